"""ACK end to end through the CLI and the sandbox: the issue's fleet (a cGPU cloud pool and an
ACK Edge pool) applies, plans no changes after, and syncs into the catalog counted in GiB."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from click.testing import CliRunner

from provisioner.cli import main
from provisioner.compile import compile_file
from provisioner.drivers.registry import connect
from provisioner.sandbox.server import Sandbox, SandboxSettings

FLEET = """\
clusters:
  - name: ali-ml
    cloud: ack
    region: cn-hangzhou
    clusterId: c0123456789abcdef0123456789abcd01
    vswitches: [vsw-bp1a2b3c4d5e6f7g8h9i0]
    pools:
      - name: a10-cgpu
        instanceType: ecs.gn7i-c8g1.2xlarge
        gpu: {sharing: memory, isolation: memory}
        nodes: {count: 2}
      - name: edge-t4
        edge: true
        gpu: {model: T4, count: 1, sharing: memory, isolation: none}
"""


def test_the_issue_s_ack_fleet_applies_converges_and_is_catalogued_in_gib(tmp_path: Path, catalog_url: str):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(textwrap.dedent(FLEET), encoding="utf-8")
    compiled = compile_file(fleet)
    sandbox = Sandbox(tmp_path / "sandbox", SandboxSettings(op_seconds=0.05)).start(
        [c.target for c in compiled.clusters]
    )
    env = {
        "PROVISIONER_SANDBOX": str(sandbox.directory),
        "PROVISIONER_LOCK_DIR": "",
        "PROVISIONER_CATALOG": catalog_url,
    }

    def run(*args: str):
        return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)

    try:
        planned = run("plan", str(fleet), "--json")
        assert planned.exit_code == 0, planned.output
        assert [(c["pool"], c["action"]) for c in json.loads(planned.stdout)["changes"]] == [
            ("a10-cgpu", "create"),
            ("edge-t4", "create"),
        ]
        applied = run("apply", str(fleet), "--auto-approve")
        assert applied.exit_code == 0, applied.output
        again = run("plan", str(fleet), "--detailed-exitcode")
        assert again.exit_code == 0, again.output  # read back as the fleet asked: no perpetual diff
        # In the cluster: the cGPU nodes advertise 22 GiB per A10, the edge machine 15 GiB per T4.
        verified = run("verify", str(fleet), "--json")
        assert verified.exit_code == 0, verified.output
        assert [
            (p["pool"], p["status"], p["nodes"], p["problems"]) for p in json.loads(verified.stdout)["pools"]
        ] == [
            ("a10-cgpu", "ok", 2, []),
            ("edge-t4", "ok", 1, []),
        ]

        ref = compiled.clusters[0].target.ref
        pools = {p.name: p for p in connect("ack", sandbox.directory).list_pools(ref)}
        assert pools["a10-cgpu"].label_map["ack.node.gpu.schedule"] == "cgpu"
        assert (pools["edge-t4"].edge, pools["edge-t4"].instance_type) == (True, "")

        assert run("sync", str(fleet)).exit_code == 0
        rows = {r["pool"]: r for r in json.loads(run("catalog", "ls", "--json").stdout)}
        assert {
            name: (r["gpu"], r["sharing"], r["isolation"], r["slice_unit"], r["slices_per_node"])
            for name, r in rows.items()
            if r["owned"]
        } == {
            "a10-cgpu": ("A10 24GB", "memory", "memory", "GiB", 22),
            "edge-t4": ("T4 16GB", "memory", "none", "GiB", 15),
        }
        assert rows["a10-cgpu"]["cloud_id"] == pools["a10-cgpu"].cloud_id
        assert rows["a10-cgpu"]["cloud_id"].startswith("np")
        capacity = {r["pool"]: r for r in json.loads(run("catalog", "inspect", "--json").stdout)}
        assert (capacity["a10-cgpu"]["slices_now"], capacity["a10-cgpu"]["slice_unit"]) == (44, "GiB")
        table = run("catalog", "inspect").stdout
        assert "44 / 44 GiB" in table
    finally:
        sandbox.stop()
