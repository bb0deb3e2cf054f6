"""hpc logs and hpc cancel through CliRunner, with stub Slurm commands and a v2 ledger."""

# ruff: noqa: E501  (rows as Slurm prints them)

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpc_toolkit.cli import app

from conftest import Stub


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A split array (2 + 1 tasks) with its venv job, and the logs of its tasks."""
    s = tmp_path / "scratch"
    jobs = s / "hpc_outputs" / "jobs"
    jobs.mkdir(parents=True)
    out = s / "hpc_outputs"
    log = f"{out}/sp-%A_%a.out"
    rows = [
        ("501", "1", "", "venv", "0", f"{out}/sp-venv-%j.out"),
        ("502", "2", f"{jobs}/sp-1-part1.sbatch", "job", "0", log),
        ("503", "1", f"{jobs}/sp-1-part2.sbatch", "job", "2", log),
    ]
    (jobs / "submissions.tsv").write_text(
        "".join(
            f"2026-11-24T10:00:00+0000\t{j}\tsp\t{n}\t{sc}\tsp-1\t{k}\t{o}\t{lg}\n"
            for j, n, sc, k, o, lg in rows
        )
    )
    for name, text in [
        ("sp-502_0", "zero\n"),
        ("sp-502_1", "a\nb\nc\nboom\n"),
        ("sp-503_0", "two\n"),
    ]:
        (out / f"{name}.out").write_text(text)
    monkeypatch.setenv("SCRATCH", str(tmp_path))
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "absent.conf"))
    return s


SACCT = "501|COMPLETED|0:0|00:00:09|node1\n502_0|COMPLETED|0:0|00:00:01|node1\n502_1|FAILED|7:0|00:00:01|node2\n503_0|COMPLETED|0:0|00:00:01|node3\n"


def test_logs_of_one_task_by_id_and_by_number(runner: CliRunner, scratch: Path) -> None:
    args = ["--scratch-dir", str(scratch)]
    assert runner.invoke(app, ["logs", "503_0", *args]).stdout == "two\n"
    assert runner.invoke(app, ["logs", "sp", "--task", "2", *args]).stdout == "two\n"
    every = runner.invoke(app, ["logs", "502", *args]).stdout
    assert "==> task 0 (502_0)" in every and "==> task 2 (503_0)" in every


def test_logs_failed_tails(runner: CliRunner, stub: Stub, scratch: Path) -> None:
    stub("sacct", SACCT)
    result = runner.invoke(
        app, ["logs", "sp", "--failed", "-n", "2", "--scratch-dir", str(scratch)]
    )
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "States from: sacct"
    assert lines[1].startswith("==> task 1 (502_1) FAILED exit 7:0 on node2: ")
    assert lines[2:] == ["c", "boom"]


def test_follow_needs_one_task(runner: CliRunner, scratch: Path) -> None:
    result = runner.invoke(app, ["logs", "sp", "-f", "--scratch-dir", str(scratch)])
    assert result.exit_code == 2
    assert "has 3 tasks: name one as JOB_TASK" in result.stderr


def test_cancel_needs_yes_off_a_terminal(runner: CliRunner, stub: Stub, scratch: Path) -> None:
    scancel = stub("scancel")
    result = runner.invoke(app, ["cancel", "503", "--scratch-dir", str(scratch)])
    assert result.exit_code == 2
    assert "not on a terminal: pass --yes to cancel 501, 502, 503" in result.stderr
    assert not Path(f"{scancel}.args").exists()
    result = runner.invoke(app, ["cancel", "sp", "--yes", "--scratch-dir", str(scratch)])
    assert result.exit_code == 0
    assert Path(f"{scancel}.args").read_text().split() == ["501", "502", "503"]
    one = runner.invoke(app, ["cancel", "502_1", "-y", "--scratch-dir", str(scratch)])
    assert one.exit_code == 0
    assert Path(f"{scancel}.args").read_text().split() == ["502_1"]


def test_cancel_reports_scancel_failure(runner: CliRunner, stub: Stub, scratch: Path) -> None:
    stub("scancel", stderr="scancel: error: Invalid job id\n", rc=1)
    result = runner.invoke(app, ["cancel", "sp", "--yes", "--scratch-dir", str(scratch)])
    assert result.exit_code == 1
    assert "scancel failed (exit 1): scancel: error: Invalid job id" in result.stderr
