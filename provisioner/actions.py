"""What a plan does to a pool, as one type (as Terraform's plans/action.go): each action carries
how it is shown, the order it runs in within a cluster, the steps that carry it out, and the drift
the catalog records for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Action:
    name: str  # as `plan --json` spells it
    sigil: str
    style: str  # rich style of the sigil
    phrase: str  # "<pool> will be created"
    doing: str
    done: str
    # The order a cluster's operations run in: capacity is added before it is removed, and a
    # replaced pool's name must be free before its new pool is created.
    run_order: int
    # The operations that carry it out, in order. A replace's are delete-first's (delete, then
    # create under the fleet's name); a create-first one's are the Change's (plan.Change.steps).
    steps: tuple[str, ...]
    drift: str  # the catalog's kind for a pool that would need this action: missing, changed, extra, unowned
    shows: Literal["after", "before", "both"]  # which side of each field a plan prints

    def __str__(self) -> str:
        return self.name


UPDATE = Action(
    "update",
    "~",
    "yellow",
    "will be updated in place",
    "updating",
    "updated",
    0,
    ("update",),
    "changed",
    "both",
)
CREATE = Action(
    "create", "+", "green", "will be created", "creating", "created", 1, ("create",), "missing", "after"
)
REPLACE = Action(
    "replace",
    "-/+",
    "magenta",
    "must be replaced",
    "replacing",
    "replaced",
    2,
    ("delete", "create"),
    "changed",
    "both",
)
DELETE = Action(
    "delete", "-", "red", "will be deleted", "deleting", "deleted", 3, ("delete",), "extra", "before"
)

# A fleet pool marked `adopt: true` whose name an unowned pool holds: the ownership marker is added
# and nothing else, so the pool keeps its identity, nodes and workloads. Where the fleet entry
# differs from the pool, the update or replacement that follows is part of the same change
# (Change.then), shown with it. First in a cluster: it adds and removes no capacity.
ADOPT = Action(
    "adopt",
    "<=",
    "cyan",
    "will be adopted",
    "adopting",
    "adopted",
    0,
    ("adopt",),
    "unowned",
    "both",
)

# In the order summaries list them.
ACTIONS = (CREATE, UPDATE, REPLACE, DELETE, ADOPT)
