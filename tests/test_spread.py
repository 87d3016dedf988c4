"""Large batches shared with helper processes (provisioner.spread), and observe through them.

Helpers are forked only while a process runs one thread, and pytest's worker runs sandboxes on
threads, so each case runs in a fresh interpreter: a script, its results printed as JSON.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from provisioner import hardware, quotas
from provisioner.compile import compile_file
from provisioner.errors import CloudError
from provisioner.observe import Drivers, Observation, observe
from provisioner.sandbox.server import Sandbox, SandboxSettings
from provisioner.spread import SPREAD_FROM, _helper_count, _shares, _shares_by_scope

PROLOGUE = """\
import json, os, sys, threading
from provisioner.quotas import set_pacing
from provisioner.spread import spread

set_pacing(None)  # as against a sandbox that enforces no quotas: helpers may be forked

PARENT = os.getpid()
results = {}

def keep(index, result):
    results[index] = result

def square(items, emit, part):
    for index, item in enumerate(items):
        emit(index, [item * item, os.getpid(), part])

def report(**more):
    print(json.dumps({"results": results, "parent": PARENT, **more}))

def paced_scopes():  # paced by the clouds' quotas from now on; 300 items over 6 EKS scopes
    from provisioner.quotas import Pacing
    set_pacing(Pacing())
    return [("eks", "111122223333", f"region-{i % 6}") for i in range(300)]
"""


def run_script(body: str, tmp_path: Path) -> dict:
    script = tmp_path / "script.py"
    script.write_text(PROLOGUE + textwrap.dedent(body), encoding="utf-8")
    command = [sys.executable, str(script)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout.splitlines()[-1])
    for key in ("results", "first"):
        if key in printed:
            printed[key] = {int(index): result for index, result in printed[key].items()}
    return printed


def all_made_here(out: dict, count: int = 300) -> bool:
    """Every item's result came back, each made by the process that called spread."""
    made_by = {pid for _, pid, _ in out["results"].values()}
    return sorted(out["results"]) == list(range(count)) and made_by == {out["parent"]}


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def test_a_large_batch_is_shared_with_helpers_each_result_coming_back_once(tmp_path):
    out = run_script("spread(square, list(range(300)), keep)\nreport()\n", tmp_path)
    assert sorted(out["results"]) == list(range(300))
    assert all(square == i * i for i, (square, _, _) in out["results"].items())
    processes = {pid for _, pid, _ in out["results"].values()}
    assert len(processes) == 1 + _helper_count()
    assert out["parent"] in processes
    assert {part for _, _, part in out["results"].values()} == {1 / len(processes)}  # of requests at once
    if cores() > 1:
        assert len(processes) > 1


def test_a_process_that_handles_each_result_takes_a_smaller_share(tmp_path):
    out = run_script("spread(square, list(range(300)), keep, here=0.5)\nreport()\n", tmp_path)
    assert sorted(out["results"]) == list(range(300))
    helpers = _helper_count()
    here = [part for _, pid, part in out["results"].values() if pid == out["parent"]]
    assert abs(len(here) - 300 * 0.5 / (0.5 + helpers)) <= 1
    assert set(here) == {0.5 / (0.5 + helpers)}  # its part of a cloud's requests at once, as of the items
    elsewhere = {part for _, pid, part in out["results"].values() if pid != out["parent"]}
    assert elsewhere == ({1 / (0.5 + helpers)} if helpers else set())


def test_shares_follow_their_weights_each_a_mix_of_the_whole():
    assert _shares(6, [1.0, 1.0]) == [[0, 2, 4], [1, 3, 5]]  # even: in turn
    uneven = _shares(300, [0.5, 1.0, 1.0])
    assert sorted(i for share in uneven for i in share) == list(range(300))
    assert [len(share) for share in uneven] == [60, 120, 120]
    assert all(max(share) - min(share) > 250 for share in uneven)  # each spans the items


def test_a_small_batch_stays_in_this_process(tmp_path):
    out = run_script(f"spread(square, list(range({SPREAD_FROM - 1})), keep)\nreport()\n", tmp_path)
    assert all_made_here(out, SPREAD_FROM - 1)


def test_shares_by_scope_keep_each_scope_whole_and_follow_their_weights():
    scopes = ["a"] * 100 + ["b"] * 100 + ["c"] * 50 + ["d"] * 50 + ["e"] * 10
    shares = _shares_by_scope(scopes, [1.0, 1.0])
    assert sorted(i for share in shares for i in share) == list(range(len(scopes)))
    first, second = ({scopes[i] for i in share} for share in shares)
    assert not first & second
    assert sorted(len(share) for share in shares) == [150, 160]
    weighted = _shares_by_scope(["a"] * 100 + ["b"] * 100 + ["c"] * 100, [0.5, 1.0])
    assert [len(share) for share in weighted] == [100, 200]


def test_a_paced_process_spreads_whole_scopes_and_takes_back_the_helpers_buckets(tmp_path):
    # Each scope's requests go from one process at a time, and the buckets' schedule with them, so
    # together the processes send what one would: never more than the quota.
    body = """
        import time
        from provisioner.quotas import PACER
        scopes = paced_scopes()

        def describe(items, emit, part):
            for index, scope in enumerate(items):
                PACER.delay(scope, "read", "DescribeNodegroup")
                emit(index, [list(scope), os.getpid(), part])

        from provisioner.spread import fork_helpers
        fork_helpers(len(scopes))  # before the draws below, so no helper has them by the fork
        started = time.monotonic()
        for scope in set(scopes):  # drawn before: each helper must pace on from there
            for _ in range(20):
                PACER.delay(scope, "read", "DescribeNodegroup")
        spread(describe, scopes, keep, scope=tuple)
        buckets = {"/".join(key): empty for key, (empty, _) in PACER.state().items()}
        report(buckets=buckets, started=started, ended=time.monotonic())
        """
    out = run_script(body, tmp_path)
    assert sorted(out["results"]) == list(range(300))
    by_scope: dict[str, set[int]] = {}
    for scope, pid, _ in out["results"].values():
        by_scope.setdefault("/".join(scope), set()).add(pid)
    assert all(len(pids) == 1 for pids in by_scope.values())  # each scope from one process
    processes = set().union(*by_scope.values())
    assert len(processes) == 1 + _helper_count()
    # The parent now counts every scope's 20 + 50 requests, its helpers' too: each bucket is empty
    # 70 intervals after its first request went, which was within the script's timing.
    assert sorted(out["buckets"]) == sorted(f"{scope}/read/DescribeNodegroup" for scope in by_scope)
    drawn = 70 / (hardware.load().clouds["eks"].quota.buckets["read"].per_second * quotas.HEADROOM)
    for empty_at in out["buckets"].values():
        assert out["started"] + drawn <= empty_at <= out["ended"] + drawn
    if cores() > 1:
        assert len(processes) > 1


def test_a_paced_helper_that_dies_leaves_its_scopes_buckets_taken_as_emptied(tmp_path):
    # It cannot say what it drew: this process, doing the rest of its share, must not start those
    # scopes' buckets full, or its burst would land on buckets the helper had emptied.
    body = """
        import time
        from provisioner.quotas import PACER
        scopes = paced_scopes()

        def dies_at_the_sixth(items, emit, part):
            for index, scope in enumerate(items):
                if os.getpid() != PARENT and index == 5:
                    os._exit(1)
                PACER.delay(scope, "read", "DescribeNodegroup")
                emit(index, [list(scope), os.getpid(), part])

        started = time.monotonic()
        spread(dies_at_the_sixth, scopes, keep, scope=tuple)
        buckets = {"/".join(key[:3]): empty for key, (empty, _) in PACER.state().items()}
        report(buckets=buckets, started=started, ended=time.monotonic())
        """
    out = run_script(body, tmp_path)
    assert sorted(out["results"]) == list(range(300))
    by_helper = {"/".join(s) for s, pid, _ in out["results"].values() if pid != out["parent"]}
    assert len(by_helper) >= _helper_count() >= 1  # each helper drew in a scope before it died
    bucket = hardware.load().clouds["eks"].quota.buckets["read"]
    interval = 1 / (bucket.per_second * quotas.HEADROOM)
    burst = (bucket.size * quotas.BURST_HEADROOM - 1) * interval
    assert out["ended"] - out["started"] < burst  # else an unpaced start would look the same
    for scope in by_helper:
        mine = [pid for s, pid, _ in out["results"].values() if "/".join(s) == scope]
        here = mine.count(out["parent"])
        # Emptied when the helper died (after `started`), then `here` drawn by this process.
        assert out["buckets"][scope] >= out["started"] + burst + (here + 1) * interval - 1e-6


def test_helpers_forked_before_a_thread_starts_still_share_the_batch(tmp_path):
    # As plan forks them before its ConfigMap reads' thread, and sync before its heartbeat's.
    body = """
        from provisioner.spread import fork_helpers
        fork_helpers(300)
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()
        spread(square, list(range(300)), keep)
        stop.set()
        report()
        """
    out = run_script(body, tmp_path)
    assert sorted(out["results"]) == list(range(300))
    assert len({pid for _, pid, _ in out["results"].values()}) == 1 + _helper_count()


def test_a_process_pacing_by_the_clouds_quotas_does_its_work_alone(tmp_path):
    # Without each item's scope, a helper's buckets would add to this process's quota.
    body = """
        from provisioner.quotas import Pacing
        set_pacing(Pacing())
        spread(square, list(range(300)), keep)
        report()
        """
    assert all_made_here(run_script(body, tmp_path))


def test_a_process_already_running_threads_does_its_work_alone(tmp_path):
    out = run_script(
        """
        stop = threading.Event()
        threading.Thread(target=stop.wait, daemon=True).start()
        spread(square, list(range(300)), keep)
        stop.set()
        report()
        """,
        tmp_path,
    )
    assert all_made_here(out)


def test_a_helper_that_dies_leaves_its_unfinished_items_to_this_process(tmp_path):
    out = run_script(
        """
        def dies_at_the_sixth(items, emit, part):
            for index, item in enumerate(items):
                if os.getpid() != PARENT and index == 5:
                    os._exit(1)
                emit(index, [item * item, os.getpid(), part])

        spread(dies_at_the_sixth, list(range(300)), keep)
        first = dict(results)
        results.clear()
        spread(square, list(range(300)), keep)  # the dead helper is not asked again
        report(first=first)
        """,
        tmp_path,
    )
    for run in (out["first"], out["results"]):
        assert sorted(run) == list(range(300))
        assert all(square == i * i for i, (square, _, _) in run.items())
    from_helpers = [i for i, (_, pid, _) in out["first"].items() if pid != out["parent"]]
    assert len(from_helpers) == 5 * _helper_count()  # each helper's first five, before it died
    assert {pid for _, pid, _ in out["results"].values()} == {out["parent"]}


def test_an_error_in_a_helpers_share_is_raised_here_once_every_share_has_ended(tmp_path):
    out = run_script(
        """
        def fails_in_a_helper(items, emit, part):
            for index, item in enumerate(items):
                if os.getpid() != PARENT and index == 3:
                    raise ValueError(f"item {item} is bad")
                emit(index, [item, os.getpid(), part])

        try:
            spread(fails_in_a_helper, list(range(300)), keep)
            report(error=None)
        except ValueError as exc:
            report(error=str(exc))
        """,
        tmp_path,
    )
    processes = 1 + _helper_count()
    if processes == 1:
        assert out["error"] is None
        return
    assert out["error"] == f"item {3 * processes + 1} is bad"  # the first helper's fourth item
    here = [i for i, (_, pid, _) in out["results"].items() if pid == out["parent"]]
    assert here == list(range(0, 300, processes))  # this process's share, all of it


def test_ctrl_c_stops_the_helpers_and_keeps_what_this_process_made(tmp_path):
    out = run_script(
        """
        import multiprocessing, signal, time

        def slow_in_helpers(items, emit, part):
            for index, item in enumerate(items):
                if os.getpid() != PARENT and index == 2:  # after two results each
                    time.sleep(60)
                emit(index, [item, os.getpid(), part])

        def ctrl_c(*_):
            raise KeyboardInterrupt

        signal.signal(signal.SIGALRM, ctrl_c)
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        started = time.monotonic()
        try:
            spread(slow_in_helpers, list(range(300)), keep)
            interrupted = False
        except KeyboardInterrupt:
            interrupted = True
        left = [(p.name, p.pid, p.exitcode) for p in multiprocessing.active_children()]
        report(interrupted=interrupted, seconds=time.monotonic() - started, left=left)
        """,
        tmp_path,
    )
    processes = 1 + _helper_count()
    assert out["interrupted"] == (processes > 1)
    assert out["seconds"] < 30 and out["left"] == []
    from_helpers = sorted(i for i, (_, pid, _) in out["results"].items() if pid != out["parent"])
    assert len(from_helpers) == 2 * _helper_count()  # what they sent before Ctrl-C is kept
    here = sorted(i for i in out["results"] if i not in from_helpers)
    assert here == list(range(0, 300, processes))  # this process's share, whole


def test_helpers_end_when_this_process_dies_without_a_word(tmp_path):
    script = tmp_path / "dies.py"
    script.write_text(
        PROLOGUE
        + textwrap.dedent(
            """
            import multiprocessing, signal, time

            def slowly(items, emit, part):
                for index, item in enumerate(items):
                    time.sleep(0.05)
                    emit(index, [item, os.getpid(), part])

            def killed(*_):
                print(json.dumps([p.pid for p in multiprocessing.active_children()]), flush=True)
                os._exit(9)  # as SIGKILL or the OOM killer would end it: no clean-up at all

            signal.signal(signal.SIGALRM, killed)
            signal.setitimer(signal.ITIMER_REAL, 0.5)
            spread(slowly, list(range(300)), keep)
            """
        ),
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=60
    )
    helpers = json.loads(done.stdout.splitlines()[-1])
    assert done.returncode == 9 and len(helpers) == _helper_count()
    deadline = time.monotonic() + 10
    while any(running(pid) for pid in helpers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(pid) for pid in helpers)


def running(pid: int) -> bool:
    """Whether `pid` runs still (a zombie no longer runs: it waits only to be reaped)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_two_batches_at_once_share_out_the_idle_helpers(tmp_path):
    out = run_script(
        """
        spread(square, list(range(300)), keep)  # helpers forked, this process still one thread
        first = dict(results)
        results.clear()
        others = {}
        def other():
            spread(square, list(range(300)), lambda i, r: others.__setitem__(i, r))
        worker = threading.Thread(target=other)
        worker.start()
        spread(square, list(range(300)), keep)
        worker.join()
        report(first=first, others=others)
        """,
        tmp_path,
    )
    others = {int(i): r for i, r in out["others"].items()}
    for run in (out["first"], out["results"], others):
        assert sorted(run) == list(range(300))
        assert all(square == i * i for i, (square, _, _) in run.items())


UNPICKLABLE = {
    "the batch": "spread(lambda items, emit, part: square(items, emit, part), list(range(300)), keep)",
    "its items": ("spread(first_of_pairs, [(i, lambda: i) for i in range(300)], keep)"),
}


@pytest.mark.parametrize("what", UNPICKLABLE)
def test_what_cannot_be_pickled_is_done_in_this_process(tmp_path, what):
    out = run_script(
        f"""
        def first_of_pairs(items, emit, part):
            for index, (item, _) in enumerate(items):
                emit(index, [item, os.getpid(), part])

        {UNPICKLABLE[what]}
        report()
        """,
        tmp_path,
    )
    assert all_made_here(out)


# A fresh interpreter's prologue that counts the results helpers handed over, by watching
# spread's own hand-over (the helpers work as they would without it).
COUNTING = """\
import multiprocessing
from provisioner import spread

handed_over = []
deliver = spread._Run._deliver
spread._Run._deliver = lambda run, i, result: handed_over.append(i) or deliver(run, i, result)
"""


def run_counting(tmp_path: Path, body: str) -> bytes:
    """Run COUNTING + body in a fresh interpreter (helpers fork only in one running one thread)."""
    script = tmp_path / "counting.py"
    script.write_text(COUNTING + textwrap.dedent(body), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


# One fleet cluster, formatted with its number c.
GKE_CLUSTER = (
    "  - name: c{c:03d}\n    cloud: gke\n    project: spread-project\n    location: us-central1\n"
    "    cluster: gke-{c:03d}\n    pools:\n"
    "      - {{name: shared, instanceType: g2-standard-8, gpu: {{sharing: time-slicing, replicas: 4}},"
    " nodes: {{min: 0, max: 2}}}}\n"
)
ACK_CLUSTER = (
    "  - name: ali-{c:03d}\n    cloud: ack\n    region: cn-hangzhou\n"
    "    clusterId: c{c:032x}\n    vswitches: [vsw-bp1a2b3c4d5e6f7g8h9i0]\n"
    "    kubeContext: ali-{c:03d}\n    pools:\n"
    "      - {{name: cgpu, instanceType: ecs.gn7i-c8g1.2xlarge,"
    " gpu: {{sharing: memory, isolation: memory}}, nodes: {{min: 1, max: 2}}}}\n"
)


def fleet_text(cluster: str, clusters: int) -> str:
    return "clusters:\n" + "".join(cluster.format(c=c) for c in range(clusters))


def comparable(observations: list[Observation]) -> list[tuple]:
    """What an observation says; an error by its kind and message (errors compare by identity)."""
    return [
        (o.target, o.pools, None if o.error is None else (type(o.error), str(o.error))) for o in observations
    ]


def test_a_large_fleet_is_observed_from_helpers_as_from_one_process(tmp_path):
    """Over the wire, through the GKE SDK: the listings a helper makes, errors included, arrive
    as this process would have made them."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(fleet_text(GKE_CLUSTER, SPREAD_FROM + 20), encoding="utf-8")
    targets = [c.target for c in compile_file(fleet).clusters]
    sandbox = Sandbox(tmp_path / "sandbox", SandboxSettings()).start(targets[:-3])  # 3 not there
    try:
        here = observe(targets, Drivers(sandbox.directory))  # this process runs threads: no helpers
        printed = run_counting(
            tmp_path,
            f"""
            import pickle, sys
            from provisioner.compile import compile_file
            from provisioner.observe import Drivers, observe

            targets = [c.target for c in compile_file({str(fleet)!r}).clusters]
            observations = observe(targets, Drivers({str(sandbox.directory)!r}))
            helpers = len(multiprocessing.active_children())
            sys.stdout.buffer.write(pickle.dumps((observations, helpers, len(handed_over))))
            """,
        )
        spread_out, helpers, from_helpers = pickle.loads(printed)
    finally:
        sandbox.stop()
    assert helpers == _helper_count()
    processes = 1 + helpers
    assert from_helpers == len(targets) - len(range(0, len(targets), processes))  # all but this one's share
    assert comparable(spread_out) == comparable(here)
    errors = [o.error for o in spread_out if o.error is not None]
    assert len(errors) == 3 and all(isinstance(e, CloudError) for e in errors)
    assert all(len(o.pools) == 1 for o in spread_out if o.error is None)  # the system pool


def test_verify_and_inspect_of_a_large_fleet_read_through_helpers_as_in_one_process(tmp_path):
    """ACK names each node's pool by the cloud's ID, so each cluster's reads include the cloud's
    listing: a helper reads both, its own kubernetes clients and ACK SDK client."""
    from concurrent.futures import ThreadPoolExecutor

    from click.testing import CliRunner

    from provisioner.cli import main
    from provisioner.compile import desired_state

    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(fleet_text(ACK_CLUSTER, SPREAD_FROM), encoding="utf-8")
    compiled = compile_file(fleet)
    sandbox = Sandbox(tmp_path / "sandbox", SandboxSettings()).start([c.target for c in compiled.clusters])
    try:
        drivers = Drivers(sandbox.directory)
        with ThreadPoolExecutor(max_workers=50) as pool:
            created = [
                pool.submit(drivers("ack").create_pool, c.target.ref, desired_state(p))
                for c in compiled.clusters
                for p in c.pools
            ]
        assert all(f.result().name == "cgpu" for f in created)
        commands = [
            [name, str(fleet), "--sandbox", str(sandbox.directory), "--json"]
            for name in ("verify", "inspect")
        ]
        here = [CliRunner().invoke(main, args, catch_exceptions=False) for args in commands]
        printed = run_counting(
            tmp_path,
            f"""
            import json
            from click.testing import CliRunner
            from provisioner.cli import main

            runs = [CliRunner().invoke(main, args) for args in {commands!r}]
            helpers = len(multiprocessing.active_children())
            print(json.dumps([[r.exit_code, r.stdout] for r in runs] + [helpers, len(handed_over)]))
            """,
        )
    finally:
        sandbox.stop()
    *spread_runs, helpers, from_helpers = json.loads(printed.decode().splitlines()[-1])
    assert helpers == _helper_count()
    clusters = len(compiled.clusters)
    assert from_helpers == 2 * (clusters - len(range(0, clusters, 1 + helpers)))  # both commands
    for ours, (code, stdout) in zip(here, spread_runs, strict=True):
        assert (code, json.loads(stdout)) == (ours.exit_code, json.loads(ours.stdout))
    verified, inspected = (json.loads(r.stdout) for r in here)
    assert {p["status"] for p in verified["pools"]} == {"ok"}, verified
    assert len({(n["cluster"], n["node"]) for n in inspected["nodes"]}) == SPREAD_FROM
    assert not inspected["errors"]
    assert {n["pool"] for n in inspected["nodes"]} == {"cgpu"}  # named from the cloud's listing


def test_a_share_of_nothing_for_this_process_is_refused():
    from provisioner.spread import spread

    with pytest.raises(ValueError, match="above 0"):
        spread(lambda items, emit, part: None, [1, 2], lambda index, result: None, here=0)
