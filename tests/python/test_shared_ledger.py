"""Ledgers and logs that other hands touched (issue 23, item 6): a `%` in $SCRATCH, a
hand-edited task count, a log field naming a device. Each must give the right answer or
a clear one, quickly; never a wrong path, never a hang."""

# ruff: noqa: E501  (ledger lines as the shell writes them)

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpc_toolkit.cli import app
from hpc_toolkit.submissions import MAX_TASKS_PER_LINE, parse_line

from conftest import Stub

PYTHONPATH = str(Path(__file__).parents[2] / "python")


def hpc(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m hpc_toolkit ARGS` in a child, so that a hang fails the test (timeout)."""
    return subprocess.run(
        [sys.executable, "-m", "hpc_toolkit", *args], capture_output=True, text=True,
        timeout=timeout, env={**os.environ, "PYTHONPATH": PYTHONPATH},
    )  # fmt: skip


def ledger(scratch: Path, *lines: str) -> None:
    jobs = scratch / "hpc_outputs" / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    (jobs / "submissions.tsv").write_text("".join(f"{line}\n" for line in lines))


@pytest.mark.parametrize("name", ["a%jb", "x%A_%a%%y", "100%", "%"])
def test_a_percent_in_scratch_is_part_of_the_log_path(
    runner: CliRunner, stub: Stub, tmp_path: Path, name: str
) -> None:
    # job_submitter.sh writes the log pattern into the ledger with the folder's '%' as it is
    # (README: any $SCRATCH works); only the file name's %j, %A and %a are Slurm's.
    scratch = tmp_path / name / "proj"
    out = scratch / "hpc_outputs"
    ledger(
        scratch,
        f"2026-11-24T12:00:00+0000\t900\tone\t1\t{out}/jobs/one.sbatch\tone-1\tjob\t0\t{out}/one-%j.out",
        f"2026-11-24T12:00:00+0000\t901\tarr\t2\t{out}/jobs/arr.sbatch\tarr-1\tjob\t0\t{out}/arr-%A_%a.out",
    )
    (out / "one-900.out").write_text("plain\n")
    (out / "arr-901_1.out").write_text("second\n")
    rows = ["900|COMPLETED", "901_0|COMPLETED", "901_1|COMPLETED"]
    stub("sacct", "".join(f"{r}|0:0|00:00:01|node1\n" for r in rows))
    args = ["--scratch-dir", str(scratch)]
    status = runner.invoke(app, ["status", "one", *args])
    assert status.exit_code == 0, status.stderr
    assert status.stdout.rstrip().endswith(f"{out}/one-900.out")
    status = runner.invoke(app, ["status", "arr", *args])
    assert status.stdout.rstrip().endswith(f"{out}/arr-901_1.out")
    got = runner.invoke(app, ["logs", "900", *args])
    assert (got.exit_code, got.stdout, got.stderr) == (0, "plain\n", "")
    got = runner.invoke(app, ["logs", "901_1", *args])
    assert (got.exit_code, got.stdout) == (0, "second\n")


def test_a_huge_hand_edited_task_count_is_a_bad_line_and_status_stays_quick(tmp_path: Path) -> None:
    scratch = tmp_path / "s"
    out = scratch / "hpc_outputs"
    ledger(
        scratch,
        f"2026-11-24T12:00:00+0000\t900\tbig\t999999999\t{out}/jobs/big.sbatch\tbig-1\tjob\t0\t{out}/big-%A_%a.out",
        f"2026-11-24T12:00:00+0000\t901\tok\t1\t{out}/jobs/ok.sbatch\tok-1\tjob\t0\t{out}/ok-%j.out",
    )
    done = hpc("status", "--scratch-dir", str(scratch), timeout=30)
    assert "submissions.tsv:1: skipped a malformed line (task count" in done.stderr
    assert f"more than {MAX_TASKS_PER_LINE}" in done.stderr
    assert "901" in done.stdout and "big" not in done.stdout


def test_the_task_count_bound_is_inclusive() -> None:
    line = "2026-11-24T12:00:00+0000\t900\tx\t{n}\t/j/x.sbatch\tx-1\tjob\t0\t/o/x-%A_%a.out"
    assert parse_line(line.format(n=MAX_TASKS_PER_LINE)).num_tasks == MAX_TASKS_PER_LINE
    with pytest.raises(ValueError, match="task count"):
        parse_line(line.format(n=MAX_TASKS_PER_LINE + 1))


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "fifo"])
def test_logs_reads_only_regular_files(tmp_path: Path, device: str) -> None:
    scratch = tmp_path / "s"
    if device == "fifo":
        device = str(tmp_path / "fifo.out")
        os.mkfifo(device)
    ledger(
        scratch,
        f"2026-11-24T12:00:00+0000\t900\tdev\t1\t{scratch}/j.sbatch\tdev-1\tjob\t0\t{device}",
    )
    for args in (["logs", "900"], ["logs", "900", "-f"]):
        done = hpc(*args, "--scratch-dir", str(scratch), timeout=30)
        assert done.returncode == 1, (args, done.stderr)
        assert f"{device} is not a regular file: not read" in done.stderr
        assert done.stdout == ""
