"""What a benchmark reports: a figure beside its baseline, measured in the same run."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Figure:
    name: str
    value: float  # the median of the runs
    unit: str
    baseline: float
    baseline_name: str
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """baseline / value: how many times better than the baseline (or, for a floor, how close).
        For rates (units ending /s) and shares (%), more is better: value / baseline. None where it
        divides by 0."""
        numerator, denominator = (
            (self.value, self.baseline) if self.unit.endswith(("/s", "%")) else (self.baseline, self.value)
        )
        return round(numerator / denominator, 2) if denominator else None

    def json(self) -> dict[str, object]:
        return {**asdict(self), "ratio": self.ratio}


def median_seconds(action: Callable[[], object], runs: int = 3) -> float:
    """The median wall time of `runs` runs of `action`."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)
