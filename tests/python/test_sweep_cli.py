"""`hpc sweep count|status|sync` through typer's CliRunner (wandb and squeue are stubs)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpc_toolkit.cli import app
from hpc_toolkit.sweep.ledger import Ledger
from hpc_toolkit.sweep.spec import parse_sweep
from real_sweep_folder import write_sweep_folder

from conftest import Stub

GRID = """\
program: t.py
method: grid
metric: {name: loss}
parameters:
  lr: {values: [0.1, 0.01, 0.001]}
  bs: {values: [16, 32]}
  seed: {value: 7}
  dropout: {values: [0.0]}
"""


def test_count(runner: CliRunner, tmp_path: Path) -> None:
    sweep = tmp_path / "sweeper.yml"
    sweep.write_text(GRID)
    result = runner.invoke(app, ["sweep", "count", str(sweep)])
    assert result.exit_code == 0 and result.stdout == "6\n"
    sweep.write_text(GRID + "run_cap: 4\n")
    result = runner.invoke(app, ["sweep", "count", str(sweep)])
    assert result.stdout == "6\n" and "run_cap 4 limits the sweep to 4" in result.stderr


def test_count_refuses_what_is_not_a_grid(runner: CliRunner, tmp_path: Path) -> None:
    sweep = tmp_path / "r.yml"
    sweep.write_text("program: t.py\nmethod: random\nparameters: {a: {min: 0.0, max: 1.0}}\n")
    result = runner.invoke(app, ["sweep", "count", str(sweep)])
    assert result.exit_code == 1 and "no grid to count" in result.stderr and result.stdout == ""
    sweep.write_text("method: grid\nparameters:\n  a: {values: [1, 2}\n")
    result = runner.invoke(app, ["sweep", "count", str(sweep)])
    assert result.exit_code == 1 and "line 3" in result.stderr and "not valid YAML" in result.stderr


@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with an offline sweep of 6 points: 2 finished, 1 failed, 1 running."""
    project = tmp_path / "proj"
    (project / "hpc_files").mkdir(parents=True)
    monkeypatch.chdir(project)
    monkeypatch.setenv("SCRATCH", str(tmp_path / "scratch"))
    folder = tmp_path / "scratch" / "proj" / "sweeps" / "abcd1234"
    write_sweep_folder(folder, parse_sweep(GRID), "abcd1234", "e", 6, GRID)
    ledger = Ledger(folder)
    for point, run, state, metric in [
        (0, "run0aaaa", "finished", 0.5),
        (1, "run1bbbb", "failed", None),
        (2, "run2cccc", "finished", 0.25),
        (3, "run3dddd", None, None),
    ]:
        params = {
            "bs": {"value": 16},
            "dropout": {"value": 0.0},
            "lr": {"value": 0.1 / 10**point},
            "seed": {"value": 7},
        }
        ledger.append(
            {"event": "start", "point": point, "run_id": run, "params": params, "job": f"7_{point}"}
        )
        if state:
            run_dir = folder / "wandb" / f"offline-run-20260101_000000-{run}"
            run_dir.mkdir(parents=True)
            end = {"event": "end", "point": point, "run_id": run, "state": state, "metric": metric}
            ledger.append(
                {**end, "exit_code": 0 if state == "finished" else 1, "run_dir": str(run_dir)}
            )
    return folder


def test_status_table(runner: CliRunner, sweep: Path, stub: Stub) -> None:
    stub("squeue", stdout="7_3\n")
    result = runner.invoke(app, ["sweep", "status", "abcd1234"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"sweep abcd1234 (grid, 6 points) in {sweep}"
    # The parameters the sweep varies; the constant ones once (a nanoGPT sweep's 15 fixed
    # settings would otherwise fill every row).
    assert lines[1] == "the same in every run: dropout=0.0 seed=7 (--all-params: in each row)"
    assert lines[2].split() == ["POINT", "STATE", "LOSS", "RUN", "PARAMETERS"]
    assert lines[3].split() == ["0", "finished", "0.5", "run0aaaa", "bs=16", "lr=0.1"]
    assert lines[4].split()[:2] == ["1", "failed"]
    assert lines[5].split()[:3] == ["2", "finished", "0.25"]
    assert lines[6].split()[:2] == ["3", "running"]
    assert lines[7].split() == ["4", "pending"]
    assert "2 finished, 1 failed, 1 running, 2 pending" in result.stdout
    assert (
        "to run points 1,4-5 again: bash hpc_files/job_submitter.sh --resume-sweep abcd1234"
        in result.stdout
    )


def test_status_all_params(runner: CliRunner, sweep: Path, stub: Stub) -> None:
    stub("squeue", stdout="7_3\n")
    result = runner.invoke(app, ["sweep", "status", "abcd1234", "--all-params"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["POINT", "STATE", "LOSS", "RUN", "PARAMETERS"]
    assert lines[2].split() == [
        "0", "finished", "0.5", "run0aaaa", "bs=16", "dropout=0.0", "lr=0.1", "seed=7"
    ]  # fmt: skip


def test_status_marks_a_run_whose_task_is_gone(runner: CliRunner, sweep: Path, stub: Stub) -> None:
    stub("squeue", stdout="")
    result = runner.invoke(app, ["sweep", "status", str(sweep)])
    assert result.stdout.splitlines()[6].split()[:2] == ["3", "lost"]


def test_status_of_an_unknown_sweep(runner: CliRunner, sweep: Path) -> None:
    result = runner.invoke(app, ["sweep", "status", "zzzz9999"])
    assert result.exit_code == 1 and "not an offline sweep's folder" in result.stderr


def wandb_recorder(bin_dir: Path, rc: int = 0) -> Path:
    """A stand-in `wandb` on PATH that appends each call's arguments to wandb.calls."""
    path = bin_dir / "wandb"
    path.write_text(f'#!/bin/sh\necho "$*" >> "$0.calls"\nexit {rc}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bin_dir / "wandb.calls"


def test_sync_uploads_finished_runs_once(runner: CliRunner, sweep: Path, hermetic: Path) -> None:
    calls = wandb_recorder(hermetic)
    result = runner.invoke(app, ["sweep", "sync", "abcd1234"])
    assert result.exit_code == 0, result.stderr
    run0 = sweep / "wandb" / "offline-run-20260101_000000-run0aaaa"
    run2 = sweep / "wandb" / "offline-run-20260101_000000-run2cccc"
    assert calls.read_text().splitlines() == [f"sync {run0}", f"sync {run2}"]
    assert "synced 2 run(s)" in result.stdout
    # wandb sync leaves a .synced mark; marked runs are not uploaded again.
    (run0 / "run-run0aaaa.wandb.synced").touch()
    calls.unlink()
    runner.invoke(app, ["sweep", "sync", "abcd1234", "--include-failed"])
    run1 = sweep / "wandb" / "offline-run-20260101_000000-run1bbbb"
    assert calls.read_text().splitlines() == [f"sync {run1}", f"sync {run2}"]


def test_sync_dry_run_and_failures(runner: CliRunner, sweep: Path, hermetic: Path) -> None:
    calls = wandb_recorder(hermetic, rc=1)
    result = runner.invoke(app, ["sweep", "sync", "abcd1234", "--dry-run"])
    assert result.exit_code == 0 and not calls.exists()
    assert result.stdout.count("wandb sync ") == 2
    result = runner.invoke(app, ["sweep", "sync", "abcd1234"])
    assert result.exit_code == 1 and "2 of 2 runs did not sync" in result.stderr
