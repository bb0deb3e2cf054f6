"""The launcher's settings: `hydra.launcher.NAME=VALUE` on the command line, or a
`hydra/launcher: hpc_files` default with these keys in the app's config. (Typed as
OmegaConf and Hydra's plugin scan read them: no `from __future__ import annotations`,
and typing's Optional and List, which OmegaConf 2.3 reads on Python 3.10.)"""

# ruff: noqa: UP006, UP035, UP045

from dataclasses import dataclass, field
from typing import List, Optional

from hydra.core.config_store import ConfigStore


@dataclass
class HpcFilesLauncherConf:
    _target_: str = "hydra_plugins.hpc_files_launcher.launcher.HpcFilesLauncher"
    # The experiment's name (job_submitter.sh --exp-name): its folder, logs and jobs.
    exp_name: str = "${hydra.job.name}"
    # Resources per task, as job_submitter.sh takes them (unset: the cluster profile's).
    gpus: Optional[int] = None
    cpus: Optional[int] = None
    mem: Optional[str] = None
    time: Optional[str] = None
    partition: Optional[str] = None
    max_parallel: Optional[int] = None
    # Any other job_submitter.sh options, each word an item: ["--fresh"], ["--data", "d"].
    options: List[str] = field(default_factory=list)
    # Print the submission (job_submitter.sh --dry-run) instead of submitting.
    dry_run: bool = False
    # job_submitter.sh; empty: hpc_files/job_submitter.sh in the folder Hydra was started
    # from or one above it.
    submitter: str = ""


ConfigStore.instance().store(
    group="hydra/launcher", name="hpc_files", node=HpcFilesLauncherConf, provider="hpc_files"
)
