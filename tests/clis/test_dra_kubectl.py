"""kubectl against the sandbox's resource.k8s.io/v1, as a user installing NVIDIA's DRA driver
meets it: `provisioner sandbox install-dra-driver` refuses as helm does without the override and
installs with it; `kubectl get resourceslices` shows what the kubelet plugin published for a MIG
pool whose device plugin the GPU Operator label turned off; `kubectl apply` (client-side and
--server-side) writes DeviceClasses and claims; `kubectl api-resources` lists the group."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clis.conftest import Served, ok

FLEET = """\
clusters:
  - name: azure
    cloud: aks
    subscription: 44444444-4444-4444-4444-444444444444
    resourceGroup: ml
    cluster: dra-aks
    pools:
      - name: a100mig
        instanceType: Standard_NC24ads_A100_v4
        gpu: {mig: 1g.10gb, allocation: dra}  # device plugin off by its label
        nodes: {count: 1}
"""
DEVICE_CLASS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: mig-1g10gb.example.com}
spec:
  selectors:
    - cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '%s'"}
"""
CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-slice, namespace: ml}
spec:
  devices:
    requests:
      - name: mig
        exactly: {deviceClassName: mig.nvidia.com, count: 1}
"""


@pytest.fixture(scope="module")
def installed(served: Served) -> Served:
    ok(served.provisioner("apply", str(served.fleet), "--auto-approve"))
    return served


def _file(served: Served, name: str, text: str) -> str:
    path = Path(served.directory).parent / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_the_driver_installs_as_helm_would_and_its_slices_show_in_kubectl(installed: Served):
    sandbox = str(installed.directory)
    refused = installed.provisioner("sandbox", "install-dra-driver", "--dir", sandbox, "--cluster", "azure")
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "Error: INSTALLATION FAILED: execution error at "
        "(dra-driver-nvidia-gpu/templates/validation.yaml:42:4):"
    )
    assert "--set 'gpuResourcesEnabledOverride=true'" in refused.stderr
    values = _file(
        installed,
        "values.yaml",
        "gpuResourcesEnabledOverride: true\nresources:\n  computeDomains:\n    enabled: false\n",
    )
    done = ok(
        installed.provisioner(
            "sandbox", "install-dra-driver", "--dir", sandbox, "--cluster", "azure", "-f", values
        )
    )
    assert done.splitlines()[0] == "NAME: dra-driver-nvidia-gpu"
    assert "STATUS: deployed" in done

    resources = ok(installed.kubectl("azure", "api-resources", "--api-group=resource.k8s.io", "-o", "name"))
    assert sorted(resources.split()) == [
        "deviceclasses.resource.k8s.io",
        "resourceclaims.resource.k8s.io",
        "resourceclaimtemplates.resource.k8s.io",
        "resourceslices.resource.k8s.io",
    ]
    [header, row] = ok(installed.kubectl("azure", "get", "resourceslices")).splitlines()
    assert header.split() == ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    name, node, driver, pool, _ = row.split()
    assert node.startswith("aks-a100mig-") and (driver, pool) == ("gpu.nvidia.com", node)
    assert name.startswith(f"00000-gpu.nvidia.com-{node}-")
    published = json.loads(ok(installed.kubectl("azure", "get", "resourceslice", name, "-o", "json")))
    profiles = [d["attributes"]["profile"]["string"] for d in published["spec"]["devices"]]
    assert profiles == ["1g.10gb"] * 7  # AKS partitioned the A100 80GB into 7 x 1g.10gb
    allocatable = json.loads(ok(installed.kubectl("azure", "get", "node", node, "-o", "json")))["status"][
        "allocatable"
    ]
    assert "nvidia.com/gpu" not in allocatable  # the GPU Operator's device plugin is off there
    classes = ok(installed.kubectl("azure", "get", "deviceclasses", "-o", "name")).split()
    assert classes == [
        "deviceclass.resource.k8s.io/gpu.nvidia.com",
        "deviceclass.resource.k8s.io/mig.nvidia.com",
        "deviceclass.resource.k8s.io/vfio.gpu.nvidia.com",
    ]


def test_kubectl_applies_device_classes_and_claims_client_and_server_side(installed: Served):
    path = _file(installed, "class.yaml", DEVICE_CLASS % "1g.10gb")
    assert ok(installed.kubectl("azure", "apply", "-f", path)).strip() == (
        "deviceclass.resource.k8s.io/mig-1g10gb.example.com created"
    )
    assert ok(installed.kubectl("azure", "apply", "-f", path)).strip() == (
        "deviceclass.resource.k8s.io/mig-1g10gb.example.com unchanged"
    )
    Path(path).write_text(DEVICE_CLASS % "1g.20gb", encoding="utf-8")
    assert ok(installed.kubectl("azure", "apply", "-f", path)).strip() == (
        "deviceclass.resource.k8s.io/mig-1g10gb.example.com configured"
    )
    stored = json.loads(
        ok(installed.kubectl("azure", "get", "deviceclass", "mig-1g10gb.example.com", "-o", "json"))
    )
    assert stored["spec"]["selectors"][0]["cel"]["expression"].endswith("'1g.20gb'")
    assert stored["metadata"]["generation"] == 2

    claim = _file(installed, "claim.yaml", CLAIM)
    assert ok(installed.kubectl("azure", "apply", "--server-side", "-f", claim)).strip() == (
        "resourceclaim.resource.k8s.io/shared-slice serverside-applied"
    )
    [header, row] = ok(installed.kubectl("azure", "get", "resourceclaims", "-A")).splitlines()
    assert header.split() == ["NAMESPACE", "NAME", "STATE", "AGE"]
    assert row.split()[:3] == ["ml", "shared-slice", "pending"]

    bad = _file(installed, "bad.yaml", CLAIM.replace("name: mig", "name: MIG"))
    refused = installed.kubectl("azure", "apply", "-f", bad)
    assert refused.returncode == 1
    assert 'The ResourceClaim "shared-slice" is invalid' in refused.stderr  # kubectl words the Status so
    assert 'spec.devices.requests[0].name: Invalid value: "MIG"' in refused.stderr


def test_uninstall_removes_the_chart_s_classes(installed: Served):
    sandbox = str(installed.directory)
    values = _file(installed, "override.yaml", "gpuResourcesEnabledOverride: true\n")
    install = ["sandbox", "install-dra-driver", "--dir", sandbox, "--cluster", "azure", "-f", values]
    installed.provisioner(*install)  # installed here, or already by the test above (then: refused)
    done = ok(
        installed.provisioner("sandbox", "uninstall-dra-driver", "--dir", sandbox, "--cluster", "azure")
    )
    assert done.strip() == 'release "dra-driver-nvidia-gpu" uninstalled'
    assert ok(installed.kubectl("azure", "get", "resourceslices", "-o", "name")).strip() == ""
    again = installed.provisioner("sandbox", "uninstall-dra-driver", "--dir", sandbox, "--cluster", "azure")
    assert again.returncode == 1
    assert (
        again.stderr.strip()
        == "Error: uninstall: Release not loaded: dra-driver-nvidia-gpu: release: not found"
    )
    unknown = installed.provisioner("sandbox", "install-dra-driver", "--dir", sandbox, "--cluster", "nowhere")
    assert unknown.returncode == 1 and "no cluster 'nowhere'" in unknown.stderr
