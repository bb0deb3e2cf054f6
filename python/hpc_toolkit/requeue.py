"""Checkpoint-and-requeue protocol for any program run by hpc_files.

Shortly before the wall time (and on a preemption) hpc_files sends SIGUSR1 to the
program, waits up to --signal-grace seconds for it to save a checkpoint in
$HPC_CHECKPOINT_DIR and exit, then requeues the job; the rerun finds the checkpoint and
resumes. With this module that is two lines in a training loop::

    stop = RequeueSignal()                 # before the loop
    ...
    if stop:                               # at a step boundary
        save_checkpoint(checkpoint_dir() / "last.pt"); sys.exit(0)

The handler only sets a flag: saving inside a signal handler can interrupt a half-done
step or a collective operation (the multi-node DDP deadlock of Lightning's own requeue).
The flag is a plain attribute, never a lock (threading.Event): signals come in bursts (a
preempted rank gets Slurm's SIGTERM and the toolkit's SIGUSR1 at once) and Python runs the
second handler inside the first, which would wait forever on the lock the first holds.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from pathlib import Path
from types import FrameType

DEFAULT_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGUSR1, signal.SIGTERM)


class RequeueSignal:
    """True once the job was warned (SIGUSR1) or is being stopped (SIGTERM).

    Installing it replaces the handlers of those signals in this process (main thread
    only, as Python requires); the previous handlers are restored by ``uninstall``.
    """

    def __init__(self, signals: Iterable[signal.Signals] = DEFAULT_SIGNALS) -> None:
        self.received: signal.Signals | None = None
        self._previous: dict[signal.Signals, object] = {}
        for sig in signals:
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        # One assignment: no lock, no allocation that could fail half-way (module docstring).
        self.received = signal.Signals(signum)

    @property
    def requested(self) -> bool:
        return self.received is not None

    def __bool__(self) -> bool:
        return self.received is not None

    def uninstall(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)  # type: ignore[arg-type]
        self._previous.clear()


def checkpoint_dir() -> Path:
    """$HPC_CHECKPOINT_DIR inside a job (per array task), ./checkpoints elsewhere; made."""
    path = Path(os.environ.get("HPC_CHECKPOINT_DIR", "checkpoints"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def resuming() -> bool:
    """Whether this attempt continues its run's checkpoints.

    Inside a job the toolkit says (HPC_RESUMING=1 or 0, README "Runs, attempts and
    checkpoints"): only a run's own later attempts, a --rerun of its line, or a submission
    with --resume resume; a new run never loads what another run left. Outside a job:
    whether the checkpoint folder holds a checkpoint.
    """
    said = os.environ.get("HPC_RESUMING")
    if said in ("0", "1"):
        return said == "1"
    return latest_checkpoint() is not None


def restart_count() -> int:
    """How many times this job was requeued (0 on the first run)."""
    value = os.environ.get("HPC_RESTART_COUNT") or os.environ.get("SLURM_RESTART_COUNT") or "0"
    return int(value) if value.isdigit() else 0


def latest_checkpoint(pattern: str = "*", directory: Path | None = None) -> Path | None:
    """The most recently modified file matching pattern in the checkpoint folder, if any."""
    folder = directory if directory is not None else checkpoint_dir()
    candidates = [
        p
        for p in folder.glob(pattern)
        if p.is_file() and not p.name.endswith(".tmp") and not p.name.startswith(".hpc_")
    ]
    return max(candidates, key=lambda p: p.stat().st_mtime_ns, default=None)


def save_atomic(path: Path, data: bytes) -> None:
    """Write data so that path holds either the old or the new content, never half."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
