"""Results that did not come back: where the job side kept them, for `hpc status`.

An attempt whose results could not be copied to `<exp>/results` (a full disk or quota)
leaves them in `<exp>/.hpc_results_kept[/task_I]/attempt_N` on $SCRATCH
(virtual_env_hpc_files/staging.sh); a later attempt or a --rerun brings them back and
removes the folder. Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from hpc_toolkit.submissions import read_script

KEPT_DIRNAME = ".hpc_results_kept"


def kept_folders(exp_dir: Path) -> list[Path]:
    """The attempt_N folders kept under EXP_DIR (its own and its array tasks'), sorted."""
    root = exp_dir / KEPT_DIRNAME
    try:
        found = [p for p in root.glob("attempt_*") if p.is_dir()]
        found += [p for p in root.glob("task_*/attempt_*") if p.is_dir()]
    except OSError:
        return []
    return sorted(found)


def _exp_dirs(scripts: Iterable[Path]) -> list[Path]:
    """The experiment folders (HPC_EXP_DIR) SCRIPTS name, each once, in order."""
    seen: list[Path] = []
    for script in scripts:
        try:
            exp = read_script(script).exports.get("HPC_EXP_DIR", "")
        except OSError:
            continue
        if exp and Path(exp) not in seen:
            seen.append(Path(exp))
    return seen


def kept_paths(scripts: Iterable[Path]) -> list[Path]:
    """Every kept attempt_N folder of the experiments SCRIPTS name (`hpc status --json`)."""
    return [p for exp in _exp_dirs(scripts) for p in kept_folders(exp)]


def kept_lines(scripts: Iterable[Path]) -> list[str]:
    """`hpc status` lines for a submission whose batch scripts are SCRIPTS: one per
    experiment folder that holds kept results; none when there are none."""
    lines: list[str] = []
    for exp in _exp_dirs(scripts):
        folders = kept_folders(exp)
        if folders:
            names = ", ".join(str(p.relative_to(exp / KEPT_DIRNAME)) for p in folders[:10])
            more = f" and {len(folders) - 10} more" if len(folders) > 10 else ""
            lines.append(
                f"  results NOT copied back: {names}{more} kept in {exp / KEPT_DIRNAME}"
                f" (the next attempt or a --rerun brings them back to {exp}/results;"
                " or copy them yourself: rsync -a --update)"
            )
    return lines
