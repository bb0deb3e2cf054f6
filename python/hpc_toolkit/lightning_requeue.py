"""A Lightning callback that checkpoints and requeues safely on multi-node DDP.

Lightning's own auto-requeue (SLURMEnvironment(auto_requeue=True)) saves the checkpoint
inside the SIGUSR1 handler; on several nodes one rank then waits in a collective while
another checkpoints, and the job hangs until its wall time (Lightning issue 21406). Here
the handler only sets a flag; at the next batch end every rank agrees (one all_reduce),
all save the checkpoint together, and training stops. hpc_files then requeues the job;
outside hpc_files, rank 0 runs `scontrol requeue` itself. On the rerun, Lightning resumes
from the newest hpc_ckpt_N.ckpt of the checkpoint folder (pass ckpt_path="hpc" or
use ``SlurmRequeue.resume_path``).

Use with SLURMEnvironment(auto_requeue=False)::

    trainer = L.Trainer(..., callbacks=[SlurmRequeue()],
                        plugins=[SLURMEnvironment(auto_requeue=False)])
    trainer.fit(model, data, ckpt_path=SlurmRequeue.resume_path())
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import lightning.pytorch as pl

from hpc_toolkit.requeue import checkpoint_dir

_CKPT = re.compile(r"^hpc_ckpt_(\d+)\.ckpt$")


def _versions(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return [int(m.group(1)) for p in folder.iterdir() if (m := _CKPT.match(p.name))]


class SlurmRequeue(pl.Callback):
    """Checkpoint at the first batch end after SIGUSR1 or SIGTERM (all ranks agree), then stop.

    SIGTERM is taken over too (from the start of training): Slurm sends it to every rank
    when a preemption starts, and Lightning's own SIGTERM handler runs a collective inside
    the handler, which hangs when the ranks receive it a different number of times, and
    then stops without a checkpoint.
    """

    def __init__(
        self,
        dirpath: str | Path | None = None,
        signals: tuple[signal.Signals, ...] = (signal.SIGUSR1, signal.SIGTERM),
    ) -> None:
        self.dirpath = Path(dirpath) if dirpath is not None else None
        self.signals = signals
        # A plain attribute, never a lock such as threading.Event: a second signal's
        # handler runs inside the first, and would wait forever on the lock it holds
        # (requeue.py's docstring).
        self.requested = False
        self.saved_path: Path | None = None
        self.saved_step: int | None = None

    # -- signal: only a flag ------------------------------------------------------------
    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                signal.signal(sig, self._handle)

    # -- at a batch boundary: agree, save, stop -----------------------------------------
    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        requested = trainer.strategy.reduce_boolean_decision(self.requested, all=False)
        if not requested or self.saved_path is not None:
            return
        folder = self.dirpath or Path(trainer.default_root_dir)
        version = max(_versions(folder), default=0) + 1
        path = folder / f"hpc_ckpt_{version}.ckpt"
        trainer.save_checkpoint(path)  # every rank calls it; rank 0 writes
        self.saved_path, self.saved_step = path, trainer.global_step
        trainer.should_stop = True
        if trainer.is_global_zero:
            print(f"[hpc] checkpoint at step {trainer.global_step}: {path}", flush=True)
            # Under hpc_files the batch script requeues once the program exits.
            env = os.environ
            if "HPC_LAUNCHER" not in env and "SLURM_JOB_ID" in env:
                # An array task is ARRAY_TASK: its own job id can name the whole array.
                job = (
                    f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
                    if "SLURM_ARRAY_TASK_ID" in env
                    else env["SLURM_JOB_ID"]
                )
                subprocess.run(["scontrol", "requeue", job], check=False)

    @staticmethod
    def resume_path(dirpath: str | Path | None = None) -> str | None:
        """The newest hpc_ckpt_N.ckpt in dirpath (default: the checkpoint folder), or None."""
        folder = Path(dirpath) if dirpath is not None else checkpoint_dir()
        versions = _versions(folder)
        return str(folder / f"hpc_ckpt_{max(versions)}.ckpt") if versions else None
