"""How every command talks: `hpc: message` on stderr, plain tables on stdout.

One place for the house rules, so the sub-apps added later word their errors the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import NoReturn

import typer

PROG = "hpc"


def warn(message: str) -> None:
    """Print a warning on stderr; the command goes on."""
    print(f"{PROG}: {message}", file=sys.stderr)


def die(message: str, code: int = 1) -> NoReturn:
    """Print an error on stderr and end the command with a non-zero exit."""
    warn(message)
    raise typer.Exit(code)


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns two spaces apart; plain text, so it survives grep, less and logs."""
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    ]
    return "\n".join(lines) + "\n"
