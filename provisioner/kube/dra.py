"""What NVIDIA's DRA driver publishes on each node and which of its devices claims hold, from the
cluster's resource.k8s.io/v1 ResourceSlices and ResourceClaims as plain JSON dicts.

A slice lists devices of one pool of one driver (`spec.pool {name, generation}`); when a driver
republishes a pool it bumps the generation, and consumers use only the newest generation's slices
(Kubernetes resource/v1 types.go, ResourcePool.Generation). A device is allocated where a claim's
`status.allocation.devices.results` names it by driver, pool and device; the pods using it are
the claim's `status.reservedFor`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from provisioner import hardware
from provisioner.hardware import Gpu

DeviceKey = tuple[str, str, str]  # (driver, pool, device): how an allocation result names a device


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    type: str  # the driver's `type` attribute: gpu, mig (vfio...)
    product: str  # `productName`, as NVML names the GPU (of a MIG device: its parent's)
    profile: str | None = None  # a MIG device's profile, e.g. 1g.10gb

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.name)

    @property
    def kind(self) -> str:
        """How messages name it: "GPU", or "MIG 1g.10gb"."""
        if self.type == "mig":
            return f"MIG {self.profile or '?'}"
        return self.type.upper() or "untyped"


def attribute(device: Mapping[str, Any], name: str, domain: str) -> Any:
    """A device attribute's value: named bare (in the driver's own domain) or qualified by it;
    each value is a one-key dict by its type (`{"string": "mig"}`)."""
    attributes = device.get("attributes") or {}
    value = attributes.get(name, attributes.get(f"{domain}/{name}"))
    if isinstance(value, Mapping):
        return next(iter(value.values()), None)
    return None


def published(slices: Iterable[Mapping[str, Any]], driver: str) -> dict[str, list[Device]]:
    """Node name -> the devices `driver` publishes for it, from each pool's newest generation."""
    newest: dict[str, int] = {}
    mine = []
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != driver or not spec.get("nodeName"):
            continue  # another driver's, or devices not local to one node
        pool = spec.get("pool") or {}
        generation = int(pool.get("generation") or 0)
        newest[pool.get("name", "")] = max(generation, newest.get(pool.get("name", ""), generation))
        mine.append((spec, pool.get("name", ""), generation))
    found: dict[str, list[Device]] = {}
    for spec, pool, generation in mine:
        if generation != newest[pool]:
            continue
        for device in spec.get("devices") or []:
            profile = attribute(device, "profile", driver)
            found.setdefault(spec["nodeName"], []).append(
                Device(
                    driver,
                    pool,
                    device.get("name", ""),
                    str(attribute(device, "type", driver) or ""),
                    str(attribute(device, "productName", driver) or ""),
                    str(profile) if profile is not None else None,
                )
            )
    return found


def reservations(claims: Iterable[Mapping[str, Any]]) -> dict[DeviceKey, tuple[str, ...]]:
    """Each allocated device -> the pods (namespace/name) reserving the claims that hold it."""
    held: dict[DeviceKey, list[str]] = {}
    for claim in claims:
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        namespace = (claim.get("metadata") or {}).get("namespace", "")
        pods = [
            f"{namespace}/{user.get('name', '')}"
            for user in status.get("reservedFor") or []
            if user.get("resource") == "pods" and not user.get("apiGroup")
        ]
        for result in results:
            key = (result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
            held.setdefault(key, []).extend(pods)
    return {key: tuple(sorted(set(pods))) for key, pods in held.items()}


def device_class(device: Device) -> str | None:
    """The DeviceClass of the driver's chart that selects `device` (gpu.nvidia.com for whole GPUs,
    mig.nvidia.com for MIG devices); None for a type the catalog does not count."""
    return hardware.load().dra_driver.device_classes.get(device.type)


_MEMORY_WORD = re.compile(r"\d+gb")


def model_words(gpu: Gpu) -> tuple[str, ...]:
    """The words naming `gpu`'s model, without its memory: "A100 80GB" -> ("a100",),
    "RTX PRO 6000 96GB" -> ("rtx", "pro", "6000")."""
    words = gpu.name.lower().split()
    return tuple(w for w in words if not _MEMORY_WORD.fullmatch(w))


def names_gpu(product: str, gpu: Gpu) -> bool:
    """Whether an NVML product name ("NVIDIA A100-SXM4-80GB", "Tesla T4", GPU feature discovery's
    hyphenated form alike) names `gpu`'s model: each of its model words is a word of the name, so
    A10 is not A100 nor A10G."""
    words = set(re.split(r"[^0-9a-z]+", product.lower()))
    return all(w in words for w in model_words(gpu))


def counted(devices: Sequence[Device]) -> str:
    """Devices in words, by kind: "7 MIG 1g.10gb devices", "1 GPU device, 3 MIG 2g.20gb devices"."""
    kinds: dict[str, int] = {}
    for device in devices:
        kinds[device.kind] = kinds.get(device.kind, 0) + 1
    return ", ".join(f"{n} {kind} device{'s' if n != 1 else ''}" for kind, n in kinds.items())
