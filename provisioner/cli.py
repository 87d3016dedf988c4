"""The command line: the `provisioner` group and its global options. Each command lives in
provisioner/commands/, parses, calls the library and prints; nothing else lives there."""

from __future__ import annotations

from pathlib import Path

import click

from provisioner import __version__
from provisioner.commands import catalog, importing, kube, manifests, place, plan, sandbox, validate
from provisioner.errors import ProvisionerError

# Old spellings kept for one release, each the command that now does the job. `render cronjob`
# (before `manifests cronjob`) generated users' CronJobs; `render FLEET` is a fleet file's.
DEPRECATED: dict[tuple[str, ...], tuple[str, ...]] = {("render", "cronjob"): ("manifests", "cronjob")}


class _Group(click.Group):
    """Prints any error of the tool's one tree and exits 1: never a traceback."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        old = tuple(args[:2])
        new = DEPRECATED.get(old)
        if new is not None and not Path(args[1]).is_file():  # a fleet file named `cronjob` renders
            click.echo(
                f"warning: `provisioner {' '.join(old)}` is deprecated and goes in the next release; "
                f"use `provisioner {' '.join(new)}`",
                err=True,
            )
            args = [*new, *args[2:]]
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ProvisionerError as exc:
            for line in exc.report():
                click.echo(line, err=True)
            ctx.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="provisioner")
@click.option(
    "--sandbox",
    metavar="DIR",
    envvar="PROVISIONER_SANDBOX",
    type=click.Path(file_okay=False, path_type=Path),
    help="Talk to the emulators `sandbox serve --dir DIR` runs, not the clouds [env PROVISIONER_SANDBOX].",
)
@click.pass_context
def main(ctx: click.Context, sandbox: Path | None) -> None:
    """Fractional-GPU node pools on AKS, GKE, EKS and ACK from one fleet file."""
    ctx.obj = sandbox


# Help lists the commands sorted by name, whatever the order here.
for _command in (
    validate.validate,
    validate.render,
    manifests.manifests,
    validate.schema,
    importing.pools,
    importing.import_pools,
    sandbox.sandbox,
    plan.plan,
    plan.apply,
    plan.destroy,
    catalog.sync,
    place.place,
    kube.verify_command,
    kube.inspect_command,
    catalog.catalog,
):
    main.add_command(_command)
