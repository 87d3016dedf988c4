"""The clouds' node pools as the Kubernetes API sees them: one adapter per cloud turns the pool its
emulator holds into the nodes that pool runs (how many, named and labelled as that cloud does, with
which GPUs) and says which GPU stack advertises them.

Read in-process from the cloud emulators' backends at request time, so a pool scaled through a
cloud driver has that many nodes at the next list. The instance tables are the sandbox's own, each
with its source (tests/test_sandbox_independence.py compares them with the tool's data).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provisioner.sandbox.kube import rules
from provisioner.sandbox.kube.migmanager import MigReport
from provisioner.sandbox.kube.rules import Advertised, Hardware

if TYPE_CHECKING:
    from provisioner.sandbox import ClusterAddress

# Taint effects as Kubernetes spells those GKE and EKS send as constants.
K8S_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
    "NO_EXECUTE": "NoExecute",
}

# VM size -> (GPU, GPUs per VM): MicrosoftDocs/azure-compute-docs, the NC A100 v4, ND A100 v4,
# NC H100 v5, ND H100 v5, ND H200 v5 and NCasT4_v3 size pages.
AKS_VM_SIZES = {
    "Standard_NC24ads_A100_v4": ("A100-80GB", 1),
    "Standard_NC48ads_A100_v4": ("A100-80GB", 2),
    "Standard_NC96ads_A100_v4": ("A100-80GB", 4),
    "Standard_ND96asr_v4": ("A100-40GB", 8),
    "Standard_ND96amsr_A100_v4": ("A100-80GB", 8),
    "Standard_NC40ads_H100_v5": ("H100-NVL-94GB", 1),
    "Standard_NC80adis_H100_v5": ("H100-NVL-94GB", 2),
    "Standard_ND96isr_H100_v5": ("H100-80GB", 8),
    "Standard_ND96isr_H200_v5": ("H200-141GB", 8),
    "Standard_NC4as_T4_v3": ("T4-16GB", 1),
    "Standard_NC8as_T4_v3": ("T4-16GB", 1),
    "Standard_NC16as_T4_v3": ("T4-16GB", 1),
    "Standard_NC64as_T4_v3": ("T4-16GB", 4),
}
# AKS gpuInstanceProfile -> the GPU-instance profile ID AKS creates (Azure/AgentBaker
# parts/linux/cloud-init/artifacts/mig-partition.sh).
AKS_GPU_INSTANCE_PROFILE_GI = {"MIG1g": 19, "MIG2g": 14, "MIG3g": 9, "MIG4g": 5, "MIG7g": 0}
# GKE accelerator type -> GPU: Compute Engine "GPU machine types" (cloud.google.com/compute/docs/gpus).
GKE_ACCELERATORS = {
    "nvidia-tesla-a100": "A100-40GB",
    "nvidia-a100-80gb": "A100-80GB",
    "nvidia-h100-80gb": "H100-80GB",
    "nvidia-h100-mega-80gb": "H100-80GB",
    "nvidia-h200-141gb": "H200-141GB",
    "nvidia-b200": "B200",
    "nvidia-l4": "L4-24GB",
    "nvidia-rtx-pro-6000": "RTX-PRO-6000-96GB",
    "nvidia-tesla-t4": "T4-16GB",
}
# GKE's sharing strategy as its node label spells it (timesharing-gpus, nvidia-mps-gpus).
GKE_SHARING_LABEL_VALUES = {"TIME_SHARING": "time-sharing", "MPS": "mps"}


def _family(prefix: str, sizes: dict[str, int], gpu: str) -> dict[str, tuple[str, int]]:
    return {f"{prefix}{size}": (gpu, count) for size, count in sizes.items()}


# EC2 instance type -> (GPU, GPUs): AWS EC2 User Guide, "Specifications for Amazon EC2 accelerated
# computing instances" (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html, Accelerators column).
_EC2_1_1_1_1_1_4_4_8 = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1}
EKS_INSTANCE_TYPES = {
    "p4d.24xlarge": ("A100-40GB", 8),
    "p4de.24xlarge": ("A100-80GB", 8),
    "p5.4xlarge": ("H100-80GB", 1),
    "p5.48xlarge": ("H100-80GB", 8),
    "p5e.48xlarge": ("H200-141GB", 8),
    "p5en.48xlarge": ("H200-141GB", 8),
    "p6-b200.48xlarge": ("B200", 8),
    **_family("g5.", {**_EC2_1_1_1_1_1_4_4_8, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}, "A10G-24GB"),
    **_family("g4dn.", {**_EC2_1_1_1_1_1_4_4_8, "12xlarge": 4, "metal": 8}, "T4-16GB"),
    **_family("g6.", {**_EC2_1_1_1_1_1_4_4_8, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}, "L4-24GB"),
    **_family("g6e.", {**_EC2_1_1_1_1_1_4_4_8, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}, "L40S-48GB"),
}
# ECS instance type -> (GPU, GPUs): Alibaba Cloud ECS "GPU-accelerated compute-optimized instance
# families" (alibabacloud.com/help/en/ecs/user-guide/gpu-accelerated-compute-optimized-and-vgpu-
# accelerated-instance-families-1), each family's GPU column; gn7 / ebmgn7 as A100 40GB per ACK's
# MIG guide ("use a node pool to partition an NVIDIA A100 GPU").
ACK_INSTANCE_TYPES = {
    **_family(
        "ecs.gn6i-",
        {"c4g1.xlarge": 1, "c8g1.2xlarge": 1, "c16g1.4xlarge": 1, "c24g1.6xlarge": 1, "c40g1.10xlarge": 1}
        | {"c24g1.12xlarge": 2, "c24g1.24xlarge": 4},
        "T4-16GB",
    ),
    "ecs.ebmgn6i.24xlarge": ("T4-16GB", 4),
    **_family(
        "ecs.gn7i-",
        {"c8g1.2xlarge": 1, "c16g1.4xlarge": 1, "c32g1.8xlarge": 1, "c32g1.16xlarge": 2, "c32g1.32xlarge": 4}
        | {"c48g1.12xlarge": 1, "c56g1.14xlarge": 1, "2x.8xlarge": 2, "4x.8xlarge": 4, "4x.16xlarge": 4}
        | {"8x.16xlarge": 8, "8x.32xlarge": 8},
        "A10-24GB",
    ),
    "ecs.ebmgn7i.32xlarge": ("A10-24GB", 4),
    **_family(
        "ecs.gn7s-",
        {"c8g1.2xlarge": 1, "c16g1.4xlarge": 1, "c32g1.8xlarge": 1, "c32g1.16xlarge": 2, "c32g1.32xlarge": 4}
        | {"c48g1.12xlarge": 1, "c56g1.14xlarge": 1},
        "A30-24GB",
    ),
    **_family(
        "ecs.gn8is",
        {".2xlarge": 1, ".4xlarge": 1, "-2x.8xlarge": 2, "-4x.16xlarge": 4, "-8x.32xlarge": 8},
        "L20-48GB",
    ),
    "ecs.ebmgn8is.32xlarge": ("L20-48GB", 8),
    "ecs.ebmgn8ia.64xlarge": ("L20-48GB", 4),
    **_family("ecs.gn7-", {"c12g1.3xlarge": 1, "c13g1.13xlarge": 4, "c13g1.26xlarge": 8}, "A100-40GB"),
    "ecs.ebmgn7.26xlarge": ("A100-40GB", 8),
    **_family(
        "ecs.gn6v-",
        {"c8g1.2xlarge": 1, "c8g1.4xlarge": 2, "c8g1.8xlarge": 4, "c8g1.16xlarge": 8, "c10g1.20xlarge": 8},
        "V100-16GB",
    ),
    **_family(
        "ecs.gn6e-",
        {"c12g1.3xlarge": 1, "c12g1.6xlarge": 2, "c12g1.12xlarge": 4, "c12g1.24xlarge": 8},
        "V100-32GB",
    ),
}
# An ACK edge pool's nodes are added by the user, not by ACK; the sandbox adds one. Its GPUs are
# what the pool's own labels say its machines carry (the labels a pool may carry to describe
# them), else the seed document's edge example (a V100 16GB, ALIYUN_COM_GPU_MEM_DEV=16).
ACK_EDGE_NODES = 1
ACK_EDGE_GPU = ("V100-16GB", 1)
ACK_EDGE_GPU_LABELS = ("gpu.provisioner.io/model", "gpu.provisioner.io/count")


def _edge_gpu(labels: dict[str, str]) -> tuple[str, int]:
    model, count = (labels.get(key) for key in ACK_EDGE_GPU_LABELS)
    if model and count and count.isdigit():
        return model, int(count)
    return ACK_EDGE_GPU


@dataclass
class Pool:
    """One pool's nodes as Kubernetes sees them."""

    name: str
    node_names: list[str]
    labels: dict[str, str]  # the pool's own labels and what the cloud adds on every node
    taints: list[dict[str, str]]
    instance_type: str
    hardware: Hardware | None
    advertise: Callable[[Hardware, dict[str, str], dict[str, Any] | None, MigReport | None], Advertised]
    zones: list[str] = field(default_factory=list)  # per node, where the cloud spreads them
    mig_manager: bool = False  # the GPU Operator's MIG manager partitions from the node label


def _hash(text: str, digits: int) -> str:
    return str(int(hashlib.sha256(text.encode()).hexdigest(), 16) % 10**digits).zfill(digits)


def _base36(number: int, width: int) -> str:
    alphabet, out = "0123456789abcdefghijklmnopqrstuvwxyz", ""
    while True:
        number, digit = divmod(number, 36)
        out = alphabet[digit] + out
        if not number:
            return out.rjust(width, "0")


def _taint(key: str, value: str, effect: str) -> dict[str, str]:
    taint = {"key": key, "effect": K8S_EFFECTS.get(effect, effect)}
    if value:
        taint["value"] = value
    return taint


def _operator(cloud_mig_profile: str | None, mig_manager: bool) -> Callable[..., Advertised]:
    def advertise(
        hardware: Hardware, labels: dict[str, str], config_map: Any, mig: MigReport | None
    ) -> Advertised:
        return rules.device_plugin(
            hardware,
            labels,
            config_map,
            cloud_mig_profile=cloud_mig_profile,
            mig_manager=mig_manager,
            mig=mig,
        )

    return advertise


class AksPools:
    """agentPools: `count` nodes named aks-<pool>-<8 digits>-vmss<6 base-36 digits>, labelled
    kubernetes.azure.com/agentpool and agentpool (AKS "Use labels in an AKS cluster"); nodeLabels
    and nodeTaints as the pool holds them (the Spot label and taint included: the AKS emulator
    stores them, as AKS does). The GPU Operator runs without its MIG manager: AKS partitions from
    gpuInstanceProfile."""

    def __init__(self, emulator: Any, ref: ClusterAddress):
        self.backend, self.cluster = emulator.backend(ref.account, ref.location), ref.name
        self.scale_set = _hash(self.backend.cluster_key(ref.name), 8)
        self.region = ""  # the ref names the resource group, not the Azure region

    def pools(self, slot: Callable[[str], int]) -> list[Pool]:
        found = []
        for name, pool in sorted(self.backend.list_pools(self.cluster).items()):
            if pool.get("provisioningState") == "Creating":
                continue
            size = pool.get("vmSize", "")
            gpu = AKS_VM_SIZES.get(size)
            hardware = Hardware.of(*gpu, size) if gpu else None
            profile = pool.get("gpuInstanceProfile")
            mig = (
                rules.profile_by_gi(gpu[0], AKS_GPU_INSTANCE_PROFILE_GI[profile]) if gpu and profile else None
            )
            taints = []
            for text in pool.get("nodeTaints") or []:
                key_value, _, effect = text.rpartition(":")
                key, _, value = key_value.partition("=")
                taints.append(_taint(key, value, effect))
            found.append(
                Pool(
                    name=name,
                    node_names=[
                        f"aks-{name}-{self.scale_set}-vmss{_base36(i, 6)}"
                        for i in range(pool.get("count", 0))
                    ],
                    labels={
                        **(pool.get("nodeLabels") or {}),
                        "kubernetes.azure.com/agentpool": name,
                        "agentpool": name,
                        "kubernetes.azure.com/mode": pool.get("mode", "User").lower(),
                    },
                    taints=taints,
                    instance_type=size,
                    hardware=hardware,
                    advertise=_operator(mig, mig_manager=False),
                )
            )
        return found


class GkePools:
    """Node pools: node_count nodes in each of the pool's locations (its zones: the count is per
    zone), named gke-<cluster>-<pool>-<8 hex>-<4 chars>; GKE
    labels them cloud.google.com/gke-nodepool, gke-accelerator and, from the accelerator config,
    gke-gpu-partition-size, gke-gpu-sharing-strategy, gke-max-shared-clients-per-gpu (GKE docs:
    gpus-multi, timesharing-gpus, nvidia-mps-gpus), gke-spot for Spot pools; and it taints GPU
    nodes nvidia.com/gpu=present:NoSchedule where the cluster also has non-GPU pools (GKE "Run
    GPUs in Standard node pools": "GKE automatically applies this taint ... if the cluster
    also has non-GPU node pools"; a sandbox cluster has its default-pool unless deleted)."""

    def __init__(self, emulator: Any, ref: ClusterAddress):
        self.backend, self.cluster = emulator.backend(ref.account, ref.location), ref.name
        self.region = self.backend.region

    def pools(self, slot: Callable[[str], int]) -> list[Pool]:
        found = []
        every = self.backend.list_pools(self.cluster)
        gpu_taint = any(not pool.accelerators for pool in every)
        for pool in sorted(every, key=lambda p: p.name):
            if pool.status == "PROVISIONING":
                continue
            labels = {**pool.labels, "cloud.google.com/gke-nodepool": pool.name}
            taints = [_taint(*t) for t in pool.taints]
            hardware, advertise = None, None
            if pool.spot:
                labels["cloud.google.com/gke-spot"] = "true"
            for accelerator in pool.accelerators[:1]:
                gpu = GKE_ACCELERATORS.get(accelerator.type)
                if gpu is None:
                    continue
                hardware = Hardware.of(gpu, accelerator.count)
                labels["cloud.google.com/gke-accelerator"] = accelerator.type
                if accelerator.partition_size:
                    labels["cloud.google.com/gke-gpu-partition-size"] = accelerator.partition_size
                clients = 0
                if accelerator.sharing_strategy:
                    clients = accelerator.max_shared_clients
                    labels["cloud.google.com/gke-gpu-sharing-strategy"] = GKE_SHARING_LABEL_VALUES.get(
                        accelerator.sharing_strategy, accelerator.sharing_strategy.lower()
                    )
                    labels["cloud.google.com/gke-max-shared-clients-per-gpu"] = str(clients)
                advertise = _gke(accelerator.partition_size, clients)
                if gpu_taint and not any(t["key"] == rules.GPU for t in taints):
                    taints.append({"key": rules.GPU, "value": "present", "effect": "NoSchedule"})
            names, node_zones = [], []
            for zone in pool.locations:  # one instance group per zone, each with its own hash
                group = hashlib.sha256(
                    f"{self.backend.cluster_key(self.cluster)}/{pool.name}/{zone}".encode()
                )
                for i in range(pool.node_count):
                    names.append(f"gke-{self.cluster}-{pool.name}-{group.hexdigest()[:8]}-{_base36(i, 4)}")
                    node_zones.append(zone)
            found.append(
                Pool(
                    pool.name,
                    names,
                    labels,
                    taints,
                    pool.machine_type,
                    hardware,
                    advertise or _none,
                    node_zones,
                )
            )
        return found


def _gke(partition_size: str, clients: int) -> Callable[..., Advertised]:
    return lambda hardware, labels, config_map, mig: rules.gke(hardware, partition_size, clients, labels)


def _none(hardware: Hardware, labels: dict[str, str], config_map: Any, mig: MigReport | None) -> Advertised:
    return Advertised()


class EksPools:
    """Managed node groups, read from the EKS emulator's own state (moto's backend behind it):
    desiredSize nodes named ip-10-0-<slot>-<n>.<region>.compute.internal (ec2.internal in
    us-east-1: EC2 "Amazon EC2 instance hostname types"), labelled eks.amazonaws.com/nodegroup
    and eks.amazonaws.com/capacityType (EKS "Managed node groups": the labels EKS adds). The GPU
    Operator's MIG manager partitions from the nvidia.com/mig.config node label."""

    def __init__(self, emulator: Any, ref: ClusterAddress):
        self.emulator, self.region, self.cluster = emulator, ref.location, ref.name

    def pools(self, slot: Callable[[str], int]) -> list[Pool]:
        domain = "ec2.internal" if self.region == "us-east-1" else f"{self.region}.compute.internal"
        found = []
        for name, group in sorted(self.emulator.nodegroups(self.region, self.cluster).items()):
            size = (group.get("instanceTypes") or [""])[0]
            gpu = EKS_INSTANCE_TYPES.get(size)
            subnet = slot(name)
            count = (group.get("scalingConfig") or {}).get("desiredSize", 0)
            found.append(
                Pool(
                    name=name,
                    node_names=[f"ip-10-0-{subnet}-{i + 10}.{domain}" for i in range(count)],
                    labels={
                        **(group.get("labels") or {}),
                        "eks.amazonaws.com/nodegroup": name,
                        "eks.amazonaws.com/capacityType": group.get("capacityType") or "ON_DEMAND",
                    },
                    taints=[
                        _taint(t["key"], t.get("value", ""), t["effect"]) for t in group.get("taints") or []
                    ],
                    instance_type=size,
                    hardware=Hardware.of(*gpu) if gpu else None,
                    advertise=_operator(None, mig_manager=True),
                    mig_manager=True,
                )
            )
        return found


class AckPools:
    """Node pools: total_nodes ECS nodes (one user-added node per edge pool) named
    <region>.10.0.<slot>.<n>, as ACK names nodes by region and private IP, labelled
    alibabacloud.com/nodepool-id (the seed document's Job examples select pools by it). ACK's
    shared-GPU stack reads the node's ack.node.gpu.schedule label."""

    def __init__(self, emulator: Any, ref: ClusterAddress):
        self.backend, self.cluster, self.region = (
            emulator.backend(ref.account, ref.location),
            ref.name,
            ref.location,
        )

    def pools(self, slot: Callable[[str], int]) -> list[Pool]:
        found = []
        for pool in sorted(self.backend.list_pools(self.cluster), key=lambda p: p.name):
            if pool.state == "initial":
                continue
            edge = pool.type == "edge"
            size = pool.instance_types[0] if pool.instance_types else ""
            gpu = _edge_gpu(dict(pool.labels)) if edge else ACK_INSTANCE_TYPES.get(size)
            count = ACK_EDGE_NODES if edge else pool.total_nodes
            subnet = slot(pool.nodepool_id)
            found.append(
                Pool(
                    name=pool.name,
                    node_names=[f"{pool.region_id}.10.0.{subnet}.{i + 10}" for i in range(count)],
                    labels={**dict(pool.labels), "alibabacloud.com/nodepool-id": pool.nodepool_id},
                    taints=[_taint(*t) for t in pool.taints],
                    instance_type=size,
                    hardware=Hardware.of(*gpu) if gpu else None,
                    advertise=lambda hardware, labels, config_map, mig: rules.ack(hardware, labels),
                )
            )
        return found


# cloud -> the adapter reading its emulator
ADAPTERS: dict[str, Callable[[Any, ClusterAddress], Any]] = {
    "aks": AksPools,
    "gke": GkePools,
    "eks": EksPools,
    "ack": AckPools,
}
