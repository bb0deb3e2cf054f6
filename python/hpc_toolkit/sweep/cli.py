"""`hpc sweep ...`: count a grid, show an offline sweep's points, sync its runs to W&B."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Container
from pathlib import Path
from typing import Annotated, Any

import typer

from hpc_toolkit.console import ScratchOpt, command_app, die, render_table, warn
from hpc_toolkit.submissions import LocateError, find_scratch_dir
from hpc_toolkit.sweep.folder import SweepFolder, locate
from hpc_toolkit.sweep.grid import grid_size
from hpc_toolkit.sweep.ledger import FAILED, FINISHED, KILLED, PENDING, RUNNING, Attempt, latest
from hpc_toolkit.sweep.spec import SweepError, SweepSpec, load_sweep
from hpc_toolkit.sweep.stage import live_of, lost, ranges, rerun_points

app = command_app("sweep", "Offline W&B sweeps: count, status, sync.")

SweepArg = Annotated[
    str, typer.Argument(help="The sweep id job_submitter.sh printed, or the sweep's folder.")
]


def open_folder(sweep: str, scratch_dir: Path | None) -> SweepFolder:
    scratch: Path | None = None
    try:
        scratch = find_scratch_dir(scratch_dir, os.environ, Path.cwd())
    except LocateError as exc:
        if "/" not in sweep:
            die(f"cannot find sweep {sweep}: {exc}")
    try:
        return SweepFolder.load(locate(sweep, scratch))
    except SweepError as exc:
        die(str(exc))


@app.command()
def count(file: Annotated[Path, typer.Argument(help="A W&B sweep file (sweeper.yml).")]) -> None:
    """Print the number of points of a grid sweep (after checking the whole file)."""
    try:
        spec = load_sweep(file)
    except SweepError as exc:
        die(str(exc))
    if spec.method == "grid":
        try:
            size = grid_size(spec)
        except SweepError as exc:
            die(f"{file}: {exc}")
        if spec.run_cap is not None and spec.run_cap < size:
            warn(f"note: run_cap {spec.run_cap} limits the sweep to {spec.run_cap} of them")
        typer.echo(size)
        return
    if spec.run_cap is None:
        die(
            f"{file}: a {spec.method} sweep has no grid to count: its number of runs is "
            "--num-agents N, or 'run_cap: N' in the file"
        )
    warn(f"note: a {spec.method} sweep has no grid; this is its run_cap")
    typer.echo(spec.run_cap)


def _values(a: Attempt | None, hidden: Container[str] = ()) -> str:
    if a is None:
        return ""
    return " ".join(f"{k}={v.get('value')}" for k, v in a.params.items() if k not in hidden)


def constants(spec: SweepSpec) -> dict[str, Any]:
    """The top-level parameters with one value in every run (`value: x`, `values: [x]`)."""
    out: dict[str, Any] = {}
    for p in spec.params:
        values = p.config.get("values")
        if len(p.path) != 1:
            continue
        if p.kind == "constant":
            out[p.name] = p.config.get("value")
        elif isinstance(values, list) and len(values) == 1:
            out[p.name] = values[0]
    return out


AllParams = Annotated[
    bool,
    typer.Option("--all-params", help="Show every parameter in each row, the constant ones too."),
]


@app.command()
def status(sweep: SweepArg, scratch_dir: ScratchOpt = None, all_params: AllParams = False) -> None:
    """Each point of an offline sweep: its state, metric, run id and the parameters it varies."""
    folder = open_folder(sweep, scratch_dir)
    spec = folder.spec()
    fixed = {} if all_params else constants(spec)
    last = latest(folder.ledger.events())
    live = live_of(last, folder.exp_name)
    metric = spec.metric_name or "METRIC"
    rows, tally = [], dict.fromkeys((FINISHED, FAILED, KILLED, RUNNING, "lost", PENDING), 0)
    for point in range(folder.num_points):
        a = last.get(point)
        state = PENDING if a is None else ("lost" if lost(a, live) else a.state)
        tally[state] = tally.get(state, 0) + 1
        shown = "" if a is None or a.metric is None else f"{a.metric:.6g}"
        rows.append([str(point), state, shown, a.run_id if a else "", _values(a, fixed)])
    header = ["POINT", "STATE", metric.upper() if spec.metric_name else metric, "RUN", "PARAMETERS"]
    typer.echo(
        f"sweep {folder.sweep_id} ({folder.method}, {folder.num_points} points) in {folder.path}"
    )
    if fixed:
        same = " ".join(f"{k}={v}" for k, v in sorted(fixed.items()))
        typer.echo(f"the same in every run: {same} (--all-params: in each row)")
    typer.echo(render_table(header, rows), nl=False)
    typer.echo(", ".join(f"{n} {s}" for s, n in tally.items() if n))
    # Pending points may only be waiting in the queue: the hint comes once a run went wrong.
    redo = rerun_points(folder.num_points, last, live)
    if any(p in last for p in redo):
        typer.echo(
            f"to run points {ranges(redo).replace(' ', ',')} again: "
            f"bash hpc_files/job_submitter.sh --resume-sweep {folder.sweep_id}"
        )


@app.command()
def sync(
    sweep: SweepArg,
    scratch_dir: ScratchOpt = None,
    include_failed: Annotated[
        bool, typer.Option("--include-failed", help="Upload failed and killed runs too.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the wandb sync commands; run none.")
    ] = False,
) -> None:
    """Upload the sweep's finished offline runs with `wandb sync` (run where there is internet)."""
    folder = open_folder(sweep, scratch_dir)
    wanted = (FINISHED, FAILED, KILLED) if include_failed else (FINISHED,)
    dirs: list[Path] = []
    for a in sorted(latest(folder.ledger.events()).values(), key=lambda a: a.point):
        if a.state in wanted and a.run_dir and Path(a.run_dir).is_dir():
            run_dir = Path(a.run_dir)
            if any(run_dir.glob("*.wandb.synced")):
                continue  # wandb sync marks what it has uploaded
            dirs.append(run_dir)
    if not dirs:
        warn(f"nothing to sync in sweep {folder.sweep_id} (no finished run that is not synced yet)")
        return
    failures = 0
    for run_dir in dirs:
        argv = ["wandb", "sync", str(run_dir)]
        typer.echo(" ".join(argv))
        if dry_run:
            continue
        try:
            done = subprocess.run(argv, check=False)
        except FileNotFoundError:
            die("wandb is not on PATH: activate the venv that has wandb, then run this again")
        if done.returncode != 0:
            failures += 1
            warn(f"wandb sync {run_dir} failed (exit {done.returncode})")
    if failures:
        die(f"{failures} of {len(dirs)} runs did not sync; run this again to retry them")
    if not dry_run:
        typer.echo(f"synced {len(dirs)} run(s) of sweep {folder.sweep_id}")
