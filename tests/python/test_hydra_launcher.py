"""The Hydra launcher plugin's pure parts (python/hydra_plugins/hpc_files_launcher): the
line each point of a sweep becomes, job_submitter.sh's command line, where the submitter is
found. On the cluster, against hydra-submitit-launcher: tests/integration/programs.bats."""

from __future__ import annotations

import shlex
from pathlib import Path

from hydra_plugins.hpc_files_launcher.config import HpcFilesLauncherConf
from hydra_plugins.hpc_files_launcher.launcher import command_line, find_submitter, submitter_argv
from omegaconf import OmegaConf


def test_each_override_is_one_quoted_word() -> None:
    line = command_line("python", "src/train.py", ["lr=0.1", "name='a b'", "+x=$HOME;rm"])
    assert line == "python src/train.py lr=0.1 'name='\"'\"'a b'\"'\"'' '+x=$HOME;rm'"
    assert shlex.split(line)[2:] == ["lr=0.1", "name='a b'", "+x=$HOME;rm"]


def test_submitter_argv_from_the_settings(tmp_path: Path) -> None:
    cfg = OmegaConf.structured(HpcFilesLauncherConf(exp_name="e", gpus=1, time="01:00:00",
                                                    options=["--fresh"]))  # fmt: skip
    argv = submitter_argv(tmp_path / "s.sh", tmp_path / "c.txt", cfg)
    assert argv == ["bash", str(tmp_path / "s.sh"), "--configs", str(tmp_path / "c.txt"),
                    "--exp-name", "e", "--gpus", "1", "--time", "01:00:00", "--fresh"]  # fmt: skip
    cfg.dry_run = True
    assert submitter_argv(tmp_path / "s.sh", tmp_path / "c.txt", cfg)[-1] == "--dry-run"


def test_the_submitter_is_found_here_or_above(tmp_path: Path) -> None:
    (tmp_path / "hpc_files").mkdir()
    (tmp_path / "hpc_files" / "job_submitter.sh").write_text("")
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert find_submitter(tmp_path / "a" / "b") == tmp_path / "hpc_files" / "job_submitter.sh"
    assert find_submitter(Path("/")) is None
