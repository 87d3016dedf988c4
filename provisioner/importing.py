"""`provisioner import`: the fleet entries that describe pools the tool does not own, read back
from the pools as the clouds hold them, and written into the fleet file in place.

An entry is compile's inverse: the gpu intent is read back through nvidia.py's readers (the same
module that writes the marks), the labels and taints the tool derives are left out, and what is
left is the user's own. Exactness is proven, not assumed: an entry is offered only when it
compiles to the PoolState the cloud holds, or to one the cloud reaches by updating the pool in
place (a pool made by hand without the GPU taint: adopting it adds the taint), and each such
update is said beside the entry and in the plan. A pool that would need a new pool, or that the
fleet language cannot describe, is skipped with the reason, never approximated. A fleet pool
caught mid-replacement (two generations, each a cloud pool) is one entry, read from the newest
under the fleet's name.

Writing keeps every byte of the file that is not the new entries: ruamel.yaml's round-trip
parser says where each cluster's pool list ends, and the entries are inserted there as text.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from provisioner import hardware
from provisioner.capacity import capacity
from provisioner.compile import CompiledCluster, CompiledPool, compile_file, compile_pool, desired_state
from provisioner.errors import Diagnostic, FleetError
from provisioner.fleet import Pool
from provisioner.generations import group
from provisioner.hardware import CloudProfile, Gpu
from provisioner.nvidia import (
    DEVICE_PLUGIN_LABEL,
    MIG_CONFIG_LABEL,
    DevicePluginConfig,
    marks,
    read_isolation,
    read_mig,
)
from provisioner.observe import Observation
from provisioner.pooljson import value_json
from provisioner.pools import GENERATION_LABEL_KEY, GPU_TAINT, POOL_NODE_LABEL, NodeTemplate, PoolState
from provisioner.rules import PoolProblems


class Inexpressible(Exception):
    """The fleet language cannot say exactly what this pool is; the message says why."""


@dataclass(frozen=True)
class Imported:
    cluster: str
    pool: str
    entry: dict[str, Any] | None = None  # the fleet entry (the file's camelCase keys); None: skipped
    reason: str = ""  # why it was skipped
    updates: tuple[str, ...] = ()  # what adopting it changes in place, in words


@dataclass(frozen=True)
class ImportResult:
    imported: list[Imported]
    errors: list[str]  # clusters that could not be listed, names asked for that are not there

    @property
    def entries(self) -> list[Imported]:
        return [i for i in self.imported if i.entry is not None]

    @property
    def skipped(self) -> list[Imported]:
        return [i for i in self.imported if i.entry is None]


def import_pools(
    clusters: Sequence[CompiledCluster],
    observations: Sequence[Observation],
    pool_names: Sequence[str] = (),
    all_pools: bool = False,
) -> ImportResult:
    """An entry (or the reason there is none) for each unowned pool of `clusters`: GPU pools only
    unless `all_pools`, only those named `pool_names` where any are."""
    by_name = {o.target.name: o for o in observations}
    imported: list[Imported] = []
    errors: list[str] = []
    found: set[str] = set()
    for cluster in clusters:
        observation = by_name[cluster.name]
        if observation.error is not None:
            errors.append(f"{cluster.name}: {observation.error}")
            continue
        in_fleet = {p.pool.name: p.pool for p in cluster.pools}
        for state in _fleet_pools(observation.pools):
            if pool_names and state.name not in pool_names:
                continue
            if not (all_pools or pool_names or _gpu_pool(cluster.cloud, state)):
                continue
            found.add(state.name)
            listed = in_fleet.get(state.name)
            if listed is not None:
                why = (
                    "the fleet already names it with adopt: true; plan shows what adopting it does"
                    if listed.adopt
                    else "the fleet already has an entry of this name (plan shows it as a conflict); "
                    "mark that entry adopt: true, or remove it and import again"
                )
                imported.append(Imported(cluster.name, state.name, reason=why))
                continue
            try:
                entry, updates = exact_entry(cluster.cloud, state)
            except Inexpressible as why:
                imported.append(Imported(cluster.name, state.name, reason=str(why)))
            else:
                imported.append(Imported(cluster.name, state.name, entry, updates=updates))
    observed = [c for c in clusters if by_name[c.name].error is None]
    for name in pool_names:
        if name not in found and observed:
            where = ", ".join(c.name for c in observed)
            errors.append(f"no pool {name} that provisioner does not own in {where}")
    return ImportResult(imported, errors)


def _fleet_pools(listed: Sequence[PoolState]) -> list[PoolState]:
    """The unowned pools, one per fleet pool in name order: the newest generation, named as the
    fleet names the pool."""
    unowned = group(p for p in listed if not p.owned)
    return [dataclasses.replace(g.current, name=name) for name, g in sorted(unowned.items())]


def _gpu_pool(cloud: CloudProfile, state: PoolState) -> bool:
    """A GPU pool: its instance type is a GPU type, or (an edge pool, whose machines are the
    user's) it says it has GPUs or shares them."""
    if capacity(cloud.key, state).gpu_model is not None:
        return True
    return bool(state.edge and cloud.scheduler is not None and cloud.scheduler.label in state.label_map)


def exact_entry(cloud: CloudProfile, state: PoolState) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The fleet entry (with adopt: true) that compiles to `state`, or to a pool the cloud makes of
    it in place, with those updates in words; Inexpressible otherwise."""
    entry = describe(cloud, state)
    try:
        pool = Pool.model_validate(entry)
        setup = compile_pool(cloud, pool)
    except ValidationError as invalid:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in invalid.errors())
        raise Inexpressible(f"its settings are not a valid fleet entry: {problems}") from None
    except PoolProblems as broken:
        problems = "; ".join(f"{'.'.join(map(str, loc))}: {message}" for loc, message in broken.problems)
        raise Inexpressible(f"its settings break provisioner's {cloud.title} rules: {problems}") from None
    desired = desired_state(CompiledPool(pool, setup, cloud))
    differing = desired.differences(state)
    fixed = [name for name in differing if name not in cloud.in_place]
    if fixed:
        shown = "; ".join(
            f"{name}: pool {_show(name, getattr(state, name))}, entry {_show(name, getattr(desired, name))}"
            for name in fixed
        )
        raise Inexpressible(
            f"no fleet entry compiles to this pool, nor to one {cloud.title} makes of it in place ({shown})"
        )
    return entry, tuple(
        _update_words(name, getattr(state, name), getattr(desired, name)) for name in differing
    )


def _update_words(name: str, before: Any, after: Any) -> str:
    """An in-place update as a person says it: `taint nvidia.com/gpu=present:NoSchedule added`."""
    if name in ("taints", "labels"):
        kind = name[:-1]
        shown = str if name == "taints" else (lambda item: f"{item[0]}={item[1]}")
        words = [f"{kind} {shown(item)} added" for item in after if item not in before]
        words += [f"{kind} {shown(item)} removed" for item in before if item not in after]
        return ", ".join(words)
    if name == "autoscaler_hints":
        return f"autoscaler hints {_hints_words(before)} -> {_hints_words(after)}"
    return f"{name} {_show(name, before)} -> {_show(name, after)}"


def _hints_words(template: NodeTemplate | None) -> str:
    """The hints in a line: resources, then the labels and taints they carry."""
    if template is None:
        return "none"
    words = [f"{name}={count}" for name, count in template.resources]
    words += [f"label {key}={value}" for key, value in template.labels]
    words += [f"taint {taint}" for taint in template.taints]
    return ", ".join(words)


def describe(cloud: CloudProfile, state: PoolState) -> dict[str, Any]:
    """The fleet entry for `state`, read back as compile writes it; Inexpressible where a setting
    is one the tool does not write. `exact_entry` proves the entry exact."""
    entry: dict[str, Any] = {"name": state.name}
    gpu_spec: dict[str, Any] = {}
    if state.edge:
        gpu = _edge_gpu(cloud, state, gpu_spec)
    else:
        machine = hardware.load().instance_type(cloud.key, state.instance_type)
        if machine is None:
            raise Inexpressible(
                f"{state.instance_type or 'its instance type'} is not a GPU instance type provisioner "
                f"knows on {cloud.title}"
            )
        entry["instanceType"] = state.instance_type
        gpu = machine.gpu
        if machine.gpus is None:  # the pool chooses how many (GKE N1 machines)
            gpu_spec["count"] = state.gpus_per_node
    derived = _gpu_intent(cloud, gpu, state, gpu_spec)
    if gpu_spec:
        entry["gpu"] = gpu_spec
    entry |= _shape(cloud, state)
    # The tool's own markers are the compiler's to write, never an entry's (rules refuse them).
    markers = (POOL_NODE_LABEL, GENERATION_LABEL_KEY)
    own_labels = {k: v for k, v in state.labels if derived.get(k) != v and k not in markers}
    if own_labels:
        entry["labels"] = own_labels
    # A pool without the GPU taint gets it when adopted (an in-place update on every cloud).
    own_taints = [str(t) for t in state.taints if t != GPU_TAINT]
    if own_taints:
        entry["taints"] = own_taints
    entry["adopt"] = True
    return entry


def _gpu_intent(cloud: CloudProfile, gpu: Gpu, state: PoolState, gpu_spec: dict[str, Any]) -> dict[str, str]:
    """Fill in `gpu_spec`'s MIG and sharing from the pool; the labels that say them (the tool's
    own, left out of the entry's labels)."""
    labels = state.label_map
    mig = read_mig(cloud, gpu, state)
    if cloud.mig_via == "operator-label" and MIG_CONFIG_LABEL in labels and mig is None:
        raise Inexpressible(
            f"{MIG_CONFIG_LABEL}={labels[MIG_CONFIG_LABEL]} names a MIG layout provisioner does not "
            f"write (it writes all-<profile>, one profile on every GPU, with a profile of the {gpu.name})"
        )
    if cloud.mig_via == "pool-field" and state.mig_setting is not None and mig is None:
        raise Inexpressible(f"MIG setting {state.mig_setting} is not a MIG profile of the {gpu.name}")
    if mig is not None:
        gpu_spec["mig"] = mig.name
    sharing, replicas, isolation, placement = _sharing(cloud, state)
    shared = {"sharing": sharing if sharing != "exclusive" else None, "replicas": replicas}
    shared |= {"isolation": isolation, "placement": placement}
    gpu_spec |= {key: value for key, value in shared.items() if value is not None}
    derived = marks(cloud, mig, sharing, replicas, isolation=isolation, placement=placement).labels
    if state.edge and cloud.edge_labels is not None:
        derived |= {key: labels.get(key, "") for key in cloud.edge_labels.values()}
    return derived


def _shape(cloud: CloudProfile, state: PoolState) -> dict[str, Any]:
    """nodes, zones, edge, spot and diskSizeGb as the entry spells them, defaults left out (zones
    where a pool that names none follows the cluster's: the entry then follows them too)."""
    if state.edge:
        return {"edge": True}
    scaling = state.scaling
    shape: dict[str, Any] = {
        "nodes": {"min": scaling.min, "max": scaling.max} if scaling.autoscaling else {"count": scaling.min}
    }
    if state.zones and cloud.zones is not None and not cloud.zones.follows_cluster:
        shape["zones"] = list(state.zones)
    if state.spot:
        shape["spot"] = True
    if state.disk_size_gb is not None:
        shape["diskSizeGb"] = state.disk_size_gb
    return shape


def _edge_gpu(cloud: CloudProfile, state: PoolState, gpu_spec: dict[str, Any]) -> Gpu:
    """An edge pool's GPU, from the labels the tool names its machines' GPUs with."""
    assert cloud.edge_labels is not None
    model_label, count_label = cloud.edge_labels["model"], cloud.edge_labels["count"]
    model, count = state.label_map.get(model_label), state.label_map.get(count_label)
    if model is None or count is None:
        raise Inexpressible(
            f"an edge pool does not say which GPUs its machines carry: provisioner names them with the "
            f"pool labels {model_label} and {count_label}; add both to the pool, then import it"
        )
    gpu = hardware.load().gpus.get(model)
    if gpu is None or not count.isdigit():
        raise Inexpressible(
            f"{model_label}={model} and {count_label}={count} do not name a GPU provisioner knows"
        )
    gpu_spec["model"], gpu_spec["count"] = model, int(count)
    return gpu


def _sharing(cloud: CloudProfile, state: PoolState) -> tuple[Any, int | None, str | None, str | None]:
    """(sharing, replicas, isolation, placement) as the pool's fields and labels hold them."""
    labels = state.label_map
    scheduler = cloud.scheduler
    if scheduler is not None:
        value = labels.get(scheduler.label)
        if value is None:
            raise Inexpressible(
                f"it has no {scheduler.label} label, which provisioner sets on every {cloud.title} GPU "
                f"pool ({scheduler.label}={scheduler.exclusive} for whole GPUs); add it to the pool, "
                "then import it"
            )
        isolation = read_isolation(cloud, state)
        if isolation is None and value != scheduler.exclusive:
            written = ", ".join([scheduler.exclusive, *scheduler.isolation.values()])
            raise Inexpressible(
                f"{scheduler.label}={value} is not a mode provisioner writes (it writes {written})"
            )
        if isolation is None:
            return "exclusive", None, None, None
        placement = labels.get(scheduler.placement_label)
        if placement is not None and placement not in ("binpack", "spread"):
            raise Inexpressible(f"{scheduler.placement_label}={placement} is neither binpack nor spread")
        return "memory", None, isolation, placement
    if cloud.sharing_via == "pool-field":
        if state.sharing is None:
            return "exclusive", None, None, None
        modes = {(spec.strategy or mode): mode for mode, spec in cloud.sharing_modes.items()}
        mode = modes.get(state.sharing.strategy)
        if mode is None:
            raise Inexpressible(f"GPU sharing strategy {state.sharing.strategy} is not one provisioner sets")
        return mode, state.sharing.clients_per_gpu, None, None
    key = labels.get(DEVICE_PLUGIN_LABEL)
    if key is None:
        return "exclusive", None, None, None
    config = DevicePluginConfig.from_key(key)
    if config is None:
        raise Inexpressible(
            f"{DEVICE_PLUGIN_LABEL}={key} names a device-plugin config provisioner does not write "
            "(it writes time-sliced-<replicas> and mps-<replicas>, each in the ConfigMap `provisioner "
            "render` prints)"
        )
    return config.mode, config.replicas, None, None


def _show(name: str, value: Any) -> str:
    shown = value_json(name, value)
    return shown if isinstance(shown, str) else str(shown).replace("'", "")


# --- the fleet file -------------------------------------------------------------------------


def entries_yaml(result: ImportResult) -> str:
    """The entries as YAML, a mapping of cluster name to the pools to add under its `pools:`."""
    by_cluster: dict[str, list[dict[str, Any]]] = {}
    for found in result.entries:
        by_cluster.setdefault(found.cluster, []).append(found.entry)  # type: ignore[arg-type]
    updates = {(found.cluster, found.entry["name"]): found.updates for found in result.entries}  # type: ignore[index]
    text = ""
    for cluster, entries in by_cluster.items():
        text += f"{cluster}:\n"
        for entry in entries:
            changes = updates[(cluster, entry["name"])]
            if changes:  # said beside the entry, before the user adopts it
                text += f"  # adopting it updates it in place: {'; '.join(changes)}\n"
            text += _items([entry], indent=2, flow=False)
    return text


def write_entries(path: str, text: str, result: ImportResult) -> str:
    """`text` (the fleet file's) with the entries added to their clusters' pool lists, every other
    byte as it was; FleetError where the result would not compile."""
    from ruamel.yaml import YAML

    document = YAML(typ="rt").load(text)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    insertions: list[tuple[int, str]] = []
    by_cluster: dict[str, list[dict[str, Any]]] = {}
    for found in result.entries:
        by_cluster.setdefault(found.cluster, []).append(found.entry)  # type: ignore[arg-type]
    for cluster in document["clusters"]:
        entries = by_cluster.get(cluster.get("name"))
        if entries:
            insertions.append(_insertion(path, lines, cluster, entries))
    for at, block in sorted(insertions, reverse=True):
        lines[at:at] = [block]
    written = "".join(lines)
    compile_file(path, written)  # FleetError: nothing is written
    return written


def _insertion(path: str, lines: list[str], cluster: Any, entries: list[dict[str, Any]]) -> tuple[int, str]:
    """Where the cluster's new pool entries go (a line index) and their text, styled as the
    entries before them (flow mappings on one line, or block mappings)."""
    pools = cluster.get("pools")
    if pools is None:  # no pools: the key goes after the cluster's last line
        key_line, key_col = cluster.lc.key("name")
        end = _end_of_block(lines, key_line + 1, key_col - 1)
        return end, " " * key_col + "pools:\n" + _items(entries, key_col + 2, flow=False)
    if not hasattr(pools, "lc") or pools.fa.flow_style() or not pools:
        line, _ = cluster.lc.key("pools")
        message = (
            "is written inline ([...]); write it as a block list (one `- ` item a line) for import "
            "--write, or add the entries `provisioner import` prints by hand"
        )
        raise FleetError([Diagnostic(path, line + 1, f"clusters[{cluster.get('name')}].pools", message)])
    last_line, last_col = pools.lc.item(len(pools) - 1)
    dash = lines[last_line].rfind("-", 0, last_col)
    last = pools[len(pools) - 1]
    flow = bool(hasattr(last, "fa") and last.fa.flow_style())
    return _end_of_block(lines, last_line + 1, dash), _items(entries, dash, flow)


def _end_of_block(lines: list[str], start: int, column: int) -> int:
    """The index of the first line from `start` that is indented no deeper than `column` (blank
    lines and comments at that depth belong to what follows), trailing blank lines left out."""
    end = start
    for index in range(start, len(lines)):
        stripped = lines[index].strip()
        indent = len(lines[index]) - len(lines[index].lstrip())
        if stripped and indent <= column:
            break
        if stripped:
            end = index + 1
    return end


def _items(entries: list[dict[str, Any]], indent: int, flow: bool) -> str:
    """The entries as YAML list items at `indent`: nested mappings and lists inline."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import SingleQuotedScalarString

    def inline(value: Any) -> Any:
        if isinstance(value, dict):
            mapping = CommentedMap(value)
            mapping.fa.set_flow_style()
            return mapping
        if isinstance(value, list):  # taints, key=value:Effect: quoted, as ':' ends a plain scalar inline
            items = CommentedSeq(SingleQuotedScalarString(item) for item in value)
            items.fa.set_flow_style()
            return items
        return value

    items = []
    for entry in entries:
        mapping = CommentedMap({key: inline(value) for key, value in entry.items()})
        if flow:
            mapping.fa.set_flow_style()
        items.append(mapping)
    yaml = YAML()
    yaml.indent(mapping=2, sequence=2, offset=0)
    yaml.width = 4096  # one entry, one line (flow), as the fleet's own
    out = io.StringIO()
    yaml.dump(items, out)
    return "".join(" " * indent + line if line.strip() else line for line in out.getvalue().splitlines(True))
