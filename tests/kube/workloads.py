"""A sandbox with one EKS cluster whose GPU node groups are made through the EKS driver, and the
official client's APIs for its pods, Deployments and PodDisruptionBudgets, and kubectl, all
pointed at its kubeconfig. `scan_interval` long: the cluster's components (kubelets, controllers,
scheduler) run only when a test calls `scan`, so each step is decided, not raced."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any

from kubernetes import client, config

from provisioner.clusters import ClusterRef, Target
from provisioner.drivers.registry import connect
from provisioner.pools import PoolState, Scaling
from provisioner.sandbox.server import Sandbox, SandboxSettings

NS = "ml"


class Cluster:
    def __init__(self, directory: Any, scan_interval: float = 3600.0) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.ref = ClusterRef(
            "eks",
            "123456789012",
            "us-west-2",
            f"eks-{suffix}",
            {"node_role": "arn:aws:iam::123456789012:role/nodes", "subnets": ("subnet-0abc1234",)},
        )
        self.name = f"fleet-{suffix}"
        settings = SandboxSettings(seed=5, scan_interval=scan_interval)
        self.sandbox = Sandbox(directory, settings).start([Target(self.name, self.ref)])
        api_client = config.new_client_from_config(str(self.sandbox.kubeconfig), context=self.name)
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.policy = client.PolicyV1Api(api_client)

    def tool(self) -> Any:
        """The tool's own client (provisioner.kube.contexts.Kube) for this cluster."""
        from provisioner.kube.contexts import KubeAccess

        return KubeAccess(kubeconfig=self.sandbox.kubeconfig).connect(self.name, self.name)

    @property
    def kube(self) -> Any:
        assert self.sandbox.kube is not None
        return self.sandbox.kube.cluster(self.name)

    @property
    def engine(self) -> Any:
        return self.sandbox.engines["eks"]

    def stop(self) -> None:
        self.sandbox.stop()

    def node_group(
        self, name: str, instance_type: str, count: int, labels: dict[str, str] | None = None
    ) -> list[str]:
        """Make a node group; its nodes' names, sorted."""
        state = PoolState(
            name=name,
            instance_type=instance_type,
            gpus_per_node=1,
            mig_setting=None,
            sharing=None,
            spot=False,
            disk_size_gb=None,
            scaling=Scaling.fixed(count),
            labels=tuple((labels or {}).items()),
            taints=(),
        )
        connect("eks", self.sandbox.directory).create_pool(self.ref, state)
        return sorted(
            n.metadata.name
            for n in self.core.list_node(label_selector=f"eks.amazonaws.com/nodegroup={name}").items
        )

    def scan(self) -> None:
        """One pass of the cluster's components."""
        self.kube.scan()

    def deployment(self, name: str, replicas: int, gpus: int = 0, group: str | None = None) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "main", "image": "busybox:1.36"}
        if gpus:
            container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
        spec: dict[str, Any] = {"containers": [container]}
        if group:
            spec["nodeSelector"] = {"eks.amazonaws.com/nodegroup": group}
        body = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
            },
        }
        self.apps.create_namespaced_deployment(NS, body)
        return body

    def budget(self, name: str, app: str, **bounds: Any) -> None:
        body = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": app}}, **bounds},
        }
        self.policy.create_namespaced_pod_disruption_budget(NS, body)

    def budget_status(self, name: str) -> dict[str, Any]:
        raw = self.policy.read_namespaced_pod_disruption_budget(name, NS, _preload_content=False)
        return json.loads(raw.data)["status"]

    def pods(self, app: str) -> dict[str, Any]:
        """The app's pods by name, as the API returns them (JSON)."""
        raw = self.core.list_namespaced_pod(NS, label_selector=f"app={app}", _preload_content=False)
        return {p["metadata"]["name"]: p for p in json.loads(raw.data)["items"]}

    def evict(self, pod: str, **options: Any) -> tuple[int, dict[str, Any]]:
        """POST the pod's eviction: the HTTP status and the body."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": NS}}
        if options:
            body["deleteOptions"] = options
        try:
            raw = self.core.create_namespaced_pod_eviction(pod, NS, body, _preload_content=False)
        except client.ApiException as refused:
            return refused.status, json.loads(refused.body)
        return raw.status, json.loads(raw.data)

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        command = ["kubectl", "--kubeconfig", str(self.sandbox.kubeconfig), "--context", self.name, *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, input=stdin)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def wait_for(check: Callable[[], Any], seconds: float = 10.0) -> Any:
    """`check`'s first truthy answer, polled until a deadline (the components run in a thread)."""
    deadline = time.monotonic() + seconds
    while True:
        answer = check()
        if answer or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)
