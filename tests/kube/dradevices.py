"""Devices as the NVIDIA DRA driver's kubelet plugin publishes them in a ResourceSlice
(kubernetes-sigs/dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/deviceinfo.go GetDevice, mig.go:
names gpu-<minor> and gpu-<minor>-mig-<profile without dots>-<profile id>-<placement start>,
attributes in the driver's own domain, capacities as quantities), and the chart's DeviceClasses
(templates/deviceclass-gpu.yaml, deviceclass-mig.yaml)."""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.nvidia.com"
A100 = "NVIDIA A100-SXM4-40GB"


def gpu(minor: int, uuid: str | None = None, product: str = A100, memory: str = "40Gi") -> dict[str, Any]:
    return {
        "name": f"gpu-{minor}",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": uuid or f"GPU-{minor:08d}"},
            "productName": {"string": product},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": "Ampere"},
            "cudaComputeCapability": {"version": "8.0.0"},
            "driverVersion": {"version": "570.158.1"},
            "cudaDriverVersion": {"version": "12.8.0"},
            "addressingMode": {"string": "None"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{minor:02x}:00.0"},
        },
        "capacity": {"memory": {"value": memory}},
    }


MIG_PROFILES = {"1g.5gb": (19, "4864Mi"), "2g.10gb": (14, "9856Mi"), "3g.20gb": (9, "19968Mi")}


def mig(parent: int, profile: str, placement: int) -> dict[str, Any]:
    profile_id, memory = MIG_PROFILES[profile]
    return {
        "name": f"gpu-{parent}-mig-{profile.replace('.', '')}-{profile_id}-{placement}",
        "attributes": {
            "type": {"string": "mig"},
            "uuid": {"string": f"MIG-{parent}-{profile_id}-{placement}"},
            "parentUUID": {"string": f"GPU-{parent:08d}"},
            "profile": {"string": profile},
            "productName": {"string": A100},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": "Ampere"},
            "cudaComputeCapability": {"version": "8.0.0"},
            "driverVersion": {"version": "570.158.1"},
            "cudaDriverVersion": {"version": "12.8.0"},
        },
        "capacity": {"multiprocessors": {"value": "14"}, "memory": {"value": memory}},
    }


def resource_slice(node: str, devices: list[dict[str, Any]], generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}-abcde"},
        "spec": {
            "driver": DRIVER,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": devices,
        },
    }


def device_class(name: str, kind: str, config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    expression = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if config:
        spec["config"] = config
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


CLASSES = {
    "gpu.nvidia.com": device_class("gpu.nvidia.com", "gpu"),
    "mig.nvidia.com": device_class("mig.nvidia.com", "mig"),
}


def node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}}


def claim(name: str, *requests: dict[str, Any], namespace: str = "default", **devices: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": list(requests), **devices}},
    }


def exactly(
    name: str, device_class_name: str, *selectors: str, count: int = 1, mode: str = ""
) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": device_class_name, "count": count}
    if mode:
        body = {"deviceClassName": device_class_name, "allocationMode": mode}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": body}


def sharing(kind: str, strategy: str, requests: list[str] | None = None) -> dict[str, Any]:
    """A claim config entry with the NVIDIA driver's opaque parameters (time-slicing.md)."""
    entry: dict[str, Any] = {
        "opaque": {
            "driver": DRIVER,
            "parameters": {
                "apiVersion": "resource.nvidia.com/v1beta1",
                "kind": kind,
                "sharing": {"strategy": strategy},
            },
        }
    }
    if requests:
        entry["requests"] = requests
    return entry
