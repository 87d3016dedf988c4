"""The wheel carries the templates: built, installed into a fresh virtual environment, it renders.

The templates sit at the repository's top level, outside the package, so only the wheel's
force-include puts them where an installed `render` finds them; a checkout would hide a wheel
without them. This builds the wheel (pip with build isolation: it fetches hatchling), installs it
with no dependencies into a venv of its own, and runs `render` from outside the repository, with
the dependencies importable from this environment's site-packages (a .pth there, such as the
editable install's, is not read from PYTHONPATH, so the checkout stays out of reach).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLEET = ROOT / "examples" / "fleet.yaml"


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_installed_wheel_renders_what_the_checkout_renders(tmp_path: Path):
    wheels = tmp_path / "wheels"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", wheels, ROOT, cwd=tmp_path)
    [wheel] = wheels.glob("provisioner-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = sorted(
            n.removeprefix("provisioner/templates/")
            for n in archive.namelist()
            if n.startswith("provisioner/templates/")
        )
    assert shipped == sorted(p.name for p in (ROOT / "templates").iterdir())

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    _run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--no-deps",
        "--quiet",
        wheel,
        cwd=tmp_path,
    )

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]  # the dependencies, not the checkout
    where = _run(python, "-c", "import provisioner; print(provisioner.__file__)", cwd=elsewhere, env=env)
    assert Path(where.strip()).is_relative_to(venv)

    installed = _run(python, "-m", "provisioner", "render", FLEET, cwd=elsewhere, env=env)
    checkout_env = {**env, "PYTHONPATH": f"{ROOT}{os.pathsep}{env['PYTHONPATH']}"}
    in_repo = _run(sys.executable, "-m", "provisioner", "render", FLEET, cwd=ROOT, env=checkout_env)
    assert "# Source: azure-ml/device-plugin-config.yaml" in in_repo
    assert installed == in_repo
