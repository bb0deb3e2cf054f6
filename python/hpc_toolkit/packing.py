"""Packed jobs (job_submitter.sh --pack N, --lines-per-job K): a job's lines, their logs
and outcomes, as virtual_env_hpc_files/pack.sh writes them.

Job number T (array task plus HPC_TASK_OFFSET) runs lines T*K .. T*K+K-1 of the commands
file. Line I's log is `HPC_OUTPUT_DIR/<exp>-<job>-line<I>.out` (<job>: the array's job id,
or the job's own when it is not an array), appended to by every attempt; its outcome is
`<commands file less .commands>.lines/I`, one line `state=S exit=E job=J attempt=A
seconds=T` (J: the Slurm id, JOBID or ARRAYID_TASK, of the task that last ran it). The
kept batch script exports what is needed to find them: HPC_PACK_LINES (K),
HPC_PACK_TOTAL, HPC_COMMANDS_FILE, HPC_OUTPUT_DIR and exp_name. Standard library only
(rerun.py uses it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hpc_toolkit.paths import Home, outputs_dir

_OUTCOME = re.compile(
    r"state=([a-z]{1,20}) exit=([0-9]{1,3}|-) job=([0-9_]{1,40})"
    r"(?: attempt=([0-9]{1,6}))?(?: seconds=([0-9]{1,12}))?"
)
MAX_LINES_PER_JOB = 10**6  # an edited export must not make a reader list 10**18 lines


@dataclass(frozen=True)
class Outcome:
    """What the last job that ran a line wrote about it."""

    state: str  # running | done | failed | requeue | stopped
    exit_code: str  # "-" while running
    job: str  # JOBID or ARRAYID_TASK
    attempt: str = ""
    seconds: str = ""

    @property
    def completed(self) -> bool:
        return self.state == "done"

    def describe(self) -> str:
        """`failed, exit 3` / `running` / `done, exit 0` / `failed, exit 79 (stalled)`."""
        text = self.state + (f", exit {self.exit_code}" if self.exit_code != "-" else "")
        # 79: the line's stall watch stopped it and it had written no checkpoint (pack.sh)
        return text + (" (stalled)" if self.state == "failed" and self.exit_code == "79" else "")


@dataclass(frozen=True)
class Packing:
    """How a packed batch script spreads the configs file's lines over its jobs."""

    lines_per_job: int
    total: int
    outcomes_dir: Path
    output_dir: Path
    exp_name: str

    def lines_of(self, number: int) -> range:
        """The lines that job number `number` (its task number in the submission) runs."""
        first = number * self.lines_per_job
        return range(first, max(first, min(first + self.lines_per_job, self.total)))

    def job_of(self, line: int) -> int:
        """The job number (task number) that runs `line`."""
        return line // self.lines_per_job

    def line_log(self, job_id: str, line: int) -> Path:
        """Line `line`'s log in the job (or array) `job_id`."""
        return self.output_dir / f"{self.exp_name}-{job_id}-line{line}.out"

    def outcome(self, line: int) -> Outcome | None:
        """The line's outcome file, None when it has none (never started) or it is garbled."""
        try:
            with open(self.outcomes_dir / str(line), encoding="utf-8", errors="replace") as fh:
                text = fh.read(300)
        except OSError:
            return None
        m = _OUTCOME.match(text)
        return None if m is None else Outcome(m[1], m[2], m[3], m[4] or "", m[5] or "")


def packing_of(exports: Mapping[str, str], scratch: Path, exp_name: str) -> Packing | None:
    """The packing a batch script's exports describe; None when the script is not packed."""
    k_text, total_text = exports.get("HPC_PACK_LINES", ""), exports.get("HPC_PACK_TOTAL", "")
    if not (k_text.isdigit() and total_text.isdigit()):
        return None
    k, total = int(k_text), int(total_text)
    if not 0 < k <= MAX_LINES_PER_JOB or total > 10**9:
        return None
    home = Home.of_exports(exports)
    output_dir = exports.get("HPC_OUTPUT_DIR", "") or str(outputs_dir(scratch))
    return Packing(
        k, total, home.path("lines") if home is not None else Path(".lines"), Path(output_dir),
        exports.get("exp_name", "") or exp_name,
    )  # fmt: skip
