"""`place` on DRA pools (gpu.allocation: dra): a ResourceClaimTemplate for whole GPUs and MIG
devices, one shared ResourceClaim for a time-sliced or MPS share, the pod's resourceClaims and the
container's resources.claims, printed, in --json and merged into --manifest; every object checked
with kubernetes-validate against Kubernetes 1.34, where resource.k8s.io/v1 is GA."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from click.testing import CliRunner, Result
from ruamel.yaml import YAML

from provisioner.capacity import capacity
from provisioner.catalog.listing import ClusterIdentity, ObservedPool
from provisioner.catalog.store import Store
from provisioner.claims import DeviceAsk, first_with_room, object_name
from provisioner.cli import main
from provisioner.compile import compile_file, desired_state
from provisioner.errors import BadRequest
from provisioner.placement import Request, place
from provisioner.podspec import merge
from tests.conftest import EXAMPLES

KUBERNETES_VERSION = "1.34"  # resource.k8s.io/v1: DRA's stable API
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
MANAGED = {"app.kubernetes.io/managed-by": "provisioner"}
ACK_POOL_ID = "np0d1e2f3a4b5c6"
# MPS on DRA: on a whole GPU, and on MIG devices (MigDeviceConfig's one sharing strategy), and a
# node group name EKS takes but a Kubernetes object name does not.
MPS_FLEET = """\
clusters:
  - name: aws-mps
    cloud: eks
    region: us-east-1
    cluster: mps-eks
    nodeRole: arn:aws:iam::123456789012:role/eks-gpu-nodes
    subnets: [subnet-0abc1234]
    pools:
      - name: p4de-mig-mps
        instanceType: p4de.24xlarge
        gpu: {mig: 1g.10gb, sharing: mps, replicas: 2, allocation: dra, draFeatureGates: [MPSSupport]}
        nodes: {count: 1}
      - name: G5_MPS
        instanceType: g5.xlarge
        gpu: {sharing: mps, replicas: 4, allocation: dra, draFeatureGates: [MPSSupport]}
        nodes: {min: 0, max: 3}
"""


def _fill(store: Store, fleet: Path) -> None:
    """Each cluster of `fleet` recorded as a sync would list it, ACK's pool with its ID."""
    for cluster in compile_file(fleet).clusters:
        pools = []
        for pool in cluster.pools:
            state = desired_state(pool)
            if cluster.cloud.key == "ack":
                state = dataclasses.replace(state, cloud_id=ACK_POOL_ID)
            pools.append(ObservedPool(state, capacity(cluster.cloud.key, state)))
        identity = ClusterIdentity(cluster.name, cluster.cloud.key, "account", "location", cluster.name)
        store.record_cluster(identity, pools, [], datetime.now(UTC))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    directory = tmp_path_factory.mktemp("place-dra")
    (directory / "mps.yaml").write_text(MPS_FLEET, encoding="utf-8")
    store = Store(f"sqlite:///{directory / 'catalog.db'}")
    store.migrate()
    _fill(store, EXAMPLES / "dra.yaml")
    _fill(store, directory / "mps.yaml")
    return store


def _template(name: str, exactly: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "labels": MANAGED},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def _shared(name: str, exactly: dict[str, Any], kind: str, sharing: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "labels": MANAGED},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": exactly}],
                "config": [
                    {
                        "requests": ["gpu"],
                        "opaque": {
                            "driver": "gpu.nvidia.com",
                            "parameters": {
                                "apiVersion": "resource.nvidia.com/v1beta1",
                                "kind": kind,
                                "sharing": sharing,
                            },
                        },
                    }
                ],
            }
        },
    }


def _profile(name: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": f"device.attributes['gpu.nvidia.com'].profile == '{name}'"}}]


# request -> (pool, the pod's resourceClaims entry, the claim object, the pool's node selector)
EVERY_DRA_CASE = {
    "whole GPUs on GKE": (
        Request(gpus=2, cloud="gke"),
        "l4-dra",
        {"name": "gpu", "resourceClaimTemplateName": "l4-dra-gpus-2"},
        _template("l4-dra-gpus-2", {"deviceClassName": "gpu.nvidia.com", "count": 2}),
        {"provisioner.io/pool": "l4-dra"},
    ),
    "a whole GPU on ACK, by its fleet name (not its pool ID)": (
        Request(gpu_memory="20GB", cloud="ack"),
        "a10-dra",
        {"name": "gpu", "resourceClaimTemplateName": "a10-dra-gpus-1"},
        _template("a10-dra-gpus-1", {"deviceClassName": "gpu.nvidia.com", "count": 1}),
        {"provisioner.io/pool": "a10-dra"},
    ),
    "a MIG profile on AKS": (
        Request(mig="1g.10gb", cloud="aks"),
        "a100dra",
        {"name": "gpu", "resourceClaimTemplateName": "a100dra-mig-1g.10gb"},
        _template(
            "a100dra-mig-1g.10gb",
            {"deviceClassName": "mig.nvidia.com", "selectors": _profile("1g.10gb"), "count": 1},
        ),
        {"provisioner.io/pool": "a100dra"},
    ),
    "a MIG profile on EKS": (
        Request(mig="2g.20gb", cloud="eks"),
        "p4de-dra",
        {"name": "gpu", "resourceClaimTemplateName": "p4de-dra-mig-2g.20gb"},
        _template(
            "p4de-dra-mig-2g.20gb",
            {"deviceClassName": "mig.nvidia.com", "selectors": _profile("2g.20gb"), "count": 1},
        ),
        {"provisioner.io/pool": "p4de-dra"},
    ),
    "a time-sliced share on AKS": (
        Request(gpu_memory="4GB", cloud="aks"),
        "t4drats",
        {"name": "gpu", "resourceClaimName": "t4drats-share-0"},
        _shared(
            "t4drats-share-0",
            {"deviceClassName": "gpu.nvidia.com", "count": 1},
            "GpuConfig",
            {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}},
        ),
        {"provisioner.io/pool": "t4drats"},
    ),
    "an MPS share of a MIG device on EKS": (
        Request(mig="1g.10gb", isolation="compute", cluster="aws-mps"),
        "p4de-mig-mps",
        {"name": "gpu", "resourceClaimName": "p4de-mig-mps-share-0"},
        _shared(
            "p4de-mig-mps-share-0",
            {"deviceClassName": "mig.nvidia.com", "selectors": _profile("1g.10gb"), "count": 1},
            "MigDeviceConfig",
            {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}},
        ),
        {"provisioner.io/pool": "p4de-mig-mps"},
    ),
}


@pytest.mark.parametrize("case", list(EVERY_DRA_CASE))
def test_each_dra_pool_gets_its_claim_and_the_pod_s_side_of_it(store: Store, case: str):
    request, pool, pod_claim, claim, selector = EVERY_DRA_CASE[case]
    chosen = place(store, request)
    shown = chosen.json()
    assert (shown["pool"], shown["allocation_mode"]) == (pool, "dra")
    assert shown["resources"] == {"limits": {}, "claims": [{"name": "gpu"}]}  # no extended resource
    assert shown["resourceClaims"] == [pod_claim]
    assert shown["claim"] == claim
    assert shown["nodeSelector"] == selector  # on the pool, as on a device-plugin pool
    assert shown["tolerations"] == [GPU_TOLERATION]
    assert "hostIPC" not in shown
    kubernetes_validate.validate(claim, KUBERNETES_VERSION, strict=True)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "c", "image": "cuda", "resources": chosen.fragment()["resources"]}],
            **{k: v for k, v in chosen.fragment().items() if k != "resources"},
        },
    }
    kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)


def test_a_share_says_why_it_is_one_claim_and_how_pods_find_it(store: Store):
    notes = place(store, Request(gpu_memory="4GB", cloud="aks")).notes
    assert notes[0].startswith(
        "ResourceClaim t4drats-share-0: one claim for one time-sliced GPU, which up to 4 "
    )
    assert notes[1] == (
        "DRA shares a device between pods only through one ResourceClaim: a ResourceClaimTemplate makes "
        "a claim per pod, so pods made from one never share a device"
    )
    assert notes[-1] == (
        "without --live, place did not read which shared claims exist or how full they are: t4drats-share-0"
    )


def test_a_mig_template_names_the_device_class_render_gives_for_the_profile(store: Store):
    notes = place(store, Request(mig="1g.10gb", cloud="aks")).notes
    assert notes[-1].startswith(
        "`provisioner render` gives DeviceClass mig-1g.10gb.nvidia.com, which selects"
    )


def test_mps_shares_a_whole_gpu_s_sms_between_the_pool_s_clients(store: Store):
    chosen = place(store, Request(gpu_memory="5.5GB", isolation="compute", cluster="aws-mps"))
    assert chosen.pool == "G5_MPS"
    name = object_name("G5_MPS") + "-share-0"
    assert chosen.json()["resourceClaims"] == [{"name": "gpu", "resourceClaimName": name}]
    (config,) = chosen.claim["spec"]["devices"]["config"]
    assert config["opaque"]["parameters"] == {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "GpuConfig",
        "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 25}},
    }
    kubernetes_validate.validate(chosen.claim, KUBERNETES_VERSION, strict=True)


def test_a_pool_name_no_object_may_carry_is_made_one_and_kept_apart():
    assert object_name("l4-dra") == "l4-dra"
    made = object_name("G5_MPS")
    assert made.startswith("g5-mps-") and len(made) == len("g5-mps-") + 6
    assert made != object_name("g5-mps") and made != object_name("G5-MPS")


def test_the_first_shared_claim_with_room_or_the_next_new_one():
    ask = DeviceAsk("t4", "gpu.nvidia.com", 1, sharing="time-slicing", replicas=4)
    assert first_with_room(ask, {}) == 0
    assert first_with_room(ask, {"t4-share-0": 3}) == 0
    assert first_with_room(ask, {"t4-share-0": 4, "t4-share-1": 1}) == 1
    assert first_with_room(ask, {"t4-share-0": 4, "t4-share-1": 4, "other-share-2": 0}) == 2
    assert first_with_room(ask, {"t4-team-0": 4}, group="team") == 1
    many = dataclasses.replace(ask, replicas=1000)  # reservedFor holds 256 pods at most
    assert many.pods_per_claim == 256
    assert first_with_room(many, {"t4-share-0": 256}) == 1


def _documents(text: str) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe").load_all(text) if d is not None]


def _run(store: Store, *args: str, input: str | None = None) -> Result:
    env = {"PROVISIONER_SANDBOX": "", "PROVISIONER_CATALOG": store.url}
    return CliRunner().invoke(main, ["place", *args], env=env, input=input, catch_exceptions=False)


def test_the_text_output_is_the_claim_then_the_fragment_and_says_what_each_is(store: Store):
    result = _run(store, "--gpu-memory", "4GB", "--cloud", "aks")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "Placed on cluster azure-dra (aks), pool t4drats."
    assert lines[2] == (  # as any pool's: sync counts a DRA pool's devices from the driver's slices
        "Tier: free slices unknown: the catalog holds no allocation for it (sync with its Kubernetes "
        "API reachable, or --live)."
    )
    assert "# apply the claim object first; the pod fragment follows it" in lines
    claim, fragment = _documents(result.stdout.partition("---\n")[2])  # the words end at the first document
    assert claim == place(store, Request(gpu_memory="4GB", cloud="aks")).claim
    kubernetes_validate.validate(claim, KUBERNETES_VERSION, strict=True)
    assert fragment == {
        "resources": {"claims": [{"name": "gpu"}]},
        "resourceClaims": [{"name": "gpu", "resourceClaimName": "t4drats-share-0"}],
        "nodeSelector": {"provisioner.io/pool": "t4drats"},
        "tolerations": [GPU_TOLERATION],
    }


def test_json_adds_the_claim_and_keeps_every_key(store: Store):
    result = _run(store, "--mig", "2g.20gb", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert set(shown) == {
        *("cluster", "cloud", "pool", "isolation", "slice", "resources", "nodeSelector", "tolerations"),
        *("capacity", "allocation_mode", "resourceClaims", "claim", "notes"),
    }
    assert shown["claim"]["kind"] == "ResourceClaimTemplate"
    assert shown["slice"] == {"memory_gb": 20.0, "unit": "slice"}


def test_a_share_group_names_the_claim_pods_of_the_group_find(store: Store):
    result = _run(store, "--gpu-memory", "4GB", "--cloud", "aks", "--share-group", "team-a", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "t4drats-team-a-0"}]
    assert shown["claim"]["metadata"]["name"] == "t4drats-team-a-0"


def test_namespace_goes_on_the_claim(store: Store):
    result = _run(store, "--gpus", "1", "--cloud", "gke", "--namespace", "ml", "--json")
    assert result.exit_code == 0, result.output
    claim = json.loads(result.stdout)["claim"]
    assert claim["metadata"] == {"name": "l4-dra-gpus-1", "namespace": "ml", "labels": MANAGED}
    kubernetes_validate.validate(claim, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--share-group", "Team_A"], "error: --share-group 'Team_A': want at most 63 lowercase letters, "),
        (["--namespace", "-ml"], "error: --namespace '-ml': want at most 63 lowercase letters, "),
    ],
)
def test_a_share_group_or_namespace_that_is_no_dns_label(store: Store, args: list[str], message: str):
    result = _run(store, "--gpu-memory", "4GB", "--cloud", "aks", *args)
    assert result.exit_code == 1
    assert result.stderr.startswith(message)


def test_a_share_group_on_a_pool_that_shares_nothing_is_said_and_ignored(store: Store):
    result = _run(store, "--gpus", "1", "--cloud", "gke", "--share-group", "team-a", "--json")
    assert result.exit_code == 0, result.output
    assert "warning: --share-group: DRA pool l4-dra gives each pod its own devices; ignored" in result.stderr
    assert json.loads(result.stdout)["claim"]["metadata"]["name"] == "l4-dra-gpus-1"


MANIFEST = """\
# the inference service
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      nodeSelector:
        kubernetes.io/os: linux   # the user's own
      resourceClaims:
        - name: scratch
          resourceClaimTemplateName: scratch-disk
      containers:
        - name: model
          image: "registry.example/model:1.2"
          resources:
            limits:
              memory: 8Gi
            claims:
              - name: scratch
        - name: proxy
          image: envoyproxy/envoy:v1.31.0
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
    - port: 80
"""


@pytest.mark.parametrize("case", list(EVERY_DRA_CASE))
def test_a_manifest_gets_the_claim_first_and_the_claims_merged(store: Store, case: str, tmp_path: Path):
    request, pool, pod_claim, claim, selector = EVERY_DRA_CASE[case]
    manifest = tmp_path / "app.yaml"
    manifest.write_text(MANIFEST, encoding="utf-8")
    where = ["--cluster", place(store, request).cluster, "--pool", pool]
    asked = (
        ["--gpus", "2"]
        if request.gpus
        else ["--mig", request.mig]
        if request.mig
        else ["--gpu-memory", "4GB"]
    )
    if request.isolation:
        asked += ["--isolation", request.isolation]
    result = _run(store, *asked, *where, "--manifest", str(manifest), "--container", "model")
    assert result.exit_code == 0, result.output
    documents = _documents(result.stdout)
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    shown, deployment, service = documents
    assert shown == claim  # first: kubectl apply -f applies it before the pods that name it
    assert service == _documents(MANIFEST)[1]
    spec = deployment["spec"]["template"]["spec"]
    assert spec["resourceClaims"] == [
        {"name": "scratch", "resourceClaimTemplateName": "scratch-disk"},
        pod_claim,
    ]
    model, proxy = spec["containers"]
    assert model["resources"] == {
        "limits": {"memory": "8Gi"},
        "claims": [{"name": "scratch"}, {"name": "gpu"}],
    }
    assert "resources" not in proxy  # --container model: the proxy is left alone
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux", **selector}
    assert spec["tolerations"] == [GPU_TOLERATION]
    assert "        kubernetes.io/os: linux   # the user's own\n" in result.stdout
    assert "# the claim object comes first: kubectl apply -f applies documents in order" in result.stderr


def test_without_container_every_container_uses_the_one_claim(store: Store):
    chosen = place(store, Request(gpus=2, cloud="gke"))
    merged = _documents(merge(MANIFEST, chosen, source="app.yaml"))[0]
    containers = merged["spec"]["template"]["spec"]["containers"]
    assert [c["resources"].get("claims") for c in containers] == [
        [{"name": "scratch"}, {"name": "gpu"}],
        [{"name": "gpu"}],
    ]
    again = _documents(merge(merge(MANIFEST, chosen, source="app.yaml"), chosen, source="app.yaml"))[0]
    assert again == merged  # merging twice adds nothing


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
            "  - name: c\n    image: busybox\n    resources: {limits: {nvidia.com/gpu: 1}}\n",
            "app.yaml:4: Pod p: container c asks for nvidia.com/gpu through the device plugin, which is off "
            "on DRA pool l4-dra's nodes: remove it; place gives the container a claim of the pool's devices "
            "instead",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  initContainers:\n"
            "  - name: warm\n    image: busybox\n    resources: {requests: {nvidia.com/mig-1g.10gb: 1}}\n"
            "  containers:\n  - {name: c, image: busybox}\n",
            "app.yaml:4: Pod p: initContainer warm asks for nvidia.com/mig-1g.10gb through the device plugin",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  resourceClaims:\n"
            "  - {name: gpu, resourceClaimName: mine}\n  containers:\n  - {name: c, image: busybox}\n",
            "app.yaml:4: Pod p: resourceClaims gpu is {'name': 'gpu', 'resourceClaimName': 'mine'}; the "
            "chosen pool needs {'name': 'gpu', 'resourceClaimTemplateName': 'l4-dra-gpus-1'}",
        ),
    ],
)
def test_a_manifest_that_cannot_take_a_dra_claim(store: Store, manifest: str, message: str):
    chosen = place(store, Request(gpus=1, cloud="gke"))
    with pytest.raises(BadRequest) as refused:
        merge(manifest, chosen, source="app.yaml")
    assert str(refused.value).startswith(message)


def test_the_cli_refuses_a_device_plugin_limit_on_a_dra_pool(store: Store, tmp_path: Path):
    manifest = tmp_path / "app.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "  - name: c\n    image: busybox\n    resources: {limits: {nvidia.com/gpu: 1}}\n",
        encoding="utf-8",
    )
    result = _run(store, "--gpus", "1", "--cloud", "gke", "--manifest", str(manifest), "--container", "c")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(
        f"error: {manifest}:4: Pod p: container c asks for nvidia.com/gpu through"
    )


@pytest.mark.parametrize("case", list(EVERY_DRA_CASE))
def test_the_json_is_what_the_openapi_document_says_of_api_place(store: Store, case: str):
    import jsonschema

    from provisioner.catalog import schemas

    jsonschema.validate(place(store, EVERY_DRA_CASE[case][0]).json(), schemas.placement())


def test_the_claim_goes_in_the_namespace_of_the_manifest_s_workloads(store: Store, tmp_path):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team-a}\nspec:\n  containers:\n"
        "    - {name: main, image: busybox}\n"
    )
    done = _run(store, "--gpu-memory", "4GB", "--cloud", "aks", "--manifest", str(manifest))
    assert done.exit_code == 0, done.output
    claim, pod = _documents(done.stdout)
    assert claim["metadata"]["namespace"] == pod["metadata"]["namespace"] == "team-a"
    other = _run(
        store, "--gpu-memory", "4GB", "--cloud", "aks", "--manifest", str(manifest), "--namespace", "ml"
    )
    assert other.exit_code == 1
    assert "--namespace: 'ml', but" in other.output and "are in namespace team-a" in other.output
