"""Start-up: `provisioner --help` and `provisioner validate examples/fleet.yaml` beside `python -c
pass`, and the proof that neither imports a cloud SDK (beside what a driver imports)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.figures import Figure, median_seconds
from provisioner.drivers.registry import SDK_MODULE_PREFIXES

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "fleet.yaml"
SDKS = SDK_MODULE_PREFIXES
_COUNT_SDK_MODULES = f"""
import runpy, sys
sys.argv = ["provisioner", *sys.argv[1:]]
try:
    runpy.run_module("provisioner", run_name="__main__")
except SystemExit:
    pass
sdks = {SDKS!r}
print(sum(1 for name in sys.modules if name.startswith(sdks)), file=sys.stderr)
"""
_DRIVER_MODULES = (
    "import sys; import kubernetes.client; from provisioner.drivers import ack, aks, eks, gke; "
    "ack.AckDriver(); aks.AksDriver(); eks.EksDriver(); gke.GkeDriver(); "
    f"print(sum(1 for name in sys.modules if name.startswith({SDKS!r})))"
)


def _time(*args: str) -> float:
    return median_seconds(
        lambda: subprocess.run([sys.executable, *args], capture_output=True, check=True), runs=5
    )


def _sdk_modules(*args: str) -> int:
    result = subprocess.run(
        [sys.executable, "-c", _COUNT_SDK_MODULES, *args], capture_output=True, text=True, check=True
    )
    return int(result.stderr.strip().splitlines()[-1])


def run() -> list[Figure]:
    python = _time("-c", "pass")
    help_time = _time("-m", "provisioner", "--help")
    validate_time = _time("-m", "provisioner", "validate", str(EXAMPLE))
    driver_modules = int(
        subprocess.run(
            [sys.executable, "-c", _DRIVER_MODULES], capture_output=True, text=True, check=True
        ).stdout
    )
    return [
        Figure("start-up: provisioner --help", round(help_time, 3), "s", round(python, 3), "python -c pass"),
        Figure(
            "start-up: provisioner validate examples/fleet.yaml",
            round(validate_time, 3),
            "s",
            round(python, 3),
            "python -c pass",
        ),
        Figure(
            "cloud SDK modules imported by --help and validate",
            _sdk_modules("--help") + _sdk_modules("validate", str(EXAMPLE)),
            "modules",
            driver_modules,
            "imported once the four drivers and the kubernetes client are made",
        ),
    ]
