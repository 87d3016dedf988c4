from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.compile import CompiledFleet, compile_file
from provisioner.sandbox.server import Sandbox, SandboxSettings

CONTRACT_FLEET = Path(__file__).with_name("contract-fleet.yaml")
# Long enough that a test can start a second operation while the first runs, short enough to be quick.
OP_SECONDS = 0.15
# Each contract cluster runs another Kubernetes version (ACK the sandbox's default, 1.35), so a
# driver that read another field, or the default, would fail the contract.
KUBERNETES_VERSIONS = {"aks-contract": "1.34.2", "gke-contract": "1.36", "eks-contract": "1.33.4"}


@pytest.fixture(scope="session")
def contract_fleet() -> CompiledFleet:
    return compile_file(CONTRACT_FLEET)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory, contract_fleet: CompiledFleet) -> Iterator[Sandbox]:
    """All three emulators over HTTP on loopback, seeded with the contract fleet's clusters."""
    directory = tmp_path_factory.mktemp("sandbox")
    settings = SandboxSettings(op_seconds=OP_SECONDS, seed=7, kubernetes_versions=KUBERNETES_VERSIONS)
    running = Sandbox(directory, settings).start([c.target for c in contract_fleet.clusters])
    yield running
    running.stop()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each driver's contract runs over that class's own pools (DriverContract.kinds)."""
    if "kind" in metafunc.fixturenames and metafunc.cls is not None:
        metafunc.parametrize("kind", metafunc.cls.kinds)
