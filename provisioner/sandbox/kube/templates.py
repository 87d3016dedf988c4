"""The node a cluster autoscaler imagines for a node group it has never seen a node of: each cloud
provider's template rules, from kubernetes/autoscaler's cloudprovider code and the clouds' docs.

- AWS (cloudprovider/aws aws_manager.go buildNodeFromTemplate): nvidia.com/gpu = the instance
  type's GPUs; the Auto Scaling group's tags `k8s.io/cluster-autoscaler/node-template/label/<key>`,
  `.../taint/<key>` (value `<value>:<Effect>`, else ignored) and `.../resources/<name>` (a value
  that is no quantity is skipped); `eks:` tags become labels without the prefix. Where those give
  `nodegroup-name` and `cluster-name`, the node group is managed: DescribeNodegroup's labels win
  over the tags' (with eks.amazonaws.com/nodegroup and capacityType), its taints are appended, and
  its tags' `.../resources/` entries override (not its label/ or taint/ tags).
- Azure (cloudprovider/azure azure_template.go): nvidia.com/gpu = the VM size's GPUs; every scale
  set tag copied as a label; `k8s.io_cluster-autoscaler_node-template_label_` / `_taint_` keys
  decoded `_` -> `/` then `~2` -> `_`, `_resources_` keys `_` -> `/` then `~2` -> `/`; label
  prediction adds agentpool from the `aks-managed-poolName` tag and
  kubernetes.azure.com/accelerator=nvidia on GPU sizes. AKS puts a pool's tags on its scale set.
- Alibaba (ACK "FAQ about node auto scaling"): the pool's configuration (labels, taints, instance
  type); natively nvidia.com/gpu and, for shared-GPU pools, aliyun.com/gpu-mem; ECS tags
  `k8s.io/cluster-autoscaler/node-template/resource/<name>` (singular) add or override resources.
- GKE: GKE's managed autoscaler knows its pools: the node GKE's GPU stack gives (partitions and
  sharing included) with GKE's labels and taints.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from provisioner.sandbox.kube import rules
from provisioner.sandbox.kube.clouds import K8S_EFFECTS, Pool
from provisioner.sandbox.kube.nodes import MAX_PODS

GPU = "nvidia.com/gpu"
AWS_PREFIX = "k8s.io/cluster-autoscaler/node-template/"
AZURE_PREFIX = "k8s.io_cluster-autoscaler_node-template_"
ALIBABA_RESOURCE = "k8s.io/cluster-autoscaler/node-template/resource/"
TAINT_VALUE = re.compile(r"(.*):(?:NoSchedule|NoExecute|PreferNoSchedule)")
# Alibaba's natively simulated GPU resources (the FAQ's list): the rest of ACK's stack is not.
ALIBABA_NATIVE = (GPU, "aliyun.com/gpu-mem")
_SUFFIXES = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
_QUANTITY = re.compile(r"^([0-9]+)(Ki|Mi|Gi|k|M|G|T)?$")


@dataclass
class Template:
    """A template node: labels, taints (flat dicts) and allocatable extended resources."""

    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    resources: dict[str, int] = field(default_factory=dict)

    def node(self, name: str) -> dict[str, Any]:
        """As a Node object, for the scheduler's filters."""
        allocatable = {"pods": str(MAX_PODS), **{k: str(v) for k, v in self.resources.items()}}
        return {
            "metadata": {"name": name, "labels": {**self.labels, "kubernetes.io/hostname": name}},
            "spec": {"taints": self.taints},
            "status": {"allocatable": allocatable},
        }


def quantity(text: str) -> int | None:
    """A whole quantity (resource.ParseQuantity for the integers extended resources take)."""
    found = _QUANTITY.match(text.strip())
    return int(found[1]) * _SUFFIXES.get(found[2] or "", 1) if found else None


def generic(instance_type: str) -> dict[str, str]:
    """buildGenericLabels: what every provider puts on a template node."""
    return {
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": instance_type,
    }


def _taint(key: str, value: str, effect: str) -> dict[str, str]:
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def _tag_taint(key: str, value: str) -> dict[str, str] | None:
    if not TAINT_VALUE.fullmatch(value):
        return None
    taint_value, effect = value.split(":", 1)
    return _taint(key, taint_value, effect)


def aws(
    instance_type: str, gpus: int, asg_tags: Mapping[str, str], nodegroup: Mapping[str, Any] | None
) -> Template:
    """`nodegroup`: what DescribeNodegroup gives (name, labels, taints, tags, capacityType)."""
    out = Template(generic(instance_type), [], {GPU: gpus})
    for key, value in asg_tags.items():
        if key.startswith(AWS_PREFIX + "label/"):
            out.labels[key.removeprefix(AWS_PREFIX + "label/")] = value
        elif key.startswith("eks:") and key != "eks:":
            out.labels[key.removeprefix("eks:")] = value
        elif key.startswith(AWS_PREFIX + "taint/"):
            if taint := _tag_taint(key.removeprefix(AWS_PREFIX + "taint/"), value):
                out.taints.append(taint)
        elif key.startswith(AWS_PREFIX + "resources/") and (count := quantity(value)) is not None:
            out.resources[key.removeprefix(AWS_PREFIX + "resources/")] = count
    if nodegroup is None or not (out.labels.get("nodegroup-name") and out.labels.get("cluster-name")):
        return out
    out.labels.update(
        {
            **dict(nodegroup.get("labels") or {}),
            "eks.amazonaws.com/nodegroup": nodegroup["name"],
            "eks.amazonaws.com/capacityType": nodegroup.get("capacityType") or "ON_DEMAND",
        }
    )
    for taint in nodegroup.get("taints") or []:
        effect = K8S_EFFECTS.get(taint["effect"], taint["effect"])
        out.taints.append(_taint(taint["key"], taint.get("value") or "", effect))
    for key, value in (nodegroup.get("tags") or {}).items():
        if key.startswith(AWS_PREFIX + "resources/") and (count := quantity(value)) is not None:
            out.resources[key.removeprefix(AWS_PREFIX + "resources/")] = count
    return out


def azure(vm_size: str, gpus: int, vmss_tags: Mapping[str, str]) -> Template:
    out = Template({**generic(vm_size), **vmss_tags}, [], {GPU: gpus})
    for key, value in vmss_tags.items():
        if key.startswith(AZURE_PREFIX + "label_"):
            name = key.removeprefix(AZURE_PREFIX + "label_").replace("_", "/").replace("~2", "_")
            out.labels[name] = value
        elif key.startswith(AZURE_PREFIX + "taint_"):
            name = key.removeprefix(AZURE_PREFIX + "taint_").replace("_", "/").replace("~2", "_")
            if taint := _tag_taint(name, value):
                out.taints.append(taint)
        elif key.startswith(AZURE_PREFIX + "resources_") and key != AZURE_PREFIX + "resources_":
            name = key.removeprefix(AZURE_PREFIX + "resources_").replace("_", "/").replace("~2", "/")
            if (count := quantity(value)) is not None:
                out.resources[name] = count
    pool = vmss_tags.get("aks-managed-poolName") or vmss_tags.get("poolName")
    if pool:
        out.labels.update({"agentpool": pool, "kubernetes.azure.com/agentpool": pool})
    if gpus:
        out.labels["kubernetes.azure.com/accelerator"] = "nvidia"
    return out


def alibaba(
    instance_type: str, hardware: rules.Hardware, pool: Pool, ecs_tags: Mapping[str, str]
) -> Template:
    native = rules.ack(hardware, pool.labels).resources
    resources = {k: v for k, v in native.items() if k in ALIBABA_NATIVE and (v or k == GPU)}
    out = Template({**generic(instance_type), **pool.labels}, [dict(t) for t in pool.taints], resources)
    for key, value in ecs_tags.items():
        if key.startswith(ALIBABA_RESOURCE) and (count := quantity(value)) is not None:
            out.resources[key.removeprefix(ALIBABA_RESOURCE)] = count
    return out


def gke(pool: Pool) -> Template:
    labels = {**generic(pool.instance_type), **pool.labels}
    resources: dict[str, int] = {}
    if pool.hardware is not None:
        advertised = pool.advertise(pool.hardware, labels, None, None)
        resources, labels = dict(advertised.resources), {**labels, **advertised.labels}
    return Template(labels, [dict(t) for t in pool.taints], resources)
