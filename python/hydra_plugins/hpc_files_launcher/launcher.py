"""The launcher: the sweep's points become the lines of one job array.

Each point runs as `python SCRIPT OVERRIDES...`, the script as Hydra was started (relative
to the project when it is in it), each override one quoted word; the lines go to a
commands file in the sweep's folder, submitted with job_submitter.sh --configs. The job
gives each line its task's own Hydra run folder (hydra.run.dir='$HPC_RESULTS_DIR',
hpc_files/lib/hydra.sh). launch() returns once the array is submitted: each JobReturn's
value is "JOB_ID_TASK"; follow them with `hpc status JOB_ID`.
"""

from __future__ import annotations

import logging
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

log = logging.getLogger(__name__)

_SUBMITTED = re.compile(r"^Submitted batch job ([0-9]+)", re.MULTILINE)


def find_submitter(start: Path) -> Path | None:
    """hpc_files/job_submitter.sh in START or a folder above it."""
    for folder in (start, *start.parents):
        candidate = folder / "hpc_files" / "job_submitter.sh"
        if candidate.is_file():
            return candidate
    return None


def command_line(python: str, script: str, overrides: Sequence[str]) -> str:
    """One line of the commands file: the script with the point's overrides, each quoted
    for bash (the job runs the line with bash)."""
    return " ".join([python, shlex.quote(script), *(shlex.quote(o) for o in overrides)])


def submitter_argv(submitter: Path, configs: Path, cfg: DictConfig) -> list[str]:
    """job_submitter.sh's command line for the commands file CONFIGS and the settings."""
    argv = ["bash", str(submitter), "--configs", str(configs), "--exp-name", str(cfg.exp_name)]
    for key, flag in (("gpus", "--gpus"), ("cpus", "--cpus"), ("mem", "--mem"),
                      ("time", "--time"), ("partition", "--partition"),
                      ("max_parallel", "--max-parallel")):  # fmt: skip
        value = cfg.get(key)
        if value is not None:
            argv += [flag, str(value)]
    argv += [str(o) for o in cfg.get("options") or []]
    if cfg.get("dry_run"):
        argv.append("--dry-run")
    return argv


class HpcFilesLauncher(Launcher):
    def __init__(self, **params: object) -> None:
        self.params = params
        self.config: DictConfig | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        assert self.config is not None
        launcher_cfg = self.config.hydra.launcher
        cwd = Path(self.config.hydra.runtime.cwd)
        submitter = (
            Path(launcher_cfg.submitter) if launcher_cfg.submitter else find_submitter(cwd)
        )
        if submitter is None or not submitter.is_file():
            raise RuntimeError(
                f"hpc_files launcher: no hpc_files/job_submitter.sh in {cwd} or above it: "
                "install hpc_files into the project (hpc_files/install_into_project.sh), or "
                "set hydra.launcher.submitter=PATH"
            )
        project = submitter.parent.parent.resolve()
        script = Path(sys.argv[0]).resolve()
        shown = str(script.relative_to(project)) if script.is_relative_to(project) else str(script)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        if not sweep_dir.is_absolute():
            sweep_dir = cwd / sweep_dir
        sweep_dir.mkdir(parents=True, exist_ok=True)
        configs = sweep_dir / "hpc_files_commands.txt"
        lines = [command_line("python", shown, list(o)) for o in job_overrides]
        configs.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        for idx, overrides in enumerate(job_overrides):
            log.info(f"\t#{initial_job_idx + idx} : {' '.join(filter_overrides(overrides))}")
        argv = submitter_argv(submitter, configs, launcher_cfg)
        log.info(f"hpc_files: {len(lines)} line(s) in {configs}: {shlex.join(argv)}")
        done = subprocess.run(argv, cwd=project, capture_output=True, text=True, check=False)
        sys.stderr.write(done.stderr)
        sys.stdout.write(done.stdout)
        if done.returncode != 0:
            raise RuntimeError(
                f"hpc_files launcher: job_submitter.sh exited {done.returncode} "
                "(its message is above); nothing was submitted"
            )
        ids = _SUBMITTED.findall(done.stdout)
        returns = []
        for idx, overrides in enumerate(job_overrides):
            ret = JobReturn(overrides=list(overrides), working_dir=str(sweep_dir))
            if len(ids) == 1:
                ret.return_value = f"{ids[0]}_{idx}" if len(lines) > 1 else ids[0]
            else:  # a dry run (none), or several arrays (the task's is in hpc status)
                ret.return_value = f"task {idx} of job(s) {', '.join(ids) or '(dry run)'}"
            ret.status = JobStatus.COMPLETED
            returns.append(ret)
        if ids:
            log.info(f"hpc_files: submitted as job(s) {', '.join(ids)}: hpc status {ids[-1]}")
        return returns
