"""`hpc why`: recorded `scontrol show job -o` lines (Slurm 22.05's own words and format)
in, sentences out; the command through CliRunner with stub Slurm commands."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpc_toolkit.cli import app
from hpc_toolkit.why import Context, explain, explain_job, parse_records

from conftest import Stub

REC = Path(__file__).parent / "recorded"
NOW = datetime(2026, 11, 28, 12, 30)


def rec(name: str) -> str:
    return (REC / name).read_text()


def why(name: str, **ctx: object) -> str:
    return "\n".join(explain(parse_records(rec(name)), Context(now=NOW, **ctx)))  # type: ignore[arg-type]


def test_parse_keeps_values_with_spaces_and_odd_keys() -> None:
    [job] = parse_records(rec("job_partition_down.txt"))
    assert job["JobName"] == "train a"
    assert job["CPUs/Task"] == "1"
    assert job["AllocNode:Sid"] == "localhost:6476"
    assert job["TRES"] == "cpu=1,mem=4000M,node=1,billing=1"


def test_dependency_names_the_job_it_waits_for() -> None:
    out = why("job_dependency.txt")
    assert "Job 2 (whydep) is PENDING in partition tmpdir" in out
    assert "Slurm says: Dependency." in out
    assert "afterok:1(unfulfilled)" in out


def test_dependency_never_satisfied_says_it_never_starts_and_to_cancel() -> None:
    out = why("job_dependency_never.txt")
    assert "will never start" in out
    assert "scancel 2" in out


def test_partition_down_names_the_partition_and_the_ones_up() -> None:
    parts = {p["PartitionName"]: p for p in parse_records(rec("partitions_gpu_down.txt"))}
    out = why("job_partition_down.txt", partitions=parts, up_partitions=["tmpdir", "notmpdir"])
    assert "Partition gpu is DOWN" in out
    assert "--partition NAME (up now: tmpdir, notmpdir)" in out


def test_held_by_user_says_how_to_release() -> None:
    assert "scontrol release 8" in why("job_held.txt")


def test_maintenance_says_how_long_the_job_can_be() -> None:
    res = parse_records(rec("reservations.txt"))
    out = why("job_maintenance.txt", reservations=res)
    assert "Slurm says: ReqNodeNotAvail, Reserved for maintenance." in out
    assert "maintenance maint_dec takes node[1-4] from 2026-11-28 18:00" in out
    # 5 h 30 min until it starts, less a minute of margin.
    assert "the job's --time (1-00:00:00) runs into it: with --time 05:29:00 or less" in out


def test_maintenance_without_reservations_points_to_sinfo() -> None:
    assert "sinfo -R" in why("job_maintenance.txt")


def test_qos_max_limit_in_words() -> None:
    out = why("job_qos_max.txt")
    assert "The QOS gpu_short allows at most so much GPUs/gres per user" in out
    assert "sacctmgr show qos gpu_short" in out


def test_assoc_group_limit() -> None:
    out = why("job_assoc_grp.txt")
    assert "Your account's limit on GPUs/gres (account def-someone)" in out


def test_priority_gives_the_estimate() -> None:
    out = why("job_priority.txt")
    assert "Slurm's estimate of its start: 2026-11-28T15:00:00." in out
    assert "sprio -j 12" in out


def test_an_unknown_reason_is_shown_as_slurm_says_it() -> None:
    out = why("job_unknown_reason.txt")
    assert "Slurm says: SomeNewReason. (Slurm's own words" in out


def test_array_running_tasks_point_to_status_and_logs_pending_ones_explained() -> None:
    out = why("job_array.txt")
    assert "Job 20_2-5 (arr) is PENDING" in out
    assert "Slurm says: Resources." in out
    assert "2 tasks (20_0, 20_1): Job 20_0 (arr) is RUNNING on node1" in out
    assert "hpc status 20" in out and "hpc logs 20_0 -f" in out


def test_finished_job_points_to_status_and_logs() -> None:
    out = why("job_failed.txt")
    assert "is FAILED (exit 1:0" in out
    assert "hpc status 14" in out and "hpc logs 14" in out


def test_explain_job_asks_the_partitions_only_when_needed() -> None:
    asked: list[list[str]] = []

    def run(argv: list[str]) -> object:
        import subprocess

        asked.append(argv)
        text = rec("job_partition_down.txt") if argv[2] == "job" else rec("partitions_gpu_down.txt")
        return subprocess.CompletedProcess(argv, 0, text, "")

    out = explain_job("7", run, NOW)  # type: ignore[arg-type]
    assert [a[2] for a in asked] == ["job", "partition"]
    assert "(up now: tmpdir, notmpdir)" in "\n".join(out)


def test_cli_why_a_job_slurm_has_forgotten(runner: CliRunner, stub: Stub) -> None:
    stub("scontrol", stderr="slurm_load_jobs error: Invalid job id specified\n", rc=1)
    result = runner.invoke(app, ["why", "4242"])
    assert result.exit_code == 1
    assert "Slurm no longer knows job 4242" in result.stderr
    assert "hpc status 4242" in result.stderr


def test_cli_why_without_slurm(runner: CliRunner) -> None:
    result = runner.invoke(app, ["why", "5"])
    assert result.exit_code == 1
    assert "scontrol is not on PATH" in result.stderr


def test_cli_why_held(runner: CliRunner, stub: Stub) -> None:
    stub("scontrol", stdout=rec("job_held.txt"))
    result = runner.invoke(app, ["why", "8"])
    assert result.exit_code == 0, result.stderr
    assert "It is held by you" in result.stdout


def test_cli_why_an_experiment_asks_about_its_latest_submission(
    runner: CliRunner, stub: Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    (project / "hpc_files").mkdir(parents=True)
    monkeypatch.chdir(project)
    monkeypatch.setenv("SCRATCH", str(tmp_path / "scratch"))
    jobs = tmp_path / "scratch" / "proj" / "hpc_outputs" / "jobs"
    jobs.mkdir(parents=True)
    (jobs / "submissions.tsv").write_text(
        f"2024-05-01T12:00:00+0000\t7\ttrain\t1\t{jobs}/train-20240501-120000-1.sbatch\n"
        f"2024-05-02T12:00:00+0000\t8\ttrain\t1\t{jobs}/train-20240502-120000-2.sbatch\n"
    )
    scontrol = stub("scontrol", stdout=rec("job_held.txt"))
    result = runner.invoke(app, ["why", "train"])
    assert result.exit_code == 0, result.stderr
    assert Path(f"{scontrol}.args").read_text().split() == ["show", "job", "-o", "8"]
    assert "It is held by you" in result.stdout
