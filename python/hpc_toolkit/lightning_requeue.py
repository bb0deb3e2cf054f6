"""A Lightning callback that checkpoints and requeues safely on multi-node DDP.

Lightning's own auto-requeue (SLURMEnvironment(auto_requeue=True)) saves the checkpoint
inside the SIGUSR1 handler; on several nodes one rank then waits in a collective while
another checkpoints, and the job hangs until its wall time (Lightning issue 21406). Here
the handler only sets a flag; at a batch end where every rank has it (or one has had it
for a few seconds) all ranks agree (one all_reduce), save the checkpoint together, and
training stops. hpc_files then requeues the job;
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
import time
from pathlib import Path
from types import FrameType
from typing import Any

import lightning.pytorch as pl
import torch

from hpc_toolkit.requeue import checkpoint_dir

_CKPT = re.compile(r"^hpc_ckpt_(\d+)\.ckpt$")
_UNSET = object()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _versions(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return [int(m.group(1)) for p in folder.iterdir() if (m := _CKPT.match(p.name))]


class SlurmRequeue(pl.Callback):
    """Checkpoint at a batch end after SIGUSR1 or SIGTERM (all ranks agree), then stop.

    The ranks stop at the first batch end where every rank has had the signal, or about
    wait_all_ranks_s seconds after it came (a rank that gets none must not block the save).

    SIGTERM is taken over too (from the start of training): Slurm sends it to every rank
    when a preemption starts, and Lightning's own SIGTERM handler runs a collective inside
    the handler, which hangs when the ranks receive it a different number of times, and
    then stops without a checkpoint.

    SIGUSR1 is taken from the start of fit and, once the ranks stopped on a warning, after
    fit too: a rank whose warning comes after the others stopped still takes it.
    """

    def __init__(
        self,
        dirpath: str | Path | None = None,
        signals: tuple[signal.Signals, ...] = (signal.SIGUSR1, signal.SIGTERM),
        wait_all_ranks_s: float = 5.0,
    ) -> None:
        self.dirpath = Path(dirpath) if dirpath is not None else None
        self.signals = signals
        self.wait_all_ranks_s = wait_all_ranks_s
        # A plain attribute, never a lock such as threading.Event: a second signal's
        # handler runs inside the first, and would wait forever on the lock it holds
        # (requeue.py's docstring).
        self.requested = False
        self._flag_since: float | None = None
        self._usr1_before: Any = _UNSET  # SIGUSR1's handler before fit (None: not Python's)
        self.saved_path: Path | None = None
        self.saved_step: int | None = None

    # -- signal: only a flag ------------------------------------------------------------
    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        # Before Lightning's signal connector notes the handlers it puts back when fit
        # ends, so it puts this one back: a rank whose warning comes after the others'
        # made every rank save and stop still takes it (hpc_files logs every rank's), and
        # is not killed by it. Also covers the sanity check and a checkpoint's restore,
        # where the warning would otherwise find only Lightning's SIGTERM handler.
        if stage == "fit" and signal.SIGUSR1 in self.signals and _main_thread():
            self._usr1_before = signal.signal(signal.SIGUSR1, self._handle)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if _main_thread():
            for sig in self.signals:
                signal.signal(sig, self._handle)

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        # Runs after Lightning put its handlers back. Stopped on the warning: SIGUSR1 stays
        # a flag (the same warning, late). Otherwise the handler from before fit is back.
        if stage != "fit" or self._usr1_before is _UNSET or not _main_thread():
            return
        before, self._usr1_before = self._usr1_before, _UNSET
        ours = signal.getsignal(signal.SIGUSR1) == self._handle
        if self.saved_path is None and before is not None and ours:
            signal.signal(signal.SIGUSR1, before)

    # -- at a batch boundary: agree, save, stop -----------------------------------------
    def _agreed(self, trainer: pl.Trainer) -> bool:
        """True on every rank at once: every rank has its flag, or the flagged ones have
        had it for wait_all_ranks_s (on average). The warning reaches the ranks one by
        one (each node's shell passes it on); stopping on the first would end training
        before a slower rank got its own, which is then a warning nobody on that rank
        takes. Never waiting for ever keeps a rank that gets none (a kill to one rank)
        from blocking the save.
        One all_reduce of every rank's _mine(): a sum, which every strategy can reduce."""
        mine = self._mine().to(trainer.strategy.root_device)
        return self._decide(trainer.strategy.reduce(mine, reduce_op="sum"))

    def _mine(self) -> torch.Tensor:
        """[not flagged, flagged, seconds since this rank first saw its flag]."""
        now = time.monotonic()
        flagged = self.requested
        if flagged and self._flag_since is None:
            self._flag_since = now
        waited = now - self._flag_since if self._flag_since is not None else 0.0
        return torch.tensor([0.0 if flagged else 1.0, 1.0 if flagged else 0.0, waited])

    def _decide(self, summed: torch.Tensor) -> bool:
        # The flagged ranks' mean wait: wait_all_ranks_s after the first rank's flag when
        # one rank has it, at most that long after the last flagged rank's in any case.
        unflagged, flagged, waited = (float(x) for x in summed.cpu())
        return unflagged == 0.0 or (flagged > 0.0 and waited >= self.wait_all_ranks_s * flagged)

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if not self._agreed(trainer) or self.saved_path is not None:
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
        """The newest hpc_ckpt_N.ckpt in dirpath (default: the checkpoint folder), or None.

        None as well in a job whose attempt does not resume (HPC_RESUMING=0: a new run's
        first attempt never loads a checkpoint another run left there).
        """
        if os.environ.get("HPC_RESUMING") == "0":
            return None
        folder = Path(dirpath) if dirpath is not None else checkpoint_dir()
        versions = _versions(folder)
        return str(folder / f"hpc_ckpt_{max(versions)}.ckpt") if versions else None
