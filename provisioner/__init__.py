"""provisioner: fractional-GPU node pools on AKS, GKE, EKS and ACK from one declarative fleet file."""

__version__ = "0.1.0"
