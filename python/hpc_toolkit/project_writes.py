"""Paths of the project folder that two tasks of one submission both wrote.

The job side (virtual_env_hpc_files/project_writes.sh and its Python hook) keeps, per task,
the paths its Python processes wrote into the project, relative to it, one per line, in
`<commands file less .commands>.writes/T/<node>.<pid>` (T: the task's number in the
submission; a folder made ends in /). Two tasks that wrote the same path overwrote one
another's files (a Hydra app's `outputs/<date>/<time>`, a relative `--out_dir`);
`hpc status` says which. Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from hpc_toolkit.paths import Home
from hpc_toolkit.submissions import read_script

MAX_READ = 1 << 20  # one process's list: a path per line
SHOWN = 5  # paths named per line of `hpc status`


def writes_dir(exports: Mapping[str, str]) -> Path | None:
    """The folder of a submission's write lists, from its plan's job variables."""
    home = Home.of_exports(exports)
    return home.path("writes") if home is not None else None


def read_writes(folder: Path) -> dict[int, set[str]]:
    """Each task's paths (task number: paths); unreadable lists are skipped."""
    out: dict[int, set[str]] = {}
    try:
        tasks = [d for d in folder.iterdir() if d.name.isdigit() and d.is_dir()]
    except OSError:
        return out
    for task in tasks:
        paths: set[str] = set()
        try:
            lists = list(task.iterdir())
        except OSError:
            continue
        for f in lists:
            try:
                with open(f, encoding="utf-8", errors="replace") as fh:
                    paths.update(p for p in fh.read(MAX_READ).splitlines() if p)
            except OSError:
                continue
        if paths:
            out[int(task.name)] = paths
    return out


def shared_writes(writes: Mapping[int, set[str]]) -> dict[tuple[int, ...], list[str]]:
    """The paths more than one task wrote, grouped by the tasks that wrote them."""
    by_path: dict[str, list[int]] = {}
    for task, paths in writes.items():
        for p in paths:
            if not p.endswith("/"):  # a folder both made: their files may differ
                by_path.setdefault(p, []).append(task)
    groups: dict[tuple[int, ...], list[str]] = {}
    for p, tasks in by_path.items():
        if len(tasks) > 1:
            groups.setdefault(tuple(sorted(tasks)), []).append(p)
    return {k: sorted(v) for k, v in sorted(groups.items())}


def shared_write_lines(scripts: Iterable[Path]) -> list[str]:
    """`hpc status` lines for a submission (its batch scripts): one per group of tasks
    that wrote the same paths in the project; none when no two did."""
    folders: list[Path] = []
    for script in scripts:
        try:
            folder = writes_dir(read_script(script).exports)
        except OSError:
            continue
        if folder is not None and folder not in folders:
            folders.append(folder)
    lines = []
    for folder in folders:
        for tasks, paths in shared_writes(read_writes(folder)).items():
            named = ", ".join(paths[:SHOWN])
            more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
            lines.append(
                f"   warning: tasks {', '.join(map(str, tasks))} wrote the same path(s) in the "
                f"project: {named}{more}; one overwrote the other's: give each task its own "
                "folder ($HPC_RESULTS_DIR, $HPC_CHECKPOINT_DIR)"
            )
    return lines
