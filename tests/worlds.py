"""A sandbox seeded with a fresh three-cloud fleet, and the CLI pointed at it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner, Result

from provisioner.cli import main
from provisioner.compile import compile_file
from provisioner.sandbox.server import Sandbox, SandboxSettings

POOLS = {
    "aks": """
      - {name: mig, instanceType: Standard_NC24ads_A100_v4, gpu: {mig: 1g.10gb}, nodes: {min: 0, max: 3}}
      - {name: shared, instanceType: Standard_NC4as_T4_v3, gpu: {sharing: time-slicing, replicas: 4},
         nodes: {min: 0, max: 2}}
      - {name: spare, instanceType: Standard_NC4as_T4_v3, nodes: {count: 1}}
""",
    "gke": """
      - {name: mig, instanceType: a2-highgpu-1g, gpu: {mig: 1g.5gb}, nodes: {min: 0, max: 3}}
      - {name: shared, instanceType: g2-standard-8, gpu: {sharing: mps, replicas: 4}, nodes: {min: 0, max: 2}}
      - {name: spare, instanceType: g2-standard-8, nodes: {count: 3}}
""",
    "eks": """
      - {name: mig, instanceType: p4d.24xlarge, gpu: {mig: 1g.5gb}, nodes: {min: 0, max: 3}}
      - {name: shared, instanceType: g5.xlarge, gpu: {sharing: time-slicing, replicas: 4},
         nodes: {min: 0, max: 2}}
      - {name: spare, instanceType: g5.xlarge, nodes: {count: 1}}
""",
}


def fleet_text(suffix: str, pools: dict[str, str] = POOLS) -> str:
    """One cluster per cloud, named uniquely (moto's EKS state lives as long as the process)."""
    return f"""\
clusters:
  - name: azure
    cloud: aks
    subscription: 22222222-2222-2222-2222-222222222222
    resourceGroup: rg-{suffix}
    cluster: aks-{suffix}
    pools:{pools["aks"]}
  - name: gcp
    cloud: gke
    project: project-{suffix}
    location: europe-west4
    cluster: gke-{suffix}
    pools:{pools["gke"]}
  - name: aws
    cloud: eks
    region: us-west-2
    cluster: eks-{suffix}
    nodeRole: arn:aws:iam::123456789012:role/nodes
    subnets: [subnet-0abc1234]
    pools:{pools["eks"]}
"""


class World:
    """A sandbox seeded with a fresh fleet, and the CLI pointed at it."""

    def __init__(self, tmp_path: Path, settings: SandboxSettings, catalog: str | None = None):
        self.catalog = catalog
        self.suffix = uuid.uuid4().hex[:8]
        self.fleet = tmp_path / "fleet.yaml"
        self.fleet.write_text(fleet_text(self.suffix), encoding="utf-8")
        compiled = compile_file(self.fleet)
        self.sandbox = Sandbox(tmp_path / "sandbox", settings).start([c.target for c in compiled.clusters])
        self.runner = CliRunner()

    def run(self, *args: str, input: str | None = None) -> Result:
        env = {
            "PROVISIONER_SANDBOX": str(self.sandbox.directory),
            "PROVISIONER_LOCK_DIR": "",
            "PROVISIONER_CATALOG": self.catalog or "",
        }
        return self.runner.invoke(main, list(args), env=env, input=input, catch_exceptions=False)

    def edit(self, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        self.fleet.write_text(fleet_text(self.suffix, change(dict(POOLS))), encoding="utf-8")

    def plan_json(self) -> dict:
        result = self.run("plan", str(self.fleet), "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)
