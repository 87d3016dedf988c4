"""What commands print is read by rich as markup: values from the user or a cloud stay as they are."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from provisioner import report
from provisioner.actions import CREATE
from provisioner.fleet import load
from provisioner.observe import Observation
from provisioner.pools import PoolState, Scaling
from tests.conftest import EXAMPLES


def test_the_pools_table_prints_cloud_values_with_brackets_as_they_are():
    cluster = load(EXAMPLES / "fleet.yaml").clusters[0]
    pool = PoolState(
        name="x[/]y",
        instance_type="[bold]Standard_NC4as_T4_v3[/bold]",
        gpus_per_node=1,
        mig_setting=None,
        sharing=None,
        spot=False,
        disk_size_gb=None,
        scaling=Scaling.fixed(1),
        labels=(),
        taints=(),
        owned=False,
    )
    console = Console(record=True, width=200)
    console.print(report.observations_table([Observation(cluster, (pool,))]))
    text = console.export_text()
    assert "x[/]y" in text
    assert "[bold]Standard_NC4as_T4_v3[/bold]" in text


def test_a_progress_line_says_what_is_retried_and_why():
    from provisioner.errors import Throttled, Unavailable
    from provisioner.plan import Change

    console = Console(record=True, width=200)
    with report.ProgressReporter(console) as progress:
        change = Change("gcp", "mig[/]", CREATE)
        progress.change_started(change)
        progress.change_retrying(change, Unavailable("GKE API unreachable:\n ConnectionError"), 1.5)
        unavailable = progress.progress.tasks[0].description
        progress.change_retrying(change, Throttled("Quota exceeded for [reads]", retry_after=4), 4.0)
        throttled = progress.progress.tasks[0].description
    assert Text.from_markup(unavailable).plain == (
        "gcp/mig[/]: creating (retrying in 1.5 s: cloud unreachable or failing: "
        "GKE API unreachable: ConnectionError)"
    )
    assert Text.from_markup(throttled).plain == (
        "gcp/mig[/]: creating (retrying in 4.0 s: throttled: Quota exceeded for [reads])"
    )
