from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.compile import CompiledFleet, compile_file
from provisioner.sandbox.server import Sandbox, SandboxSettings

CONTRACT_FLEET = Path(__file__).with_name("contract-fleet.yaml")
# Long enough that a test can start a second operation while the first runs, short enough to be quick.
OP_SECONDS = 0.15


@pytest.fixture(scope="session")
def contract_fleet() -> CompiledFleet:
    return compile_file(CONTRACT_FLEET)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory, contract_fleet: CompiledFleet) -> Iterator[Sandbox]:
    """All three emulators over HTTP on loopback, seeded with the contract fleet's clusters."""
    directory = tmp_path_factory.mktemp("sandbox")
    running = Sandbox(directory, SandboxSettings(op_seconds=OP_SECONDS, seed=7)).start(
        [c.target for c in contract_fleet.clusters]
    )
    yield running
    running.stop()
