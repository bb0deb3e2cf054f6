"""After submitting: which submission a user means, its tasks with their states and logs.

`hpc status`, `hpc logs` and `hpc cancel` all name a submission the same way: a Slurm job
id (`123`, or `123_4` for one array task; any of a split array's ids, or the venv job's),
an experiment name (its latest submission), or a submission id (as `hpc status` shows it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hpc_toolkit.slurm import (
    Runner,
    TaskQuery,
    TaskState,
    query_tasks,
    run_command,
    slurm_conf_settings,
)
from hpc_toolkit.submissions import Group, SlurmJob, by_job_number, ref_key


class TargetError(ValueError):
    """The job id or experiment name matches no recorded submission (code 1), or names a
    task that does not exist or two submissions at once (code 2: a usage error)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Task:
    """One array task (or plain job, or venv job) of a submission, with what Slurm knows."""

    job: SlurmJob
    index: int | None  # array index within job.job_id
    number: int | None  # task number in the submission (line number - 1); None: venv job
    state: TaskState | None

    @property
    def slurm_id(self) -> str:
        return self.job.job_id if self.index is None else f"{self.job.job_id}_{self.index}"

    @property
    def state_name(self) -> str:
        return self.state.state if self.state else "UNKNOWN"

    @property
    def failed(self) -> bool:
        if self.state is None:
            return False
        code = self.state.exit_code.split(":", 1)[0]
        done_badly = self.state.state not in ("COMPLETED", "PENDING", "RUNNING", "REQUEUED")
        return done_badly or (code not in ("-", "0", "") and self.state.state != "RUNNING")

    def log(self, scratch: Path) -> Path:
        return self.job.log_path(scratch, self.index)

    def log_text(self, scratch: Path) -> str:
        """str(self.log(scratch)), cheaper per task (SlurmJob.log_text)."""
        return self.job.log_text(scratch, self.index)


def resolve(target: str, groups: list[Group]) -> tuple[Group, str | None]:
    """The submission `target` names and, for `JOB_TASK`, the task's Slurm id. A job
    number Slurm handed out again names its latest submission; a submission id names any.
    A name that is a job number and an experiment's name too (an experiment named `4`,
    from before job_submitter.sh refused such names) names the one that is recorded, and
    is refused when both are (TargetError, code 2)."""
    for g in groups:
        if g.submission_id == target and not target.isdigit():
            return g, None
    named = next((g for g in reversed(groups) if g.exp_name == target), None)
    m = re.fullmatch(r"([0-9]+)(?:_([0-9]+))?", target)
    if m:
        found = by_job_number(groups, m[1], slurm_conf_settings().get("clustername", ""))
        if found is not None and named is not None and found is not named:
            raise TargetError(
                f"{target!r} names both job {m[1]} (submission {found.submission_id}, "
                f"experiment {found.exp_name!r}) and experiment {target!r} (its latest "
                f"submission {named.submission_id}): name the one you mean by its submission "
                f"id (`hpc status {found.submission_id}` or `hpc status {named.submission_id}`)",
                2,
            )
        if found is not None and m[2] is not None:
            if found is named and not _has_task(found, target):
                return found, None
            _check_task(found, m[1], target)
            return found, target
        if found is not None:
            return found, None
        if named is not None:
            return named, None
        raise TargetError(
            f"job {m[1]} is not in the ledger of this project: "
            "run `hpc status` for the recorded jobs"
        )
    if named is not None:
        return named, None
    raise TargetError(missing_experiment(target))


def missing_experiment(exp_name: str) -> str:
    return (
        f"no submission of experiment {exp_name!r} is recorded: "
        "run `hpc status` for the recorded ones"
    )


def _has_task(group: Group, task_id: str) -> bool:
    return any(f"{j.job_id}_{i}" == task_id for j, i, _n in group.tasks() if i is not None)


def _check_task(group: Group, job_id: str, task_id: str) -> None:
    """TargetError (code 2) unless JOB_TASK `task_id` is a task of job `job_id` of `group`."""
    indices = [i for j, i, _n in group.tasks() if j.job_id == job_id and i is not None]
    if task_id in {f"{job_id}_{i}" for i in indices}:
        return
    where = f"no such task {task_id} in submission {group.submission_id}"
    if not indices:
        raise TargetError(
            f"{where}: job {job_id} is a single job, not an array: name it {job_id}", 2
        )
    raise TargetError(
        f"{where}: job {job_id}'s tasks are {job_id}_{min(indices)} to {job_id}_{max(indices)} "
        f"(`hpc status {group.submission_id}` lists them)",
        2,
    )


def tasks_of(group: Group, query: TaskQuery) -> list[Task]:
    return [
        Task(job, index, number, query.state_of(ref_key(job), index))
        for job, index, number in group.tasks()
    ]


def query_groups(groups: list[Group], run: Runner = run_command) -> TaskQuery:
    """Task states of these submissions' jobs, each told from any other job Slurm numbered
    the same (Group.refs): read them with tasks_of. Every task is asked for (expected), so
    that one slurmdbd has not yet heard of is taken from squeue, not shown UNKNOWN."""
    refs = {k: r for g in groups for k, r in g.refs.items()}
    return query_tasks(refs, run, expected_tasks(groups))


def expected_tasks(groups: list[Group]) -> dict[str, list[int | None]]:
    """The array indices (None: a plain job) of each job of these submissions, by ref_key:
    query_tasks's `expected`."""
    out: dict[str, list[int | None]] = {}
    for g in groups:
        for job, index, _number in g.tasks():
            out.setdefault(ref_key(job), []).append(index)
    return out
