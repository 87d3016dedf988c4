"""What a pod on a DRA pool (`gpu.allocation: dra`) claims: the ResourceClaimTemplate or shared
ResourceClaim `place` prints, and the pod's side of it (spec.resourceClaims, the container's
resources.claims). On such a pool the device plugin is off: a pod asks for no extended resource,
it claims devices of the NVIDIA DRA driver's DeviceClasses (docs/FACTS.md, "Dynamic Resource
Allocation"):

- whole GPUs: a template whose one request asks `exactly` N devices of class gpu.nvidia.com;
- a MIG device: a template asking one device of class mig.nvidia.com whose `profile` attribute
  is the pool's (CEL on device.attributes['gpu.nvidia.com'], the driver's mig.md);
- a share of a time-sliced or MPS GPU: one ResourceClaim that every sharing pod names, with the
  driver's opaque GpuConfig (MigDeviceConfig on a MIG device) saying how. DRA shares one device
  between pods only through one claim: a template makes a claim per pod (core/v1 types.go,
  PodResourceClaim.ResourceClaimTemplateName), so pods from one template never share.

Plain dicts, no client: the objects are printed, merged and validated, never sent from here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provisioner import hardware

API_VERSION = "resource.k8s.io/v1"  # DRA's stable API, Kubernetes 1.34 (KEP-4381)
CLAIM = "gpu"  # the pod's claim and the claim's request: each a DNS label, one per pod here
# The driver's opaque config (api/nvidia.com/resource/v1beta1: api.go, sharing.go).
CONFIG_API_VERSION = "resource.nvidia.com/v1beta1"
STRATEGIES = {"time-slicing": "TimeSlicing", "mps": "MPS"}
_SHARED = {"time-slicing": "time-sliced", "mps": "MPS-shared"}
# resource/v1 types.go: ResourceClaimReservedForMaxSize, the pods one claim can be reserved for.
RESERVED_FOR_MAX = 256
SHARE_GROUP = "share"  # the default share group: claims <pool>-share-0, -1, ...
MANAGED_BY = {"app.kubernetes.io/managed-by": "provisioner"}
_NOT_IN_NAME = re.compile(r"[^a-z0-9.-]+")
_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class DeviceAsk:
    """What a pod on a DRA pool asks of the driver: devices of one class, how many, and how the
    pool shares them (its sharing lives in the claim's config, not on the node)."""

    pool: str
    device_class: str  # gpu.nvidia.com or mig.nvidia.com
    count: int
    mig: str | None = None  # the profile a MIG device must have
    sharing: str = "exclusive"  # exclusive | time-slicing | mps
    replicas: int | None = None  # pods one shared device serves

    @property
    def shared(self) -> bool:
        return self.sharing in STRATEGIES

    @property
    def pods_per_claim(self) -> int:
        """Pods one shared claim holds: the pool's clients per device, within reservedFor's limit."""
        return min(self.replicas or 1, RESERVED_FOR_MAX)

    def template_name(self) -> str:
        """A template per pool and ask: pods asking alike share the template, each its own claim."""
        what = f"mig-{self.mig}" if self.mig else f"gpus-{self.count}"
        return f"{object_name(self.pool)}-{what}"

    def share_name(self, group: str = SHARE_GROUP, index: int = 0) -> str:
        """The shared claim `index` of `group` on the pool: pods placed with the same group find it."""
        return f"{object_name(self.pool)}-{group}-{index}"


def object_name(pool: str) -> str:
    """A pool's name as part of an object's (a DNS subdomain: lowercase, digits, '-', '.'); a pool
    name that needed changing (EKS allows A-Z and _) gets a short hash of it, so two pools never
    meet in one name."""
    name = _NOT_IN_NAME.sub("-", pool.lower()).strip("-.") or "pool"
    if name == pool:
        return name
    return f"{name[:200]}-{hashlib.sha256(pool.encode()).hexdigest()[:6]}"


def check_label(flag: str, value: str) -> str | None:
    """Why `value` cannot be given to `flag` (a share group, which goes into a claim's name, or a
    namespace: each a DNS label), or None."""
    if _DNS_LABEL.match(value):
        return None
    return f"{flag} {value!r}: want at most 63 lowercase letters, digits and '-' (a DNS label), e.g. team-a"


def request(ask: DeviceAsk) -> dict[str, Any]:
    """The claim's one request: `exactly` N devices of the class, a MIG device by its profile."""
    exactly: dict[str, Any] = {"deviceClassName": ask.device_class}
    if ask.mig:
        attributes = f"device.attributes['{hardware.load().dra_driver.driver}']"
        exactly["selectors"] = [{"cel": {"expression": f"{attributes}.profile == '{ask.mig}'"}}]
    exactly["count"] = ask.count
    return {"name": CLAIM, "exactly": exactly}


def sharing_config(ask: DeviceAsk) -> dict[str, Any]:
    """The driver's opaque config sharing the claim's device as the pool does: GpuConfig for a
    whole GPU, MigDeviceConfig for a MIG device (its sharing takes MPS alone, migconfig.go)."""
    strategy = STRATEGIES[ask.sharing]
    sharing: dict[str, Any] = {"strategy": strategy}
    if strategy == "TimeSlicing":
        sharing["timeSlicingConfig"] = {"interval": "Default"}
    else:  # each of the pool's clients gets its share of the SMs, as the device plugin's MPS gives it
        sharing["mpsConfig"] = {"defaultActiveThreadPercentage": max(1, 100 // (ask.replicas or 1))}
    return {
        "requests": [CLAIM],
        "opaque": {
            "driver": hardware.load().dra_driver.driver,
            "parameters": {
                "apiVersion": CONFIG_API_VERSION,
                "kind": "MigDeviceConfig" if ask.mig else "GpuConfig",
                "sharing": sharing,
            },
        },
    }


def claim_object(ask: DeviceAsk, share: str | None = None, namespace: str | None = None) -> dict[str, Any]:
    """The object to apply before the pod (in its namespace: claims are namespaced): the shared
    ResourceClaim `share` where the pool shares its devices, else the ResourceClaimTemplate each
    pod's claim is made from."""
    devices: dict[str, Any] = {"requests": [request(ask)]}
    if ask.shared:
        devices["config"] = [sharing_config(ask)]
        name, kind, spec = share or ask.share_name(), "ResourceClaim", {"devices": devices}
    else:
        name, kind, spec = ask.template_name(), "ResourceClaimTemplate", {"spec": {"devices": devices}}
    metadata = {"name": name, **({"namespace": namespace} if namespace else {}), "labels": dict(MANAGED_BY)}
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def pod_claim(ask: DeviceAsk, share: str | None = None) -> dict[str, str]:
    """The pod spec's resourceClaims entry: the shared claim by name, or the template."""
    if ask.shared:
        return {"name": CLAIM, "resourceClaimName": share or ask.share_name()}
    return {"name": CLAIM, "resourceClaimTemplateName": ask.template_name()}


def first_with_room(ask: DeviceAsk, reserved: Mapping[str, int], group: str = SHARE_GROUP) -> int:
    """The first shared claim of `group` that holds fewer pods than it can (by its reservedFor,
    `reserved`: claim name -> pods), or that does not exist yet."""
    index = 0
    while reserved.get(ask.share_name(group, index), 0) >= ask.pods_per_claim:
        index += 1
    return index


def claim_notes(ask: DeviceAsk, share: str | None, live: bool) -> list[str]:
    """What each printed object is for, in words."""
    if not ask.shared:
        devices = f"one {ask.mig} MIG device" if ask.mig else f"{ask.count} whole GPU{'s' * (ask.count > 1)}"
        said = [
            f"ResourceClaimTemplate {ask.template_name()}: Kubernetes makes one ResourceClaim from it for "
            f"each pod, asking the DRA driver for {devices} of DeviceClass {ask.device_class}; apply it "
            "first, in the pod's namespace"
        ]
        if ask.mig:
            from provisioner.nvidia import mig_device_class

            said.append(
                f"`provisioner render` gives DeviceClass {mig_device_class(ask.mig)}, which selects "
                f"{ask.mig} devices itself: a claim may name it instead of {ask.device_class} "
                "and the selector"
            )
        return said
    name = share or ask.share_name()
    device = f"{_SHARED[ask.sharing]} {'MIG device' if ask.mig else 'GPU'}"
    said = [
        f"ResourceClaim {name}: one claim for one {device}, "
        f"which up to {ask.pods_per_claim} pods share by naming it (resourceClaimName); apply it first, in "
        "the pods' namespace",
        "DRA shares a device between pods only through one ResourceClaim: a ResourceClaimTemplate makes "
        "a claim per pod, so pods made from one never share a device",
        f"pods placed with the same share group find the same claim; once it holds {ask.pods_per_claim} "
        "pods, place the next on the next claim of the group (--live finds the first with room)",
    ]
    if not live:
        said.append(
            f"without --live, place did not read which shared claims exist or how full they are: {name}"
        )
    return said
