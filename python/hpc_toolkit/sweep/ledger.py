"""The ledger of an offline sweep: one JSON line per event, appended under a lock.

The tasks of an array start together on different nodes and share only the filesystem,
so every append, and every read that decides what to append (a bayes task choosing its
point, a run id that must be new), holds a POSIX record lock (fcntl.lockf) on
ledger.lock; those work on NFS and Lustre, where flock can be local to one node.
Events: {"event": "start", point, run_id, params, ...} when a run starts and
{"event": "end", point, run_id, state, exit_code, metric, ...} when it ends. A torn last
line (a node that died mid-write) is skipped, never fatal.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Point states, as `hpc sweep status` prints them.
PENDING, RUNNING, FINISHED, FAILED, KILLED = "pending", "running", "finished", "failed", "killed"
ENDED = (FINISHED, FAILED, KILLED)
JOB_LABEL = re.compile(r"[0-9]{1,18}(_[0-9]{1,18})?")


@dataclass
class Attempt:
    """One run of one point (a point is run again after a failure or a requeue)."""

    point: int
    run_id: str
    params: dict[str, Any]
    started: str = ""
    job: str = ""
    node: str = ""
    state: str = RUNNING
    exit_code: int | None = None
    metric: float | None = None
    run_dir: str | None = None
    ended: str | None = None


class Ledger:
    """ledger.jsonl and its lock file in a sweep's folder."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "ledger.jsonl"
        self.lock_path = folder / "ledger.lock"

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the sweep's lock (blocks until the task holding it is done)."""
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN)
            os.close(fd)

    def events(self) -> list[dict[str, Any]]:
        """Every well-formed event, oldest first ([] before the first run)."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        out: list[dict[str, Any]] = []
        for line in text.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and isinstance(event.get("point"), int):
                out.append(event)
        return out

    def append(self, event: dict[str, Any]) -> None:
        """Add one event as one write (call it with the lock held)."""
        data = (json.dumps(event, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)


def attempts(events: list[dict[str, Any]]) -> dict[int, list[Attempt]]:
    """Every point's attempts in the order they started."""
    by_run: dict[str, Attempt] = {}
    per_point: dict[int, list[Attempt]] = {}
    for e in events:
        run_id = str(e.get("run_id", ""))
        if e.get("event") == "start":
            a = Attempt(
                point=e["point"],
                run_id=run_id,
                params=dict(e.get("params") or {}),
                started=str(e.get("time", "")),
                job=_job_label(e.get("job")),
                node=str(e.get("node", "")),
            )
            by_run[run_id] = a
            per_point.setdefault(a.point, []).append(a)
        elif e.get("event") == "end" and run_id in by_run:
            a = by_run[run_id]
            a.state = str(e.get("state", FAILED))
            code = e.get("exit_code")
            a.exit_code = code if isinstance(code, int) else None
            metric = e.get("metric")
            a.metric = float(metric) if isinstance(metric, (int, float)) else None
            run_dir = e.get("run_dir")
            a.run_dir = run_dir if isinstance(run_dir, str) else None
            a.ended = str(e.get("time", ""))
    return per_point


def _job_label(value: Any) -> str:
    """A Slurm job or array task id ("123", "123_4") from the ledger, else "": the ledger
    may have been edited, and the label goes to squeue."""
    text = str(value or "")
    return text if JOB_LABEL.fullmatch(text) else ""


def latest(events: list[dict[str, Any]]) -> dict[int, Attempt]:
    """The last attempt of every point that has started."""
    return {p: tries[-1] for p, tries in attempts(events).items()}


def run_ids(events: list[dict[str, Any]]) -> set[str]:
    return {str(e["run_id"]) for e in events if e.get("event") == "start" and "run_id" in e}
