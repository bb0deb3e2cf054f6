"""hpc logs and hpc cancel through CliRunner, with stub Slurm commands and a v2 ledger."""

# ruff: noqa: E501  (rows as Slurm prints them)

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
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


def _scancel_log(stub: Stub) -> Path:
    """A scancel that appends each call's argv, one call per line, to the returned file."""
    path = stub("scancel")
    path.write_text('#!/bin/sh\necho "$*" >> "$0.calls"\n')
    return Path(f"{path}.calls")


def test_cancel_needs_yes_off_a_terminal(runner: CliRunner, stub: Stub, scratch: Path) -> None:
    calls = _scancel_log(stub)
    result = runner.invoke(app, ["cancel", "503", "--scratch-dir", str(scratch)])
    assert result.exit_code == 2
    assert "not on a terminal: pass --yes to cancel 501, 502, 503" in result.stderr
    assert not calls.exists()
    result = runner.invoke(app, ["cancel", "sp", "--yes", "--scratch-dir", str(scratch)])
    assert result.exit_code == 0
    # Each job by its number and the name it was given: the arrays, then the venv job.
    assert calls.read_text().splitlines() == ["--name=sp 502 503", "--name=sp-venv 501"]
    calls.unlink()
    one = runner.invoke(app, ["cancel", "502_1", "-y", "--scratch-dir", str(scratch)])
    assert one.exit_code == 0
    assert calls.read_text().splitlines() == ["--name=sp 502_1"]


def test_cancel_leaves_alone_a_job_whose_number_is_another_jobs_now(
    runner: CliRunner, stub: Stub, scratch: Path
) -> None:
    """Slurm numbered its jobs afresh (or another cluster shares $SCRATCH): job 501 of the
    ledger is now someone else's job of this user, under another name."""
    calls = _scancel_log(stub)
    stub("squeue", "501|train-other\n502_[0-1]|sp\n503_0|sp\n")
    result = runner.invoke(app, ["cancel", "sp", "--yes", "--scratch-dir", str(scratch)])
    assert result.exit_code == 0
    assert (
        "job 501 is another job now (named 'train-other', not 'sp-venv'): left alone"
        in result.stderr
    )
    assert calls.read_text().splitlines() == ["--name=sp 502 503"]
    assert result.stdout == "Cancelled 502, 503 (sp, 3 task(s))\n"
    stub("squeue", "501|a\n502|b\n503|c\n")
    calls.unlink()
    result = runner.invoke(app, ["cancel", "sp", "--yes", "--scratch-dir", str(scratch)])
    assert result.exit_code == 1
    assert "nothing cancelled: the jobs of submission sp-1 have ended" in result.stderr
    assert not calls.exists()


ENDED = "hpc: nothing to cancel: every job of submission sp-1 has ended; `hpc status sp-1` shows how they ended\n"


def test_cancel_when_every_job_has_ended_says_nothing_to_cancel(
    runner: CliRunner, stub: Stub, scratch: Path
) -> None:
    """None of the submission's jobs is in squeue any more: nothing is sent to scancel
    (which would answer `Invalid job id specified`), asked or not."""
    calls = _scancel_log(stub)
    stub("squeue", "")
    for yes in (["--yes"], []):
        result = runner.invoke(app, ["cancel", "sp", *yes, "--scratch-dir", str(scratch)])
        assert (result.exit_code, result.stdout, result.stderr) == (1, "", ENDED)
    assert not calls.exists()


def test_cancel_when_scancel_finds_every_job_ended_says_nothing_to_cancel(
    runner: CliRunner, stub: Stub, scratch: Path
) -> None:
    """squeue could not say (not on PATH here), and the jobs had ended: scancel's own
    answer for each (Slurm 22.05's words) is read, not shown raw."""
    path = stub("scancel")
    path.write_text(
        '#!/bin/sh\nfor a; do case $a in --*) ;; *) echo "scancel: error: Kill job error on '
        'job id $a: Invalid job id specified" >&2 ;; esac; done\nexit 1\n'
    )
    result = runner.invoke(app, ["cancel", "sp", "--yes", "--scratch-dir", str(scratch)])
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", ENDED)


def test_cancel_of_a_partly_ended_submission_cancels_what_is_left(
    runner: CliRunner, stub: Stub, scratch: Path
) -> None:
    calls = _scancel_log(stub)
    stub("squeue", "503_0|sp\n")
    result = runner.invoke(app, ["cancel", "sp", "--yes", "--scratch-dir", str(scratch)])
    assert (result.exit_code, result.stderr) == (0, "")
    assert calls.read_text().splitlines() == ["--name=sp 503"]
    assert result.stdout == "Cancelled 503 (sp, 3 task(s))\n"


@pytest.mark.parametrize(
    ("queue", "called"),
    [("502_0|sp\n503_0|sp\n", None), ("502_[1-3%2]|sp\n", "--name=sp 502_1"),
     ("502_1|sp\n", "--name=sp 502_1")],
)  # fmt: skip
def test_cancel_of_one_task_that_has_ended_says_nothing_to_cancel(
    runner: CliRunner, stub: Stub, scratch: Path, queue: str, called: str | None
) -> None:
    calls = _scancel_log(stub)
    stub("squeue", queue)
    result = runner.invoke(app, ["cancel", "502_1", "--yes", "--scratch-dir", str(scratch)])
    if called is None:
        assert (result.exit_code, result.stdout) == (1, "")
        assert result.stderr == (
            "hpc: nothing to cancel: task 502_1 of submission sp-1 has ended; "
            "`hpc status 502_1` shows how it ended\n"
        )
        assert not calls.exists()
    else:
        assert (result.exit_code, result.stderr) == (0, "")
        assert calls.read_text().splitlines() == [called]


def test_cancel_reports_scancel_failure(runner: CliRunner, stub: Stub, scratch: Path) -> None:
    stub("scancel", stderr="scancel: error: Invalid job id\n", rc=1)
    result = runner.invoke(app, ["cancel", "sp", "--yes", "--scratch-dir", str(scratch)])
    assert result.exit_code == 1
    assert "scancel failed (exit 1): scancel: error: Invalid job id" in result.stderr


@pytest.fixture
def packed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A packed submission (--pack 2: 5 lines, 2 per job, array 700 of 3 jobs), as the job
    side leaves it: each job's log, one log per line that ran, one outcome file per line.
    Job 0 ran lines 0 (done) and 1 (exit 3); job 1 lines 2 and 3; job 2 was cancelled
    before it started line 4."""
    s = tmp_path / "scratch"
    jobs = s / "hpc_outputs" / "jobs"
    jobs.mkdir(parents=True)
    out = s / "hpc_outputs"
    commands = jobs / "pk-1.commands"
    commands.write_text("".join(f"echo {i}\n" for i in range(5)))
    (jobs / "pk-1.sbatch").write_text(
        '#!/bin/bash\n#SBATCH --array="0-2"\n'
        f"export exp_name='pk'\nexport HPC_OUTPUT_DIR='{out}'\n"
        f"export HPC_COMMANDS_FILE='{commands}'\n"
        "export HPC_PACK='2'\nexport HPC_PACK_LINES='2'\nexport HPC_PACK_TOTAL='5'\n"
    )
    (jobs / "submissions.tsv").write_text(
        f"2026-11-24T10:00:00+0000\t700\tpk\t3\t{jobs}/pk-1.sbatch\tpk-1\tjob\t0\t{out}/pk-%A_%a.out\n"
    )
    lines = jobs / "pk-1.lines"
    lines.mkdir()
    for i, (state, code, job) in enumerate(
        [
            ("done", "0", "700_0"),
            ("failed", "3", "700_0"),
            ("done", "0", "700_1"),
            ("done", "0", "700_1"),
        ]
    ):
        (lines / str(i)).write_text(f"state={state} exit={code} job={job} attempt=1 seconds=1\n")
        (out / f"pk-700-line{i}.out").write_text(f"line {i} says\nline {i} ends\n")
    for t in range(3):
        (out / f"pk-700_{t}.out").write_text(f"job {t} header\njob {t} end\n")
    monkeypatch.setenv("SCRATCH", str(tmp_path))
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "absent.conf"))
    return s


PACKED_SACCT = "700_0|FAILED|3:0|00:00:02|node1\n700_1|COMPLETED|0:0|00:00:02|node2\n700_2|CANCELLED by 0|0:0|00:00:00|None assigned\n"


def test_logs_of_a_packed_task_shows_its_lines_logs(runner: CliRunner, packed: Path) -> None:
    result = runner.invoke(app, ["logs", "700_0", "--scratch-dir", str(packed)])
    assert result.exit_code == 0, result.stderr
    out = packed / "hpc_outputs"
    assert result.stdout.splitlines() == [
        f"==> task 0 (700_0), packed lines 0-1: {out}/pk-700_0.out <==",
        "job 0 header",
        "job 0 end",
        f"==> line 0 (task 0, 700_0) done, exit 0: {out}/pk-700-line0.out <==",
        "line 0 says",
        "line 0 ends",
        f"==> line 1 (task 0, 700_0) failed, exit 3: {out}/pk-700-line1.out <==",
        "line 1 says",
        "line 1 ends",
    ]
    # The whole submission: every job's log and every line's, in order.
    every = runner.invoke(app, ["logs", "pk", "--scratch-dir", str(packed)]).stdout
    heads = [x for x in every.splitlines() if x.startswith("==>")]
    assert [h.split(":")[0].removesuffix(" <==") for h in heads] == [
        "==> task 0 (700_0), packed lines 0-1", "==> line 0 (task 0, 700_0) done, exit 0",
        "==> line 1 (task 0, 700_0) failed, exit 3",
        "==> task 1 (700_1), packed lines 2-3", "==> line 2 (task 1, 700_1) done, exit 0",
        "==> line 3 (task 1, 700_1) done, exit 0",
        "==> task 2 (700_2), packed lines 4", "==> line 4 (task 2, 700_2) never started",
    ]  # fmt: skip


def test_logs_line_of_a_packed_submission(runner: CliRunner, packed: Path) -> None:
    args = ["--scratch-dir", str(packed)]
    assert (
        runner.invoke(app, ["logs", "pk", "--line", "3", *args]).stdout
        == "line 3 says\nline 3 ends\n"
    )
    assert (
        runner.invoke(app, ["logs", "700", "--line", "1", *args]).stdout
        == "line 1 says\nline 1 ends\n"
    )
    none = runner.invoke(app, ["logs", "pk", "--line", "4", *args])
    assert none.exit_code == 0
    assert none.stdout == ""
    assert "line 4 (task 2, 700_2) has no log: never started" in none.stderr
    bad = runner.invoke(app, ["logs", "pk", "--line", "5", *args])
    assert bad.exit_code == 2
    assert "no line 5 in submission pk-1: its lines are 0-4" in bad.stderr
    both = runner.invoke(app, ["logs", "pk", "--line", "1", "--task", "0", *args])
    assert both.exit_code == 2
    assert "--line names one line: give it without --task" in both.stderr


def test_logs_line_of_an_unpacked_submission_is_its_task(runner: CliRunner, scratch: Path) -> None:
    # Line I of an unpacked submission is run by task I (split arrays: 503_0 is task 2).
    result = runner.invoke(app, ["logs", "sp", "--line", "2", "--scratch-dir", str(scratch)])
    assert result.stdout == "two\n"


def test_logs_failed_of_a_packed_submission_shows_the_failed_lines(
    runner: CliRunner, stub: Stub, packed: Path
) -> None:
    stub("sacct", PACKED_SACCT)
    result = runner.invoke(app, ["logs", "pk", "--failed", "-n", "1", "--scratch-dir", str(packed)])
    assert result.exit_code == 0, result.stderr
    out = packed / "hpc_outputs"
    assert result.stdout.splitlines() == [
        "States from: sacct",
        f"==> task 0 (700_0) FAILED exit 3:0 on node1, packed lines 0-1: {out}/pk-700_0.out <==",
        "lines that did not complete: 1 (failed, exit 3)",
        f"==> line 1 (task 0, 700_0) failed, exit 3: {out}/pk-700-line1.out <==",
        "line 1 ends",
        f"==> task 2 (700_2) CANCELLED exit 0:0 on -, packed lines 4: {out}/pk-700_2.out <==",
        "lines that did not complete: 4 (never started)",
        "job 2 end",
    ]


def test_logs_line_not_in_a_rerun_names_the_lines_it_ran(runner: CliRunner, scratch: Path) -> None:
    # A rerun of tasks 1 and 3 of a 5-line array (array indices kept: --array=1,3).
    jobs = scratch / "hpc_outputs" / "jobs"
    (jobs / "sp-2-rerun.sbatch").write_text('#!/bin/bash\n#SBATCH --array="1,3"\n')
    with open(jobs / "submissions.tsv", "a") as fh:
        fh.write(
            f"2026-11-24T11:00:00+0000\t600\tsp\t2\t{jobs}/sp-2-rerun.sbatch\tsp-2\tjob\t0\t"
            f"{scratch}/hpc_outputs/sp-%A_%a.out\tsp-1\n"
        )
    (scratch / "hpc_outputs" / "sp-600_3.out").write_text("three again\n")
    args = ["--scratch-dir", str(scratch)]
    assert runner.invoke(app, ["logs", "600", "--line", "3", *args]).stdout == "three again\n"
    bad = runner.invoke(app, ["logs", "600", "--line", "2", *args])
    assert bad.exit_code == 2
    assert "no line 2 in submission sp-2: its lines are 1,3" in bad.stderr


def test_logs_reads_no_script_that_is_not_a_file(tmp_path: Path, scratch: Path) -> None:
    # An edited ledger naming a fifo as a job's script: hpc logs must not block on it.
    fifo = tmp_path / "fifo.sbatch"
    os.mkfifo(fifo)
    with open(scratch / "hpc_outputs" / "jobs" / "submissions.tsv", "a") as fh:
        fh.write(
            f"2026-11-24T12:00:00+0000\t900\tff\t1\t{fifo}\tff-1\tjob\t0\t{scratch}/hpc_outputs/ff-%j.out\n"
        )
        fh.write(
            f"2026-11-24T12:00:00+0000\t901\tfa\t2\t{fifo}\tfa-1\tjob\t0\t{scratch}/hpc_outputs/fa-%A_%a.out\n"
        )
    (scratch / "hpc_outputs" / "fa-901_1.out").write_text("second\n")
    (scratch / "hpc_outputs" / "ff-900.out").write_text("plain\n")
    done = subprocess.run(
        [sys.executable, "-m", "hpc_toolkit", "logs", "900", "--scratch-dir", str(scratch)],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "python")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "plain\n"
    done = subprocess.run(
        [sys.executable, "-m", "hpc_toolkit", "logs", "fa", "--task", "1", "--scratch-dir", str(scratch)],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "python")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "second\n"


def test_logs_line_of_a_packed_rerun_that_does_not_run_it(runner: CliRunner, packed: Path) -> None:
    # Job 710 reruns task 0 (lines 0-1): line 0 was done by 700_0, so 710_0 skips it; -f
    # must not wait for a log that will never come.
    jobs = packed / "hpc_outputs" / "jobs"
    text = (jobs / "pk-1.sbatch").read_text().replace('--array="0-2"', '--array="0"')
    (jobs / "pk-2-rerun.sbatch").write_text(text)
    with open(jobs / "submissions.tsv", "a") as fh:
        fh.write(
            f"2026-11-24T11:00:00+0000\t710\tpk\t1\t{jobs}/pk-2-rerun.sbatch\tpk-2\tjob\t0\t"
            f"{packed}/hpc_outputs/pk-%A_%a.out\tpk-1\n"
        )
    for follow in ([], ["-f"]):
        result = runner.invoke(
            app, ["logs", "710", "--line", "0", *follow, "--scratch-dir", str(packed)]
        )
        assert result.exit_code == 0, result.stderr
        assert result.stdout == ""
        assert (
            "line 0 was done by 700_0, so 710_0 does not run it again: hpc logs 700 --line 0"
            in result.stderr
        )


def test_logs_of_a_packed_ledger_line_edited_to_more_tasks(runner: CliRunner, packed: Path) -> None:
    # 4 tasks where the script packs 5 lines into 3 jobs: task 3 has no lines; no traceback.
    ledger = packed / "hpc_outputs" / "jobs" / "submissions.tsv"
    ledger.write_text(ledger.read_text().replace("\tpk\t3\t", "\tpk\t4\t"))
    result = runner.invoke(app, ["logs", "pk", "--scratch-dir", str(packed)])
    assert result.exit_code == 0, result.stderr
    assert "==> task 3 (700_3), packed lines none: " in result.stdout


def _reused(scratch: Path) -> None:
    """Submission sp-2 of the same experiment, after the cluster numbered afresh: its array
    got 502 again (an hour after sp-1's 502, as Slurm prints times: local, no zone)."""
    jobs = scratch / "hpc_outputs" / "jobs"
    with open(jobs / "submissions.tsv", "a", encoding="utf-8") as fh:
        fh.write(
            f"2026-11-24T11:00:00+0000\t502\tsp\t2\t{jobs}/sp-2.sbatch\tsp-2\tjob\t0\t"
            f"{scratch}/hpc_outputs/sp-%A_%a.out\n"
        )


def _local(utc: str) -> str:
    when = datetime.fromisoformat(utc + "+00:00").astimezone()
    return when.strftime("%Y-%m-%dT%H:%M:%S")


def test_status_never_shows_a_reused_numbers_new_job_as_the_old(
    runner: CliRunner, stub: Stub, scratch: Path
) -> None:
    _reused(scratch)
    old, new = _local("2026-11-24T10:00:00"), _local("2026-11-24T11:00:00")
    stub(
        "sacct",
        f"501|COMPLETED|0:0|00:00:09|node1|sp-venv|{old}\n"
        f"502_0|COMPLETED|0:0|00:00:01|node1|sp|{old}\n502_1|FAILED|7:0|00:00:01|node2|sp|{old}\n"
        f"503_0|COMPLETED|0:0|00:00:01|node3|sp|{old}\n"
        f"502_0|COMPLETED|0:0|00:00:01|node1|sp|{new}\n502_1|COMPLETED|0:0|00:00:01|node4|sp|{new}\n",
    )
    result = runner.invoke(app, ["status", "--json", "--scratch-dir", str(scratch)])
    assert result.exit_code == 0, result.stderr
    subs = json.loads(result.stdout)["submissions"]
    states = {s["submission"]: [(t["job"], t["state"]) for t in s["tasks"]] for s in subs}
    assert states["sp-1"] == [("501", "COMPLETED"), ("502_0", "COMPLETED"), ("502_1", "FAILED"),
                              ("503_0", "COMPLETED")]  # fmt: skip
    assert states["sp-2"] == [("502_0", "COMPLETED"), ("502_1", "COMPLETED")]
    # By the number alone, the latest submission; by its id, the older one.
    one = runner.invoke(app, ["status", "502", "--json", "--scratch-dir", str(scratch)])
    assert [s["submission"] for s in json.loads(one.stdout)["submissions"]] == ["sp-2"]
    one = runner.invoke(app, ["status", "sp-1", "--json", "--scratch-dir", str(scratch)])
    assert [s["submission"] for s in json.loads(one.stdout)["submissions"]] == ["sp-1"]


def test_cancel_of_an_old_submission_leaves_the_new_job_of_its_number_alone(
    runner: CliRunner, stub: Stub, scratch: Path
) -> None:
    _reused(scratch)
    calls = _scancel_log(stub)
    old = _local("2026-11-24T10:00:00")
    stub(
        "squeue",
        f"501|sp-venv|{old}\n503_0|sp|{old}\n502_[0-1]|sp|{_local('2026-11-24T11:00:00')}\n",
    )
    result = runner.invoke(app, ["cancel", "sp-1", "--yes", "--scratch-dir", str(scratch)])
    assert "job 502 is another job of that name now" in result.stderr
    assert calls.read_text().splitlines() == ["--name=sp 503", "--name=sp-venv 501"]
    calls.unlink()
    result = runner.invoke(app, ["cancel", "sp", "--yes", "--scratch-dir", str(scratch)])
    assert result.exit_code == 0
    assert calls.read_text().splitlines() == ["--name=sp 502"]
