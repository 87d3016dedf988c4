"""The order test modules are handed to xdist's workers in: the slowest of the last whole run first.

`make test` runs `--dist loadscope --no-loadscope-reorder`: each module goes to one worker whole
(its module-scoped sandboxes are made once), the next module to the first worker free, in
collection order. Sorted longest first, a 40 s module never starts while the others are ending,
which would leave two workers idle for its length. The seconds come from pytest's cache
(.pytest_cache, key MODULE_SECONDS), written by the last run that ran whole modules; modules it
has no figure for (new ones) go first, since they may be slow. No cache, no change of order.
"""

from __future__ import annotations

import math
from collections import defaultdict

import pytest

MODULE_SECONDS = "provisioner/module-seconds"  # {module path: setup + call + teardown seconds}


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def longest_first(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Reorder `items` in place, module by module, each module's own order kept."""
    cache = getattr(config, "cache", None)
    recorded: dict[str, float] = cache.get(MODULE_SECONDS, {}) if cache is not None else {}
    if not recorded:
        return
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(module_of(item.nodeid), len(first_seen))

    def key(item: pytest.Item) -> tuple[float, int]:
        module = module_of(item.nodeid)
        return (-recorded.get(module, math.inf), first_seen[module])

    items.sort(key=key)  # stable: within a module, the order pytest collected


class Recorder:
    """Sums each module's test seconds as reports arrive (on xdist's controller, every worker's)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def add(self, report: pytest.TestReport) -> None:
        self.seconds[module_of(report.nodeid)] += report.duration

    def save(self, session: pytest.Session) -> None:
        """Into the cache, for the modules this run ran whole: a run selected by -k, -m or a test's
        id, or stopped early, records nothing."""
        config = session.config
        cache = getattr(config, "cache", None)
        if cache is None or hasattr(config, "workerinput") or not self.seconds:
            return
        partial = config.option.keyword or config.option.markexpr or any("::" in a for a in config.args)
        if partial or session.shouldstop or session.shouldfail:
            return
        cache.set(MODULE_SECONDS, {**cache.get(MODULE_SECONDS, {}), **self.seconds})
