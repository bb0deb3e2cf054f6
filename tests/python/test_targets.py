"""The TARGET of hpc status, logs, cancel and why: a task that does not exist, a name that is
both a job number and an experiment, --exp-name beside a target. Every command says the
same, with the same exit code (tracking.resolve)."""

# ruff: noqa: E501  (ledger lines as the shell writes them)

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpc_toolkit.cli import app

from conftest import Stub

# Job 13: an array of 2 tasks; 14: a single job; 4: a job of experiment 'other'; experiment
# '4' (digits only, recorded before such names were refused) ran as job 20; experiment '7'
# as job 7 itself; experiment '9' as job 30 (no job 9 recorded).
ROWS = [
    ("13", "arr", "2", "arr-1", "arr-%A_%a.out"),
    ("14", "one", "1", "one-1", "one-%j.out"),
    ("4", "other", "1", "other-1", "other-%j.out"),
    ("20", "4", "1", "4-20261124-100000-1", "4-%j.out"),
    ("7", "7", "1", "7-20261124-100000-2", "7-%j.out"),
    ("30", "9", "1", "9-20261124-100000-3", "9-%j.out"),
]
SACCT = "13_0|RUNNING|0:0|00:01:00|node1\n13_1|RUNNING|0:0|00:01:00|node2\n14|COMPLETED|0:0|00:00:01|node1\n4|COMPLETED|0:0|00:00:01|node1\n20|COMPLETED|0:0|00:00:01|node2\n7|COMPLETED|0:0|00:00:01|node1\n30|COMPLETED|0:0|00:00:01|node1\n"
AMBIGUOUS = (
    "hpc: '4' names both job 4 (submission other-1, experiment 'other') and experiment '4' "
    "(its latest submission 4-20261124-100000-1): name the one you mean by its submission id "
    "(`hpc status other-1` or `hpc status 4-20261124-100000-1`)\n"
)


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stub: Stub) -> Path:
    s = tmp_path / "scratch"
    jobs = s / "hpc_outputs" / "jobs"
    jobs.mkdir(parents=True)
    out = s / "hpc_outputs"
    (jobs / "submissions.tsv").write_text(
        "".join(
            f"2026-11-24T10:00:00+0000\t{j}\t{exp}\t{n}\t{jobs}/{sid}/job.sbatch\t{sid}\tjob\t0\t{out}/{log}\n"
            for j, exp, n, sid, log in ROWS
        )
    )
    monkeypatch.setenv("SCRATCH", str(tmp_path))
    monkeypatch.setenv("HPC_PROJECT_NAME", "scratch")
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "absent.conf"))
    stub("sacct", SACCT)
    stub("squeue", "13_0|arr\n13_1|arr\n")
    return s


def _called(hermetic: Path, name: str) -> bool:
    return (hermetic / f"{name}.args").exists()


COMMANDS = [["status"], ["logs"], ["cancel", "--yes"], ["why"]]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("13_5", "hpc: no such task 13_5 in submission arr-1: job 13's tasks are 13_0 to 13_1 (`hpc status arr-1` lists them)\n"),
        ("14_0", "hpc: no such task 14_0 in submission one-1: job 14 is a single job, not an array: name it 14\n"),
    ],
)  # fmt: skip
def test_a_task_that_does_not_exist_is_refused_alike_by_every_command(
    runner: CliRunner, stub: Stub, scratch: Path, hermetic: Path, command: list[str],
    target: str, said: str,
) -> None:  # fmt: skip
    stub("scancel")
    stub("scontrol")
    result = runner.invoke(app, [command[0], target, *command[1:]])
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", said)
    assert not _called(hermetic, "scancel") and not _called(hermetic, "scontrol")


def test_a_task_that_exists_is_still_shown(runner: CliRunner, scratch: Path) -> None:
    result = runner.invoke(app, ["status", "13_1"])
    assert result.exit_code == 0, result.stderr
    rows = [line.split()[:3] for line in result.stdout.splitlines()[3:]]
    assert rows == [["1", "13_1", "RUNNING"]]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_name_that_is_a_job_and_an_experiment_is_refused_with_both_ids(
    runner: CliRunner, stub: Stub, scratch: Path, hermetic: Path, command: list[str]
) -> None:
    stub("scancel")
    stub("scontrol")
    result = runner.invoke(app, [command[0], "4", *command[1:]])
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", AMBIGUOUS)
    assert not _called(hermetic, "scancel") and not _called(hermetic, "scontrol")


def test_each_of_the_two_is_named_by_its_submission_id(runner: CliRunner, scratch: Path) -> None:
    for target, job in [("other-1", "4"), ("4-20261124-100000-1", "20")]:
        result = runner.invoke(app, ["status", target, "--summary"])
        assert result.exit_code == 0, result.stderr
        assert f"  jobs {job}  " in result.stdout
    by_option = runner.invoke(app, ["status", "--exp-name", "4", "--summary"])
    assert by_option.exit_code == 0, by_option.stderr
    assert "== 4  jobs 20  " in by_option.stdout


@pytest.mark.parametrize(("target", "job"), [("9", "30"), ("7", "7")])
def test_a_digit_experiment_name_with_no_other_job_of_that_number_names_the_experiment(
    runner: CliRunner, scratch: Path, target: str, job: str
) -> None:
    # '9': no job 9 is recorded; '7': job 7 is experiment '7''s own job.
    result = runner.invoke(app, ["status", target, "--summary"])
    assert (result.exit_code, result.stderr) == (0, "")
    assert f"== {target}  jobs {job}  " in result.stdout


def test_a_missing_experiment_exits_1_by_target_and_by_option(
    runner: CliRunner, scratch: Path
) -> None:
    said = "hpc: no submission of experiment 'nosuch' is recorded: run `hpc status` for the recorded ones\n"
    for args in (["status", "nosuch"], ["status", "--exp-name", "nosuch"]):
        result = runner.invoke(app, args)
        assert (result.exit_code, result.stdout, result.stderr) == (1, "", said), args


@pytest.mark.parametrize("target", ["13", "arr", "arr-1", "13_1"])
def test_a_target_of_another_experiment_than_exp_name_says_so(
    runner: CliRunner, scratch: Path, target: str
) -> None:
    result = runner.invoke(app, ["status", target, "--exp-name", "one"])
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (
        "hpc: submission arr-1 is of experiment 'arr', not of 'one': leave out --exp-name "
        "or the target (`hpc status --exp-name one` lists that experiment's submissions)\n"
    )
    both = runner.invoke(app, ["status", target, "--exp-name", "arr"])
    assert both.exit_code == 0, both.stderr


def test_why_of_a_digit_experiment_name_asks_about_its_jobs(
    runner: CliRunner, stub: Stub, scratch: Path
) -> None:
    scontrol = stub(
        "scontrol", stdout=(Path(__file__).parent / "recorded" / "job_held.txt").read_text()
    )
    result = runner.invoke(app, ["why", "9"])
    assert result.exit_code == 0, result.stderr
    assert Path(f"{scontrol}.args").read_text().split() == ["show", "job", "-o", "30"]
    other = runner.invoke(app, ["why", "14"])  # a recorded job: that job, as before
    assert other.exit_code == 0, other.stderr
    assert Path(f"{scontrol}.args").read_text().split() == ["show", "job", "-o", "14"]
