"""What a pod asks for, checked when it is made: a MIG profile, an amount of GPU memory (with a
minimum isolation) or whole GPUs, optionally narrowed by GPU model, cloud, cluster and pool
(placement.py chooses the pool)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from provisioner import hardware
from provisioner.capacity import ISOLATION_LEVELS
from provisioner.errors import BadRequest

# Units a size may carry: SI (a GB is 10^9 bytes, as GPU makers count) and binary (a GiB is 2^30),
# also in Kubernetes' quantity spelling (G, Gi). Case does not matter.
MEMORY_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "ki": 2**10,
    "mi": 2**20,
    "gi": 2**30,
    "ti": 2**40,
}
_SIZE = re.compile(r"^\s*(?P<number>[-+]?\d+(?:\.\d+)?|[-+]?\.\d+)\s*(?P<unit>[A-Za-z]*)\s*$")
_SIZE_EXAMPLES = "e.g. 4GB, 4000MB or 4GiB"
_MIG_NAME = re.compile(r"^\d+g\.\d+gb$")


def parse_size(text: str) -> int:
    """Bytes in a size such as "4GB" (4 x 10^9), "4000MB" or "4GiB" (4 x 2^30)."""
    match = _SIZE.match(text) if isinstance(text, str) else None
    if match is None:
        raise BadRequest(f"gpu_memory: {text!r} is not a size; want a number and a unit, {_SIZE_EXAMPLES}")
    number, unit = float(match["number"]), match["unit"]
    if not unit:
        raise BadRequest(f"gpu_memory: {text!r} has no unit; say which, {_SIZE_EXAMPLES}")
    if unit.lower() not in MEMORY_UNITS:
        raise BadRequest(
            f"gpu_memory: {text!r}: unknown unit {unit!r}; want B, KB, MB, GB, TB (10^3) or KiB, MiB, "
            f"GiB, TiB (2^10), {_SIZE_EXAMPLES}"
        )
    if number <= 0:
        raise BadRequest(f"gpu_memory: {text!r}: a size must be more than zero")
    return math.ceil(number * MEMORY_UNITS[unit.lower()])


@dataclass(frozen=True)
class Request:
    """What a pod asks for: exactly one of `mig`, `gpu_memory` and `gpus`, optionally with a minimum
    `isolation` and narrowed to a GPU model, cloud, cluster or pool. Checked when made (BadRequest)."""

    mig: str | None = None  # a MIG profile, e.g. "1g.10gb"
    gpu_memory: str | None = None  # a size, e.g. "4GB", "4000MB", "4GiB"
    gpus: int | None = None  # whole GPUs
    isolation: str | None = None  # minimum: none < memory < compute < hardware
    gpu: str | None = None  # GPU model: a key (A100-80GB) or a family (A100)
    cloud: str | None = None
    cluster: str | None = None
    pool: str | None = None
    memory_bytes: int | None = field(default=None, init=False, compare=False)

    def __post_init__(self) -> None:
        given = [name for name in ("mig", "gpu_memory", "gpus") if getattr(self, name) is not None]
        if len(given) != 1:
            spelled = " and ".join(f"--{n.replace('_', '-')}" for n in given) if given else "none"
            raise BadRequest(
                f"ask for exactly one of --mig PROFILE, --gpu-memory SIZE and --gpus N (got {spelled})"
            )
        if self.isolation is not None and self.isolation not in ISOLATION_LEVELS:
            raise BadRequest(
                f"isolation: {self.isolation!r} is not a level; want one of {', '.join(ISOLATION_LEVELS)}"
            )
        known = hardware.load()
        if self.cloud is not None and self.cloud not in known.clouds:
            raise BadRequest(f"cloud: {self.cloud!r} is not a cloud; want one of {', '.join(known.clouds)}")
        if self.gpu is not None and not known.gpus_named(self.gpu):
            raise BadRequest(f"gpu: {self.gpu!r} is not a GPU model; known: {', '.join(known.gpus)}")
        if self.gpus is not None and (isinstance(self.gpus, bool) or not isinstance(self.gpus, int)):
            raise BadRequest(f"gpus: {self.gpus!r} is not a whole number of GPUs")
        if self.gpus is not None and self.gpus < 1:
            raise BadRequest(f"gpus: {self.gpus} GPUs; ask for at least 1")
        if self.gpu_memory is not None:
            object.__setattr__(self, "memory_bytes", parse_size(self.gpu_memory))
        if self.mig is not None:
            self._check_mig(known)

    def _check_mig(self, known: hardware.Hardware) -> None:
        gpus = known.gpus_named(self.gpu) if self.gpu else list(known.gpus.values())
        offered = sorted({p for g in gpus for p in g.mig}, key=_profile_order)
        if self.mig in offered:
            return
        where = f"the {', '.join(g.name for g in gpus)}" if self.gpu else "any GPU the tool knows"
        shape = "" if _MIG_NAME.match(self.mig or "") else " (a MIG profile reads like 1g.10gb)"
        raise BadRequest(
            f"mig: {self.mig!r} is not a MIG profile of {where}{shape}; "
            f"profiles: {', '.join(offered) or 'none (not MIG-capable)'}"
        )

    @property
    def minimum_isolation(self) -> str:
        """The isolation asked for; a MIG request, unless told otherwise, wants a MIG instance's own."""
        if self.isolation is not None:
            return self.isolation
        return "hardware" if self.mig is not None else "none"

    def describe(self) -> str:
        if self.mig is not None:
            asked = f"a {self.mig} MIG slice"
        elif self.gpu_memory is not None:
            asked = f"{self.gpu_memory} of GPU memory"
        else:
            asked = f"{self.gpus} whole GPU{'' if self.gpus == 1 else 's'}"
        if self.minimum_isolation != "none":
            asked += f" with isolation {self.minimum_isolation} or stronger"
        return asked


def _profile_order(name: str) -> tuple[int, int]:
    compute, _, memory = name.partition("g.")
    return int(compute), int(memory.removesuffix("gb"))
