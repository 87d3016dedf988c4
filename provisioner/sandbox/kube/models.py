"""The sandbox's Kubernetes API state: one KubeCluster per fleet cluster, the façade the responses
call. It holds the cluster's lock and composes its parts, each one idea:

- nodes.py: nodes computed from the cloud emulator's pools, and what kubectl changed on them;
- pods.py: stored pods, bound by the scheduler (scheduling.py), admitted or refused by the kubelet;
  podgc.py: the pod garbage collector, deleting pods bound to nodes gone with their pool;
- events.py: the events the scheduler and the autoscaler record about pods;
- autoscaler.py: the cluster autoscaler, scanning from KubeEmulator's thread;
- configmaps.py: stored ConfigMaps, their field ownership kept by fields.py (server-side apply);
- resources.py: stored resource.k8s.io/v1 DeviceClasses, ResourceClaims and their templates,
  served from Kubernetes 1.34 (versions.py: the cluster's version and what it turns on);
- dra.py: the NVIDIA DRA driver installed by its Helm chart, and the ResourceSlices its kubelet
  plugin publishes, computed from the nodes;
- objects.py: what they share, new objects' metadata and the cluster's resourceVersion.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from provisioner.sandbox.kube import apps, dra, versions
from provisioner.sandbox.kube.autoscaler import ClusterAutoscaler
from provisioner.sandbox.kube.claims import DynamicResources
from provisioner.sandbox.kube.clouds import ADAPTERS
from provisioner.sandbox.kube.configmaps import ConfigMaps
from provisioner.sandbox.kube.disruption import BUDGETS, Disruption
from provisioner.sandbox.kube.events import Events
from provisioner.sandbox.kube.eviction import Evictions
from provisioner.sandbox.kube.exceptions import NotFound
from provisioner.sandbox.kube.migmanager import MigManager
from provisioner.sandbox.kube.nodes import Nodes
from provisioner.sandbox.kube.objects import Revisions, merge_patch
from provisioner.sandbox.kube.podgc import collect_orphans
from provisioner.sandbox.kube.pods import Pods
from provisioner.sandbox.kube.resources import ResourceObjects, slices_matching
from provisioner.sandbox.kube.selectors import selector_text
from provisioner.sandbox.kube.stored import Store
from provisioner.sandbox.kube.workloads import Workloads

if TYPE_CHECKING:
    from provisioner.sandbox import SeededCluster

T = TypeVar("T")


class KubeCluster:
    """One fleet cluster's Kubernetes API: nodes from its cloud's pools, stored pods and ConfigMaps.
    Every request holds the cluster's lock while its part answers."""

    def __init__(
        self,
        target: SeededCluster,
        emulator: Any,
        scale_down_delay: float = 10 * 60,
        kubernetes_version: str = versions.DEFAULT_VERSION,
    ):
        self.name = target.name
        self.ref = target.ref
        # The seed's own version where it names one (a cloud emulator's cluster), else the default.
        self.kubernetes_version = versions.normalized(
            getattr(target, "kubernetes_version", None) or kubernetes_version
        )
        self.lock = threading.RLock()
        self._revisions = Revisions()
        self._config_maps = ConfigMaps(self._revisions)
        self.resources = ResourceObjects(self._revisions, self.kubernetes_version)
        self.dra_driver: dra.Release | None = None  # the DRA driver's Helm release, once installed
        self._published: dict[str, str] = {}  # node -> when its kubelet plugin first published
        engine = emulator.engine
        mig = MigManager(
            engine.now, lambda: engine.op_seconds, lambda: engine.fault_rate, engine.seed, self.name
        )
        self._nodes = Nodes(
            ADAPTERS[target.ref.cloud](emulator, target.ref), self._config_maps, self._revisions, mig
        )
        self._events = Events(self._revisions)
        # Pods with ResourceClaims, where resource.k8s.io is served (claims.py).
        dra = (
            DynamicResources(self.resources, self.resource_slices, self.dra_feature_gates, self._events)
            if self.serves_resource_api
            else None
        )
        self._pods = Pods(self._nodes, self._revisions, self._events, dra)
        # apps/v1 and policy/v1, stored, with their controllers (workloads.py, disruption.py)
        self.stored = {
            kind.resource: Store(kind, self._revisions)
            for kind in (apps.DEPLOYMENTS, apps.REPLICA_SETS, BUDGETS)
        }
        self._workloads = Workloads(self.stored["deployments"], self.stored["replicasets"], self._pods)
        self._disruption = Disruption(
            self.stored["poddisruptionbudgets"], self._pods, self._workloads, self._events
        )
        self._evictions = Evictions(self._pods, self._disruption)
        self._autoscaler = ClusterAutoscaler(
            self._nodes, self._pods, self._events, scale_down_delay, lambda: engine.op_seconds
        )

    def scan(self) -> None:
        """One loop of the cluster's components (KubeEmulator's thread runs one per scan interval):
        the kubelets stop Terminating pods, the pod garbage collector deletes those whose node is
        gone, the controllers replace them, the scheduler and the cluster autoscaler run, the
        disruption controller catches up. None until the cluster's
        first pod: before it nothing is pending or was run, and a scan would see the pools first,
        numbering their nodes' subnets before the API's first listing does."""
        with self.lock:
            if not self._pods.created:
                self._disruption.sync()
                return
            self._pods.reap()
            collect_orphans(self._pods)
            self._workloads.sync()
            self._autoscaler.scan()
            self._workloads.sync()  # the pods the scheduler bound count as ready now
            self._disruption.sync()

    def list_events(
        self, namespace: str | None, label_selector_text: str = "", field_selector_text: str = ""
    ) -> list[dict[str, Any]]:
        with self.lock:
            return self._events.matching(namespace, label_selector_text, field_selector_text)

    @property
    def version(self) -> str:
        """The resourceVersion a list reports: the last write's, whatever its kind."""
        return self._revisions.current

    def namespaces(self) -> set[str]:
        """The namespaces something is stored in."""
        with self.lock:
            return (
                {ns for ns, _ in self._config_maps.stored}
                | {ns for ns, _ in self._pods.stored}
                | {key[0] for key in self._events.stored}
                | {ns for store in self.stored.values() for ns, _ in store.stored}
                | self.resources.namespaces()
            )

    def dry_run(self, change: Callable[[], T]) -> T:
        """What `change` (to ConfigMaps or resource.k8s.io objects) gives, keeping nothing of it
        (?dryRun=All)."""
        with self.lock:
            saved, version = self._config_maps.saved(), self._revisions.current
            resources = self.resources.saved()
            try:
                return change()
            finally:
                self._config_maps.restore(saved)
                self.resources.restore(resources)
                self._revisions.current = version

    # resource.k8s.io/v1 (DRA): served from 1.34, as the group is GA there

    @property
    def serves_resource_api(self) -> bool:
        return versions.serves_resource_v1(self.kubernetes_version)

    def list_resources(
        self,
        resource: str,
        namespace: str | None,
        label_selector_text: str = "",
        field_selector_text: str = "",
    ) -> list[dict[str, Any]]:
        with self.lock:
            return self.resources.matching(resource, namespace, label_selector_text, field_selector_text)

    def get_resource(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            return self.resources.get(resource, namespace, name)

    def has_resource(self, resource: str, namespace: str, name: str) -> bool:
        with self.lock:
            return self.resources.exists(resource, namespace, name)

    def create_resource(
        self, resource: str, namespace: str, body: dict[str, Any], manager: str
    ) -> dict[str, Any]:
        with self.lock:
            return self.resources.create(resource, namespace, body, manager)

    def replace_resource(
        self, resource: str, namespace: str, name: str, body: dict[str, Any], manager: str
    ) -> dict[str, Any]:
        with self.lock:
            return self.resources.replace(resource, namespace, name, body, manager)

    def merge_patch_resource(
        self, resource: str, namespace: str, name: str, patch: dict[str, Any], manager: str
    ) -> dict[str, Any]:
        with self.lock:
            return self.resources.merge_patch(resource, namespace, name, patch, manager)

    def apply_resource(
        self, resource: str, namespace: str, name: str, body: dict[str, Any], manager: str, *, force: bool
    ) -> dict[str, Any]:
        with self.lock:
            return self.resources.apply(resource, namespace, name, body, manager, force=force)

    def delete_resource(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            return self.resources.delete(resource, namespace, name)

    def replace_claim_status(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            return self.resources.replace_status(namespace, name, body)

    def merge_patch_claim_status(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            return self.resources.merge_patch_status(namespace, name, patch)

    def update_claim_status(self, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Write a claim's status as the scheduler does when it allocates (dra-claims' allocator)."""
        with self.lock:
            return self.resources.update_status(namespace, name, status)

    def dra_feature_gates(self) -> set[str]:
        """The gates the NVIDIA DRA driver's kubelet plugin runs with (none before it is installed)."""
        release = self.dra_driver
        return {gate for gate, on in release.feature_gates.items() if on} if release is not None else set()

    def resource_slices(self) -> list[dict[str, Any]]:
        """Every ResourceSlice the DRA kubelet plugins publish now, sorted by name (for the scheduler)."""
        with self.lock:
            release = self.dra_driver
            if release is None or not release.gpus:
                return []
            found = []
            for name, node in sorted(self._nodes.all().items()):
                gpus = self._nodes.gpus.get(name)
                if gpus is None or not dra.placement(release, node, gpus, self.ref.cloud).running:
                    continue
                published = self._published.setdefault(
                    name, max(release.installed, node["metadata"]["creationTimestamp"])
                )
                made = dra.resource_slice(node, gpus, published)
                if made is not None:
                    found.append(made)
            return sorted(found, key=lambda s: s["metadata"]["name"])

    # The DRA driver, as `helm install` / `helm uninstall` of its chart would do it

    def install_dra_driver(
        self, values: dict[str, Any], namespace: str = dra.NAMESPACE, name: str = dra.RELEASE
    ) -> dra.Release:
        """Install the chart with `values` (a values file's mapping); dra.ChartError, with
        nothing installed, where helm would fail."""
        with self.lock:
            if self.dra_driver is not None:
                raise dra.ChartError("INSTALLATION FAILED: cannot re-use a name that is still in use")
            release = dra.render(values, self.kubernetes_version, namespace, name)
            classes = release.device_classes()
            for body in classes:
                self._check_adoptable(body["metadata"]["name"], release)
            for body in classes:
                existing = self.resources.exists("deviceclasses", "", body["metadata"]["name"])
                if existing:
                    self.resources.replace("deviceclasses", "", body["metadata"]["name"], body, "helm")
                else:
                    self.resources.create("deviceclasses", "", body, "helm")
            self.dra_driver = release
            self._published.clear()
            return release

    def uninstall_dra_driver(self, name: str = dra.RELEASE) -> str:
        """`helm uninstall NAME`: the release's DeviceClasses go with it."""
        with self.lock:
            release = self.dra_driver
            if release is None or release.name != name:
                raise dra.ChartError(f"uninstall: Release not loaded: {name}: release: not found")
            for body in release.device_classes():
                if self.resources.exists("deviceclasses", "", body["metadata"]["name"]):
                    self.resources.delete("deviceclasses", "", body["metadata"]["name"])
            self.dra_driver = None
            self._published.clear()
            return f'release "{name}" uninstalled'

    def dra_plugin_pods(self) -> dict[str, dra.PluginOnNode]:
        """Per node, the kubelet plugin DaemonSet's pod: scheduled there, and running."""
        with self.lock:
            release = self.dra_driver
            if release is None:
                return {}
            return {
                name: dra.placement(release, node, self._nodes.gpus.get(name), self.ref.cloud)
                for name, node in sorted(self._nodes.all().items())
            }

    def _check_adoptable(self, class_name: str, release: dra.Release) -> None:
        """helm's ownership check: an existing object it would create must carry its release's
        labels and annotations (pkg/action/validate.go existingResourceConflict)."""
        if not self.resources.exists("deviceclasses", "", class_name):
            return
        metadata = self.resources.get("deviceclasses", "", class_name)["metadata"]
        labels, annotations = metadata.get("labels") or {}, metadata.get("annotations") or {}
        problems = []
        if labels.get("app.kubernetes.io/managed-by") != "Helm":
            problems.append(
                'label validation error: missing key "app.kubernetes.io/managed-by": must be set to "Helm"'
            )
        for key, wanted in (
            ("meta.helm.sh/release-name", release.name),
            ("meta.helm.sh/release-namespace", release.namespace),
        ):
            if annotations.get(key) != wanted:
                problems.append(
                    f'annotation validation error: missing key "{key}": must be set to "{wanted}"'
                )
        if problems:
            raise dra.ChartError(
                "INSTALLATION FAILED: Unable to continue with install: "
                f'DeviceClass "{class_name}" in namespace "" exists and cannot be imported into the '
                "current release: invalid ownership metadata; " + "; ".join(problems)
            )

    def list_resource_slices(
        self, label_selector_text: str = "", field_selector_text: str = ""
    ) -> list[dict[str, Any]]:
        with self.lock:
            return slices_matching(self.resource_slices(), label_selector_text, field_selector_text)

    def resource_slice(self, name: str) -> dict[str, Any]:
        with self.lock:
            found = next((s for s in self.resource_slices() if s["metadata"]["name"] == name), None)
            if found is None:
                raise NotFound.of("resourceslices.resource.k8s.io", name)
            return found

    # Nodes

    def nodes(self) -> dict[str, dict[str, Any]]:
        """Every node now, by name, as the API shows it."""
        with self.lock:
            return self._nodes.all()

    def node(self, name: str) -> dict[str, Any]:
        with self.lock:
            return self._nodes.get(name)

    def list_nodes(self, label_selector_text: str = "") -> list[dict[str, Any]]:
        with self.lock:
            return self._nodes.matching(label_selector_text)

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            return self._nodes.patch(name, patch)

    # Test helpers: what the node's agents would report otherwise, what a pod's containers did.

    def fail_mig(self, node: str, state: str = "failed") -> None:
        """Make the MIG manager report `state` for `node` (it then leaves the GPUs whole)."""
        with self.lock:
            self._nodes.fail_mig(node, state)

    def stall_mig(self, node: str) -> None:
        """Keep `node`'s MIG reconfiguration in flight (or its next) pending for good
        (NVIDIA/gpu-operator#2833: the MIG manager stuck waiting for the GPU clients' pods)."""
        with self.lock:
            self._nodes.stall_mig(node)

    def strand_mig(self, node: str) -> None:
        """Leave `node`'s GPUs in MIG mode with no MIG partitions."""
        with self.lock:
            self._nodes.strand_mig(node)

    def set_capacity(self, node: str, resource: str, quantity: int | str) -> None:
        """Make `node` advertise `quantity` of `resource` (a device plugin that lost devices, a
        kubelet with fewer pods)."""
        with self.lock:
            self._nodes.set_capacity(node, resource, quantity)

    def label_node(self, node: str, key: str, value: str | None) -> None:
        """`kubectl label node NODE KEY=VALUE --overwrite` (or `KEY-` for None)."""
        self.patch_node(node, {"metadata": {"labels": {key: value}}})

    def finish_pod(self, namespace: str, name: str, phase: str = "Succeeded") -> None:
        with self.lock:
            self._pods.finish(namespace, name, phase)

    # Pods

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            return self._pods.get(namespace, name)

    def list_pods(
        self, namespace: str | None, label_selector_text: str = "", field_selector_text: str = ""
    ) -> list[dict[str, Any]]:
        """The stored pods themselves, not copies, for the response to serialise: never modify them."""
        with self.lock:
            return self._pods.matching(namespace, label_selector_text, field_selector_text)

    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            return self._pods.create(namespace, body)

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            return self._pods.patch(namespace, name, patch)

    def delete_pod(self, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            gone = self._pods.delete(namespace, name)
            self._workloads.sync()
            return gone

    def evict_pod(
        self, namespace: str, name: str, body: dict[str, Any], dry_run: bool = False
    ) -> dict[str, Any]:
        """POST …/pods/NAME/eviction (eviction.py): the Status of success, or its error."""
        with self.lock:
            done = self._evictions.evict(namespace, name, body, dry_run)
            self._workloads.sync()
            return done

    # apps/v1 Deployments and ReplicaSets, policy/v1 PodDisruptionBudgets (stored.py)

    def list_stored(
        self,
        resource: str,
        namespace: str | None,
        label_selector_text: str = "",
        field_selector_text: str = "",
    ) -> list[dict[str, Any]]:
        with self.lock:
            return self.stored[resource].matching(namespace, label_selector_text, field_selector_text)

    def get_stored(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            return self.stored[resource].get(namespace, name)

    def has_stored(self, resource: str, namespace: str, name: str) -> bool:
        with self.lock:
            return self.stored[resource].exists(namespace, name)

    def create_stored(self, resource: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            made = self.stored[resource].create(namespace, body)
            return self._settled(resource, namespace, made["metadata"]["name"])

    def replace_stored(
        self, resource: str, namespace: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        with self.lock:
            self.stored[resource].replace(namespace, name, body)
            return self._settled(resource, namespace, name)

    def patch_stored(
        self, resource: str, namespace: str, name: str, patch: dict[str, Any], content_type: str
    ) -> dict[str, Any]:
        with self.lock:
            self.stored[resource].patch(namespace, name, patch, content_type)
            return self._settled(resource, namespace, name)

    def delete_stored(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            if resource == "deployments":
                gone = self._workloads.delete_deployment(namespace, name)
            elif resource == "replicasets":
                gone = self._workloads.delete_replica_set(namespace, name)
            else:
                gone = self.stored[resource].delete(namespace, name)
            self._workloads.sync()
            return gone

    def scale(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        """…/scale: the autoscaling/v1 Scale of a Deployment or ReplicaSet."""
        with self.lock:
            return _scale_of(self.stored[resource].get(namespace, name))

    def patch_scale(self, resource: str, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A merge patch (or a whole Scale, PUT) of …/scale: only spec.replicas is taken."""
        with self.lock:
            current = _scale_of(self.stored[resource].get(namespace, name))
            replicas = merge_patch(current, patch).get("spec", {}).get("replicas")
            self.stored[resource].patch(
                namespace, name, {"spec": {"replicas": replicas}}, "application/merge-patch+json"
            )
            return _scale_of(self._settled(resource, namespace, name))

    def _settled(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        """The object after its controllers have run on the write (a budget's is synced at once)."""
        if resource == "poddisruptionbudgets":
            self._disruption.sync()
        else:
            self._workloads.sync()
        return self.stored[resource].get(namespace, name)

    # ConfigMaps

    def has_config_map(self, namespace: str, name: str) -> bool:
        with self.lock:
            return (namespace, name) in self._config_maps.stored

    def config_map(self, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            return self._config_maps.get(namespace, name)

    def list_config_maps(
        self, namespace: str | None, label_selector_text: str = "", field_selector_text: str = ""
    ) -> list[dict[str, Any]]:
        with self.lock:
            return self._config_maps.matching(namespace, label_selector_text, field_selector_text)

    def create_config_map(self, namespace: str, body: dict[str, Any], manager: str) -> dict[str, Any]:
        with self.lock:
            return self._config_maps.create(namespace, body, manager)

    def replace_config_map(
        self, namespace: str, name: str, body: dict[str, Any], manager: str
    ) -> dict[str, Any]:
        with self.lock:
            return self._config_maps.replace(namespace, name, body, manager)

    def merge_patch_config_map(
        self, namespace: str, name: str, patch: dict[str, Any], manager: str
    ) -> dict[str, Any]:
        with self.lock:
            return self._config_maps.merge_patch(namespace, name, patch, manager)

    def apply_config_map(
        self, namespace: str, name: str, body: dict[str, Any], manager: str, force: bool
    ) -> dict[str, Any]:
        with self.lock:
            return self._config_maps.apply(namespace, name, body, manager, force)

    def delete_config_map(self, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            return self._config_maps.delete(namespace, name)


def _scale_of(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj["metadata"]
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: metadata[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in metadata
        },
        "spec": {"replicas": obj["spec"]["replicas"]},
        "status": {
            "replicas": (obj.get("status") or {}).get("replicas", 0),
            "selector": selector_text(obj["spec"].get("selector")),
        },
    }


class KubeClusters:
    """Every fleet cluster's API, by the fleet's name for it."""

    def __init__(
        self, scale_down_delay: float = 10 * 60, kubernetes_version: str = versions.DEFAULT_VERSION
    ) -> None:
        self.clusters: dict[str, KubeCluster] = {}
        self.scale_down_delay = scale_down_delay
        self.kubernetes_version = kubernetes_version  # for a seed that names none

    def add(self, target: SeededCluster, emulator: Any) -> KubeCluster:
        if target.name not in self.clusters:
            self.clusters[target.name] = KubeCluster(
                target, emulator, self.scale_down_delay, self.kubernetes_version
            )
        return self.clusters[target.name]

    def __getitem__(self, name: str) -> KubeCluster:
        try:
            return self.clusters[name]
        except KeyError:
            raise NotFound("the server could not find the requested resource", {}) from None
