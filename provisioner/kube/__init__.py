"""In-cluster truth: what each cluster's Kubernetes API says about the pools the clouds hold.

A pool the cloud holds exactly as asked can still give no shares: the device-plugin ConfigMap
lacks the key a node's label names, a MIG reconfiguration is stuck, the plugin never picked up
a change. This package reads and writes the clusters through the official `kubernetes` client:
contexts.py reaches each cluster, configmap.py installs the device-plugin ConfigMap, verify.py
checks nodes against the compiler's promise and inspect.py totals allocation. The client is
imported lazily, only here, as the cloud SDKs are only in drivers/.
"""
