"""Paths of the project that two tasks of one submission both wrote (issue 35): the lists
the job side's hook keeps per task, and the lines `hpc status` prints from them."""

from __future__ import annotations

from pathlib import Path

from hpc_toolkit.project_writes import read_writes, shared_write_lines, shared_writes, writes_dir


def _lists(folder: Path, task: int, **per_process: list[str]) -> None:
    (folder / str(task)).mkdir(parents=True, exist_ok=True)
    for name, paths in per_process.items():
        (folder / str(task) / name).write_text("".join(p + "\n" for p in paths))


def test_writes_dir_is_beside_the_commands_file() -> None:
    assert writes_dir({"HPC_COMMANDS_FILE": "/s/jobs/e-1.commands"}) == Path("/s/jobs/e-1.writes")
    assert writes_dir({}) is None


def test_each_tasks_paths_from_all_its_processes(tmp_path: Path) -> None:
    _lists(tmp_path, 0, n1_10=["outputs/a/config.yaml"], n2_11=["outputs/a/config.yaml", "x"])
    _lists(tmp_path, 3, n1_12=["y"])
    (tmp_path / "junk").mkdir()
    assert read_writes(tmp_path) == {0: {"outputs/a/config.yaml", "x"}, 3: {"y"}}
    assert read_writes(tmp_path / "missing") == {}


def test_shared_paths_grouped_by_the_tasks_that_wrote_them() -> None:
    writes = {0: {"a", "b", "c"}, 1: {"a", "b"}, 2: {"a", "z"}, 5: {"q"}}
    assert shared_writes(writes) == {(0, 1): ["b"], (0, 1, 2): ["a"]}
    assert shared_writes({0: {"a"}, 1: {"b"}}) == {}


def test_status_lines_from_the_batch_scripts(tmp_path: Path) -> None:
    commands = tmp_path / "jobs" / "e-1.commands"
    script = tmp_path / "jobs" / "e-1.sbatch"
    script.parent.mkdir()
    script.write_text(f"#!/bin/bash\nexport HPC_COMMANDS_FILE='{commands}'\n")
    folder = tmp_path / "jobs" / "e-1.writes"
    paths = [f"outputs/2026-11-28/10-24-25/f{i}" for i in range(7)]
    _lists(folder, 0, n_1=paths)
    _lists(folder, 1, n_2=paths)
    _lists(folder, 2, n_3=["other"])
    lines = shared_write_lines([script, script, tmp_path / "gone.sbatch"])
    assert len(lines) == 1
    assert lines[0].startswith("   warning: tasks 0, 1 wrote the same path(s) in the project: ")
    assert "f0, " in lines[0] and " and 2 more; one overwrote the other's" in lines[0]
    _lists(folder, 1, n_2=["elsewhere"])
    assert shared_write_lines([script]) == []
