"""JobEnv: typed reading of the variables the batch script exports."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from hpc_toolkit.jobenv import JobEnv, JobEnvError

ARRAY_TASK = {
    "source_dir": "/home/me/my project",
    "project_name": "my project",
    "scratch_dir": "/scratch/me/my project",
    "exp_name": "sweep'; echo foo",
    "HPC_TASK_INDEX": "2",
    "HPC_NUM_TASKS": "4",
    "HPC_RESTART_COUNT": "0",
    "HPC_EXP_DIR": "/scratch/me/my project/sweep",
    "HPC_CHECKPOINT_DIR": "/scratch/me/my project/sweep/checkpoints",
    "HPC_OUTPUT_DIR": "/scratch/me/my project/hpc_outputs",
    "HPC_COMMANDS_FILE": "/scratch/me/my project/hpc_outputs/jobs/x.commands",
    "HPC_JOB_SCRIPT": "/scratch/me/my project/hpc_outputs/jobs/x.sbatch",
    "HPC_LAUNCHER": "srun",
    "HPC_NUM_NODES": "1",
    "HPC_GPUS_PER_NODE": "2",
    "HPC_CPUS_PER_NODE": "8",
    "HPC_TASKS_PER_NODE": "1",
    "HPC_CPUS_PER_TASK": "8",
    "HPC_VENV": "none",
    "SLURM_JOB_ID": "1001",
    "SLURM_ARRAY_TASK_ID": "2",
    "SLURM_TMPDIR": "/localscratch/1001",
    "SLURM_RESTART_COUNT": "0",
}


def test_outside_a_job_everything_is_absent() -> None:
    job = JobEnv.from_environ({})
    assert job == JobEnv()
    assert not job.in_job
    assert not job.is_rerun
    assert job.local_tmpdir is None
    assert job.to_shell() == ""


def test_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("HPC_NUM_TASKS", "3")
    job = JobEnv.from_environ()
    assert job.slurm_job_id == "77"
    assert job.num_tasks == 3


def test_array_task_has_types() -> None:
    job = JobEnv.from_environ(ARRAY_TASK)
    assert job.in_job
    assert job.task_index == 2
    assert job.num_tasks == 4
    assert job.slurm_array_task_id == 2
    assert job.gpus_per_node == 2
    assert job.source_dir == Path("/home/me/my project")
    assert job.checkpoint_dir == Path("/scratch/me/my project/sweep/checkpoints")
    assert job.local_tmpdir == Path("/localscratch/1001")
    assert job.venv == "none"
    assert not job.is_rerun


def test_single_job_without_tmpdir() -> None:
    env = {k: v for k, v in ARRAY_TASK.items() if k not in ("SLURM_ARRAY_TASK_ID", "SLURM_TMPDIR")}
    job = JobEnv.from_environ(env)
    assert job.in_job
    assert job.slurm_array_task_id is None
    assert job.local_tmpdir is None


@pytest.mark.parametrize(
    ("hpc", "slurm", "rerun"),
    [("1", "1", True), ("0", "0", False), (None, "2", True), (None, None, False), ("", "", False)],
)
def test_is_rerun(hpc: str | None, slurm: str | None, rerun: bool) -> None:
    env = {"SLURM_JOB_ID": "5"}
    if hpc is not None:
        env["HPC_RESTART_COUNT"] = hpc
    if slurm is not None:
        env["SLURM_RESTART_COUNT"] = slurm
    assert JobEnv.from_environ(env).is_rerun is rerun


@pytest.mark.parametrize("bad", ["two", "-1", " 3", "3.0"])
def test_bad_number_names_the_variable(bad: str) -> None:
    with pytest.raises(JobEnvError, match="HPC_NUM_TASKS"):
        JobEnv.from_environ({"HPC_NUM_TASKS": bad})


def test_to_shell_round_trips_through_a_shell_parser() -> None:
    text = JobEnv.from_environ(ARRAY_TASK).to_shell()
    parsed = {}
    for line in text.splitlines():
        words = shlex.split(line)
        assert words[0] == "export"
        name, _, value = words[1].partition("=")
        parsed[name] = value
    assert parsed == ARRAY_TASK


def test_to_json() -> None:
    data = json.loads(JobEnv.from_environ(ARRAY_TASK).to_json())
    assert data["task_index"] == 2
    assert data["exp_name"] == "sweep'; echo foo"
    assert data["scratch_dir"] == "/scratch/me/my project"
    assert data["in_job"] is True
    assert data["is_rerun"] is False
    assert data["local_tmpdir"] == "/localscratch/1001"
    assert json.loads(JobEnv().to_json())["slurm_job_id"] is None
