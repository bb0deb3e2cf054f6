"""The job's environment as typed values, for Python code running inside a job.

The batch script made by job_submitter.sh exports these variables; reading them here once,
with types, saves every training script from parsing strings (and from guessing whether it
runs under Slurm or on a laptop).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


class JobEnvError(ValueError):
    """A variable is set to something that cannot be its type (e.g. a non-number count)."""


def _as_str(name: str, value: str) -> str:
    return value


def _as_path(name: str, value: str) -> Path:
    return Path(value)


def _as_int(name: str, value: str) -> int:
    # Only plain digits: int() would also take " 3", "+3" and "3_0", which no job sets.
    if not re.fullmatch(r"[0-9]+", value):
        raise JobEnvError(f"{name}={value!r} is not a whole number")
    return int(value)


_PARSERS: dict[str, Callable[[str, str], object]] = {
    "str": _as_str,
    "path": _as_path,
    "int": _as_int,
}


def _var(env: str, kind: str) -> Any:
    """A field read from environment variable `env`; None when the variable is unset or empty."""
    return field(default=None, metadata={"env": env, "kind": kind})


@dataclass(frozen=True)
class JobEnv:
    """What a job knows about itself. Every field is None where its variable is absent."""

    source_dir: Path | None = _var("source_dir", "path")
    project_name: str | None = _var("project_name", "str")
    scratch_dir: Path | None = _var("scratch_dir", "path")
    exp_name: str | None = _var("exp_name", "str")
    task_index: int | None = _var("HPC_TASK_INDEX", "int")
    num_tasks: int | None = _var("HPC_NUM_TASKS", "int")
    restart_count: int | None = _var("HPC_RESTART_COUNT", "int")
    exp_dir: Path | None = _var("HPC_EXP_DIR", "path")
    checkpoint_dir: Path | None = _var("HPC_CHECKPOINT_DIR", "path")
    output_dir: Path | None = _var("HPC_OUTPUT_DIR", "path")
    commands_file: Path | None = _var("HPC_COMMANDS_FILE", "path")
    job_script: Path | None = _var("HPC_JOB_SCRIPT", "path")
    launcher: str | None = _var("HPC_LAUNCHER", "str")
    num_nodes: int | None = _var("HPC_NUM_NODES", "int")
    gpus_per_node: int | None = _var("HPC_GPUS_PER_NODE", "int")
    cpus_per_node: int | None = _var("HPC_CPUS_PER_NODE", "int")
    tasks_per_node: int | None = _var("HPC_TASKS_PER_NODE", "int")
    cpus_per_task: int | None = _var("HPC_CPUS_PER_TASK", "int")
    # A path, or the word `none` when the job runs without a virtual environment.
    venv: str | None = _var("HPC_VENV", "str")
    slurm_job_id: str | None = _var("SLURM_JOB_ID", "str")
    slurm_array_task_id: int | None = _var("SLURM_ARRAY_TASK_ID", "int")
    slurm_tmpdir: Path | None = _var("SLURM_TMPDIR", "path")
    slurm_restart_count: int | None = _var("SLURM_RESTART_COUNT", "int")

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> JobEnv:
        """Read the variables from `environ` (default: os.environ). Raises JobEnvError."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f.metadata["env"], "")
            if raw:
                values[f.name] = _PARSERS[f.metadata["kind"]](f.metadata["env"], raw)
        return cls(**values)

    @property
    def in_job(self) -> bool:
        """True under Slurm (SLURM_JOB_ID is set)."""
        return self.slurm_job_id is not None

    @property
    def is_rerun(self) -> bool:
        """True when Slurm requeued this job, so a checkpoint may be waiting to be resumed."""
        count = self.restart_count if self.restart_count is not None else self.slurm_restart_count
        return (count or 0) > 0

    @property
    def local_tmpdir(self) -> Path | None:
        """The node-local scratch folder, where the cluster provides one."""
        return self.slurm_tmpdir

    def variables(self) -> dict[str, str]:
        """The set variables as the environment spells them, in a stable order."""
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.metadata["env"]] = str(value)
        return out

    def to_shell(self) -> str:
        """`export NAME=value` lines, quoted for bash, for the variables that are set."""
        return "".join(
            f"export {name}={shlex.quote(value)}\n" for name, value in self.variables().items()
        )

    def to_json(self) -> str:
        """Every field (null where absent) and the derived properties, as a JSON object."""
        data: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            data[f.name] = str(value) if isinstance(value, Path) else value
        data["in_job"] = self.in_job
        data["is_rerun"] = self.is_rerun
        data["local_tmpdir"] = None if self.local_tmpdir is None else str(self.local_tmpdir)
        return json.dumps(data, indent=2) + "\n"
