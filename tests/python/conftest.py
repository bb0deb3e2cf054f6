"""Hermetic setup for every test: no Slurm or hpc variables, HOME and PATH in tmp_path.

PATH holds only an empty bin/ folder, so the real sacct/squeue are never reached; a test
that wants one writes a stub there with `stub`.
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path
from typing import Protocol

import pytest
from typer.testing import CliRunner

JOB_VARS = ("source_dir", "project_name", "scratch_dir", "exp_name", "SCRATCH")


@pytest.fixture(autouse=True)
def hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith(("SLURM_", "HPC_")) or name in JOB_VARS:
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


class Stub(Protocol):
    def __call__(self, name: str, stdout: str = "", stderr: str = "", rc: int = 0) -> Path: ...


@pytest.fixture
def stub(hermetic: Path) -> Stub:
    """Write an executable `name` on PATH printing fixed output; its argv lands in name.args.

    Only shell builtins are used, since PATH holds nothing else.
    """

    def write(name: str, stdout: str = "", stderr: str = "", rc: int = 0) -> Path:
        path = hermetic / name
        path.write_text(
            "#!/bin/sh\n"
            'printf "%s\\n" "$@" > "$0.args"\n'
            f"printf %s {shlex.quote(stdout)}\n"
            f"printf %s {shlex.quote(stderr)} >&2\n"
            f"exit {rc}\n"
        )
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return path

    return write


@pytest.fixture
def runner() -> CliRunner:
    """Keeps stderr apart from stdout on every click version (mix_stderr went away in 8.2)."""
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()
