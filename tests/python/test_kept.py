"""hpc status's line for results the job side kept because they could not come back."""

from __future__ import annotations

from pathlib import Path

from hpc_toolkit.kept import kept_folders, kept_lines, kept_paths


def _script(tmp_path: Path, exp: Path) -> Path:
    script = tmp_path / "e.sbatch"
    script.write_text(f"#!/bin/bash\nexport HPC_EXP_DIR='{exp}'\n", encoding="utf-8")
    return script


def test_no_kept_results_no_line(tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    (exp / "results").mkdir(parents=True)
    assert kept_lines([_script(tmp_path, exp)]) == []
    assert kept_lines([tmp_path / "missing.sbatch", Path()]) == []


def test_kept_attempts_are_named_with_where_they_are(tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    (exp / ".hpc_results_kept" / "attempt_1").mkdir(parents=True)
    (exp / ".hpc_results_kept" / "task_3" / "attempt_2").mkdir(parents=True)
    assert [p.name for p in kept_folders(exp)] == ["attempt_1", "attempt_2"]
    script = _script(tmp_path, exp)
    (line,) = kept_lines([script, script])
    assert "results NOT copied back: attempt_1, task_3/attempt_2" in line
    assert f"kept in {exp / '.hpc_results_kept'}" in line
    assert f"{exp}/results" in line
    assert kept_paths([script]) == kept_folders(exp)
