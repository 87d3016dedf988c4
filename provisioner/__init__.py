"""provisioner: fractional-GPU node pools on AKS, GKE and EKS from one declarative fleet file."""

__version__ = "0.1.0"
