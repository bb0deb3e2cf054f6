"""How every command talks: `hpc: message` on stderr, plain tables on stdout.

One place for the house rules, so the sub-apps added later word their errors the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, NoReturn

import typer

PROG = "hpc"

# --scratch-dir: the option of every command that reads a project's scratch folder.
ScratchOpt = Annotated[
    Path | None,
    typer.Option(
        "--scratch-dir",
        help="The project's scratch folder (default: $SCRATCH/<project>).",
        file_okay=False,
        exists=True,
    ),
]


def command_app(name: str, help_text: str) -> typer.Typer:
    """A typer app (`hpc`, or a group such as `hpc sweep`) set up the one house way: its help
    when called with nothing, no shell-completion installer, errors as plain messages."""
    return typer.Typer(
        name=name,
        help=help_text,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )


def warn(message: str) -> None:
    """Print a warning on stderr; the command goes on."""
    print(f"{PROG}: {message}", file=sys.stderr)


def die(message: str, code: int = 1) -> NoReturn:
    """Print an error on stderr and end the command with a non-zero exit."""
    warn(message)
    raise typer.Exit(code)


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart; plain text, so it survives grep, less and logs."""
    # One format string for all rows (20,000 rows of hpc status: 0.2 s cell by cell).
    widths = [max(map(len, column)) for column in zip(header, *rows, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*r).rstrip() for r in [header, *rows]) + "\n"
