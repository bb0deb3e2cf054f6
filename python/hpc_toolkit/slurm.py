"""Job states from Slurm: sacct when it works, else squeue (which only knows live jobs).

Both are called by name through PATH, so tests put a stub first on PATH. Array jobs come
back one row per task (`123_0`) or, while pending, one row per range (`123_[2-9%4]`);
everything is counted per task under the submission's job id.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

SACCT_FIELDS = "JobID,JobName,State,ExitCode,Elapsed"
TIMEOUT_S = 60.0  # a hung slurmdbd should not hang `hpc status` for ever

# 123, 123_4, 123_[0-9%4], 123+0 (heterogeneous jobs); steps (123.batch) do not match.
_JOB_ID = re.compile(r"(?P<job>[0-9]+)(?:_(?:[0-9]+|\[(?P<range>[^\]]*)\]))?(?:\+[0-9]+)?")


@dataclass(frozen=True)
class StateQuery:
    """Task counts per state, per job id; `note` says what could not be known, if anything."""

    counts: dict[str, Counter[str]] = field(default_factory=dict)
    source: str = "none"  # "sacct", "squeue" or "none"
    note: str | None = None


def count_range(spec: str) -> int:
    """How many tasks an array range names: `0-9%4` is 10, `1,3,5-7` is 5, `0-15:4` is 4."""
    total = 0
    for part in spec.split("%", 1)[0].split(","):
        m = re.fullmatch(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?", part.strip())
        if m is None:
            total += 1  # a form we do not know still stands for at least one task
            continue
        first = int(m[1])
        last = int(m[2]) if m[2] else first
        step = int(m[3]) if m[3] else 1
        total += len(range(first, last + 1, max(step, 1)))
    return total


def parse_rows(text: str, wanted: Sequence[str], state_col: int) -> dict[str, Counter[str]]:
    """Count tasks per state for the job ids in `wanted`, from `|`-separated rows.

    The job id is column 0 and the state column `state_col` (2 for our sacct fields, 1 for
    squeue). The state is its first word, so `CANCELLED by 123` counts as CANCELLED.
    """
    wanted_ids = set(wanted)
    counts: dict[str, Counter[str]] = {}
    for line in text.splitlines():
        cols = line.split("|")
        m = _JOB_ID.fullmatch(cols[0].strip())
        if m is None or m["job"] not in wanted_ids or len(cols) <= state_col:
            continue
        words = cols[state_col].split()
        state = words[0] if words else "UNKNOWN"
        n = count_range(m["range"]) if m["range"] is not None else 1
        counts.setdefault(m["job"], Counter())[state] += n
    return counts


def _run(argv: list[str]) -> subprocess.CompletedProcess[str] | str:
    """The finished command, or why it could not be run at all."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except FileNotFoundError:
        return f"{argv[0]} is not on PATH"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{argv[0]} could not be run ({exc})"


def _failure(done: subprocess.CompletedProcess[str]) -> str:
    said = done.stderr.strip().splitlines()
    return f"{done.args[0]} failed (exit {done.returncode}{': ' + said[-1] if said else ''})"


def query_states(job_ids: Sequence[str]) -> StateQuery:
    """States of `job_ids` from sacct, falling back to squeue when sacct is missing or fails."""
    if not job_ids:
        return StateQuery(source="none")
    ids = ",".join(job_ids)
    sacct = _run(["sacct", "-X", "-P", "-n", "-o", SACCT_FIELDS, "-j", ids])
    if not isinstance(sacct, str) and sacct.returncode == 0:
        return StateQuery(parse_rows(sacct.stdout, job_ids, state_col=2), "sacct")
    why = sacct if isinstance(sacct, str) else _failure(sacct)
    squeue = _run(["squeue", "-h", "-o", "%i|%T", "-j", ids])
    if isinstance(squeue, str):
        return StateQuery({}, "none", f"{why}, and {squeue}: job states are unknown")
    # squeue exits 1 with "Invalid job id" when none of the jobs is queued or running any
    # more: that is an answer (nothing live), not a failure.
    if squeue.returncode != 0 and "Invalid job id" not in squeue.stderr:
        return StateQuery({}, "none", f"{why}, and {_failure(squeue)}: job states are unknown")
    note = f"{why}; states are from squeue, which forgets finished jobs: their states are unknown"
    return StateQuery(parse_rows(squeue.stdout, job_ids, state_col=1), "squeue", note)
