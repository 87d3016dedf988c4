"""What the commands share: the console they print on, counting, OS errors, the drivers and the
catalog of a run, and the `--sandbox` and `--catalog` options."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from rich.console import Console

if TYPE_CHECKING:
    from provisioner.catalog.store import Store
    from provisioner.observe import Drivers

# Diagnostics go through click, not rich: rich would read "[azure-ml]" in a path as markup. What
# does go through rich has every value from the user or a cloud escaped (rich.markup.escape), and
# no :name: in one becomes an emoji (emoji=False: escape leaves those).
# Piped output gets room for whole instance-type names rather than a terminal's default 80 columns.
out = Console(highlight=False, soft_wrap=True, emoji=False, width=None if sys.stdout.isatty() else 132)
# Progress of long runs goes to stderr, so --json on stdout stays one document.
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def os_error(doing: str, exc: OSError) -> NoReturn:
    """An OS error on a path the user gave, as one line naming the path; exit 1, never a traceback."""
    click.echo(f"error: {doing}: {exc.filename}: {exc.strerror or exc}", err=True)
    sys.exit(1)


@functools.cache  # one set of drivers (and SDK clients) per run, shared by plan and apply
def drivers_for(sandbox: Path | None) -> Drivers:
    from provisioner.observe import Drivers

    return Drivers(sandbox)


def store_for(sandbox: Path | None, catalog_url: str | None, *, create: bool = True) -> Store:
    from provisioner.workflow import open_catalog

    return open_catalog(sandbox, catalog_url, create=create)


def _use_sandbox(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is not None:  # given after the command name: it wins over the one before it
        ctx.obj = value


def sandbox_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--sandbox DIR` after the command name too (`plan fleet.yaml --sandbox DIR`), for every
    command that reaches a cloud; the group's option, before the name, reads PROVISIONER_SANDBOX."""
    return click.option(
        "--sandbox",
        metavar="DIR",
        type=click.Path(file_okay=False, path_type=Path),
        expose_value=False,
        callback=_use_sandbox,
        help="As `provisioner --sandbox DIR` [env PROVISIONER_SANDBOX].",
    )(command)


def catalog_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--catalog",
        "catalog_url",
        metavar="URL",
        envvar="PROVISIONER_CATALOG",
        help="SQLAlchemy URL, e.g. postgresql+psycopg://host/db [env PROVISIONER_CATALOG; "
        "default: a SQLite file in $XDG_DATA_HOME/provisioner, or DIR/catalog.db with --sandbox].",
    )(command)
