"""Local emulators of the AKS, GKE and EKS node-pool APIs, for the demo, tests and benchmarks.

Each emulator keeps its state apart from its wire glue, as moto does: `engine` is the
cloud-neutral part (clusters, one pool operation per cluster at a time, operations that take
time, injected faults); each cloud's models and its HTTP layer sit on top.
"""
