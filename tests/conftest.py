from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.ordering import Recorder, longest_first

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

AKS_HEADER = """\
clusters:
  - name: azure-ml
    cloud: aks
    subscription: 00000000-0000-0000-0000-000000000000
    resourceGroup: ml
    cluster: ml-aks
    pools:
"""
GKE_HEADER = """\
clusters:
  - name: gcp-ml
    cloud: gke
    project: my-project
    location: us-central1
    cluster: ml-gke
    pools:
"""
EKS_HEADER = """\
clusters:
  - name: aws-ml
    cloud: eks
    region: us-east-1
    cluster: ml-eks
    nodeRole: arn:aws:iam::123456789012:role/eks-gpu-nodes
    subnets: [subnet-0abc1234]
    pools:
"""
HEADERS = {"aks": AKS_HEADER, "gke": GKE_HEADER, "eks": EKS_HEADER}


@pytest.fixture
def fleet_file(tmp_path: Path) -> Callable[[str], Path]:
    """Writes a fleet file from YAML text and returns its path (named fleet.yaml)."""

    def write(text: str) -> Path:
        path = tmp_path / "fleet.yaml"
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return write


@pytest.fixture
def pool_file(fleet_file: Callable[[str], Path]) -> Callable[[str, str], Path]:
    """A one-cluster fleet on `cloud` whose pools are the given YAML (indented as list items)."""

    def write(cloud: str, pools: str) -> Path:
        return fleet_file(HEADERS[cloud] + textwrap.indent(textwrap.dedent(pools), "      "))

    return write


_RECORDER = Recorder()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    longest_first(config, items)  # tests/ordering.py: the slowest modules of the last run first


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _RECORDER.add(report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    _RECORDER.save(session)
