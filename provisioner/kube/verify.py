"""`verify`: do a pool's nodes really give what the compiler promised?

Per pool, its nodes (found by the cloud's pool label, hardware/clouds.yaml `poolLabel`) must carry
the pool's labels and taints, MIG must have finished where the GPU Operator partitions
(nvidia.com/mig.config.state=success), the device-plugin ConfigMap must hold the key each label
names with the fleet's replicas, and each node must advertise `resource: slices_per_node` of the
pool's NodeSetup. The failure users meet most is silent: a label naming a key the ConfigMap
lacks, and the node advertises `nvidia.com/gpu: 1` instead of ten shares. Each mismatch is said in
words, naming the node and the likely cause.
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
from provisioner.kube.inspect import gpu_resources, quantity
from provisioner.nvidia import DEVICE_PLUGIN_LABEL, GPU_RESOURCE
from provisioner.observe import Drivers
from provisioner.render import CONFIG_MAP, NAMESPACE

# Set by the GPU Operator's MIG manager once it has partitioned a node's GPUs as the
# nvidia.com/mig.config label asks (NVIDIA GPU Operator docs, "GPU Operator with MIG").
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_STATE_DONE = "success"

Status = Literal["ok", "no nodes yet", "degraded", "unreachable"]


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

    def json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "pool": self.pool,
            "status": self.status,
            "nodes": self.nodes,
            "problems": [{"node": p.node, "message": p.message} for p in self.problems],
        }


def unreachable(compiled: CompiledCluster, error: Exception) -> list[PoolVerdict]:
    # The verdict names the cluster already; the error's own "<cluster>: " would say it twice.
    problem = (Problem(None, str(error).removeprefix(f"{compiled.name}: ")),)
    return [PoolVerdict(compiled.name, p.pool.name, "unreachable", 0, problem) for p in compiled.pools]


def verify_fleet(
    clusters: Sequence[CompiledCluster], access: KubeAccess, drivers: Drivers
) -> list[PoolVerdict]:
    """Every pool of `clusters`, all clusters at once; a cluster that cannot be reached is
    `unreachable` and the others go on."""
    verdicts = each_cluster(functools.partial(verify_cluster, access, drivers), clusters)
    return [verdict for of_cluster in verdicts for verdict in of_cluster]


def verify_cluster(access: KubeAccess, drivers: Drivers, compiled: CompiledCluster) -> list[PoolVerdict]:
    """One cluster's pools, from its nodes and device-plugin ConfigMap (and, where nodes name
    their pool by the cloud's ID, the cloud's listing, read at the same time)."""

    def in_cluster() -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        with access.for_cluster(compiled.cluster) as kube:
            return read_nodes_and_config_map(kube, compiled)

    try:
        if labels_pool_ids(compiled.cluster):
            ids, (nodes, config_map) = at_once(lambda: pool_ids(compiled.cluster, drivers), in_cluster)
        else:
            ids, (nodes, config_map) = None, in_cluster()
    except (KubeUnreachable, CloudError) as error:
        return unreachable(compiled, error)
    return judge_cluster(compiled, nodes, config_map, ids)


def labels_pool_ids(cluster: Any) -> bool:
    """Whether `cluster`'s cloud labels nodes with its own ID of the pool (ACK), not the name."""
    label = hardware.load().clouds[cluster.cloud].pool_label
    return label is not None and label.value == "cloudId"


def pool_ids(cluster: Any, drivers: Drivers) -> dict[str, str] | None:
    """Pool name -> the cloud's ID of the pool, for a fleet cluster whose cloud labels nodes with
    the ID (ACK); None where the label holds the name."""
    if not labels_pool_ids(cluster):
        return None
    pools = drivers(cluster.cloud).list_pools(cluster.ref)
    return {p.name: p.cloud_id for p in pools if p.cloud_id}


def read_nodes_and_config_map(
    kube: Kube, compiled: CompiledCluster
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The cluster's nodes and, where the GPU Operator runs, its device-plugin ConfigMap (None:
    absent), read at once; KubeUnreachable where the API cannot be used."""
    if not compiled.uses_gpu_operator:
        return kube.nodes(), None
    nodes, config_map = at_once(kube.nodes, lambda: kube.config_map(NAMESPACE, CONFIG_MAP))
    return nodes, config_map


def judge_cluster(
    compiled: CompiledCluster,
    nodes: Sequence[Mapping[str, Any]],
    config_map: Mapping[str, Any] | None,
    pool_ids: Mapping[str, str] | None = None,
) -> list[PoolVerdict]:
    """Each pool of `compiled` as `nodes` and `config_map` show it."""
    label = compiled.cloud.pool_label
    assert label is not None, f"{compiled.cloud.key} has no poolLabel in hardware/clouds.yaml"
    verdicts = []
    for pool in compiled.pools:
        value = pool.pool.name if label.value == "name" else (pool_ids or {}).get(pool.pool.name)
        mine = [n for n in nodes if value is not None and _labels(n).get(label.key) == value]
        problems = _pool_problems(compiled, pool, config_map) + [
            problem for node in mine for problem in _node_problems(compiled, pool, node, config_map)
        ]
        status: Status = "degraded" if problems else ("ok" if mine else "no nodes yet")
        verdicts.append(PoolVerdict(compiled.name, pool.pool.name, status, len(mine), tuple(problems)))
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
    compiled: CompiledCluster, pool: CompiledPool, config_map: Mapping[str, Any] | None
) -> list[Problem]:
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
        (causes if key == DEVICE_PLUGIN_LABEL else standalone).append(words)
    standalone += _taint_problems(setup.taints, node.get("spec", {}).get("taints") or [])
    if setup.mig is not None and compiled.cloud.mig_via == "operator-label":
        state = labels.get(MIG_STATE_LABEL)
        if state != MIG_STATE_DONE:
            causes.append(
                f"MIG is not in place: {MIG_STATE_LABEL} is {state or 'absent'}, expected {MIG_STATE_DONE}"
            )
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
        return [Problem(name, m) for m in standalone + causes]
    advertised = gpu_resources(allocatable)
    shown = ", ".join(f"{r}: {n}" for r, n in advertised.items()) or "no GPU resource"
    shared = setup.sharing != "exclusive"
    prefix = "sharing is off: " if shared and not have and advertised else ""
    headline = f"{prefix}node {name} advertises {shown}, expected {setup.resource}: {want}"
    if config_cause:
        causes.append(config_cause)
    return [Problem(name, "; ".join([headline, *causes])), *(Problem(name, m) for m in standalone)]


def _taint_problems(expected: Sequence[Any], taints: Sequence[Mapping[str, Any]]) -> list[str]:
    have = {(t.get("key"), t.get("value") or "", t.get("effect")) for t in taints}
    return [f"taint {t} is missing" for t in expected if (t.key, t.value, t.effect) not in have]
