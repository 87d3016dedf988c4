"""`provisioner place` on the command line: its output, --json, --manifest (several documents and
containers, checked with kubernetes-validate), bad requests, nothing that fits, and end to end
through the sandbox: apply, sync, place."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import kubernetes_validate
import pytest
from click.testing import CliRunner, Result
from kubernetes import client, config
from ruamel.yaml import YAML

from provisioner.cli import main
from provisioner.compile import compile_file
from provisioner.drivers.registry import connect
from provisioner.sandbox.server import Sandbox, SandboxSettings
from tests.placements import catalog

KUBERNETES_VERSION = "1.31"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return catalog(tmp_path_factory.mktemp("place-cli")).url


def run(url: str, *args: str, input: str | None = None) -> Result:
    env = {"PROVISIONER_SANDBOX": "", "PROVISIONER_CATALOG": url}
    return CliRunner().invoke(main, ["place", *args], env=env, input=input, catch_exceptions=False)


def test_the_default_output_says_where_why_and_the_fragment(url: str):
    result = run(url, "--mig", "1g.5gb", "--cloud", "gke")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "Placed on cluster gcp (gke), pool a100-mig.",
        "Why: the smallest slice that fits: 1g.5gb MIG slices of A100 40GB "
        "(5.0 GB each, isolation hardware); 56 such pods at its maximum size (8 nodes); "
        "the only pool that fits.",
        "Tier: free slices unknown: the catalog holds no allocation for it "
        "(sync with its Kubernetes API reachable, or --live).",
        "# resources go on the container; the rest on the pod spec",
        "resources:",
        "  limits:",
        "    nvidia.com/gpu: 1",
        "nodeSelector:",
        "  provisioner.io/pool: a100-mig",
        "  cloud.google.com/gke-gpu-partition-size: 1g.5gb",
        "tolerations:",
        "- key: nvidia.com/gpu",
        "  operator: Equal",
        "  value: present",
        "  effect: NoSchedule",
    ]


def test_a_memory_scheduler_s_slice_is_what_the_pod_asks_for(url: str):
    result = run(url, "--gpu-memory", "3GiB", "--isolation", "memory", "--cloud", "ack")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:2] == [
        "Placed on cluster ali (ack), pool a10-cgpu.",
        "Why: the smallest slice that fits: A10 24GB memory by the GiB (22 GiB per GPU, isolation memory); "
        "this pod gets 3 GiB (3.22 GB); 28 such pods at its maximum size (4 nodes); 1 other pool also fits.",
    ]


def test_json_is_the_contract(url: str):
    result = run(url, "--gpu-memory", "6GB", "--isolation", "compute", "--cloud", "gke", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown.pop("capacity") == {
        "tier": "unknown",
        "free": None,
        "growable": None,
        "nodes_left": None,
        "at_max": 16,
        "allocation": "none",
        "allocation_at": None,
    }
    assert shown == {
        "cluster": "gcp",
        "cloud": "gke",
        "pool": "l4-mps",
        "isolation": "compute",
        "slice": {"memory_gb": 6.0, "unit": "slice"},
        "resources": {"limits": {"nvidia.com/gpu": 1}},
        "nodeSelector": {
            "provisioner.io/pool": "l4-mps",
            "cloud.google.com/gke-gpu-sharing-strategy": "mps",
            "cloud.google.com/gke-max-shared-clients-per-gpu": "4",
        },
        "tolerations": [GPU_TOLERATION],
        "hostIPC": True,
    }


# A user's file: comments, its own selectors and tolerations, a sidecar, a Service, a container
# that already asks for a GPU, and sequences indented under their keys.
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
      tolerations:
        - key: team
          operator: Equal
          value: ml
          effect: NoSchedule
      containers:
        - name: model
          image: "registry.example/model:1.2"
          resources:
            limits:
              memory: 8Gi
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
---
apiVersion: batch/v1
kind: Job
metadata:
  name: train
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: train
          image: registry.example/train:3
          resources:
            limits:
              nvidia.com/gpu: 1
        - name: eval
          image: registry.example/eval:3
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - name: batch
              image: registry.example/batch:1
---
apiVersion: v1
kind: Pod
metadata:
  name: notebook
spec:
  hostIPC: true
  tolerations:
    - operator: Exists
  containers:
    - name: jupyter
      image: jupyter/base-notebook:2024-05-01
"""


def _documents(text: str) -> list[dict]:
    return [d for d in YAML(typ="safe").load_all(text) if d is not None]


def _containers(document: dict) -> dict[str, dict]:
    spec = {
        "Deployment": lambda d: d["spec"]["template"]["spec"],
        "Job": lambda d: d["spec"]["template"]["spec"],
        "CronJob": lambda d: d["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        "Pod": lambda d: d["spec"],
    }[document["kind"]](document)
    return {c["name"]: c.get("resources", {}) for c in spec["containers"]}


def test_a_manifest_gets_the_fragment_in_every_pod_template(url: str, tmp_path: Path):
    manifest = tmp_path / "app.yaml"
    manifest.write_text(MANIFEST, encoding="utf-8")
    result = run(
        url, "--gpu-memory", "6GB", "--isolation", "compute", "--cloud", "gke", "--manifest", str(manifest)
    )
    assert result.exit_code == 0, result.output
    documents = _documents(result.stdout)
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    deployment, service, job, cronjob, pod = documents
    assert service == _documents(MANIFEST)[1]  # not a workload: kept as it was
    assert _containers(deployment) == {
        "model": {"limits": {"memory": "8Gi", "nvidia.com/gpu": 1}},
        "proxy": {"limits": {"nvidia.com/gpu": 1}},
    }
    pod_spec = deployment["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {
        "kubernetes.io/os": "linux",
        "provisioner.io/pool": "l4-mps",
        "cloud.google.com/gke-gpu-sharing-strategy": "mps",
        "cloud.google.com/gke-max-shared-clients-per-gpu": "4",
    }
    assert pod_spec["tolerations"] == [
        {"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
        GPU_TOLERATION,
    ]
    assert pod_spec["hostIPC"] is True
    # the Job's train container asked for a GPU itself and keeps it; eval gets the slice
    assert _containers(job) == {
        "train": {"limits": {"nvidia.com/gpu": 1}},
        "eval": {"limits": {"nvidia.com/gpu": 1}},
    }
    assert _containers(cronjob) == {"batch": {"limits": {"nvidia.com/gpu": 1}}}
    assert cronjob["spec"]["schedule"] == "0 3 * * *"
    # the Pod tolerates everything already: nothing added; hostIPC was already true
    assert pod["spec"]["tolerations"] == [{"operator": "Exists"}]
    assert pod["spec"]["hostIPC"] is True
    # the user's formatting: comments, quotes, flow maps and indented sequences stay
    assert result.stdout.startswith("# the inference service\napiVersion: apps/v1\n")
    assert "        kubernetes.io/os: linux   # the user's own\n" in result.stdout
    assert '          image: "registry.example/model:1.2"\n' in result.stdout
    assert "    matchLabels: {app: web}\n" in result.stdout
    assert "        - name: proxy\n" in result.stdout
    assert result.stderr.startswith("# Placed on cluster gcp (gke), pool l4-mps.\n")


def test_container_names_the_one_that_gets_the_limit(url: str, tmp_path: Path):
    manifest = tmp_path / "job.yaml"
    manifest.write_text(MANIFEST.split("---\n")[2], encoding="utf-8")
    result = run(
        url, "--gpu-memory", "3GiB", "--cloud", "ack", "--manifest", str(manifest), "--container", "train"
    )
    assert result.exit_code == 0, result.output
    (job,) = _documents(result.stdout)
    kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)
    # train's own nvidia.com/gpu is replaced by the ACK pool's resource; eval is left alone
    assert _containers(job) == {"train": {"limits": {"aliyun.com/gpu-mem": 3}}, "eval": {}}
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"provisioner.io/pool": "edge-t4"}


def test_a_manifest_on_stdin(url: str):
    pod = MANIFEST.split("---\n")[4]
    result = run(url, "--gpus", "2", "--manifest", "-", input=pod)
    assert result.exit_code == 0, result.output
    (document,) = _documents(result.stdout)
    kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    assert _containers(document) == {"jupyter": {"limits": {"nvidia.com/gpu": 2}}}
    assert document["spec"]["nodeSelector"] == {"provisioner.io/pool": "a10g-x4"}


@pytest.mark.parametrize(
    ("args", "manifest", "message"),
    [
        (
            ["--container", "nope"],
            MANIFEST.split("---\n")[2],
            "error: app.yaml:7: Job train: no container named 'nope'; it has train, eval\n",
        ),
        (
            [],
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  nodeSelector:\n"
            "    provisioner.io/pool: other\n  containers:\n  - {name: c, image: busybox}\n",
            "error: app.yaml:4: Pod p: nodeSelector provisioner.io/pool is 'other', "
            "but the chosen pool needs 'a100-mig'\n",
        ),
        (
            [],
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  nodeSelector:\n"
            "    cloud.google.com/gke-nodepool: other\n  containers:\n  - {name: c, image: busybox}\n",
            "error: app.yaml:4: Pod p: nodeSelector cloud.google.com/gke-nodepool is 'other', another pool "
            "than the chosen 'a100-mig'; remove it (place selects the pool by provisioner.io/pool, across "
            "its generations)\n",
        ),
        (
            [],
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
            "  - name: c\n    image: busybox\n    resources: {limits: {nvidia.com/gpu: 1}}\n",
            "error: app.yaml:4: Pod p: every container already has a GPU limit; "
            "name the one to place with --container\n",
        ),
        (
            [],
            "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n",
            "error: app.yaml: no pod template to place",
        ),
        ([], "kind: Pod\nspec: [unclosed\n", "error: app.yaml:3: not YAML: "),
        (
            ["--json"],
            MANIFEST,
            "error: --json prints the placement, --manifest the manifest: give one of them\n",
        ),
    ],
)
def test_manifests_that_cannot_take_the_fragment(  # noqa: PLR0917 (pytest passes parameters by position)
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], manifest: str, message: str
):
    monkeypatch.chdir(tmp_path)
    Path("app.yaml").write_text(manifest, encoding="utf-8")
    result = run(url, "--mig", "1g.5gb", "--cloud", "gke", "--manifest", "app.yaml", *args)
    assert result.exit_code == 1
    assert result.stderr.startswith(message)
    assert result.stdout == ""


def test_a_manifest_an_earlier_place_pinned_to_the_cloud_pool_follows_the_fleet_pool(
    url: str, tmp_path: Path
):
    # An earlier place selected the cloud's pool label, which names one generation of the pool.
    manifest = tmp_path / "app.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  nodeSelector:\n"
        "    kubernetes.io/os: linux\n    cloud.google.com/gke-nodepool: a100-mig\n"
        "  containers:\n  - {name: c, image: busybox}\n",
        encoding="utf-8",
    )
    result = run(url, "--mig", "1g.5gb", "--cloud", "gke", "--manifest", str(manifest))
    assert result.exit_code == 0, result.output
    (pod,) = _documents(result.stdout)
    assert pod["spec"]["nodeSelector"] == {
        "kubernetes.io/os": "linux",
        "provisioner.io/pool": "a100-mig",
        "cloud.google.com/gke-gpu-partition-size": "1g.5gb",
    }


def test_an_unreadable_manifest(url: str, tmp_path: Path):
    result = run(url, "--gpus", "1", "--manifest", str(tmp_path / "missing.yaml"))
    assert result.exit_code == 1
    assert (
        result.stderr
        == f"error: reading the manifest: {tmp_path / 'missing.yaml'}: No such file or directory\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--mig", "1g.7gb"],
            "error: mig: '1g.7gb' is not a MIG profile of any GPU the tool knows; profiles: ",
        ),
        (["--gpu-memory", "4"], "error: gpu_memory: '4' has no unit; say which, e.g. 4GB, 4000MB or 4GiB\n"),
        (["--gpu-memory", "0GB"], "error: gpu_memory: '0GB': a size must be more than zero\n"),
        (["--gpus", "0"], "error: gpus: 0 GPUs; ask for at least 1\n"),
        (
            ["--mig", "1g.5gb", "--gpu-memory", "4GB"],
            "error: ask for exactly one of --mig PROFILE, --gpu-memory SIZE and --gpus N "
            "(got --mig and --gpu-memory)\n",
        ),
        (["--gpus", "1", "--container", "c"], "error: --container names a container of the --manifest FILE"),
        (
            ["--gpus", "1", "--allow-device-bypass"],
            "error: --allow-device-bypass is about the --manifest FILE",
        ),
    ],
)
def test_bad_requests_exit_1_without_a_traceback(url: str, args: list[str], message: str):
    result = run(url, *args)
    assert result.exit_code == 1
    assert result.stderr.startswith(message)
    assert "Traceback" not in result.output


def test_a_file_that_is_no_manifest_is_said_so_even_when_nothing_would_fit(url: str, tmp_path: Path):
    notes = tmp_path / "notes.yaml"
    notes.write_text("title: not a manifest\n", encoding="utf-8")
    result = run(url, "--gpus", "8", "--manifest", str(notes))  # 8 whole GPUs fit nowhere either
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {notes}: no pod template to place (it has no ")


def test_nothing_fits_exits_1_naming_the_closest_pools(url: str):
    result = run(url, "--gpus", "8")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "error: no live pool offers 8 whole GPUs",
        "closest pools:",
        "  aws/a10g-x4 (eks): whole A10G 24GB GPUs (24.0 GB each, 4 per node); "
        "a node has 4 GPUs, fewer than 8",
        "  azure/a100x2 (aks): whole A100 80GB GPUs (80.0 GB each, 2 per node); "
        "a node has 2 GPUs, fewer than 8",
        "  ali/a10-cgpu (ack): A10 24GB memory by the GiB (22 GiB per GPU, isolation memory); "
        "its GPUs are partitioned or shared, not whole",
    ]


# A Job whose containers reach GPUs past the scheduler's count in each way a pod spec can.
BYPASSING = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: train
spec:
  template:
    spec:
      restartPolicy: Never
      initContainers:
        - name: warm
          image: busybox:1.36
          securityContext:
            privileged: true
      containers:
        - name: train
          image: registry.example/train:3
          env:
            - name: EPOCHS
              value: "3"
            - name: NVIDIA_VISIBLE_DEVICES
              value: all
        - name: exporter
          image: registry.example/exporter:1
          env:
            - name: NVIDIA_VISIBLE_DEVICES
              valueFrom:
                configMapKeyRef: {name: gpus, key: visible}
          securityContext: {privileged: true, runAsNonRoot: false}
"""
BYPASSES = [
    "app.yaml:13: Job train: initContainer warm: securityContext.privileged is true: "
    "a privileged container sees every GPU on the node",
    "app.yaml:20: Job train: container train: env[NVIDIA_VISIBLE_DEVICES] is 'all': "
    "the NVIDIA runtime exposes those GPUs, counted or not",
    "app.yaml:25: Job train: container exporter: env[NVIDIA_VISIBLE_DEVICES] is set by valueFrom, "
    "which place cannot read: it may name any GPU",
    "app.yaml:28: Job train: container exporter: securityContext.privileged is true: "
    "a privileged container sees every GPU on the node",
]
BYPASS_HINT = (
    "these reach GPUs the scheduler does not count, so it places other pods on the same GPUs; "
    "ask for GPUs only through resources.limits (place sets them), or pass --allow-device-bypass "
    "if that is what you mean"
)
# One request per cloud, each landing on a pool of another kind: MIG, MPS, time-slicing, ACK memory.
EVERY_CLOUD = {
    "aks": (["--mig", "1g.10gb", "--cloud", "aks"], {"nvidia.com/gpu": 1}),
    "gke": (["--gpu-memory", "6GB", "--isolation", "compute", "--cloud", "gke"], {"nvidia.com/gpu": 1}),
    "eks": (["--gpu-memory", "2GB", "--cloud", "eks"], {"nvidia.com/gpu.shared": 1}),
    "ack": (["--gpu-memory", "3GiB", "--cloud", "ack"], {"aliyun.com/gpu-mem": 3}),
}


@pytest.mark.parametrize("cloud", list(EVERY_CLOUD))
def test_a_manifest_that_bypasses_device_accounting_is_refused(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cloud: str
):
    monkeypatch.chdir(tmp_path)
    Path("app.yaml").write_text(BYPASSING, encoding="utf-8")
    request, _ = EVERY_CLOUD[cloud]
    result = run(url, *request, "--manifest", "app.yaml")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [*(f"error: {line}" for line in BYPASSES), BYPASS_HINT]


@pytest.mark.parametrize("cloud", list(EVERY_CLOUD))
def test_allow_device_bypass_merges_with_a_warning_per_container(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cloud: str
):
    monkeypatch.chdir(tmp_path)
    Path("app.yaml").write_text(BYPASSING, encoding="utf-8")
    request, limits = EVERY_CLOUD[cloud]
    result = run(url, *request, "--manifest", "app.yaml", "--allow-device-bypass")
    assert result.exit_code == 0, result.output
    stderr = result.stderr.splitlines()
    assert stderr[: len(BYPASSES)] == [
        f"warning: {line} (let through by --allow-device-bypass)" for line in BYPASSES
    ]
    assert stderr[len(BYPASSES)].startswith("# Placed on cluster ")
    assert f"({cloud}), pool " in stderr[len(BYPASSES)]
    (job,) = _documents(result.stdout)
    kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)
    assert _containers(job) == {"train": {"limits": limits}, "exporter": {"limits": limits}}
    spec = job["spec"]["template"]["spec"]
    assert spec["containers"][0]["env"][1] == {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}  # kept
    assert spec["initContainers"][0]["securityContext"] == {"privileged": True}


def _job(train: str, exporter: str = "") -> str:
    """A Job with a `train` container and an `exporter` sidecar, each with the lines given."""
    return (
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n"
        "      restartPolicy: Never\n      containers:\n"
        f"      - name: train\n        image: t\n{train}"
        f"      - name: exporter\n        image: e\n{exporter}"
    )


def _env(value: str) -> str:
    return f"        env:\n        - {{name: NVIDIA_VISIBLE_DEVICES, value: {value}}}\n"


PRIVILEGED = "        securityContext: {privileged: yes}\n"  # kubectl's YAML 1.1 reads yes as true
GPU_LIMIT = "        resources: {limits: {nvidia.com/gpu: 1}}\n"


REPLACES = "on a container given GPUs it replaces the devices the device plugin passes in that variable"
EXPOSES = "the NVIDIA runtime exposes those GPUs, counted or not"


@pytest.mark.parametrize(
    ("args", "manifest", "refused"),
    [
        # NVIDIA's `void`, empty and `none` expose no GPU: harmless on a container without the slice...
        (["--container", "train"], _job("", _env("void")), None),
        (["--container", "train"], _job("", _env('""')), None),
        (["--container", "train"], _job("", _env("none")), None),
        # ...but on one given GPUs they replace the device list the device plugin passes in that variable
        (
            ["--container", "train"],
            _job(_env("none")),
            f"12: Job j: container train: env[NVIDIA_VISIBLE_DEVICES] is 'none': {REPLACES}",
        ),
        (
            [],
            _job("", _env("void")),
            f"14: Job j: container exporter: env[NVIDIA_VISIBLE_DEVICES] is 'void': {REPLACES}",
        ),
        # a container keeping its own GPU limit gets GPUs from the device plugin too
        (
            ["--container", "exporter"],
            _job(GPU_LIMIT + _env("void")),
            f"13: Job j: container train: env[NVIDIA_VISIBLE_DEVICES] is 'void': {REPLACES}",
        ),
        (
            ["--container", "train"],
            _job("", _env('"0,1"')),
            f"14: Job j: container exporter: env[NVIDIA_VISIBLE_DEVICES] is '0,1': {EXPOSES}",
        ),
        (
            ["--container", "train"],
            _job("", _env("GPU-fef8089b")),
            f"14: Job j: container exporter: env[NVIDIA_VISIBLE_DEVICES] is 'GPU-fef8089b': {EXPOSES}",
        ),
        # a sidecar without the slice still lands on the GPU node, where privileged sees every GPU
        (
            ["--container", "train"],
            _job("", PRIVILEGED),
            "13: Job j: container exporter: securityContext.privileged is true: "
            "a privileged container sees every GPU on the node",
        ),
        ([], _job("        securityContext: {privileged: false}\n"), None),
        # environment variable names are case-sensitive: this one is not NVIDIA's
        ([], _job("        env:\n        - {name: nvidia_visible_devices, value: all}\n"), None),
    ],
)
def test_which_settings_bypass_device_accounting(  # noqa: PLR0917 (pytest passes parameters by position)
    url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    manifest: str,
    refused: str | None,
):
    monkeypatch.chdir(tmp_path)
    Path("app.yaml").write_text(manifest, encoding="utf-8")
    result = run(url, "--mig", "1g.5gb", "--cloud", "gke", "--manifest", "app.yaml", *args)
    if refused is None:
        assert result.exit_code == 0, result.output
        (job,) = _documents(result.stdout)
        kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)
        assert "warning" not in result.stderr
    else:
        assert result.exit_code == 1
        assert result.stdout == ""
        assert result.stderr.splitlines() == [f"error: app.yaml:{refused}", BYPASS_HINT]


def test_the_python_api_refuses_the_same_manifests(tmp_path: Path):
    from provisioner.errors import BadRequest
    from provisioner.placement import Request, place
    from provisioner.podspec import DeviceBypass, check, merge

    chosen = place(catalog(tmp_path), Request(gpu_memory="3GiB", cloud="ack"))
    with pytest.raises(DeviceBypass) as refused:
        merge(BYPASSING, chosen, source="app.yaml")
    assert isinstance(refused.value, BadRequest)
    assert refused.value.findings == BYPASSES
    assert str(refused.value) == "\n".join(BYPASSES)
    with pytest.raises(DeviceBypass):
        check(BYPASSING, "app.yaml")
    assert check(BYPASSING, "app.yaml", allow_device_bypass=True) == BYPASSES
    merged = merge(BYPASSING, chosen, source="app.yaml", allow_device_bypass=True)
    assert _containers(_documents(merged)[0])["train"] == {"limits": {"aliyun.com/gpu-mem": 3}}


ACK_AND_GKE = """\
clusters:
  - name: ali
    cloud: ack
    region: cn-hangzhou
    clusterId: c0123456789abcdef0123456789ab{suffix}
    vswitches: [vsw-bp1a2b3c4d5e6f7g8h9i0]
    pools:
      - name: a10-cgpu
        instanceType: ecs.gn7i-c8g1.2xlarge
        gpu: {{sharing: memory, isolation: memory}}
        nodes: {{min: 1, max: 2}}
  - name: gcp
    cloud: gke
    project: project-{suffix}
    location: europe-west4
    cluster: gke-{suffix}
    pools:
      - {{name: l4-mps, instanceType: g2-standard-8, gpu: {{sharing: mps, replicas: 4}},
         nodes: {{min: 0, max: 2}}}}
"""


def test_end_to_end_apply_sync_place(tmp_path: Path):
    """The selector `place` writes from what a real sync recorded selects the pool's nodes: by the
    fleet pool's label on ACK too, where the cloud's own label holds the pool's ID."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(ACK_AND_GKE.format(suffix=uuid.uuid4().hex[:4]), encoding="utf-8")
    compiled = compile_file(fleet)
    sandbox = Sandbox(tmp_path / "sandbox", SandboxSettings(op_seconds=0.05)).start(
        [c.target for c in compiled.clusters]
    )
    env = {
        "PROVISIONER_SANDBOX": str(sandbox.directory),
        "PROVISIONER_LOCK_DIR": "",
        "PROVISIONER_CATALOG": f"sqlite:///{tmp_path / 'catalog.db'}",
    }

    def cli(*args: str) -> Result:
        return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)

    try:
        assert cli("apply", str(fleet), "--auto-approve").exit_code == 0
        assert cli("sync", str(fleet)).exit_code == 0
        ack = compiled.cluster("ali").target.ref
        pool_id = {p.name: p.cloud_id for p in connect("ack", sandbox.directory).list_pools(ack)}["a10-cgpu"]
        placed = cli("place", "--gpu-memory", "3GiB", "--cloud", "ack", "--json")
        assert placed.exit_code == 0, placed.output
        selector = json.loads(placed.stdout)["nodeSelector"]
        assert selector == {"provisioner.io/pool": "a10-cgpu"}
        kube = client.CoreV1Api(config.new_client_from_config(str(sandbox.kubeconfig), context="ali"))
        selected = kube.list_node(label_selector=",".join(f"{k}={v}" for k, v in selector.items())).items
        by_id = kube.list_node(label_selector=f"alibabacloud.com/nodepool-id={pool_id}").items
        assert sorted(n.metadata.name for n in selected) == sorted(n.metadata.name for n in by_id) != []
        assert json.loads(placed.stdout)["resources"] == {"limits": {"aliyun.com/gpu-mem": 3}}
        placed = cli("place", "--gpu-memory", "6GB", "--cloud", "gke", "--json")
        assert placed.exit_code == 0, placed.output
        assert json.loads(placed.stdout)["nodeSelector"] == {
            "provisioner.io/pool": "l4-mps",
            "cloud.google.com/gke-gpu-sharing-strategy": "mps",
            "cloud.google.com/gke-max-shared-clients-per-gpu": "4",
        }
    finally:
        sandbox.stop()
