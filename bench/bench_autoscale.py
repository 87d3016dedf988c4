"""A pod that asks for a slice of a pool at zero nodes, in the sandbox: the wall time from its
creation (through the Kubernetes API, as `kubectl apply` makes it) to the autoscaler's scale-up
request (TriggeredScaleUp), beside one scan interval of the autoscaler's loop; and to the pod
Running on the node that joined, beside the scan plus the node's join time (--op-seconds).

The pool is an EKS node group that `provisioner apply` made with `nodes: {min: 0, max: 8}`, so
the scale-up is read from the hints on its Auto Scaling group and node group, as
cluster-autoscaler's AWS provider reads them.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from bench.figures import Figure

SCAN_SECONDS = 0.5  # the sandbox's default scan interval (cluster-autoscaler's is 10 s)
JOIN_SECONDS = 0.5  # --op-seconds: how long a new node takes to join
RUNS = 5
FLEET = """\
clusters:
  - name: aws
    cloud: eks
    region: us-west-2
    cluster: bench-eks
    nodeRole: arn:aws:iam::123456789012:role/nodes
    subnets: [subnet-0abc1234]
    pools:
      - name: shared
        instanceType: g5.xlarge
        gpu: {sharing: time-slicing, replicas: 4}
        nodes: {min: 0, max: 8}
"""


def run() -> list[Figure]:
    from click.testing import CliRunner
    from kubernetes import client, config

    from provisioner.cli import main
    from provisioner.compile import compile_file
    from provisioner.sandbox.server import Sandbox, SandboxSettings

    directory = Path(tempfile.mkdtemp(prefix="provisioner-bench-autoscale-"))
    fleet = directory / "fleet.yaml"
    fleet.write_text(FLEET, encoding="utf-8")
    settings = SandboxSettings(scan_interval=SCAN_SECONDS, scale_down_delay=3600)
    sandbox = Sandbox(directory / "sandbox", settings).start([c.target for c in compile_file(fleet).clusters])
    try:
        env = {"PROVISIONER_SANDBOX": str(sandbox.directory), "PROVISIONER_LOCK_DIR": ""}
        applied = CliRunner().invoke(main, ["apply", str(fleet), "--auto-approve"], env=env)
        assert applied.exit_code == 0, applied.output
        for engine in sandbox.engines.values():
            engine.op_seconds = JOIN_SECONDS
        api = client.CoreV1Api(config.new_client_from_config(str(sandbox.kubeconfig), context="aws"))
        requested, running = [], []
        for run_index in range(RUNS):  # each pod fills a node (4 slices), so each asks for a new one
            name = f"pod-{run_index}"
            container = {
                "name": "main",
                "image": "busybox",
                "resources": {"limits": {"nvidia.com/gpu.shared": 4}},
            }
            spec = {
                "containers": [container],
                "nodeSelector": {"eks.amazonaws.com/nodegroup": "shared"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            }
            started = time.monotonic()
            api.create_namespaced_pod("default", {"metadata": {"name": name}, "spec": spec})
            scaled = _until(lambda name=name: "TriggeredScaleUp" in _reasons(api, name))
            requested.append(scaled - started)
            up = _until(lambda name=name: api.read_namespaced_pod(name, "default").status.phase == "Running")
            running.append(up - started)
    finally:
        sandbox.stop()
    return [
        Figure(
            "autoscaler, a pending pod on a pool at zero to its scale-up request",
            round(statistics.median(requested), 2),
            "s",
            SCAN_SECONDS,
            "one scan interval of the sandbox's autoscaler",
        ),
        Figure(
            "autoscaler, a pending pod on a pool at zero to Running on the new node",
            round(statistics.median(running), 2),
            "s",
            SCAN_SECONDS + JOIN_SECONDS,
            "one scan interval plus the node's join time",
        ),
    ]


def _reasons(api: object, pod: str) -> set[str]:
    events = api.list_namespaced_event("default", field_selector=f"involvedObject.name={pod}").items  # type: ignore[attr-defined]
    return {e.reason for e in events}


def _until(check: object, seconds: float = 30.0) -> float:
    """When `check` first answers truthy (polled every 10 ms), as time.monotonic()."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return time.monotonic()
        time.sleep(0.01)
    raise AssertionError(f"not within {seconds} s")
