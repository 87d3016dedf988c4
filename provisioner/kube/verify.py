"""`verify`: do a pool's nodes really give what the compiler promised?

Per pool, its nodes (those whose provisioner.io/pool label names the fleet pool, of every
generation, and those without it whose cloud pool label, hardware/clouds.yaml `poolLabel`, names
the pool: pools made before the tool set it, whose missing label is then a problem) must carry
the pool's labels and taints, MIG must have finished where the GPU Operator partitions
(nvidia.com/mig.config.state=success), the device-plugin ConfigMap must hold the key each label
names with the fleet's replicas, and each node must advertise `resource: slices_per_node` of the
pool's NodeSetup. The failure users meet most is silent: a label naming a key the ConfigMap
lacks, and the node advertises `nvidia.com/gpu: 1` instead of ten shares. Each mismatch is said in
words, naming the node and the likely cause.

On a DRA pool (gpu.allocation: dra) the devices are the DRA driver's ResourceSlices, read with the
nodes where the cluster has DRA pools: each node must be published with the pool's devices (count,
whole GPUs or the MIG profile, the model), and must not also advertise a device plugin's GPU
resource, nor a device-plugin pool's node publish DRA devices: two managers of one GPU hand it to
two pods (EKS's DRA page warns of silent oversubscription).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from provisioner import hardware
from provisioner.compile import CompiledCluster, CompiledPool
from provisioner.errors import CloudError, KubeUnreachable
from provisioner.kube.contexts import Kube, KubeAccess, at_once, each_cluster
from provisioner.kube.dra import Device, counted, names_gpu, published
from provisioner.kube.inspect import gpu_resources, node_pool, quantity
from provisioner.nvidia import DEVICE_PLUGIN_LABEL, GPU_RESOURCE
from provisioner.observe import Drivers
from provisioner.render import CONFIG_MAP, NAMESPACE

# Set by the GPU Operator's MIG manager once it has partitioned a node's GPUs as the
# nvidia.com/mig.config label asks (NVIDIA GPU Operator docs, "GPU Operator with MIG").
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_STATE_DONE = "success"

Status = Literal["ok", "no nodes yet", "degraded", "unreachable"]
NO_DRA_API = (
    "the cluster serves no resource.k8s.io/v1 (Kubernetes before 1.34, or DRA turned off): "
    "the DRA driver cannot publish the pool's devices"
)


@dataclass(frozen=True)
class Problem:
    node: str | None  # None: the pool's, not one node's (the ConfigMap, the cluster's API)
    message: str


@dataclass(frozen=True)
class PoolVerdict:
    cluster: str
    pool: str
    status: Status
    nodes: int
    problems: tuple[Problem, ...] = ()
    allocation_mode: str = "device-plugin"  # or "dra"

    def json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "pool": self.pool,
            "status": self.status,
            "nodes": self.nodes,
            "problems": [{"node": p.node, "message": p.message} for p in self.problems],
            "allocation_mode": self.allocation_mode,
        }


def unreachable(compiled: CompiledCluster, error: Exception) -> list[PoolVerdict]:
    # The verdict names the cluster already; the error's own "<cluster>: " would say it twice.
    problem = (Problem(None, str(error).removeprefix(f"{compiled.name}: ")),)
    return [
        PoolVerdict(compiled.name, p.pool.name, "unreachable", 0, problem, p.setup.allocation)
        for p in compiled.pools
    ]


def verify_fleet(
    clusters: Sequence[CompiledCluster], access: KubeAccess, drivers: Drivers
) -> list[PoolVerdict]:
    """Every pool of `clusters`, all clusters at once; a cluster that cannot be reached is
    `unreachable` and the others go on."""
    verdicts = each_cluster(functools.partial(verify_cluster, access, drivers), clusters)
    return [verdict for of_cluster in verdicts for verdict in of_cluster]


def verify_cluster(access: KubeAccess, drivers: Drivers, compiled: CompiledCluster) -> list[PoolVerdict]:
    """One cluster's pools, from its nodes, device-plugin ConfigMap and, with DRA pools, its
    ResourceSlices (and, where nodes name their pool by the cloud's ID, the cloud's listing, read
    at the same time)."""

    def in_cluster() -> ClusterReads:
        with access.for_cluster(compiled.cluster) as kube:
            return read_cluster(kube, compiled)

    try:
        if labels_pool_ids(compiled.cluster):
            ids, reads = at_once(lambda: pool_ids(compiled.cluster, drivers), in_cluster)
        else:
            ids, reads = None, in_cluster()
    except (KubeUnreachable, CloudError) as error:
        return unreachable(compiled, error)
    return judge_cluster(compiled, reads.nodes, reads.config_map, ids, reads.slices)


def labels_pool_ids(cluster: Any) -> bool:
    """Whether `cluster`'s cloud labels nodes with its own ID of the pool (ACK), not the name."""
    label = hardware.load().clouds[cluster.cloud].pool_label
    return label is not None and label.value == "cloudId"


def pool_ids(cluster: Any, drivers: Drivers) -> dict[str, str] | None:
    """The cloud's ID of each pool -> the fleet pool it is a generation of, for a fleet cluster
    whose cloud labels nodes with the ID (ACK); None where the label holds the name."""
    if not labels_pool_ids(cluster):
        return None
    pools = drivers(cluster.cloud).list_pools(cluster.ref)
    return {p.cloud_id: p.pool_name for p in pools if p.cloud_id}


@dataclass(frozen=True)
class ClusterReads:
    nodes: list[dict[str, Any]]
    config_map: dict[str, Any] | None  # None: absent, or not read (no GPU Operator)
    slices: list[dict[str, Any]] | None  # None: not read (no DRA pool), or no resource.k8s.io/v1


def read_cluster(kube: Kube, compiled: CompiledCluster) -> ClusterReads:
    """The cluster's nodes, where the GPU Operator runs its device-plugin ConfigMap, and where it
    has DRA pools its ResourceSlices, read at once; KubeUnreachable where the API cannot be used."""
    calls: list[Any] = [kube.nodes]
    if compiled.uses_gpu_operator:
        calls.append(lambda: kube.config_map(NAMESPACE, CONFIG_MAP))
    if compiled.dra_pools:
        calls.append(kube.resource_slices)
    found = at_once(*calls)
    config_map = found[1] if compiled.uses_gpu_operator else None
    return ClusterReads(found[0], config_map, found[-1] if compiled.dra_pools else None)


def judge_cluster(
    compiled: CompiledCluster,
    nodes: Sequence[Mapping[str, Any]],
    config_map: Mapping[str, Any] | None,
    pool_ids: Mapping[str, str] | None = None,
    slices: Sequence[Mapping[str, Any]] | None = None,
) -> list[PoolVerdict]:
    """Each pool of `compiled` as `nodes`, `config_map` and (with DRA pools) `slices` show it;
    `pool_ids` the cloud's pool IDs -> fleet pool names, where nodes name their pool by ID (ACK);
    `slices` None on a cluster with DRA pools: it serves no resource.k8s.io/v1."""
    label = compiled.cloud.pool_label
    assert label is not None, f"{compiled.cloud.key} has no poolLabel in hardware/clouds.yaml"
    devices = published(slices, hardware.load().dra_driver.driver) if slices is not None else None
    by_pool: dict[str, list[Mapping[str, Any]]] = {}
    for node in nodes:
        by_pool.setdefault(node_pool(node, (label.key,), pool_ids or {}), []).append(node)
    verdicts = []
    for pool in compiled.pools:
        mine = by_pool.get(pool.pool.name, [])
        problems = _pool_problems(compiled, pool, config_map, devices) + [
            problem for node in mine for problem in _node_problems(compiled, pool, node, config_map, devices)
        ]
        status: Status = "degraded" if problems else ("ok" if mine else "no nodes yet")
        verdicts.append(
            PoolVerdict(
                compiled.name, pool.pool.name, status, len(mine), tuple(problems), pool.setup.allocation
            )
        )
    return verdicts


def _labels(node: Mapping[str, Any]) -> dict[str, str]:
    return node.get("metadata", {}).get("labels") or {}


def _config_path() -> str:
    return f"{NAMESPACE}/{CONFIG_MAP}"


def _replicas(config_map: Mapping[str, Any], key: str) -> int | None:
    """The replicas the config under `key` gives each GPU (None: it shares nothing)."""
    return _replicas_in((config_map.get("data") or {}).get(key, ""))


@functools.lru_cache(maxsize=256)
def _replicas_in(text: str) -> int | None:
    """_replicas of one config's text: parsed once per text, not once per node of every cluster."""
    try:
        config = YAML(typ="safe", pure=True).load(text)
    except YAMLError:
        return None
    sharing = (config or {}).get("sharing") or {} if isinstance(config, dict) else {}
    for section in sharing.values() if isinstance(sharing, dict) else ():
        for resource in (section or {}).get("resources") or []:
            if resource.get("name") == GPU_RESOURCE:
                return resource.get("replicas")
    return None


def _config_problem(
    config_map: Mapping[str, Any] | None, key: str, replicas: int | None, whose: str
) -> str | None:
    """Why the ConfigMap does not give `key` with `replicas`, in words; None where it does."""
    if config_map is None:
        return f"{whose} names {key}, but the ConfigMap {_config_path()} does not exist"
    if key not in (config_map.get("data") or {}):
        return f"{whose} names {key}, which the ConfigMap lacks"
    given = _replicas(config_map, key)
    if given != replicas:
        gives = f"{given} replicas" if given is not None else "no sharing"
        return f"ConfigMap key {key} gives {gives}, expected {replicas}"
    return None


def _pool_problems(
    compiled: CompiledCluster,
    pool: CompiledPool,
    config_map: Mapping[str, Any] | None,
    devices: Mapping[str, Sequence[Device]] | None,
) -> list[Problem]:
    if pool.setup.allocation == "dra" and devices is None:
        return [Problem(None, NO_DRA_API)]
    key = pool.setup.labels.get(DEVICE_PLUGIN_LABEL)
    if key is None:
        return []
    problem = _config_problem(config_map, key, pool.setup.replicas, "the pool's label")
    return [Problem(None, problem)] if problem else []


def _node_problems(
    compiled: CompiledCluster,
    pool: CompiledPool,
    node: Mapping[str, Any],
    config_map: Mapping[str, Any] | None,
    devices: Mapping[str, Sequence[Device]] | None = None,
) -> list[Problem]:
    setup, name = pool.setup, node.get("metadata", {}).get("name", "?")
    labels = _labels(node)
    standalone: list[str] = []  # mismatches that stand on their own
    causes: list[str] = []  # what would keep the node from advertising its slices
    for key, value in setup.labels.items():
        have = labels.get(key)
        if have == value:
            continue
        words = (
            f"label {key}={value} is missing" if have is None else f"label {key} is {have}, expected {value}"
        )
        (causes if key in _cause_labels(compiled, pool) else standalone).append(words)
    standalone += _taint_problems(setup.taints, node.get("spec", {}).get("taints") or [])
    if setup.mig is not None and compiled.cloud.mig_via == "operator-label":
        state = labels.get(MIG_STATE_LABEL)
        if state != MIG_STATE_DONE:
            causes.append(
                f"MIG is not in place: {MIG_STATE_LABEL} is {state or 'absent'}, expected {MIG_STATE_DONE}"
            )
    if setup.allocation == "dra":
        found = None if devices is None else devices.get(name, [])
        return _dra_node_problems(compiled, pool, node, found, standalone=standalone, causes=causes)
    node_key = labels.get(DEVICE_PLUGIN_LABEL)
    config_cause = None
    if setup.device_plugin is not None and node_key is not None:
        config_cause = _config_problem(config_map, node_key, setup.replicas, "its label")
    allocatable = node.get("status", {}).get("allocatable") or {}
    have = quantity(allocatable.get(setup.resource, "0"))
    want = setup.slices_per_node
    if have == want:
        # The node gives what it should now; a cause still wrong will bite at its next restart.
        if config_cause and node_key != setup.labels.get(DEVICE_PLUGIN_LABEL):
            causes.append(config_cause)
        return [Problem(name, m) for m in standalone + causes + _dra_on_device_plugin_node(name, devices)]
    advertised = gpu_resources(allocatable)
    shown = ", ".join(f"{r}: {n}" for r, n in advertised.items()) or "no GPU resource"
    shared = setup.sharing != "exclusive"
    prefix = "sharing is off: " if shared and not have and advertised else ""
    headline = f"{prefix}node {name} advertises {shown}, expected {setup.resource}: {want}"
    if config_cause:
        causes.append(config_cause)
    also = _dra_on_device_plugin_node(name, devices)
    return [Problem(name, "; ".join([headline, *causes])), *(Problem(name, m) for m in standalone + also)]


def _cause_labels(compiled: CompiledCluster, pool: CompiledPool) -> frozenset[str]:
    """The labels whose mismatch would change what the node advertises: the device-plugin config
    label, or on a DRA pool the labels that keep the device plugin off and select the driver."""
    if pool.setup.allocation == "dra" and compiled.cloud.dra is not None:
        return frozenset(compiled.cloud.dra.device_plugin_off)
    return frozenset({DEVICE_PLUGIN_LABEL})


def _dra_node_problems(
    compiled: CompiledCluster,
    pool: CompiledPool,
    node: Mapping[str, Any],
    devices: Sequence[Device] | None,
    *,
    standalone: list[str],
    causes: list[str],
) -> list[Problem]:
    """A DRA pool's node: the driver publishes the pool's devices for it, and no device plugin
    advertises its GPUs too. `devices` None: the cluster has no resource.k8s.io/v1 (said once,
    for the pool)."""
    setup, name = pool.setup, node.get("metadata", {}).get("name", "?")
    headlines = []
    if devices is not None:
        headlines += _dra_device_mismatch(compiled, pool, name, devices)
        wrong = sorted({d.product for d in devices if not names_gpu(d.product, setup.gpu)})
        if wrong:
            standalone.append(
                f"the DRA driver publishes {', '.join(wrong)} devices for node {name}, "
                f"expected the pool's {setup.gpu.name}"
            )
    advertised = gpu_resources(node.get("status", {}).get("allocatable") or {})
    if advertised:
        shown = ", ".join(f"{r}: {n}" for r, n in advertised.items())
        off = ", ".join(f"{k}={v}" for k, v in _device_plugin_off(compiled).items())
        if devices:
            effect = (
                f"also advertises {shown} through a device plugin: the device plugin and the DRA driver "
                "both manage its GPUs, so one GPU can go to two pods (EKS warns of silent oversubscription)"
            )
        else:  # the DRA driver is not there (or the API is not): the plugin has the GPUs instead
            effect = f"advertises {shown} through a device plugin instead of the DRA driver"
        headlines.append(f"node {name} of a DRA pool {effect}; the label {off} keeps the device plugin off")
    if not headlines:
        return [Problem(name, m) for m in standalone + causes]
    first = "; ".join([headlines[0], *causes])
    return [Problem(name, m) for m in (first, *headlines[1:], *standalone)]


def _dra_device_mismatch(
    compiled: CompiledCluster, pool: CompiledPool, name: str, devices: Sequence[Device]
) -> list[str]:
    """Why the devices published for node `name` are not the pool's, in words; [] where they are."""
    setup = pool.setup
    kind, per_gpu = ("mig", setup.mig.instances) if setup.mig is not None else ("gpu", 1)
    want = setup.gpus_per_node * per_gpu
    right = [d for d in devices if d.type == kind and (setup.mig is None or d.profile == setup.mig.name)]
    if len(right) == want and len(devices) == want:
        return []
    wanted = counted([Device("", "", "", kind, "", setup.mig.name if setup.mig else None)] * want)
    driver = hardware.load().dra_driver.driver
    if not devices:
        selector = ", ".join(f"{k}={v}" for k, v in _device_plugin_off(compiled).items())
        return [
            f"the DRA driver {driver} publishes no devices for node {name}, expected {wanted} "
            f"({setup.resource}): its kubelet plugin runs only on the nodes its Helm values select "
            f"(kubeletPlugin.nodeSelector {selector}, as `provisioner render` prints them)"
        ]
    return [f"the DRA driver {driver} publishes {counted(devices)} for node {name}, expected {wanted}"]


def _device_plugin_off(compiled: CompiledCluster) -> Mapping[str, str]:
    return compiled.cloud.dra.device_plugin_off if compiled.cloud.dra is not None else {}


def _dra_on_device_plugin_node(name: str, devices: Mapping[str, Sequence[Device]] | None) -> list[str]:
    """A device-plugin pool's node for which the DRA driver publishes devices too."""
    found = (devices or {}).get(name)
    if not found:
        return []
    driver = hardware.load().dra_driver.driver
    return [
        f"the DRA driver {driver} publishes {counted(found)} for node {name} of a device-plugin pool: "
        "the device plugin and the DRA driver both manage its GPUs, so one GPU can go to two pods; "
        "the driver's kubelet plugin belongs on DRA pools' nodes only (its nodeSelector in the "
        "values `provisioner render` prints)"
    ]


def _taint_problems(expected: Sequence[Any], taints: Sequence[Mapping[str, Any]]) -> list[str]:
    have = {(t.get("key"), t.get("value") or "", t.get("effect")) for t in taints}
    return [f"taint {t} is missing" for t in expected if (t.key, t.value, t.effect) not in have]


def node_problems(
    compiled: CompiledCluster, pool: CompiledPool, reads: ClusterReads, node: Mapping[str, Any]
) -> list[str]:
    """What keeps one node from giving what `pool` promises, in words ([]: it gives it): the check
    a create-first replacement waits on before it drains the old generation."""
    devices = published(reads.slices, hardware.load().dra_driver.driver) if reads.slices is not None else None
    found = _pool_problems(compiled, pool, reads.config_map, devices)
    found += _node_problems(compiled, pool, node, reads.config_map, devices)
    return [problem.message for problem in found]
