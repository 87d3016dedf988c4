"""The cloud-neutral shapes that the compiler, the drivers, plan and sync share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
TAINT_EFFECTS: tuple[TaintEffect, ...] = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True, order=True)
class Taint:
    key: str
    value: str
    effect: TaintEffect

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


# Every GPU pool carries this taint, so only pods that ask for a GPU land there; GKE adds it by
# itself only when the cluster also has a non-GPU pool, so it is always set explicitly.
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
