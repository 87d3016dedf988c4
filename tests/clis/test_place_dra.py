"""Issue 28's `place` as a user meets it: examples/dra.yaml applied to a running `sandbox serve`,
NVIDIA's DRA driver installed in each cluster with the values `render` prints, synced into its
catalog (each pool's allocation_mode read back from the cloud, its devices from the slices), then
`place` on each DRA pool: the claim object and the pod's claims, as JSON and merged into a
manifest, each object valid for Kubernetes 1.34 (checked with kubernetes-validate)."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest
from ruamel.yaml import YAML

from tests.clis.conftest import Served, ok
from tests.conftest import EXAMPLES

FLEET = (EXAMPLES / "dra.yaml").read_text(encoding="utf-8")
KUBERNETES_VERSION = "1.34"
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: notebook}
spec:
  containers:
    - {name: main, image: busybox, command: [sleep, infinity]}
"""
# Per DRA pool: what its pod asks for, and the claim object's kind and device class.
PLACED = {
    ("azure-dra", "a100dra"): (["--mig", "1g.10gb"], "ResourceClaimTemplate", "mig.nvidia.com"),
    ("azure-dra", "t4drats"): (["--gpu-memory", "4GB"], "ResourceClaim", "gpu.nvidia.com"),
    ("gcp-dra", "l4-dra"): (["--gpus", "2"], "ResourceClaimTemplate", "gpu.nvidia.com"),
    ("aws-dra", "p4de-dra"): (["--mig", "2g.20gb"], "ResourceClaimTemplate", "mig.nvidia.com"),
    ("aws-dra", "g5-dra-ts"): (["--gpu-memory", "6GB"], "ResourceClaim", "gpu.nvidia.com"),
    ("ali-dra", "a10-dra"): (["--gpus", "1"], "ResourceClaimTemplate", "gpu.nvidia.com"),
}


@pytest.fixture(scope="module")
def synced(served: Served) -> Served:
    ok(served.provisioner("apply", str(served.fleet), "--auto-approve"))
    rendered = served.directory.parent / "rendered"
    ok(served.provisioner("render", str(served.fleet), "--out-dir", str(rendered)))
    for cluster in sorted({c for c, _ in PLACED}):  # helm install -f <render's values>, as its comment says
        values = str(rendered / cluster / "dra-driver-values.yaml")
        where = ["--dir", str(served.directory), "--cluster", cluster]
        ok(served.provisioner("sandbox", "install-dra-driver", *where, "-f", values))
        classes = rendered / cluster / "dra-device-classes.yaml"
        if classes.exists():
            assert "created" in ok(served.kubectl(cluster, "apply", "-f", str(classes)))
    ok(served.provisioner("sync", str(served.fleet)))
    return served


def test_sync_records_every_pool_of_the_example_as_a_dra_pool(synced: Served):
    listed = json.loads(ok(synced.provisioner("catalog", "ls", "--json")))
    gpu_pools = {(r["cluster"], r["pool"]): r["allocation_mode"] for r in listed if r["gpu"]}
    assert gpu_pools == dict.fromkeys(PLACED, "dra")
    figures = {
        (r["cluster"], r["pool"]): (r["k8s_nodes"], r["slices_advertised"]) for r in listed if r["gpu"]
    }
    assert figures == {  # the devices the driver publishes, times the pods sharing each where shared
        ("azure-dra", "a100dra"): (1, 7),  # 1 A100 80GB x 7 MIG 1g.10gb
        ("azure-dra", "t4drats"): (1, 4),  # 1 T4 x 4
        ("gcp-dra", "l4-dra"): (1, 2),
        ("aws-dra", "p4de-dra"): (1, 24),  # 8 A100 80GB x 3 MIG 2g.20gb
        ("aws-dra", "g5-dra-ts"): (1, 16),  # 4 A10G x 4
        ("ali-dra", "a10-dra"): (1, 2),
    }
    assert "allocation" in ok(synced.provisioner("catalog", "ls"))  # the column, however wrapped


@pytest.mark.parametrize(("cluster", "pool"), sorted(PLACED))
def test_place_on_each_dra_pool_gives_a_claim_and_the_pod_s_claims(synced: Served, cluster: str, pool: str):
    asked, kind, device_class = PLACED[(cluster, pool)]
    where = ["--cluster", cluster, "--pool", pool]
    shown = json.loads(ok(synced.provisioner("place", *asked, *where, "--json")))
    assert (shown["pool"], shown["allocation_mode"]) == (pool, "dra")
    assert shown["resources"] == {"limits": {}, "claims": [{"name": "gpu"}]}
    claim = shown["claim"]
    assert claim["kind"] == kind
    devices = claim["spec"]["devices"] if kind == "ResourceClaim" else claim["spec"]["spec"]["devices"]
    assert devices["requests"][0]["exactly"]["deviceClassName"] == device_class
    kubernetes_validate.validate(claim, KUBERNETES_VERSION, strict=True)
    manifest = synced.directory.parent / f"pod-{pool}.yaml"
    manifest.write_text(POD, encoding="utf-8")
    merged = ok(synced.provisioner("place", *asked, *where, "--manifest", str(manifest)))
    first, pod = [d for d in YAML(typ="safe").load_all(merged) if d is not None]
    assert first == claim  # applied first: the pod names it
    for document in (first, pod):
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    assert pod["spec"]["resourceClaims"] == shown["resourceClaims"]
    assert pod["spec"]["nodeSelector"] == shown["nodeSelector"]  # the pool's nodes, by the synced ID on ACK
    assert pod["spec"]["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}


def test_live_on_a_share_names_the_first_claim_of_the_group_none_exist_yet(synced: Served):
    done = synced.provisioner("place", "--gpu-memory", "4GB", "--pool", "t4drats", "--live", "--json")
    shown = json.loads(ok(done))
    assert shown["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "t4drats-share-0"}]


def _wait(check, what: str, tries: int = 100) -> None:
    import time

    for _ in range(tries):
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen")


@pytest.fixture(scope="module")
def with_driver(synced: Served) -> Served:
    """Each cluster's DRA driver installed with the values `render` gives, its DeviceClasses applied
    (before the sync: `synced` does it)."""
    return synced


@pytest.mark.parametrize(("cluster", "pool"), sorted(PLACED))
def test_the_placed_pod_runs_on_its_pool_with_the_device_its_claim_asks_for(
    with_driver: Served, cluster: str, pool: str
):
    asked = PLACED[(cluster, pool)][0]
    manifest = with_driver.directory.parent / f"run-{pool}.yaml"
    manifest.write_text(POD.replace("name: notebook", f"name: run-{pool}"), encoding="utf-8")
    placed = with_driver.directory.parent / f"placed-{pool}.yaml"
    placed.write_text(
        ok(
            with_driver.provisioner(
                "place", *asked, "--cluster", cluster, "--pool", pool, "--manifest", str(manifest)
            )
        ),
        encoding="utf-8",
    )
    ok(with_driver.kubectl(cluster, "apply", "-f", str(placed)))

    def pod() -> dict:
        return json.loads(ok(with_driver.kubectl(cluster, "get", "pod", f"run-{pool}", "-o", "json")))

    _wait(lambda: pod()["status"].get("phase") == "Running", f"pod run-{pool} running")
    claims = json.loads(ok(with_driver.kubectl(cluster, "get", "resourceclaims", "-o", "json")))["items"]
    mine = [c for c in claims if any(r["name"] == f"run-{pool}" for r in c["status"].get("reservedFor", []))]
    [claim] = mine
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == (int(asked[1]) if "--gpus" in asked else 1)
    node = pod()["spec"]["nodeName"]
    slices = json.loads(
        ok(
            with_driver.kubectl(
                cluster, "get", "resourceslices", "--field-selector", f"spec.nodeName={node}", "-o", "json"
            )
        )
    )["items"]
    devices = {d["name"]: d for s in slices for d in s["spec"]["devices"]}
    for result in results:
        assert (result["driver"], result["pool"]) == ("gpu.nvidia.com", node)  # a device of the pod's node
        attributes = devices[result["device"]]["attributes"]
        if "--mig" in asked:
            assert attributes["profile"]["string"] == asked[1]
        else:
            assert attributes["type"]["string"] == "gpu"
    allocatable = json.loads(ok(with_driver.kubectl(cluster, "get", "node", node, "-o", "json")))["status"][
        "allocatable"
    ]
    assert (
        "nvidia.com/gpu" not in allocatable or allocatable["nvidia.com/gpu"] == "0"
    )  # the device plugin is off


def test_pods_placed_on_a_time_sliced_pool_share_one_claim_and_one_gpu(with_driver: Served):
    cluster, pool = "aws-dra", "g5-dra-ts"
    for name in ("share-a", "share-b"):
        manifest = with_driver.directory.parent / f"{name}.yaml"
        manifest.write_text(POD.replace("name: notebook", f"name: {name}"), encoding="utf-8")
        placed = ok(
            with_driver.provisioner(
                "place", "--gpu-memory", "6GB", "--pool", pool, "--manifest", str(manifest)
            )
        )
        manifest.write_text(placed, encoding="utf-8")
        ok(with_driver.kubectl(cluster, "apply", "-f", str(manifest)))

    def claim() -> dict:
        return json.loads(
            ok(with_driver.kubectl(cluster, "get", "resourceclaim", f"{pool}-share-0", "-o", "json"))
        )

    def reserving() -> set[str]:
        return {r["name"] for r in claim()["status"].get("reservedFor", [])}

    _wait(lambda: {"share-a", "share-b"} <= reserving(), "both pods reserving the claim")
    pods = [
        json.loads(ok(with_driver.kubectl(cluster, "get", "pod", n, "-o", "json")))
        for n in ("share-a", "share-b")
    ]
    assert pods[0]["spec"]["nodeName"] == pods[1]["spec"]["nodeName"]  # one claim: one device, one node
    [result] = claim()["status"]["allocation"]["devices"]["results"]
    [config] = claim()["status"]["allocation"]["devices"]["config"]
    assert config["opaque"]["parameters"]["sharing"]["strategy"] == "TimeSlicing"
    assert result["pool"] == pods[0]["spec"]["nodeName"]


def test_live_counts_the_pods_that_name_a_claim_before_they_are_scheduled(synced: Served):
    waiting = "".join(
        f"""---
apiVersion: v1
kind: Pod
metadata: {{name: waiting-{i}, namespace: fill}}
spec:
  containers: [{{name: main, image: busybox, resources: {{claims: [{{name: gpu}}]}}}}]
  resourceClaims: [{{name: gpu, resourceClaimName: t4drats-share-0}}]
"""
        for i in range(4)  # the pool's replicas: the claim they name (not made yet) is full
    )
    pods = synced.directory.parent / "waiting.yaml"
    pods.write_text(waiting, encoding="utf-8")
    ok(synced.kubectl("azure-dra", "apply", "-f", str(pods)))
    done = synced.provisioner(
        "place", "--gpu-memory", "4GB", "--pool", "t4drats", "--live", "--namespace", "fill", "--json"
    )
    shown = json.loads(ok(done))
    assert shown["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "t4drats-share-1"}]
