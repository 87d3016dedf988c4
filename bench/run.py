"""`make bench`: run every benchmark against the sandbox, write bench/results.json and
bench/results.md, and put the table in the README between its bench markers.

`python -m bench.run NAME...` runs only those benchmarks and replaces only their figures.
Each benchmark runs in a fresh interpreter: what one leaves behind (threads, garbage, warm
caches) must not weigh on the next one's figures."""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def benchmarks() -> dict[str, object]:
    from bench import (
        bench_ack,
        bench_apply,
        bench_autoscale,
        bench_compile,
        bench_fleet,
        bench_kube,
        bench_listing,
        bench_place,
        bench_plan,
        bench_plan_cpu,
        bench_replace,
        bench_serve,
        bench_startup,
        bench_sync,
    )

    return {
        "listing": bench_listing,  # the client's CPU per cluster listing, per cloud
        "plan": bench_plan,
        "plan-cpu": bench_plan_cpu,  # the whole plan command's CPU, with and without ConfigMap reads
        "apply": bench_apply,
        "sync": bench_sync,
        "compile": bench_compile,
        "startup": bench_startup,
        "place": bench_place,
        "serve": bench_serve,
        "ack": bench_ack,  # plan, sync and apply on ACK clusters, through its driver and emulator
        "kube": bench_kube,  # verify and inspect through the clusters' Kubernetes APIs
        "autoscale": bench_autoscale,  # a pending pod to its scale-up, in the sandbox's autoscaler
        "replace": bench_replace,  # every pool of 10 clusters replaced: wall time and slices kept
        "fleet": bench_fleet,  # 3,000 clusters inside the clouds' quotas; whole plan commands
    }


# Issue 17's goals: (figure name starts with, baseline it is judged beside, the most allowed of
# value / baseline, or of value where the baseline is a floor of 1, and how the goal reads).
GOALS: list[tuple[str, str, float, str]] = [
    ("plan, 300 clusters", "floor: one round trip", 3.0, "<= 3 round trips"),
    ("whole `provisioner plan`, 300 clusters, ConfigMap reads on", "goal", 1.0, "<= 4 CPU s"),  # issue 30
    ("sync, 300 clusters", "floor:", 1.5, "<= 1.5 x floor"),
    ("apply, 3 pools", "floor:", 3.4 / 3, "<= 3.4 operations"),
    ("`provisioner apply` process", "floor:", 4 / 3, "<= 4 operations"),
    ("loading the 10,000-pool", "goal", 1.0, "<= 1 CPU s"),
    ("compile + diff", "goal", 1.0, "<= 1 CPU s"),
    ("place over", "goal", 1.0, "<= 50 ms"),
    ("verify --json, 100 clusters", "floor: one round trip", 3.0, "<= 3 round trips"),
    ("verify --json on DRA pools, 100 clusters", "floor: one round trip", 3.0, "<= 3 round trips"),
    ("inspect --json, 100 clusters", "floor: one round trip", 3.0, "<= 3 round trips"),
    # Issue 30's.
    ("plan, 3,000 clusters", "floor:", 1.2, "<= 1.2 x the quota floor"),
    ("429s received", "goal", 0.0, "none"),
    ("peak memory of the plan, 3,000", "goal", 1.0, "<= 600 MB"),
    ("sync, 3,000 clusters", "floor:", 1.3, "<= 1.3 x the quota floor"),
    ("`provisioner plan`, 30 clusters", "floor:", 2.5 / 2, "<= 2.5 round trips"),
]


def goal(figure: dict[str, object]) -> str:
    """Where a figure stands against its goal in issue 17, or "" where it has none."""
    for prefix, beside, most, text in GOALS:
        if str(figure["name"]).startswith(prefix) and str(figure["baseline_name"]).startswith(beside):
            value, baseline = float(figure["value"]), float(figure["baseline"])  # type: ignore[arg-type]
            if beside.startswith("floor") and value < baseline * 0.9:  # a tenth of drift allowed
                return f"{text}: below its floor, so not a measurement"
            times = value / baseline if baseline else value  # beside 0 (none wanted): the value itself
            return f"{text}: {'met' if times <= most + 1e-9 else 'not met'}"
    return ""


# What each figure means, by the start of its name: one sentence each, under the table.
MEANINGS: list[tuple[str, str]] = [
    (
        "plan, 3,000 clusters",
        "wall time of the whole `provisioner plan` command against the sandbox with the clouds' quotas "
        "on, beside the time those quotas need for the requests it made (each bucket's burst, then its "
        "refill), all buckets at once",
    ),
    ("429s received", "throttling answers the quota-enforcing sandbox gave that plan, over every cloud"),
    (
        "peak memory of the plan",
        "the most memory `provisioner plan` and its helper processes held at once for those clusters"
        " (the sum of their PSS: a page shared since the fork counted once)",
    ),
    (
        "clusters whose Kubernetes API the sync could not read",
        "clusters whose Kubernetes API reads failed or timed out during that sync (`sync --json`'s "
        "allocation_stale; all 3,000 behind the sandbox's one API server): their allocation figures "
        "were not read, and any stored before are kept, marked stale",
    ),
    (
        "sync, 3,000 clusters",
        "wall time from starting `sync --shard I/4` for every I at once to the last one's end, into one "
        "PostgreSQL catalog, beside the quotas' time for the requests they made",
    ),
    (
        "`provisioner plan`, 30 clusters on 4 clouds, 1000 to",
        "wall time of the whole command at 2 s latency minus the same at 1 s, in round trips: those "
        "made one after another, where at 200 ms the start-up's CPU hides some of them (a control, "
        "no goal)",
    ),
    (
        "`provisioner plan`, 30 clusters",
        "wall time of the whole `provisioner plan` command at that latency minus the same at none, in "
        "round trips",
    ),
    (
        "plan,",
        "wall time of observing every cluster's pools (one listing per cluster, all at once), "
        "in API round trips",
    ),
    (
        "whole `provisioner plan`",
        "CPU seconds of the whole `provisioner plan FLEET --json` command and the helpers it forks, "
        "each AKS cluster's device-plugin ConfigMap read through its kubeconfig context (all "
        "clusters behind one API server), no latency",
    ),
    (
        "client CPU per listing",
        "CPU the calling thread spends listing one cluster's pools through the cloud's SDK, beside "
        "one bare HTTP request",
    ),
    ("apply,", "wall time of creating the pools, in cloud operations (each cluster runs one at a time)"),
    (
        "`provisioner apply` process",
        "wall time of the whole `provisioner apply FLEET --auto-approve` command, from its start to its "
        "exit (start-up, reading the fleet, planning, locks and ConfigMap checks with the pools' "
        "creation), in cloud operations",
    ),
    (
        "sync,",
        "wall time of listing every cluster and writing it to the catalog, beside the same "
        "listings with nothing written, measured in the same run",
    ),
    ("sync rows", "pool rows written per second while sync runs, beside the store writing them alone"),
    ("compile + diff", "CPU time to compile a 10,000-pool fleet and diff it against the clouds"),
    ("peak memory", "the process's peak resident memory for the 10,000-pool run"),
    ("loading the", "CPU time to parse and validate the 10,000-pool fleet file, diagnostics as for any file"),
    ("start-up", "wall time of a fresh process, beside Python starting and doing nothing"),
    ("cloud SDK modules", "cloud SDK modules imported by commands that never talk to a cloud"),
    (
        "place over a catalog of 10,000 pools, the first request after",
        "wall time of a placement request that finds the catalog changed: it reads and indexes the "
        "live pools again",
    ),
    (
        "place over a catalog of 10,000 pools with allocation",
        "wall time of one placement request where the catalog also holds each pool's free slices, "
        "so place ranks free before growable pools",
    ),
    ("place over", "wall time of one placement request against the catalog, the process already started"),
    (
        "autoscaler, a pending pod on a pool at zero to its scale-up",
        "wall time from a pod created through the Kubernetes API to the sandbox autoscaler's "
        "TriggeredScaleUp for a pool at zero, read from the hints apply wrote",
    ),
    (
        "autoscaler, a pending pod on a pool at zero to Running",
        "wall time from the same pod's creation to Running on the node the autoscaler added",
    ),
    (
        "verify --json on DRA pools",
        "wall time of `verify --json` reading every cluster's nodes, device-plugin ConfigMap and the "
        "ResourceSlices NVIDIA's DRA driver publishes (one per GPU node) through its kubeconfig "
        "context, in API round trips",
    ),
    (
        "verify --json",
        "wall time of `verify --json` reading every cluster's nodes and device-plugin ConfigMap "
        "through its kubeconfig context, in API round trips",
    ),
    (
        "inspect --json",
        "wall time of `inspect FLEET --json` reading every cluster's nodes and pods through its "
        "kubeconfig context, in API round trips",
    ),
    (
        "`provisioner apply` replacing",
        "wall time of the whole `provisioner apply FLEET --auto-approve` command replacing every pool "
        "create-first (new pool, its nodes Ready, the old drained through the Eviction API under a "
        "budget of one pod, then deleted), in cloud operations; the floor counts each drain as one "
        "scan of the sandbox's cluster components per pod",
    ),
    (
        "`provisioner apply` delete-first",
        "wall time of the same command replacing every pool delete-first (`replace: delete-first`), "
        "in cloud operations",
    ),
    (
        "lowest share of a pool's slices",
        "the pool that fell the furthest while apply replaced it: allocatable GPUs of its Ready, "
        "uncordoned nodes (label provisioner.io/pool), sampled through each cluster's Kubernetes API, "
        "over the same before apply began; beside the same figure for delete-first",
    ),
    (
        "catalog serve",
        "/api/pools under 50 concurrent clients, beside the same server sending a static "
        "file of the same rows",
    ),
]


def meanings(figures: list[dict[str, object]]) -> str:
    """One line per figure: what it measures and, where issue 17 set one, where it stands."""
    by_name: dict[str, tuple[dict[str, object], str]] = {}
    for f in figures:
        name, stands = str(f["name"]), goal(f)
        if name not in by_name or stands:
            by_name[name] = (f, stands or by_name.get(name, (f, ""))[1])
    lines = []
    for name, (f, stands) in by_name.items():
        meaning = next((m for prefix, m in MEANINGS if name.startswith(prefix)), "")
        against = f" Goal {stands}." if stands else ""
        lines.append(f"- **{name}** ({f['value']:g} {f['unit']}): {meaning}.{against}")
    return "\n".join(lines) + "\n"


def table(figures: list[dict[str, object]]) -> str:
    rows = ["| figure | provisioner | beside | its value | ratio | goal |", "|---|---|---|---|---|---|"]
    for f in figures:
        ratio = "-" if f["ratio"] is None else f"{f['ratio']:g}"
        rows.append(
            f"| {f['name']} | {f['value']:g} {f['unit']} | {f['baseline_name']} "
            f"| {f['baseline']:g} {f['unit']} | {ratio} | {goal(f)} |"
        )
    return "\n".join(rows) + "\n"


def publish(document: dict[str, object]) -> str:
    """Write results.md and the README's table from a results.json document."""
    markdown = table(document["figures"])  # type: ignore[arg-type]
    markdown += "\n" + meanings(document["figures"])  # type: ignore[arg-type]
    (HERE / "results.md").write_text(markdown, encoding="utf-8")
    readme = README.read_text(encoding="utf-8")
    if BEGIN in readme and END in readme:
        head, rest = readme.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        README.write_text(f"{head}{BEGIN}\n{markdown}{END}{tail}", encoding="utf-8")
    return markdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help="only these benchmarks")
    parser.add_argument("--publish-only", action="store_true", help="rewrite the tables from results.json")
    parser.add_argument("--one", metavar="NAME", help=argparse.SUPPRESS)  # a child: print its figures
    args = parser.parse_args()
    if args.one:
        figures = benchmarks()[args.one].run()  # type: ignore[attr-defined]
        print(json.dumps([{"bench": args.one, **f.json()} for f in figures]))
        return
    results = HERE / "results.json"
    if args.publish_only:
        print(publish(json.loads(results.read_text(encoding="utf-8"))), end="")
        return
    unknown = set(args.names) - set(benchmarks())
    if unknown:
        parser.error(f"no benchmark {', '.join(sorted(unknown))}; there are {', '.join(benchmarks())}")
    kept = []  # a partial run keeps the other benchmarks' figures
    if args.names and results.exists():
        kept = json.loads(results.read_text(encoding="utf-8"))["figures"]
        if any("bench" not in figure for figure in kept):  # written before figures named their bench
            parser.error("bench/results.json does not say which benchmark made each figure: run make bench")
    by_bench: dict[str, list[dict[str, object]]] = {}
    for figure in kept:
        by_bench.setdefault(str(figure.get("bench", "")), []).append(figure)
    started = time.perf_counter()
    for name in benchmarks():
        if args.names and name not in args.names:
            continue
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        child = subprocess.run(
            [sys.executable, "-m", "bench.run", "--one", name], stdout=subprocess.PIPE, text=True, check=True
        )
        by_bench[name] = json.loads(child.stdout.strip().splitlines()[-1])
    machine = f"{platform.python_implementation()} {platform.python_version()}, {platform.machine()}"
    document = {
        "machine": machine,
        "seconds": round(time.perf_counter() - started, 1),
        "figures": [f for name in benchmarks() for f in by_bench.get(name, [])],
    }
    results.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(publish(document), end="")


if __name__ == "__main__":
    main()
