"""Tables and JSON for what commands print: one place, so --json and the table agree."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from provisioner.actions import ACTIONS, ADOPT
from provisioner.apply import ApplyResult, Outcome
from provisioner.capacity import capacity, sharing_text
from provisioner.errors import CloudError, InvalidOption
from provisioner.kube.configmap import NO_KUBE_HINT, ConfigMapPlan
from provisioner.observe import Observation
from provisioner.plan import Change, Plan
from provisioner.pooljson import observed_json, value_json
from provisioner.pools import CLOUD_DEFAULT_FIELDS


def observations_json(observations: Sequence[Observation]) -> list[dict[str, Any]]:
    return [
        {
            "cluster": o.target.name,
            "cloud": o.target.cloud,
            "error": str(o.error) if o.error else None,
            "pools": [observed_json(p, capacity(o.target.cloud, p), o.target.cloud) for p in o.pools],
        }
        for o in observations
    ]


def observations_table(observations: Sequence[Observation]) -> Table:
    table = Table(title="Pools now", title_justify="left")
    for column in ("cluster", "pool", "instance type", "GPUs", "MIG", "sharing", "nodes", "spot", "owned"):
        table.add_column(column)
    # The clouds' values as Text: a string cell is read as markup, and rich.markup.escape doubles
    # a trailing backslash.
    for observation in observations:
        if observation.error is not None:
            table.add_row(Text(observation.target.name), Text("listing failed", style="red"), *[""] * 7)
        for pool in observation.pools:
            read = capacity(observation.target.cloud, pool)
            table.add_row(
                Text(observation.target.name),
                Text(pool.name),
                Text(pool.instance_type),
                str(pool.gpus_per_node or ""),
                Text(read.mig_profile or ""),
                Text(sharing_text(read.sharing, read.replicas, read.isolation)),
                str(value_json("scaling", pool.scaling)),
                "yes" if pool.spot else "",
                "yes" if pool.owned else "[dim]no[/]",
            )
    return table


def plan_text(plan: Plan) -> Text:
    """A plan as Terraform users read one: per cluster, per pool, each field before -> after. Made
    from Plan.view(), the data `plan --json` prints, so the two never disagree."""
    view = plan.view()
    lines = Text()
    # The ConfigMap a cluster needs is planned beside its pools, and shown beside them.
    for cluster, planned in zip(view["clusters"], plan.clusters, strict=True):
        config_map = planned.configmap
        showing = config_map is not None and config_map.worth_showing
        if not (
            cluster["changes"]
            or cluster["in_progress"]
            or cluster["conflicts"]
            or cluster["error"]
            or showing
        ):
            continue
        _cluster_lines(lines, cluster, config_map)
    unobserved = [c["cluster"] for c in view["clusters"] if c["error"]]
    observed = len(view["clusters"]) - len(unobserved)
    summary = view["summary"]
    config_maps = sum(c.pending for c in plan.config_maps)
    if any(summary.values()) or config_maps:
        counts = ", ".join(f"{n} to {action}" for action, n in _shown_counts(summary))
        lines.append(f"Plan: {counts}.\n", style="bold")
        if config_maps:
            what = _count(config_maps, "device-plugin ConfigMap")
            lines.append(f"Kubernetes: {what} to apply.\n", style="bold")
    elif not unobserved:
        lines.append("No changes. The clusters match the fleet.\n", style="green")
    elif observed:
        lines.append(f"No changes in the {_count(observed, 'cluster')} observed.\n")
    if unobserved:
        # Never a match claimed for a cluster nobody saw: nothing is planned for it either.
        names = ", ".join(unobserved)
        lines.append(
            f"{_count(len(unobserved), 'cluster')} could not be observed, so nothing is planned "
            f"for {'it' if len(unobserved) == 1 else 'them'}: {names}.\n",
            style="red",
        )
    return lines


def _cluster_lines(lines: Text, cluster: dict[str, Any], config_map: ConfigMapPlan | None) -> None:
    lines.append(cluster["cluster"], style="bold").append(f" ({cluster['cloud']})\n")
    if cluster["error"]:
        lines.append(f"  could not observe: {cluster['error']}\n", style="red")
    for pool in cluster["in_progress"]:
        lines.append(f"  … {pool}: an operation is still running; apply waits for it\n", style="dim")
    for conflict in cluster["conflicts"]:
        lines.append(f"  ! {conflict}\n", style="red")
    if config_map is not None:
        _config_map_lines(lines, config_map)
    for change in cluster["changes"]:
        _change_lines(lines, change)
    for note in cluster["notes"]:
        lines.append(f"  note: {note['pool']}: {note['note']}\n", style="yellow")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _shown_counts(counts: dict[str, int]) -> list[tuple[str, int]]:
    """The counts a summary line names: adoptions first where there are any (as Terraform names
    imports), then the four actions always."""
    adopted = counts.get(ADOPT.name, 0)
    rest = [(action, n) for action, n in counts.items() if action != ADOPT.name]
    return [(ADOPT.name, adopted), *rest] if adopted else rest


_ACTION_NAMED = {action.name: action for action in ACTIONS}


def _change_lines(lines: Text, change: dict[str, Any]) -> None:
    """One change as Change.json() spells it: the pool, what happens to it, and its fields."""
    action = _ACTION_NAMED[change["action"]]
    lines.append(f"  {action.sigil} ", style=action.style).append(change["pool"], style="bold")
    lines.append(f" {action.phrase}")
    then = _ACTION_NAMED.get(change.get("then", ""))
    if then is not None:  # an adoption the fleet entry changes: what follows is shown with it
        lines.append(", then ").append(
            f"{then.done}{' in place' if then.name == 'update' else ''}", then.style
        )
    elif action is ADOPT:
        lines.append(" (only the ownership marker is added: its nodes and workloads stay)")
    lines.append(f" ({change['reason']})\n" if change.get("reason") else "\n")
    _rollout_lines(lines, change)
    for f in change["fields"]:
        lines.append(f"      {f['field']}: ")
        if action.shows == "after":
            lines.append(_show(f["after"], f["field"]))
        elif action.shows == "before":
            lines.append(_show(f["before"], f["field"]), style="red")
        else:
            lines.append(_show(f["before"], f["field"])).append(" -> ").append(_show(f["after"], f["field"]))
        if f["forces_replacement"]:
            lines.append("  # forces replacement", style="magenta")
        lines.append("\n")


def _rollout_lines(lines: Text, change: dict[str, Any]) -> None:
    """How a replacement or a node-reconfiguring update will run, before the user says yes."""
    order, retires, made = change.get("order"), ", ".join(change.get("retires", [])), change.get("cloud_name")
    if order == "create-first" and change.get("resumes"):
        lines.append(
            f"      # resumes: {made or change['pool']} is up; drains {retires}, then deletes it\n", "cyan"
        )
    elif order == "create-first":
        lines.append(
            f"      # create-first: creates {made} beside it, waits for its nodes to give their slices, "
            f"drains {retires} through the Eviction API (PodDisruptionBudgets honoured), then deletes it\n",
            "cyan",
        )
    elif order == "delete-first":
        lines.append(f"      # delete-first: deletes {retires}, then creates it anew\n", "cyan")
    if change.get("keeps"):
        lines.append(f"      # keeps meanwhile: {change['keeps']}\n", "cyan")
    if change.get("rollout") == "node-by-node":
        labels = ", ".join(change["node_labels"])
        lines.append(
            f"      ~ reconfigure (node by node, drains GPU pods): {labels} changes on live nodes; each is "
            "cordoned, drained, relabelled and waited for before the next\n",
            "yellow",
        )


def _config_map_lines(lines: Text, config_map: ConfigMapPlan) -> None:
    """The ConfigMap as a pool change is shown: `~ configmap ns/name: keys time-sliced-10 added`."""
    if config_map.error is not None:
        needed = ", ".join(config_map.needed)
        lines.append(f"  ! cannot reach the Kubernetes API: {config_map.error}\n", style="red")
        if needed:
            lines.append(
                f"    pools whose label names {needed} will not be created or updated; {NO_KUBE_HINT}\n",
                style="red",
            )
        return
    for conflict in config_map.conflicts:
        lines.append(f"  ! {conflict}\n", style="red")
    for key, why in config_map.blocked.items():
        blocked = f"    pools whose label names {key} will not be created or updated: {why}\n"
        lines.append(blocked, style="red")
    if config_map.pending:
        sigil, style = ("+", "green") if config_map.action == "create" else ("~", "yellow")
        lines.append(f"  {sigil} ", style=style).append(f"configmap {config_map.path}", style="bold")
        separator = " " if config_map.action == "create" else ": "
        lines.append(f"{separator}{config_map.summary()}\n")


def _show(value: Any, field: str) -> str:
    if value is None:  # unset: the cloud chooses, except where nothing is the value (no hints)
        return "(cloud default)" if field in CLOUD_DEFAULT_FIELDS else "(none)"
    return value if isinstance(value, str) else json.dumps(value)


HEARTBEAT_ENV = "PROVISIONER_PROGRESS_INTERVAL"
HEARTBEAT_SECONDS = 60.0  # as often as `terraform apply` says "Still creating..." in a log


def heartbeat_seconds() -> float:
    """The seconds between "still running" lines where progress goes to a log: HEARTBEAT_ENV, or
    HEARTBEAT_SECONDS. InvalidOption unless a positive number."""
    value = os.environ.get(HEARTBEAT_ENV)
    if value is None or not value.strip():
        return HEARTBEAT_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise InvalidOption(HEARTBEAT_ENV, f"{value[:40]!r} is not a positive number of seconds")
    return seconds


class ProgressReporter:
    """Live progress of an apply: a line per pool operation, with its retries and outcome. On a
    terminal rich redraws those lines in place. Where nothing is redrawn (a pipe, a file, a CI or
    CronJob log) each start, retry and outcome is printed, and flushed, when it happens, and every
    `heartbeat` seconds a line names the operations still running, as Terraform's "Still creating"."""

    def __init__(self, console: Console, heartbeat: float = HEARTBEAT_SECONDS):
        self.progress = Progress(
            SpinnerColumn(finished_text=""),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
        )
        self._tasks: dict[tuple[str, str], TaskID] = {}
        # rich's Live redraws only there; elsewhere it prints its table once, when it stops.
        self.redrawn = console.is_terminal and not console.is_dumb_terminal
        self._heartbeat = heartbeat
        self._running: dict[tuple[str, str], tuple[str, float]] = {}  # what runs, since when
        self._lock = threading.Lock()  # changes are reported from each cluster's thread
        self._stopped = threading.Event()
        self._beating: threading.Thread | None = None
        self._began = time.monotonic()

    def __enter__(self) -> ProgressReporter:
        self._began = time.monotonic()
        if self.redrawn:
            self.progress.start()
        else:
            self._beating = threading.Thread(target=self._beat, name="progress-heartbeat", daemon=True)
            self._beating.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._beating is not None:
            self._stopped.set()
            self._beating.join()
        if self.redrawn:
            self.progress.stop()

    def cluster_waiting(self, cluster: str, why: str) -> None:
        self.progress.console.print(Text(f"{cluster}: {why}", style="dim"))

    def change_started(self, change: Change) -> None:
        label = f"{_where(change)}: {change.action.doing}"
        self._tasks[(change.cluster, change.pool)] = self.progress.add_task(label, total=1)
        with self._lock:
            self._running[(change.cluster, change.pool)] = (
                f"{_plain(change)} {change.action}",
                time.monotonic(),
            )
        self._log(Text(f"{_plain(change)}: {change.action.doing}…"))

    def change_retrying(self, change: Change, error: CloudError, delay: float) -> None:
        task = self._tasks[(change.cluster, change.pool)]
        why = escape(retry_reason(error))
        label = f"{_where(change)}: {change.action.doing} [yellow](retrying in {delay:.1f} s: {why})[/]"
        self.progress.update(task, description=label)
        line = Text(f"{_plain(change)}: {change.action.doing} ")
        self._log(line.append(f"(retrying in {delay:.1f} s: {retry_reason(error)})", style="yellow"))

    def change_progress(self, change: Change, message: str) -> None:
        task = self._tasks[(change.cluster, change.pool)]
        self.progress.update(task, description=f"{_where(change)}: {change.action.doing}: {escape(message)}")
        self._log(Text(f"{_plain(change)}: {message}"))

    def change_finished(self, outcome: Outcome) -> None:
        task = self._tasks[(outcome.cluster, outcome.pool)]
        if outcome.done:
            label = f"[green]✓[/] {_where(outcome)}: {outcome.action.done}"
        else:
            label = f"[red]✗[/] {_where(outcome)}: {outcome.action} failed"
        self.progress.update(task, description=label, completed=1)
        with self._lock:
            _, began = self._running.pop((outcome.cluster, outcome.pool), ("", time.monotonic()))
        took = f" ({duration(time.monotonic() - began)})"
        if outcome.done:
            self._log(Text("✓ ", style="green").append(f"{_plain(outcome)}: {outcome.action.done}{took}"))
        else:
            self._log(Text("✗ ", style="red").append(f"{_plain(outcome)}: {outcome.action} failed{took}"))

    def _log(self, line: Text) -> None:
        """A line for a log, where the live display does not redraw: printed (and flushed) now."""
        if not self.redrawn:
            self.progress.console.print(line)

    def _beat(self) -> None:
        while not self._stopped.wait(self._heartbeat):
            with self._lock:
                running = [what for what, _ in self._running.values()]
            if running:
                took = duration(time.monotonic() - self._began)
                self._log(Text(f"still running ({took}): {', '.join(running)}", style="dim"))


class CountHeartbeat:
    """Progress of a long run over many clusters (sync): every `heartbeat` seconds, on stderr, a
    line of how many are done, so a CronJob's or CI's log shows a nightly sync still moving."""

    def __init__(self, console: Console, doing: str, total: int, heartbeat: float = HEARTBEAT_SECONDS):
        self._console = console
        self._doing = doing
        self._total = total
        self._heartbeat = heartbeat
        self._done = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._beating = threading.Thread(target=self._beat, name="count-heartbeat", daemon=True)
        self._began = time.monotonic()

    def __enter__(self) -> CountHeartbeat:
        self._began = time.monotonic()
        self._beating.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._beating.join()

    def tick(self) -> None:
        with self._lock:
            self._done += 1

    def _beat(self) -> None:
        while not self._stopped.wait(self._heartbeat):
            with self._lock:
                done = self._done
            took = duration(time.monotonic() - self._began)
            self._console.print(
                Text(f"still {self._doing} ({took}): {done} of {self._total} clusters done", style="dim")
            )


def duration(seconds: float) -> str:
    """Elapsed time as Terraform logs it: 45s, 2m0s, 1h3m0s."""
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


_RETRIED = {
    "Unavailable": "cloud unreachable or failing",
    "Throttled": "throttled",
    "Busy": "another operation runs on the cluster",
}


def retry_reason(error: CloudError, limit: int = 160) -> str:
    """What is retried and why, on one line: the kind of wait, then the cloud's own words."""
    words = " ".join(str(error).split())
    words = words if len(words) <= limit else words[: limit - 1] + "…"
    return f"{_RETRIED.get(type(error).__name__, type(error).__name__)}: {words}"


def _where(change: Change | Outcome) -> str:
    """cluster/pool for a progress line, whose text rich reads as markup: escaped."""
    return escape(_plain(change))


def _plain(change: Change | Outcome) -> str:
    """cluster/pool for a line printed as Text, which rich never reads as markup."""
    return f"{change.cluster}/{change.pool}"


def apply_summary(result: ApplyResult) -> Text:
    lines = Text()
    for config_map in result.config_maps:
        style = "red" if config_map.failed else ("green" if config_map.message.startswith("applied") else "")
        line = f"{config_map.cluster}: configmap {config_map.path}: {config_map.message}\n"
        lines.append(line, style=style)
    # An adoption then updated counts as both, as the plan's header counts it.
    counts = {action.name: sum(action in (o.action, o.then) for o in result.done) for action in ACTIONS}
    done = ", ".join(f"{n} {_ACTION_NAMED[action].done}" for action, n in _shown_counts(counts))
    if result.ok:
        lines.append(f"Apply complete: {done}.\n", style="green")
        return lines
    # Pools are counted as the header counts them; the ConfigMaps not applied follow the pools.
    failed_maps = sum(c.failed for c in result.config_maps)
    missing = (
        f"{len(result.not_done)} not done"
        if result.not_done
        else f"{_count(failed_maps, 'device-plugin ConfigMap')} not applied"
    )
    lines.append(f"Apply incomplete: {done}; {missing}:\n", style="red")
    for outcome in result.not_done:
        lines.append(f"  {outcome.cluster}/{outcome.pool} ({outcome.action}): {outcome.message}\n")
    for config_map in result.config_maps:
        if config_map.failed:
            lines.append(f"  {config_map.cluster}: configmap {config_map.path}: {config_map.message}\n")
    lines.append("Run apply again to finish: it picks up where this one stopped.\n")
    return lines
