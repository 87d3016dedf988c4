"""Which kubeconfig context reaches each fleet cluster, and a small client for that cluster.

A fleet cluster may name its context (`kubeContext`); otherwise it is the context the cloud's
own CLI writes (`kubeContext` in hardware/clouds.yaml). The kubeconfig is --kubeconfig, else
DIR/kubeconfig under --sandbox DIR (one context per fleet cluster, named as the cluster), else
$KUBECONFIG (a list of files, as kubectl merges them), else ~/.kube/config.

Everything the `kubernetes` client raises is turned into KubeUnreachable here, naming the
cluster; callers report it for that cluster and go on with the others.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import json
import math
import os
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner import hardware
from provisioner.errors import KubeUnreachable
from provisioner.heap import heap_frozen
from provisioner.sdks import import_sdk
from provisioner.spread import spread

if TYPE_CHECKING:
    from provisioner.kube.kubeconfig import Kubeconfig

# Seconds per request, once it has a connection: one through a gateway may first wait for one
# (kubeconfig.REQUESTS_PER_POOL).
CONNECT_TIMEOUT, READ_TIMEOUT = 5.0, 30.0
FIELD_MANAGER = "provisioner"  # server-side apply's field manager: how the tool knows what it wrote
# Clusters read at once, all of a 100-cluster fleet: each holds a thread and two sockets while it
# waits; more at once would gain little past the round trip each cluster's reads take.
MAX_PARALLEL_CLUSTERS = 100


def each_cluster(work: Callable[[Any], Any], clusters: Sequence[Any], *, helpers: bool = True) -> list[Any]:
    """work(cluster) for every cluster, up to MAX_PARALLEL_CLUSTERS at once, results in order.
    A `work` that pickles (a module-level function, or a functools.partial of one) is shared
    with helper processes for a large fleet (provisioner.spread): each client's CPU per read
    would otherwise set the wall time. Without `helpers`, it stays in this process (beside a
    batch that has more use for them)."""
    results: list[Any] = [None] * len(clusters)

    def made(index: int, result: Any) -> None:
        results[index] = result

    if helpers:
        spread(functools.partial(_each_here, work), clusters, made)
    else:
        _each_here(work, clusters, made, 1.0)
    return results


def _each_here(
    work: Callable[[Any], Any], clusters: Sequence[Any], emit: Callable[[int, Any], None], part: float
) -> None:
    threads = max(1, min(len(clusters), math.floor(MAX_PARALLEL_CLUSTERS * part)))
    with heap_frozen(), ThreadPoolExecutor(max_workers=threads) as pool:
        for index, result in enumerate(pool.map(work, clusters)):
            emit(index, result)


def at_once(*calls: Callable[[], Any]) -> list[Any]:
    """Each call's result, in order, the calls made at the same time (the first on this thread):
    a cluster's reads take one round trip, not one each. Where calls fail, the first one's error
    is raised, as if they had run one after another."""
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            results[i] = calls[i]()
        except BaseException as exc:  # raised again below, on the caller's thread
            errors[i] = exc

    others = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(1, len(calls))]
    for thread in others:
        thread.start()
    if calls:
        run(0)
    for thread in others:
        thread.join()
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return results


@dataclass(frozen=True)
class KubeAccess:
    """Where the kubeconfig is, and whether the sandbox's stands in for it."""

    kubeconfig: Path | None = None  # --kubeconfig
    sandbox: Path | None = None  # --sandbox DIR: DIR/kubeconfig, contexts named as fleet clusters

    @property
    def config_file(self) -> str:
        if self.kubeconfig is not None:
            return str(self.kubeconfig)
        if self.sandbox is not None:
            return str(self.sandbox / "kubeconfig")
        # Read now, not at import (the client's own default is fixed when it is imported).
        return os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())

    def _kubeconfig(self) -> Kubeconfig:
        """The kubeconfig, read once for every cluster rather than once per cluster."""
        import_sdk("kubernetes.client", "kubernetes.config")
        from provisioner.kube.kubeconfig import shared

        return shared(self.config_file)

    def contexts(self) -> list[str]:
        """Every context of the kubeconfig, in its order; KubeUnreachable where there is none."""
        from kubernetes.config import ConfigException

        kubeconfig = self._kubeconfig()
        try:
            return kubeconfig.contexts()
        except (ConfigException, OSError, ValueError) as exc:
            raise KubeUnreachable(f"cannot read the kubeconfig {self.config_file}: {_words(exc)}") from None

    def context_for(self, cluster: Any) -> str:
        """The context that reaches fleet cluster `cluster`; KubeUnreachable naming it where none does."""
        if self.sandbox is not None:  # the sandbox names each context as the fleet names the cluster
            return cluster.name
        if cluster.kube_context:
            return cluster.kube_context
        rule = hardware.load().clouds[cluster.cloud].kube_context
        fields = {name: value for name, value in cluster if isinstance(value, str)}
        if "name" in rule:
            return rule["name"].format(**fields)
        if "match" in rule:
            pattern = rule["match"].format(**fields)
            matching = [c for c in self.contexts() if fnmatch.fnmatchcase(c, pattern)]
            if len(matching) == 1:
                return matching[0]
            found = f"{len(matching)} contexts match ({', '.join(matching)})" if matching else "no context"
            raise KubeUnreachable(
                f"{cluster.name}: {found} in {self.config_file} matches {pattern}; "
                f"name its context with kubeContext in the fleet"
            )
        title = hardware.load().clouds[cluster.cloud].title
        raise KubeUnreachable(
            f"{cluster.name}: {title} writes no kubeconfig context the tool can find by itself; "
            "name the cluster's context with kubeContext in the fleet (kubeContext is required on "
            f"{title})"
        )

    def connect(self, name: str, context: str) -> Kube:
        """A client for the cluster the fleet calls `name`, through `context`."""
        kubeconfig = self._kubeconfig()
        from kubernetes import client
        from kubernetes.config import ConfigException

        try:
            api = kubeconfig.client(context)
        except (ConfigException, OSError, ValueError) as exc:
            raise KubeUnreachable(
                f"{name}: no usable context {context!r} in {self.config_file}: {_words(exc)}"
            ) from None
        return Kube(name, context, client.CoreV1Api(api))

    def for_cluster(self, cluster: Any) -> Kube:
        return self.connect(cluster.name, self.context_for(cluster))


class Kube:
    """One cluster's API, as plain JSON dicts (what the API server sends, without the client's
    model classes); every failure a KubeUnreachable naming the cluster, a 404 on a get None."""

    def __init__(self, name: str, context: str, core: Any):
        self.name, self.context, self._core = name, context, core
        self._resource_api: Any = None

    def close(self) -> None:
        self._core.api_client.close()

    def __enter__(self) -> Kube:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def nodes(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        kwargs = {"label_selector": label_selector} if label_selector else {}
        return self._call(self._core.list_node, **kwargs).get("items", [])

    def pods(self, field_selector: str | None = None) -> list[dict[str, Any]]:
        kwargs = {"field_selector": field_selector} if field_selector else {}
        return self._call(self._core.list_pod_for_all_namespaces, **kwargs).get("items", [])

    def resource_slices(self) -> list[dict[str, Any]] | None:
        """Every ResourceSlice the DRA drivers publish; None where the cluster serves no
        resource.k8s.io/v1 (Kubernetes before 1.34, or DRA turned off)."""
        found = self._call(self._resource().list_resource_slice, missing_ok=True)
        return None if found is None else found.get("items", [])

    def resource_claims(self, namespace: str | None = None) -> list[dict[str, Any]] | None:
        """The ResourceClaims of `namespace` (default: every namespace's); None where the cluster
        serves no resource.k8s.io/v1."""
        api = self._resource()
        if namespace is None:
            found = self._call(api.list_resource_claim_for_all_namespaces, missing_ok=True)
        else:
            found = self._call(api.list_namespaced_resource_claim, namespace, missing_ok=True)
        return None if found is None else found.get("items", [])

    def _resource(self) -> Any:
        """resource.k8s.io/v1 on the same connections as the core API."""
        if self._resource_api is None:
            from kubernetes import client

            self._resource_api = client.ResourceV1Api(self._core.api_client)
        return self._resource_api

    def config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._call(self._core.read_namespaced_config_map, name, namespace, missing_ok=True)

    def apply_config_map(self, body: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply of `body` as field manager `provisioner` (force: the tool's own
        fields are the tool's; the caller leaves out every field another manager owns)."""
        meta = body["metadata"]
        return self._call(
            self._core.patch_namespaced_config_map,
            meta["name"],
            meta["namespace"],
            body,
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )

    def node(self, name: str) -> dict[str, Any] | None:
        return self._call(self._core.read_node, name, missing_ok=True)

    def patch_node(self, name: str, patch: dict[str, Any], *, strategic: bool = False) -> dict[str, Any]:
        """A JSON merge patch of the node (kubectl label's), or a strategic-merge one (kubectl
        cordon's, CordonHelper)."""
        kind = "strategic-merge-patch" if strategic else "merge-patch"
        return self._call(self._core.patch_node, name, patch, _content_type=f"application/{kind}+json")

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._call(self._core.read_namespaced_pod, name, namespace, missing_ok=True)

    def delete_pod(self, namespace: str, name: str) -> bool:
        """DELETE the pod (no PodDisruptionBudget asked); False where it was already gone."""
        return self._call(self._core.delete_namespaced_pod, name, namespace, missing_ok=True) is not None

    def evict(self, namespace: str, name: str) -> Answer:
        """POST the pod's policy/v1 Eviction: the API server's answer, whatever its code (a 429 is
        a PodDisruptionBudget's refusal, for the caller to retry); KubeUnreachable only where no
        answer came."""
        from kubernetes.client.exceptions import ApiException

        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        try:
            response = self._send(self._core.create_namespaced_pod_eviction, name, namespace, body)
        except ApiException as exc:
            retry_after = (exc.headers or {}).get("Retry-After")
            seconds = float(retry_after) if retry_after and retry_after.isdigit() else None
            return Answer(exc.status, exc.reason or "", _status_message(exc.body), seconds)
        response.drain_conn()  # the body read, so that the connection goes back to the pool
        return Answer(response.status, response.reason or "", "")

    def _send(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        """The raw response; ApiException as the client raises it, no answer as KubeUnreachable.
        The caller reads its body (`.data`) or drains it: until then it holds one of the pool's
        few connections, which other requests to that API server wait for."""
        from urllib3.exceptions import HTTPError

        try:
            return method(
                *args, _preload_content=False, _request_timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), **kwargs
            )
        except (HTTPError, OSError, ValueError) as exc:
            raise KubeUnreachable(
                f"{self.name}: the Kubernetes API (context {self.context}) is unreachable: {_words(exc)}"
            ) from None

    def _call(self, method: Any, *args: Any, missing_ok: bool = False, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            response = self._send(method, *args, **kwargs)
            return json.loads(response.data or b"{}")
        except ApiException as exc:
            if exc.status == 404 and missing_ok:
                return None
            raise KubeUnreachable(f"{self.name}: the Kubernetes API answered {_api_error(exc)}") from None
        except (HTTPError, OSError, ValueError) as exc:  # the body cut short, or not JSON
            raise KubeUnreachable(
                f"{self.name}: the Kubernetes API (context {self.context}) is unreachable: {_words(exc)}"
            ) from None


@dataclass(frozen=True)
class Answer:
    """The API server's answer to a request whose refusals the caller handles itself."""

    status: int  # the HTTP code
    reason: str  # its words (Too Many Requests)
    message: str  # the Status's message, its causes' after it; empty on success
    retry_after: float | None = None  # the Retry-After header, in seconds

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300  # an eviction is 201 Created, its docs say 200 (FACTS.md §1)


def _status_message(body: Any) -> str:
    """A Status object's message and its causes' (a 429's names the PodDisruptionBudget)."""
    try:
        status = json.loads(body or "{}")
    except ValueError:
        return ""
    if not isinstance(status, dict):
        return ""
    causes = [c.get("message", "") for c in (status.get("details") or {}).get("causes") or []]
    said = [str(m) for m in (status.get("message"), *causes) if m]
    return " ".join(said)


def _api_error(exc: Any) -> str:
    """`403 Forbidden: <the API server's message>`: the Status object's message where it sent one."""
    message = ""
    with contextlib.suppress(ValueError, AttributeError):
        message = json.loads(exc.body or "{}").get("message", "")
    return f"{exc.status} {exc.reason}" + (f": {message}" if message else "")


def _words(exc: BaseException) -> str:
    """An exception's text on one line, without the client's object reprs."""
    reason = getattr(exc, "reason", None)  # urllib3's MaxRetryError carries the real cause
    text = re.sub(r"<[^<>]* object at 0x[0-9a-f]+>:?\s*", "", str(reason if reason is not None else exc))
    return " ".join(text.split())[:300]
