"""The `hpc` command: one typer app, one function per command.

Later command groups (`hpc sweep ...`) live in their own module as a typer app and are
added at the bottom with one `app.add_typer(...)` line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from hpc_toolkit import __version__
from hpc_toolkit.console import die, render_table, warn
from hpc_toolkit.jobenv import JobEnv, JobEnvError
from hpc_toolkit.slurm import query_states
from hpc_toolkit.submissions import LocateError, find_scratch_dir, ledger_path, read_submissions

app = typer.Typer(
    name="hpc",
    help="Helpers for jobs submitted with hpc_files/job_submitter.sh.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.command()
def status(
    exp_name: Annotated[
        str | None, typer.Option("--exp-name", help="Only this experiment's submissions.")
    ] = None,
    scratch_dir: Annotated[
        Path | None,
        typer.Option(
            "--scratch-dir",
            help="The project's scratch folder (default: $SCRATCH/<project>).",
            file_okay=False,
            exists=True,
        ),
    ] = None,
    last: Annotated[int, typer.Option("--last", min=1, help="How many submissions to show.")] = 20,
) -> None:
    """Show recent submissions and the state of their tasks (from sacct, else squeue)."""
    try:
        scratch = find_scratch_dir(scratch_dir, os.environ, Path.cwd())
    except LocateError as exc:
        die(str(exc))
    ledger = ledger_path(scratch)
    subs = read_submissions(ledger, on_bad_line=warn)
    if exp_name is not None:
        subs = [s for s in subs if s.exp_name == exp_name]
    subs = subs[-last:]
    if not subs:
        which = f" of experiment {exp_name!r}" if exp_name is not None else ""
        warn(f"no submissions{which} recorded in {ledger}")
        return
    query = query_states([s.job_id for s in subs])
    if query.note:
        warn(query.note)
    rows = [
        [
            s.job_id,
            s.exp_name,
            str(s.num_tasks),
            s.submitted_at.strftime("%Y-%m-%d %H:%M"),
            s.state_summary(query.counts.get(s.job_id, {})),
            s.log_pattern(scratch),
        ]
        for s in subs
    ]
    header = ["JOB ID", "EXP", "TASKS", "SUBMITTED", "STATES", "LOG"]
    typer.echo(render_table(header, rows), nl=False)


@app.command()
def env(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of shell.")] = False,
    allow_outside: Annotated[
        bool, typer.Option("--allow-outside", help="Print whatever is set, even outside a job.")
    ] = False,
) -> None:
    """Print the job's environment (`export` lines, or JSON with --json)."""
    try:
        job = JobEnv.from_environ()
    except JobEnvError as exc:
        die(str(exc))
    if not job.in_job and not allow_outside:
        die("not inside a Slurm job (SLURM_JOB_ID is not set); --allow-outside prints it anyway")
    typer.echo(job.to_json() if as_json else job.to_shell(), nl=False)


@app.command()
def version() -> None:
    """Print the hpc_toolkit version."""
    typer.echo(__version__)


# Command groups from their own modules go here, e.g.:
#   from hpc_toolkit.sweep import app as sweep_app
#   app.add_typer(sweep_app, name="sweep")
from hpc_toolkit.sweep.cli import app as sweep_app  # noqa: E402

app.add_typer(sweep_app, name="sweep")
