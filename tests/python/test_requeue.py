"""The requeue protocol helpers and the SlurmRequeue Lightning callback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpc_toolkit.requeue import (
    RequeueSignal,
    checkpoint_dir,
    latest_checkpoint,
    restart_count,
    save_atomic,
)


def test_signal_sets_the_flag_only_when_received() -> None:
    stop = RequeueSignal()
    try:
        assert not stop and not stop.requested
        os.kill(os.getpid(), signal.SIGUSR1)
        assert stop and stop.requested
        assert stop.received == signal.SIGUSR1
    finally:
        stop.uninstall()


# A program whose handler catches signals that come in bursts: in a preemption on
# Slurm 24.11 each rank gets Slurm's SIGTERM and the toolkit's SIGUSR1 within microseconds,
# and Python runs the second handler inside the first. A handler that takes a lock
# (threading.Event.set) then waits on itself forever: the ranks hung, saved nothing and
# the job failed (124) instead of requeueing.
_BURST_CHILD = """
import signal, sys, time
from hpc_toolkit.{module} import {cls}
flag = {cls}()
{install}
print("ready", flush=True)
end = time.monotonic() + 4
while time.monotonic() < end:
    pass
print("alive", {check}, flush=True)
"""


@pytest.mark.parametrize(
    ("module", "cls", "install", "check"),
    [
        ("requeue", "RequeueSignal", "", "bool(flag)"),
        (
            "lightning_requeue",
            "SlurmRequeue",
            "flag.on_train_start(None, None)",
            "flag.requested",
        ),
    ],
)
def test_a_burst_of_usr1_and_term_never_hangs_the_program(
    module: str, cls: str, install: str, check: str
) -> None:
    code = _BURST_CHILD.format(module=module, cls=cls, install=install, check=check)
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        end = time.monotonic() + 2.5
        pairs = 0
        while time.monotonic() < end:  # what a preempted rank gets, again and again
            os.kill(child.pid, signal.SIGUSR1)
            os.kill(child.pid, signal.SIGTERM)
            pairs += 1
            time.sleep(0.001)
        out, err = child.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        child.kill()
        pytest.fail(f"{cls}'s handler hung the program after {pairs} USR1+TERM pairs")
    assert child.returncode == 0, err
    assert out == "alive True\n"


def test_uninstall_restores_the_previous_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)
    stop = RequeueSignal()
    assert signal.getsignal(signal.SIGTERM) != before
    stop.uninstall()
    assert signal.getsignal(signal.SIGTERM) == before


def test_checkpoint_dir_is_the_jobs_or_a_local_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert checkpoint_dir() == Path("checkpoints") and Path("checkpoints").is_dir()
    monkeypatch.setenv("HPC_CHECKPOINT_DIR", str(tmp_path / "job" / "checkpoints"))
    assert checkpoint_dir() == tmp_path / "job" / "checkpoints"
    assert checkpoint_dir().is_dir()


def test_restart_count(monkeypatch: pytest.MonkeyPatch) -> None:
    assert restart_count() == 0
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    assert restart_count() == 2
    monkeypatch.setenv("HPC_RESTART_COUNT", "3")
    assert restart_count() == 3


def test_latest_checkpoint_and_atomic_save(tmp_path: Path) -> None:
    assert latest_checkpoint(directory=tmp_path) is None
    save_atomic(tmp_path / "a.pt", b"1")
    save_atomic(tmp_path / "b.pt", b"22")
    os.utime(tmp_path / "a.pt", ns=(1, 1))
    (tmp_path / "c.pt.tmp").write_bytes(b"partial")
    assert latest_checkpoint("*.pt*", tmp_path) == tmp_path / "b.pt"
    assert (tmp_path / "b.pt").read_bytes() == b"22"
    assert not list(tmp_path.glob("b.pt.tmp"))


@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGTERM], ids=["warning", "sigterm"])
def test_lightning_callback_checkpoints_at_a_batch_end_and_resumes(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """SIGUSR1 (the wall-time warning) and SIGTERM (a preemption's, sent by Slurm to every
    rank) both only set the flag: Lightning's own SIGTERM handler, which runs a collective
    inside the handler and stops without a checkpoint, is replaced while training."""
    import lightning  # the test venv has it (tests/setup/requirements.txt)
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from hpc_toolkit.lightning_requeue import SlurmRequeue

    class Model(lightning.LightningModule):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            if self.global_step == 5:
                os.kill(os.getpid(), sig)  # mid-epoch
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = DataLoader(TensorDataset(torch.randn(64, 2), torch.randn(64, 1)), batch_size=4)

    def trainer(cb: SlurmRequeue) -> lightning.Trainer:  # type: ignore[name-defined]
        return lightning.Trainer(
            accelerator="cpu",
            max_steps=12,
            default_root_dir=tmp_path,
            callbacks=[cb],
            logger=False,
            enable_progress_bar=False,
            enable_checkpointing=False,
            enable_model_summary=False,
        )

    first = SlurmRequeue(dirpath=tmp_path)
    t1 = trainer(first)
    t1.fit(Model(), data)
    assert first.saved_path == tmp_path / "hpc_ckpt_1.ckpt" and first.saved_path.is_file()
    assert t1.global_step == 6  # stopped right after the signalled step, nothing beyond
    assert SlurmRequeue.resume_path(tmp_path) == str(tmp_path / "hpc_ckpt_1.ckpt")

    second = SlurmRequeue(dirpath=tmp_path)
    t2 = trainer(second)
    t2.fit(Model(), data, ckpt_path=SlurmRequeue.resume_path(tmp_path))
    assert t2.global_step == 12
    assert second.saved_path is None
