"""The `hpc` commands through typer's CliRunner, with stdout and stderr kept apart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpc_toolkit import __version__
from hpc_toolkit.cli import app

from conftest import Stub

LEDGER = """\
2024-05-01T12:00:00+0000\t1001\ttrain\t1\t{jobs}/train-20240501-120000-1.sbatch
this line is torn
2024-05-01T13:00:00+0000\t1002\tsweep\t3\t{jobs}/sweep-20240501-130000-2.sbatch
2024-05-02T09:00:00+0000\t1003\ttrain\t1\t{jobs}/train-20240502-090000-3.sbatch
"""
SACCT = """\
1001|COMPLETED|0:0|00:10:00|node1
1002_0|COMPLETED|0:0|00:05:00|node1
1002_1|COMPLETED|0:0|00:05:00|node2
1002_2|FAILED|1:0|00:00:03|node3
1003|RUNNING|0:0|00:01:00|node4
"""


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project `my proj` (cwd: a folder inside it) and its ledger under $SCRATCH."""
    project = tmp_path / "my proj"
    (project / "hpc_files").mkdir(parents=True)
    (project / "src").mkdir()
    monkeypatch.chdir(project / "src")
    monkeypatch.setenv("SCRATCH", str(tmp_path / "scratch"))
    scratch_dir = tmp_path / "scratch" / "my proj"
    jobs = scratch_dir / "hpc_outputs" / "jobs"
    jobs.mkdir(parents=True)
    (jobs / "submissions.tsv").write_text(LEDGER.format(jobs=jobs))
    return scratch_dir


def test_version(runner: CliRunner) -> None:
    result = runner.invoke(app, ["version"])
    assert result.exit_code == 0
    assert result.stdout == f"{__version__}\n"


def test_python_dash_m(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hpc_toolkit", "version"], capture_output=True, text=True
    )
    assert done.returncode == 0
    assert done.stdout == f"{__version__}\n"


def test_help_lists_commands(runner: CliRunner) -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("status", "env", "version"):
        assert command in result.stdout


def test_status_table(runner: CliRunner, stub: Stub, scratch: Path) -> None:
    stub("sacct", SACCT)
    result = runner.invoke(app, ["status"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "States from: sacct"
    assert lines[1].startswith("== train  jobs 1001  1 task(s)") and "COMPLETED 1" in lines[1]
    assert lines[2].split() == [
        "TASK",
        "JOB",
        "STATE",
        "EXIT",
        "ELAPSED",
        "NODE",
        "ATTEMPTS",
        "LOG",
    ]
    assert lines[3].split()[6] == "-"  # no attempts file (a job from an older toolkit)
    assert lines[3].split()[:6] == ["0", "1001", "COMPLETED", "0:0", "00:10:00", "node1"]
    assert lines[3].endswith(str(scratch / "hpc_outputs" / "train-1001.out"))
    assert "COMPLETED 2, FAILED 1" in lines[4]
    assert lines[8].split()[:6] == ["2", "1002_2", "FAILED", "1:0", "00:00:03", "node3"]
    assert lines[8].endswith(str(scratch / "hpc_outputs" / "sweep-1002_2.out"))
    assert "RUNNING 1" in lines[9]
    assert len(lines) == 12
    assert "submissions.tsv:2: skipped a malformed line" in result.stderr


def test_status_array_cancelled_before_accounting_split_it(
    runner: CliRunner, stub: Stub, scratch: Path
) -> None:
    """An array cancelled while it waited, before accounting split it into tasks: sacct
    knows it by its job id alone (22.05, seen under hpc cancel), and every task has its state."""
    stub(
        "sacct",
        "1001|COMPLETED|0:0|00:10:00|node1\n"
        "1002|CANCELLED by 1000|0:0|00:00:00|None assigned\n"
        "1003|RUNNING|0:0|00:01:00|node4\n",
    )
    result = runner.invoke(app, ["status", "sweep"])
    assert result.exit_code == 0, result.stderr
    assert "CANCELLED 3" in result.stdout and "UNKNOWN" not in result.stdout
    rows = [
        line.split()[:3]
        for line in result.stdout.splitlines()
        if line.split()[:1] in (["0"], ["1"], ["2"])
    ]
    assert rows == [
        ["0", "1002_0", "CANCELLED"],
        ["1", "1002_1", "CANCELLED"],
        ["2", "1002_2", "CANCELLED"],
    ]


def _attempts(scratch: Path) -> Path:
    """Submission 1002's batch script naming its commands file, and task 2's attempts."""
    jobs = scratch / "hpc_outputs" / "jobs"
    (jobs / "sweep-20240501-130000-2.sbatch").write_text(
        f"#!/bin/bash\nexport HPC_COMMANDS_FILE='{jobs}/sweep-20240501-130000-2.commands'\n"
    )
    folder = jobs / "sweep-20240501-130000-2.attempts"
    folder.mkdir()
    (folder / "2").write_text(
        "attempt=1 job=1002_2 start=100 end=- outcome=running exit=-\n"
        "attempt=1 job=1002_2 start=100 end=160 outcome=warned-requeued exit=0\n"
        "attempt=2 job=1002_2 start=170 end=- outcome=running exit=-\n"
        "attempt=2 job=1002_2 start=170 end=230 outcome=preempted-requeued exit=0\n"
        "garbage line; rm -rf /\n"
        "attempt=3 job=1002_2 start=240 end=- outcome=running exit=-\n"
        "attempt=4 job=1002_2 start=300 end=- outcome=running exit=-\n"
        "attempt=4 job=1002_2 start=300 end=310 outcome=failed exit=1\n"
    )
    return folder


def test_status_attempts(runner: CliRunner, stub: Stub, scratch: Path) -> None:
    stub("sacct", SACCT)
    _attempts(scratch)
    result = runner.invoke(app, ["status", "1002_2"])
    assert result.exit_code == 0, result.stderr
    row = result.stdout.splitlines()[3]
    assert (
        "4: warned and requeued, preempted and requeued, ended with no record (killed?), "
        "failed (exit 1)" in row
    )
    as_json = runner.invoke(app, ["status", "1002", "--json"])
    assert as_json.exit_code == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    (sub,) = data["submissions"]
    tasks = {t["task"]: t for t in sub["tasks"]}
    assert tasks[0]["attempts"] == 0 and tasks[0]["state"] == "COMPLETED"
    two = tasks[2]
    assert two["attempts"] == 4 and two["state"] == "FAILED" and two["exit_code"] == "1:0"
    assert [a["outcome"] for a in two["attempt_list"]] == [
        "warned-requeued", "preempted-requeued", "lost", "failed"
    ]  # fmt: skip
    assert two["attempt_list"][0] == {
        "number": 1, "job": "1002_2", "start": 100, "end": 160, "outcome": "warned-requeued",
        "exit_code": "0", "description": "warned and requeued",
    }  # fmt: skip


def test_status_reads_a_home_beside_an_older_versions_files(
    runner: CliRunner, stub: Stub, scratch: Path
) -> None:
    # Submission 1002 was made before homes (_attempts: files side by side in jobs/); a
    # new one, 1004, has its home: script, manifest (its array starts at 5), attempts.
    stub("sacct", SACCT + "1004_5|FAILED|2:0|00:00:01|node1\n1004_6|COMPLETED|0:0|00:00:01|node1\n")
    _attempts(scratch)
    jobs = scratch / "hpc_outputs" / "jobs"
    home = jobs / "new-20240503-100000-4-ab12"
    (home / "attempts").mkdir(parents=True)
    # The script says nothing hpc reads: the manifest is the plan.
    (home / "job.sbatch").write_text("#!/bin/bash\n#SBATCH --array=0-1\n")
    (home / "job.plan").write_text(
        f"# the plan\n@job_name\tnew\n@array\t5-6\nHPC_HOME\t{home}\n"
        f"HPC_COMMANDS_FILE\t{home}/commands\n"
    )
    (home / "attempts" / "5").write_text(
        "attempt=1 job=1004_5 start=1 end=2 outcome=failed exit=2\n"
    )
    with open(jobs / "submissions.tsv", "a") as fh:
        fh.write(
            f"2024-05-03T10:00:00+0000\t1004\tnew\t2\t{home}/job.sbatch\t{home.name}\tjob\t0"
            f"\t{scratch}/hpc_outputs/new-%A_%a.out\t\t\t\n"
        )
    result = runner.invoke(app, ["status", "1004", "--json"])
    assert result.exit_code == 0, result.stderr
    (sub,) = json.loads(result.stdout)["submissions"]
    tasks = {t["task"]: t for t in sub["tasks"]}
    assert sorted(tasks) == [5, 6]
    assert tasks[5]["attempts"] == 1 and tasks[5]["attempt_list"][0]["outcome"] == "failed"
    assert tasks[6]["attempts"] == 0 and tasks[6]["state"] == "COMPLETED"
    old = runner.invoke(app, ["status", "1002_2"])
    assert old.exit_code == 0, old.stderr
    assert "4: warned and requeued" in old.stdout.splitlines()[3]


def test_status_attempt_running(runner: CliRunner, stub: Stub, scratch: Path) -> None:
    stub("sacct", SACCT)
    folder = _attempts(scratch)
    (folder / "1").write_text("attempt=1 job=1002_1 start=5 end=- outcome=running exit=-\n")
    result = runner.invoke(app, ["status", "1002_1"])
    assert "1: running" in result.stdout.splitlines()[3]


def test_status_filters(runner: CliRunner, stub: Stub, scratch: Path) -> None:
    stub("sacct", SACCT)
    result = runner.invoke(app, ["status", "--exp-name", "train", "--last", "1", "--summary"])
    assert result.exit_code == 0
    assert [line.split()[3] for line in result.stdout.splitlines()[1:]] == ["1003"]
    one = runner.invoke(app, ["status", "1002_1"])
    assert one.exit_code == 0
    assert [r.split()[1] for r in one.stdout.splitlines()[3:]] == ["1002_1"]


def test_status_scratch_dir_and_project_name(
    runner: CliRunner, stub: Stub, scratch: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub("sacct", SACCT)
    monkeypatch.chdir(tmp_path)  # outside the project: only the override can find the ledger
    result = runner.invoke(app, ["status", "--scratch-dir", str(scratch)])
    assert result.exit_code == 0
    assert "1002" in result.stdout
    monkeypatch.setenv("HPC_PROJECT_NAME", "my proj")
    assert runner.invoke(app, ["status"]).exit_code == 0


def test_status_squeue_fallback(runner: CliRunner, stub: Stub, scratch: Path) -> None:
    stub("squeue", "1003|RUNNING|-|1:00|node4\n")
    result = runner.invoke(app, ["status", "--summary"])
    assert result.exit_code == 0
    assert "sacct is not on PATH" in result.stderr
    assert "no source knows job(s) 1001, 1002" in result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "States from: squeue -t all"
    assert "UNKNOWN 1" in lines[1]
    assert "UNKNOWN 3" in lines[2]
    assert "RUNNING 1" in lines[3]


def test_status_no_ledger(runner: CliRunner, scratch: Path) -> None:
    (scratch / "hpc_outputs" / "jobs" / "submissions.tsv").unlink()
    result = runner.invoke(app, ["status"])
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "hpc: no submissions recorded in" in result.stderr


def test_status_unknown_experiment(runner: CliRunner, scratch: Path) -> None:
    # As `hpc status nope` does (test_targets.py): exit 1, whichever way it is named.
    result = runner.invoke(app, ["status", "--exp-name", "nope"])
    assert (result.exit_code, result.stdout) == (1, "")
    assert "hpc: no submission of experiment 'nope' is recorded" in result.stderr


def test_status_without_scratch(
    runner: CliRunner, scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SCRATCH")
    result = runner.invoke(app, ["status"])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("hpc: SCRATCH is not set")


def test_status_outside_a_project(
    runner: CliRunner, scratch: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["status"])
    assert result.exit_code == 1
    assert "no hpc_files/ folder" in result.stderr


@pytest.mark.parametrize(
    ("args", "option"),
    [(["--last", "0"], "--last"), (["--last", "x"], "--last"), (["--scratch-dir", "/nope"], "")],
)
def test_status_bad_values(runner: CliRunner, scratch: Path, args: list[str], option: str) -> None:
    result = runner.invoke(app, ["status", *args])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "Invalid value" in result.stderr
    assert option in result.stderr


def test_env_outside_a_job(runner: CliRunner) -> None:
    result = runner.invoke(app, ["env"])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "hpc: not inside a Slurm job" in result.stderr
    assert "--allow-outside" in result.stderr


def test_env_allow_outside(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPC_NUM_TASKS", "2")
    result = runner.invoke(app, ["env", "--allow-outside"])
    assert result.exit_code == 0
    assert result.stdout == "export HPC_NUM_TASKS=2\n"


def test_env_in_a_job(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "1002")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    monkeypatch.setenv("exp_name", "a 0")
    shell = runner.invoke(app, ["env"])
    assert shell.exit_code == 0
    assert "export exp_name='a 0'\n" in shell.stdout
    data = json.loads(runner.invoke(app, ["env", "--json"]).stdout)
    assert data["slurm_array_task_id"] == 1
    assert data["in_job"] is True


def test_env_bad_value(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "5")
    monkeypatch.setenv("HPC_TASK_INDEX", "first")
    result = runner.invoke(app, ["env"])
    assert result.exit_code == 1
    assert result.stderr == "hpc: HPC_TASK_INDEX='first' is not a whole number\n"
