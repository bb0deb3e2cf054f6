"""Ledgers and logs that other hands touched (issue 23, item 6): a `%` in $SCRATCH, a
hand-edited task count, a log field naming a device. Each must give the right answer or
a clear one, quickly; never a wrong path, never a hang."""

# ruff: noqa: E501  (ledger lines as the shell writes them)

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
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


TEST_USER = os.environ.get("HPC_TEST_USER", "hpcalice")


def _walk(tree: Path) -> Iterator[Path]:
    yield tree
    for root, dirs, files in os.walk(tree):
        for name in dirs + files:
            yield Path(root) / name


def give_to_user(tree: Path) -> None:
    """TREE (made by the test) becomes the test user's when we are root (hpc_as_user),
    open to it; the user is made if missing, as the shell tests do."""
    for path in _walk(tree):
        path.chmod(path.stat().st_mode | 0o555 if path.is_dir() else path.stat().st_mode | 0o444)
    if os.geteuid() != 0:
        return
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["/usr/sbin/useradd", "-m", "-s", "/bin/bash", TEST_USER], check=True)
    uid = pwd.getpwnam(TEST_USER).pw_uid
    for path in _walk(tree):
        os.chown(path, uid, -1)


def hpc_as_user(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`hpc ARGS` as a normal user, for a mode the user cannot read (root reads anything):
    as ourselves when we are not root, else as the test user (give_to_user first)."""
    if os.geteuid() != 0:
        return hpc(*args, timeout=timeout)
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    return subprocess.run(
        [runuser, "-u", TEST_USER, "--", "/usr/bin/env", f"PYTHONPATH={PYTHONPATH}",
         sys.executable, "-m", "hpc_toolkit", *args],
        capture_output=True, text=True, timeout=timeout, cwd="/",
    )  # fmt: skip


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A folder another user may enter (pytest's own is root's, mode 700)."""
    path = Path(tempfile.mkdtemp(prefix="hpc_pytest_"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for p in _walk(path):
            p.chmod(0o700)
        shutil.rmtree(path, ignore_errors=True)


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


def _one_job(scratch: Path) -> Path:
    out = scratch / "hpc_outputs"
    ledger(
        scratch,
        f"2026-11-24T12:00:00+0000\t900\tone\t1\t{out}/jobs/one-1/job.sbatch\tone-1\tjob\t0\t{out}/one-%j.out",
    )
    return out / "jobs" / "submissions.tsv"


LEDGER_COMMANDS = [
    ["status"],
    ["status", "one"],
    ["logs", "one"],
    ["cancel", "one", "--yes"],
    ["why", "one"],
]


@pytest.mark.parametrize("args", LEDGER_COMMANDS)
def test_a_ledger_that_is_a_folder_is_said_so_without_a_traceback(
    tmp_path: Path, args: list[str]
) -> None:
    scratch = tmp_path / "s"
    path = _one_job(scratch)
    path.unlink()
    path.mkdir()
    done = hpc(*args, "--scratch-dir", str(scratch))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"hpc: cannot read {path}: Is a directory; the ledger is a file (job_submitter.sh "
        "appends a line to it per job): move that folder away\n"
    )


@pytest.mark.parametrize("args", LEDGER_COMMANDS)
def test_an_unreadable_ledger_is_said_so_without_a_traceback(
    open_tmp: Path, args: list[str]
) -> None:
    scratch = open_tmp / "s"
    path = _one_job(scratch)
    give_to_user(scratch)
    path.chmod(0)
    done = hpc_as_user(*args, "--scratch-dir", str(scratch))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"hpc: cannot read {path}: Permission denied; make it and its folders readable to "
        "you (ls -ld shows whose they are), or pass --scratch-dir\n"
    )


def _shown_without_traceback(
    run: Callable[..., subprocess.CompletedProcess[str]], scratch: Path, *commands: list[str]
) -> None:
    """Each of COMMANDS, run by RUN on SCRATCH, exits 0 with no traceback."""
    for args in commands:
        done = run(*args, "--scratch-dir", str(scratch), timeout=30)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        assert done.returncode == 0, (args, done.stderr)


def test_a_home_whose_files_are_folders_or_unreadable_shows_what_it_can(tmp_path: Path) -> None:
    """The plan, the script, the attempts and the lines folders in a home turned into
    something else (a folder, a fifo, a file): no traceback, no hang; the task is shown."""
    scratch = tmp_path / "s"
    _one_job(scratch)
    home = scratch / "hpc_outputs" / "jobs" / "one-1"
    home.mkdir()
    (home / "job.plan").mkdir()
    os.mkfifo(home / "job.sbatch")
    (home / "attempts").write_text("not a folder\n")
    _shown_without_traceback(
        hpc, scratch, ["status", "one"], ["status", "one", "--json"], ["logs", "one"],
        ["logs", "one", "--failed"],
    )  # fmt: skip


@pytest.mark.parametrize("unreadable", ["", "job.plan", "attempts"])
def test_a_home_that_cannot_be_read_shows_the_tasks_without_a_traceback(
    open_tmp: Path, unreadable: str
) -> None:
    scratch = open_tmp / "s"
    out = scratch / "hpc_outputs"
    home = out / "jobs" / "one-1"
    ledger(
        scratch,
        f"2026-11-24T12:00:00+0000\t900\tone\t2\t{home}/job.sbatch\tone-1\tjob\t0\t{out}/one-%A_%a.out",
    )
    home.mkdir()
    (home / "job.sbatch").write_text("#!/bin/bash\n")
    (home / "job.plan").write_text(f"@array\t0-1\nHPC_HOME\t{home}\n")
    (home / "attempts").mkdir()
    give_to_user(scratch)
    (home / unreadable).chmod(0)
    try:
        _shown_without_traceback(
            hpc_as_user, scratch, ["status", "one"], ["status", "one", "--json"], ["logs", "one"]
        )
    finally:
        (home / unreadable).chmod(0o700)


@pytest.mark.parametrize("name", ["bob scr%atch", "p%a", "%a%A%j"])
def test_a_percent_a_in_scratch_does_not_make_a_single_job_an_array(
    runner: CliRunner, stub: Stub, tmp_path: Path, name: str
) -> None:
    scratch = tmp_path / name / "proj"
    _one_job(scratch)
    stub("sacct", "900|COMPLETED|0:0|00:00:01|node1\n")
    scancel = stub("scancel")
    args = ["--scratch-dir", str(scratch)]
    status = runner.invoke(app, ["status", *args])
    assert status.exit_code == 0, status.stderr
    assert status.stdout.splitlines()[3].split()[:3] == ["0", "900", "COMPLETED"]
    wrong = runner.invoke(app, ["status", "900_0", *args])
    assert wrong.exit_code == 2
    assert "job 900 is a single job, not an array: name it 900" in wrong.stderr
    done = runner.invoke(app, ["cancel", "one", "--yes", *args])
    assert done.exit_code == 0, done.stderr
    assert Path(f"{scancel}.args").read_text().split() == ["--name=one", "900"]
