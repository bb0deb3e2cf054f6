"""Lets `python -m hpc_toolkit` work where the `hpc` script is not on PATH."""

from hpc_toolkit.cli import app

app(prog_name="hpc")
