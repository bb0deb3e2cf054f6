"""The submissions ledger that job_submitter.sh appends to, and where to find it.

Each successful sbatch adds one tab-separated line to
`$SCRATCH/<project>/hpc_outputs/jobs/submissions.tsv`:
`submitted_at  job_id  exp_name  num_tasks  script_path`. The ledger is only ever appended
to by a shell, so a torn or hand-edited line is possible: it is skipped with a warning,
never fatal, because the other lines are still worth showing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

LEDGER = Path("hpc_outputs", "jobs", "submissions.tsv")


class LocateError(RuntimeError):
    """The project's scratch folder cannot be worked out from the environment."""


@dataclass(frozen=True)
class Submission:
    """One line of the ledger: one sbatch call (an array job when num_tasks > 1)."""

    submitted_at: datetime
    job_id: str
    exp_name: str
    num_tasks: int
    script_path: Path

    @property
    def is_array(self) -> bool:
        return self.num_tasks > 1

    def log_pattern(self, scratch_dir: Path) -> str:
        """Where Slurm writes the logs (a glob over the tasks for an array job)."""
        name = f"{self.exp_name}-{self.job_id}" + ("_*.out" if self.is_array else ".out")
        return str(scratch_dir / "hpc_outputs" / name)

    def state_summary(self, counts: Mapping[str, int]) -> str:
        """`COMPLETED 2, FAILED 1`; tasks Slurm did not report on are counted as UNKNOWN."""
        parts = [f"{state} {n}" for state, n in sorted(counts.items())]
        missing = self.num_tasks - sum(counts.values())
        if missing > 0:
            parts.append(f"UNKNOWN {missing}")
        return ", ".join(parts)


def _parse_time(text: str) -> datetime:
    # bash writes +0000 (no colon), which datetime.fromisoformat only takes from Python 3.11.
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return datetime.fromisoformat(text)


def parse_line(line: str) -> Submission:
    """One ledger line as a Submission; ValueError saying what is wrong with it."""
    cols = line.rstrip("\r\n").split("\t")
    if len(cols) != 5:
        raise ValueError(f"{len(cols)} tab-separated fields instead of 5")
    when, job_id, exp_name, num_tasks, script = cols
    if not re.fullmatch(r"[0-9]+", job_id):
        raise ValueError(f"job id {job_id!r} is not a number")
    if not re.fullmatch(r"[0-9]+", num_tasks) or int(num_tasks) < 1:
        raise ValueError(f"task count {num_tasks!r} is not a positive whole number")
    if not exp_name or not script:
        raise ValueError("empty experiment name or script path")
    try:
        submitted_at = _parse_time(when)
    except ValueError:
        raise ValueError(f"time {when!r} is not ISO 8601") from None
    return Submission(submitted_at, job_id, exp_name, int(num_tasks), Path(script))


def read_submissions(path: Path, on_bad_line: Callable[[str], None]) -> list[Submission]:
    """Every well-formed line of the ledger at `path`, oldest first; [] if it does not exist."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    subs: list[Submission] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            subs.append(parse_line(line))
        except ValueError as exc:
            on_bad_line(f"{path}:{lineno}: skipped a malformed line ({exc})")
    return subs


def find_project_root(cwd: Path) -> Path | None:
    """The nearest folder, from `cwd` up, that holds hpc_files/ (as job_submitter.sh sees it)."""
    for folder in (cwd, *cwd.parents):
        if (folder / "hpc_files").is_dir():
            return folder
    return None


def find_scratch_dir(override: Path | None, environ: Mapping[str, str], cwd: Path) -> Path:
    """`$SCRATCH/<project>`, the way job_submitter.sh names it, unless `override` is given."""
    if override is not None:
        return override
    scratch = environ.get("SCRATCH", "")
    if not scratch:
        raise LocateError(
            "SCRATCH is not set: export SCRATCH=/path/to/scratch or pass --scratch-dir"
        )
    project = environ.get("HPC_PROJECT_NAME", "")
    if not project:
        root = find_project_root(cwd)
        if root is None:
            raise LocateError(
                f"no hpc_files/ folder in {cwd} or above: run hpc inside your project, "
                "set HPC_PROJECT_NAME, or pass --scratch-dir"
            )
        project = root.name
    return Path(scratch) / project


def ledger_path(scratch_dir: Path) -> Path:
    return scratch_dir / LEDGER
