"""The sandbox's Kubernetes API: one API server per fleet cluster, each under its own path prefix
on one loopback port, served by `sandbox serve` and named in DIR/kubeconfig.

Split as the cloud emulators are (moto's split): `models` the state's façade (KubeCluster),
composing `nodes` (computed from the cloud emulators' pools), `pods` (stored, bound by
`scheduling`, admitted by the kubelet), `events`, `autoscaler` (with `nodegroups` and `templates`:
each cloud's node groups and template nodes), `configmaps` (stored) with `fields` (their server-
side apply field ownership) and `objects` (metadata and resourceVersion they share); `rules` what
the GPU stack of each cloud advertises, `clouds` one adapter per cloud reading its emulator's
pools, `exceptions` one class per Status reason, `responses` the wire format and `urls` the routes.
Like the clouds' emulators, it imports nothing of the tool outside provisioner.sandbox at run time.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.sandbox.engine import Engine

if TYPE_CHECKING:
    from provisioner.sandbox import SeededCluster
    from provisioner.sandbox.kube.models import KubeCluster, KubeClusters

KUBECONFIG_FILE = "kubeconfig"
# The sandbox's cluster autoscaler scans every half second and removes a node idle for 5 s
# (cluster-autoscaler's defaults: --scan-interval 10s, --scale-down-unneeded-time 10m).
SCAN_INTERVAL = 0.5
SCALE_DOWN_DELAY = 5.0


class KubeEmulator:
    def __init__(
        self,
        engine: Engine,
        latency: float = 0.0,
        scan_interval: float = SCAN_INTERVAL,
        scale_down_delay: float = SCALE_DOWN_DELAY,
        kubernetes_version: str | None = None,
    ):
        from provisioner.sandbox.kube import responses, versions
        from provisioner.sandbox.kube.models import KubeClusters

        # A seeded cluster's own version wins (KubeCluster); this is for seeds that name none.
        self.clusters: KubeClusters = KubeClusters(
            scale_down_delay, kubernetes_version or versions.DEFAULT_VERSION
        )
        self.app: Any = responses.app(engine, self.clusters, latency)
        self.scan_interval = scan_interval
        self._stop = threading.Event()
        self._scanner: threading.Thread | None = None

    def start_autoscaler(self) -> None:
        """Scan every cluster each scan interval, from a daemon thread, until `stop_autoscaler`."""
        self._stop.clear()
        self._scanner = threading.Thread(target=self._scan_forever, name="sandbox-autoscaler", daemon=True)
        self._scanner.start()

    def stop_autoscaler(self) -> None:
        self._stop.set()
        if self._scanner is not None:
            self._scanner.join()
            self._scanner = None

    def _scan_forever(self) -> None:
        import logging
        import traceback

        while not self._stop.wait(self.scan_interval):
            for cluster in list(self.clusters.clusters.values()):
                try:
                    cluster.scan()
                except Exception:  # a bug in one scan: logged, the next scan goes on
                    logging.getLogger(__name__).error("autoscaler scan failed:\n%s", traceback.format_exc())

    def add_cluster(self, target: SeededCluster, cloud_emulator: Any) -> KubeCluster:
        """Serve `target`'s API, its nodes read from `cloud_emulator` (the cluster's cloud's)."""
        return self.clusters.add(target, cloud_emulator)

    def cluster(self, name: str) -> KubeCluster:
        """A cluster's state, by its fleet name (tests change what its nodes report through it)."""
        return self.clusters[name]

    def write_kubeconfig(self, directory: Path, url: str, ca_pem: bytes | None = None) -> Path:
        """DIR/kubeconfig: a cluster, user and context per fleet cluster, each named as the fleet
        names it (the server's CA with it, where it serves TLS), current-context the first;
        written whole then renamed."""
        import base64
        import json

        from provisioner.sandbox.kube.responses import TOKEN

        names = list(self.clusters.clusters)
        ca = {"certificate-authority-data": base64.b64encode(ca_pem).decode()} if ca_pem else {}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [{"name": n, "cluster": {"server": f"{url}/clusters/{n}", **ca}} for n in names],
            "users": [{"name": n, "user": {"token": TOKEN}} for n in names],
            "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in names],
            "current-context": names[0] if names else "",
        }
        directory.mkdir(parents=True, exist_ok=True)
        path, partial = directory / KUBECONFIG_FILE, directory / f".{KUBECONFIG_FILE}.partial"
        # JSON, which every YAML reader reads alike: kubectl's YAML is 1.1, where a fleet name
        # such as `no` or `y` written unquoted is a boolean (and a YAML 1.2 emitter leaves it so).
        with partial.open("w", encoding="utf-8") as out:
            json.dump(config, out, indent=2)
        partial.replace(path)
        return path
