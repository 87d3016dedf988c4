"""NVIDIA's DRA driver in a sandbox cluster, installed as `helm install dra-driver-nvidia-gpu
<chart> -n NAMESPACE -f values.yaml` would install it, and the ResourceSlices its GPU kubelet
plugin publishes on the nodes where it runs.

Written from kubernetes-sigs/dra-driver-nvidia-gpu (formerly NVIDIA/k8s-dra-driver-gpu) at its
2026 snapshot, chart deployments/helm/dra-driver-nvidia-gpu:
- Chart.yaml kubeVersion ">=1.32.0-0"; values.yaml (the defaults below, with their lines);
- templates/validation.yaml: the `fail`s helm reports, each at its line and column;
- templates/deviceclass-*.yaml: the DeviceClasses, gpu.nvidia.com with extendedResourceName
  nvidia.com/gpu when rendered as resource.k8s.io/v1 (deviceclass-gpu.yaml L12-14);
- templates/kubeletplugin.yaml: the kubelet plugin DaemonSet, its nodeSelector, affinity and
  tolerations from kubeletPlugin.* (L410-421), NVIDIA_DRIVER_ROOT and FEATURE_GATES (L270-315);
and the GPU kubelet plugin (cmd/gpu-kubelet-plugin): nvlib.go (a GPU in MIG mode announces its
static MIG devices, or nothing: "stranded"), deviceinfo.go (a full GPU's name gpu-<minor>, its
attributes and memory capacity, L124-256), mig.go (a MIG device's name
gpu-<minor>-mig-<profile without dots>-<GI profile ID>-<placement start>, L111-114, its attributes
L139-187 and capacities L118-135, memorySlice<N> per slice, deviceinfo.go L258-281), driver.go
(without DynamicMIG: one slice, one pool named after the node, L480-496), and the ResourceSlice
controller of k8s.io/dynamic-resource-allocation (generateName <index, 5 hex digits>-<driver>-
<node>-, owned by the Node, pool generation 1 on first publication).
Helm's value merge: helm.sh/docs "Values Files" (maps merge into the chart's defaults, other
values replace them) and "Deleting a default key" (null removes it).
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from provisioner.sandbox.kube import nvml, rules, versions
from provisioner.sandbox.kube.nodes import NodeGpus
from provisioner.sandbox.kube.objects import now
from provisioner.sandbox.kube.scheduling import SCHEDULING_EFFECTS, matches_node_affinity, tolerates

CHART = "dra-driver-nvidia-gpu"
RELEASE = "dra-driver-nvidia-gpu"  # the release name the install docs use (install.md L31-35)
NAMESPACE = "dra-driver-nvidia-gpu"
DRIVER = "gpu.nvidia.com"
CHART_KUBE_VERSION = (1, 32)  # Chart.yaml kubeVersion: ">=1.32.0-0"
RESOURCE_API = "resource.k8s.io/v1"

# The chart's defaults the sandbox reads (values.yaml at the lines named).
DEFAULTS: dict[str, Any] = {
    "nvidiaDriverRoot": "/",  # L23
    "namespaceOverride": "",  # L38
    "gpuResourcesEnabledOverride": False,  # L40
    "allowDefaultNamespace": False,  # L44
    "resourceApiVersion": "",  # L58
    "resources": {  # L79-107
        "gpus": {"enabled": True},
        "computeDomains": {"enabled": True, "imex": {"mode": "driverManaged", "isolation": "domain"}},
    },
    "featureGates": {},  # L121
    "webhook": {"enabled": False},  # L172-173
    "kubeletPlugin": {
        "nodeSelector": {},  # L289
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],  # L290-293
        "affinity": {  # L319-352: NFD's NVIDIA PCI labels, or the GPU Operator's gpu.present
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
                        for key, value in (
                            ("feature.node.kubernetes.io/pci-10de.present", "true"),
                            ("feature.node.kubernetes.io/pci-0302_10de.present", "true"),
                            ("feature.node.kubernetes.io/pci-0300_10de.present", "true"),
                            ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
                            ("nvidia.com/gpu.present", "true"),
                        )
                    ]
                }
            }
        },
    },
}

_VALIDATION = f"{CHART}/templates/validation.yaml"
GPUS_WITHOUT_OVERRIDE = (  # validation.yaml L33-42, the message as its printf calls build it
    "\n\nThe default value of 'resources.gpus.enabled == true'. However, when "
    "'resources.gpus.enabled=true' this DRA driver cannot be deployed alongside the standard GPU "
    "device plugin on the same node. To avoid potential collisions between these two components, we "
    "will not allow this default to take effect until KEP 5004 has reached GA in upstream Kubernetes."
    "\n\nIf you are sure you have disabled the deployment of the standard GPU device plugin and want "
    "to remove this error and force 'resources.gpus.enabled=true', you must also:\n\n    --set "
    "'gpuResourcesEnabledOverride=true'\n\nOnce KEP 5004 has reached GA, this DRA driver will be able "
    "to honour extended resource requests for 'nvidia.com/gpu' alongside requests made using "
    "ResourceClaims, essentially obsoleting the need for the standard GPU device plugin altogether. If "
    "you want to try this feature now, you can enable it in upstream Kubernetes v1.35+ by setting the "
    "'DRAExtendedResource' feature gate on the 'kube-apiserver', 'kube-scheduler', "
    "'kube-controller-manager', and 'kubelet'."
)
DEFAULT_NAMESPACE = (  # validation.yaml L24-31
    "\nRunning in the 'default' namespace is not recommended.\nSet 'allowDefaultNamespace=true' to "
    "bypass this error.\nOtherwise, use --namespace (with --create-namespace as necessary) to run in a "
    "specific namespace.\nSee: https://helm.sh/docs/helm/helm_install/#options"
)
NO_RESOURCE_API = (  # validation.yaml L124-130
    "\nNo supported resource.k8s.io API version found in the cluster.\nThis chart requires one of: "
    "resource.k8s.io/v1, resource.k8s.io/v1beta1, or resource.k8s.io/v1beta2.\nPlease ensure your "
    "cluster supports Dynamic Resource Allocation (DRA) with one of these API versions."
)

# The chart's DeviceClasses (templates/deviceclass-*.yaml): name -> (the value enabling it, type).
GPU_CLASSES = {"gpu.nvidia.com": "gpu", "mig.nvidia.com": "mig", "vfio.gpu.nvidia.com": "vfio"}
COMPUTE_DOMAIN_CLASSES = {
    "compute-domain-daemon.nvidia.com": "device.driver == 'compute-domain.nvidia.com' && "
    "device.attributes['compute-domain.nvidia.com'].type == 'daemon'",
    "compute-domain-default-channel.nvidia.com": "device.driver == 'compute-domain.nvidia.com' && "
    "device.attributes['compute-domain.nvidia.com'].type == 'channel' && "
    "device.attributes['compute-domain.nvidia.com'].id == 0",
}

# Where each cloud's GPU nodes have the host's NVIDIA driver (the chart's nvidiaDriverRoot must
# name it): GKE installs it under /home/kubernetes/bin/nvidia (the driver's install.md L26-28,
# helm-values.md L25); the AKS, EKS (AL2023 and Bottlerocket NVIDIA AMIs) and ACK GPU images ship
# it on the host root (docs/FACTS.md, "Turning the device plugin off per node").
DRIVER_ROOTS = {"gke": "/home/kubernetes/bin/nvidia", "aks": "/", "eks": "/", "ack": "/"}

# The driver's feature gates and their defaults (pkg/featuregates/featuregates.go L47-207).
FEATURE_GATE_DEFAULTS = {
    "TimeSlicingSettings": False,
    "MPSSupport": False,
    "IMEXDaemonsWithDNSNames": True,
    "PassthroughSupport": False,
    "DynamicMIG": False,
    "NVMLDeviceHealthCheck": False,
    "ComputeDomainCliques": True,
    "CrashOnNVLinkFabricErrors": True,
    "DeviceMetadata": False,
    "DRAListTypeAttributes": False,
    "FabricManagerPartitioning": False,
    "HostManagedIMEXDaemon": False,
    "ConsumableShares": False,
}
# The slice name's random suffix as the API server draws it for generateName (k8s.io/apiserver
# storage/names: 5 characters of utilrand's alphabet, after the base cut to 58 characters).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GENERATE_NAME_BASE_MAX = 58


class ChartError(Exception):
    """What helm prints (after "Error: ") when it installs nothing."""


def merged(defaults: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's coalesce of a values file into the chart's defaults: maps merge key by key, any
    other value (lists included) replaces the default, and null deletes the default key."""
    out = copy.deepcopy(dict(defaults))
    for key, value in overrides.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _at(values: Mapping[str, Any], *path: str) -> Any:
    """values.a.b.c as a template reads it: nil where any step is missing."""
    node: Any = values
    for part in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def _failed(line: int, column: int, message: str) -> ChartError:
    """A template's `fail`, as helm reports it."""
    return ChartError(f"INSTALLATION FAILED: execution error at ({_VALIDATION}:{line}:{column}): {message}")


@dataclass
class Release:
    """One installed release of the chart: its name, namespace and the values it rendered with."""

    name: str
    namespace: str
    values: dict[str, Any]
    installed: str = field(default_factory=now)
    revision: int = 1

    @property
    def gpus(self) -> bool:
        return bool(_at(self.values, "resources", "gpus", "enabled"))

    @property
    def driver_root(self) -> str:
        return str(self.values.get("nvidiaDriverRoot") or "")

    @property
    def feature_gates(self) -> dict[str, bool]:
        """Every driver gate as the plugin starts with it: the defaults, then FEATURE_GATES."""
        given = self.values.get("featureGates") or {}
        return {**FEATURE_GATE_DEFAULTS, **{str(k): _truthy(v) for k, v in given.items()}}

    def gate_enabled(self, gate: str) -> bool:
        return self.feature_gates.get(gate, False)

    def device_classes(self) -> list[dict[str, Any]]:
        """The DeviceClasses the chart renders with these values, as resource.k8s.io/v1 objects
        carrying helm's ownership metadata."""
        bodies: list[tuple[str, dict[str, Any]]] = []
        if self.gpus:
            for name, kind in GPU_CLASSES.items():
                expression = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"
                spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
                if kind == "gpu":
                    spec["extendedResourceName"] = rules.GPU  # deviceclass-gpu.yaml L12-14 (v1 only)
                bodies.append((name, spec))
        if _at(self.values, "resources", "computeDomains", "enabled"):
            for name, expression in COMPUTE_DOMAIN_CLASSES.items():
                host_managed = (
                    _at(self.values, "resources", "computeDomains", "imex", "mode") == "hostManaged"
                )
                if name.startswith("compute-domain-daemon") and host_managed:
                    continue
                bodies.append((name, {"selectors": [{"cel": {"expression": expression}}]}))
        return [
            {
                "apiVersion": RESOURCE_API,
                "kind": "DeviceClass",
                "metadata": {
                    "name": name,
                    "labels": {"app.kubernetes.io/managed-by": "Helm"},
                    "annotations": {
                        "meta.helm.sh/release-name": self.name,
                        "meta.helm.sh/release-namespace": self.namespace,
                    },
                },
                "spec": spec,
            }
            for name, spec in bodies
        ]

    def describe(self) -> str:
        """What `helm install` prints once the release is installed (the chart has no NOTES)."""
        deployed = datetime.datetime.fromisoformat(self.installed.replace("Z", "+00:00"))
        when = deployed.strftime("%a %b ") + f"{deployed.day:>2}" + deployed.strftime(" %H:%M:%S %Y")
        return (  # LAST DEPLOYED in Go's time.ANSIC, as helm prints it
            f"NAME: {self.name}\nLAST DEPLOYED: {when}\nNAMESPACE: {self.namespace}\n"
            f"STATUS: deployed\nREVISION: {self.revision}\nTEST SUITE: None"
        )


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def render(
    values: Mapping[str, Any], kubernetes_version: str, namespace: str = NAMESPACE, name: str = RELEASE
) -> Release:
    """The release helm would install into a cluster at `kubernetes_version`, or the ChartError it
    fails with: the chart's kubeVersion, then validation.yaml's checks, in the template's order."""
    if not isinstance(values, Mapping):
        raise ChartError("INSTALLATION FAILED: values must be a map (a YAML mapping of the chart's values)")
    if versions.parse(kubernetes_version)[:2] < CHART_KUBE_VERSION:
        raise ChartError(
            f"INSTALLATION FAILED: chart requires kubeVersion: >=1.32.0-0 which is incompatible with "
            f"Kubernetes v{kubernetes_version}"
        )
    final = merged(DEFAULTS, values)
    if final.get("namespace"):  # L15-22
        raise _failed(
            21,
            4,
            f"\nValue 'namespace' set to {final['namespace']}\nSetting an explicit 'namespace' in "
            "values.yaml or via --set on the command line is no longer supported.\nUse --namespace "
            "(with --create-namespace as necessary) instead.\nSee: https://helm.sh/docs/helm/helm_install/#options",
        )
    target = final.get("namespaceOverride") or namespace
    if target == "default" and not final.get("namespaceOverride") and not final.get("allowDefaultNamespace"):
        raise _failed(30, 4, DEFAULT_NAMESPACE)
    if _at(final, "resources", "gpus", "enabled") and not final.get("gpuResourcesEnabledOverride"):
        raise _failed(42, 4, GPUS_WITHOUT_OVERRIDE)
    api = final.get("resourceApiVersion") or (
        RESOURCE_API if versions.serves_resource_v1(kubernetes_version) else ""
    )
    if not api:
        raise _failed(129, 3, NO_RESOURCE_API)
    if api != RESOURCE_API:  # the sandbox serves v1 only: helm cannot map the other versions
        raise ChartError(
            "INSTALLATION FAILED: unable to build kubernetes objects from release manifest: resource "
            'mapping not found for name: "gpu.nvidia.com" namespace: "" from "": no matches for kind '
            f'"DeviceClass" in version "{api}"\nensure CRDs are installed first'
        )
    return Release(name, target, final)


# --- Where the kubelet plugin runs, and what it publishes there


@dataclass(frozen=True)
class PluginOnNode:
    """The kubelet plugin's pod on one node: whether the DaemonSet runs it there, and whether it
    came up (with the reason it did not)."""

    scheduled: bool
    running: bool
    message: str = ""


def placement(release: Release, node: Mapping[str, Any], gpus: NodeGpus | None, cloud: str) -> PluginOnNode:
    """The DaemonSet's pod on `node`: scheduled where kubeletPlugin.nodeSelector (labels equal),
    .affinity (required node affinity) and .tolerations (every NoSchedule / NoExecute taint)
    admit it; running where the node has GPUs and the host driver is at nvidiaDriverRoot."""
    plugin = release.values.get("kubeletPlugin") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    selector = plugin.get("nodeSelector") or {}
    if any(labels.get(k) != str(v) for k, v in selector.items()):
        return PluginOnNode(False, False, "node(s) didn't match Pod's node affinity/selector")
    if not matches_node_affinity(plugin.get("affinity"), node):
        return PluginOnNode(False, False, "node(s) didn't match Pod's node affinity/selector")
    tolerations = plugin.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in SCHEDULING_EFFECTS and not tolerates(tolerations, taint):
            return PluginOnNode(
                False,
                False,
                f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}",
            )
    if gpus is None:
        return PluginOnNode(
            True, False, "error creating driver: failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND"
        )
    expected = DRIVER_ROOTS.get(cloud, "/")
    if release.driver_root.rstrip("/") != expected.rstrip("/"):
        return PluginOnNode(
            True,
            False,
            f"error creating driver: failed to locate the NVIDIA driver under nvidiaDriverRoot "
            f"{release.driver_root!r} (this node has it at {expected!r})",
        )
    return PluginOnNode(True, True)


def resource_slice(node: Mapping[str, Any], gpus: NodeGpus, published: str) -> dict[str, Any] | None:
    """The one ResourceSlice the GPU kubelet plugin publishes for `node`, or None where it has no
    device to announce (MIG mode on with no partitions)."""
    devices = _devices(node["metadata"]["name"], gpus)
    if not devices:
        return None
    name = node["metadata"]["name"]
    base = f"{0:05x}-{DRIVER}-{name}-"[:_GENERATE_NAME_BASE_MAX]
    digest = hashlib.sha256(f"slice/{name}".encode()).digest()
    suffix = "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:5])
    spec = {
        "driver": DRIVER,
        "nodeName": name,
        "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
        "devices": devices,
    }
    metadata: dict[str, Any] = {
        "name": base + suffix,
        "generateName": base,
        "uid": str(_uuid(f"slice/{name}")),
        "creationTimestamp": published,
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": name,
                "uid": node["metadata"].get("uid", ""),
                "controller": True,
            }
        ],
    }
    metadata["resourceVersion"] = str(int(hashlib.sha256(repr(spec).encode()).hexdigest()[:12], 16))
    return {"apiVersion": RESOURCE_API, "kind": "ResourceSlice", "metadata": metadata, "spec": spec}


def _devices(node: str, gpus: NodeGpus) -> list[dict[str, Any]]:
    """A device per whole GPU; on GPUs in MIG mode, a device per MIG instance instead, or none."""
    hardware = gpus.hardware
    info = nvml.GPUS[hardware.gpu]
    product = nvml.PCIE_NAMES.get(hardware.product, info.name)
    common = {
        "productName": {"string": product},
        "brand": {"string": info.brand},
        "architecture": {"string": info.architecture},
        "cudaComputeCapability": {"version": _semver(info.compute_capability)},
        "driverVersion": {"version": _semver(nvml.DRIVER_VERSION)},
        "cudaDriverVersion": {"version": _semver(nvml.CUDA_DRIVER_VERSION)},
    }
    devices = []
    for minor in range(hardware.count):
        parent = f"GPU-{_uuid(f'{node}/gpu/{minor}')}"
        if not gpus.mig_mode:
            devices.append(
                {
                    "name": f"gpu-{minor}",
                    "attributes": {"type": {"string": "gpu"}, "uuid": {"string": parent}, **common},
                    "capacity": {"memory": {"value": _binary_quantity(info.memory_mib * 2**20)}},
                }
            )
            continue
        for start, size, gi in _placements(hardware.gpu, gpus.mig_profile):
            profile = str(gpus.mig_profile)
            capacity = {
                "memory": {"value": _binary_quantity(nvml.mig_memory_mib(hardware.gpu, profile) * 2**20)}
            }
            capacity.update({f"memorySlice{i}": {"value": "1"} for i in range(start, start + size)})
            devices.append(
                {
                    "name": f"gpu-{minor}-mig-{_rfc1123(profile.replace('.', ''))}-{gi}-{start}",
                    "attributes": {
                        "type": {"string": "mig"},
                        "parentUUID": {"string": parent},
                        "profile": {"string": profile},
                        **common,
                        "uuid": {"string": f"MIG-{_uuid(f'{node}/gpu/{minor}/mig/{gi}/{start}')}"},
                    },
                    "capacity": capacity,
                }
            )
    return sorted(devices, key=lambda d: d["name"])


def _placements(gpu: str, profile: str | None) -> list[tuple[int, int, int]]:
    """(placement start, memory slices, GPU-instance profile ID) of each instance of `profile`
    when the GPU is partitioned wholly into it: the instances side by side, each over the memory
    slices its share of the GPU's memory covers (8 slices on the 7-compute-slice GPUs, 4 on the
    A30 and RTX PRO 6000; `nvidia-smi mig -lgipp` in NVIDIA's MIG user guide). DERIVED: the slice
    count from the profile's memory over the largest profile's."""
    if not profile:
        return []
    base = profile.split("+", 1)[0].removesuffix("-me")
    table = rules.MIG_PROFILES.get(gpu, {})
    if base not in table:
        return []
    instances, gi = table[base]
    largest = max(table, key=_profile_gb)
    slices = 8 if table[largest][0] == 1 and largest.startswith("7g") else 4
    size = max(1, round(_profile_gb(base) / _profile_gb(largest) * slices))
    return [(i * size, size, gi) for i in range(instances)]


def _rfc1123(name: str) -> str:
    """mig.go toRFC1123Compliant: lower case, other characters as '-', trimmed of '-'."""
    return re.sub(r"[^a-z0-9-.]", "-", name.lower()).strip("-").removesuffix(".")


def _profile_gb(profile: str) -> int:
    return int(profile.split(".", 1)[1].removesuffix("gb"))


def _semver(version: str) -> str:
    """Masterminds semver's String() of a driver or CUDA version: three numbers, no leading zeros."""
    parts = [int(p) for p in version.split(".")][:3]
    return ".".join(str(p) for p in parts + [0] * (3 - len(parts)))


def _binary_quantity(number: int) -> str:
    """resource.NewQuantity(n, BinarySI) as it serialises: the largest binary suffix dividing n."""
    for suffix, power in (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if number and number % 2**power == 0:
            return f"{number // 2**power}{suffix}"
    return str(number)


def _uuid(seed: str) -> uuid.UUID:
    """A stable UUID per node and device, as nodes.py keeps node uids stable."""
    return uuid.UUID(bytes=hashlib.sha256(seed.encode()).digest()[:16], version=4)
