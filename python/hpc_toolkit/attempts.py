"""A task's attempts (the times Slurm started it: requeues) and how each ended.

The job side (virtual_env_hpc_files/runs.sh) appends one line per event to
`<commands file less .commands>.attempts/T` (T: the task's number in the submission):
`attempt=A job=J start=EPOCH end=EPOCH|- outcome=O exit=E|- [node=NODES] [why=WORD]`,
"running" when an attempt starts and its outcome when it ends; node= and why= name the
node(s) a preflight failed on (and the check) or the node lost under the attempt; on a
"running" line, node= is the batch shell's node (the next attempt records a node failure
there when the attempt ended with no word: longruns.sh). sacct
shows only a job's last attempt; this file shows them all. A --rerun's jobs run the same
lines and append to the same files. Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from hpc_toolkit.paths import Home

_LINE = re.compile(
    r"attempt=([0-9]{1,6}) job=([0-9_]{1,40}|local) start=([0-9]{1,12}) end=([0-9]{1,12}|-)"
    r" outcome=([a-z-]{1,30}) exit=([0-9]{1,3}|-)"
    r"(?: node=([A-Za-z0-9][A-Za-z0-9._,-]{0,200}))?(?: why=([a-z-]{1,30}))?$"
)
# What each outcome means, in the words `hpc status` shows.
OUTCOMES = {
    "running": "running",
    "finished": "finished",
    "failed": "failed",
    "warned-requeued": "warned and requeued",
    "preempted-requeued": "preempted and requeued",
    "requeued": "requeued from outside",
    "no-progress": "warned, no progress: not requeued",
    "started-over": "started over instead of resuming: not requeued",
    "restart-limit": "warned at the restart limit: not requeued",
    "not-requeued": "warned, --no-requeue",
    "cancelled": "cancelled",
    "lost": "ended with no record (killed?)",
    "stalled": "stalled: stopped, not requeued",
    "stalled-requeued": "stalled: stopped and requeued",
    "preflight-failed": "preflight failed",
    "node-failure": "node failure",
}
# What a failed preflight checked (the job side's preflight.sh), in words.
PREFLIGHT_CHECKS = {
    "gpus": "the GPUs asked for are not all visible",
    "gpu-health": "nvidia-smi failed",
    "scratch": "node-local scratch cannot be written",
    "scratch-room": "node-local scratch has no room for --data",
    "rendezvous": "the first node's rendezvous port cannot be reached",
    "user-check": "--preflight failed",
}
MAX_READ = 1 << 20  # a task's file: a few dozen bytes per attempt


@dataclass(frozen=True)
class Attempt:
    """One start of a task by Slurm."""

    number: int
    job: str
    start: int
    end: int | None
    outcome: str
    exit_code: str
    node: str = ""
    why: str = ""

    def describe(self) -> str:
        text = OUTCOMES.get(self.outcome, self.outcome)
        if self.outcome == "preflight-failed" and self.node:
            text += f" on {self.node}"
            if self.why:
                text += f": {PREFLIGHT_CHECKS.get(self.why, self.why)}"
        elif self.outcome == "node-failure" and self.node:
            text += f" ({self.node})"
        elif self.outcome == "lost" and self.node:
            text += f" on {self.node}"
        return text + (f" (exit {self.exit_code})" if self.exit_code not in ("-", "0") else "")

    def to_dict(self) -> dict[str, object]:
        """Its fields and description; node and why only when the line had them."""
        fields = {k: v for k, v in asdict(self).items() if v != "" or k not in ("node", "why")}
        return {**fields, "description": self.describe()}


def attempts_dir(exports: Mapping[str, str]) -> Path | None:
    """The folder of a submission's attempts files, from its plan's job variables (the
    home they name: paths.py)."""
    home = Home.of_exports(exports)
    return home.path("attempts") if home is not None else None


def read_attempts(path: Path) -> list[Attempt]:
    """The attempts in one task's file, in order; an attempt that started and has no end
    is "running" when it is the last one, else "lost". Garbled lines are skipped."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(MAX_READ)
    except OSError:
        return []
    found: dict[tuple[str, int], Attempt] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        end = None if m[4] == "-" else int(m[4])
        found[(m[2], int(m[1]))] = Attempt(
            int(m[1]), m[2], int(m[3]), end, m[5], m[6], m[7] or "", m[8] or ""
        )
    attempts = sorted(found.values(), key=lambda a: (a.start, a.number))
    return [
        Attempt(a.number, a.job, a.start, a.end, "lost", a.exit_code, a.node, a.why)
        if a.outcome == "running" and i < len(attempts) - 1
        else a
        for i, a in enumerate(attempts)
    ]


def attempts_summary(attempts: list[Attempt]) -> str:
    """`3: warned and requeued, warned and requeued, finished` (`-` when none)."""
    if not attempts:
        return "-"
    return f"{len(attempts)}: " + ", ".join(a.describe() for a in attempts)
