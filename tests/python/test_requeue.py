"""The requeue protocol helpers and the SlurmRequeue Lightning callback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpc_toolkit.requeue import (
    RequeueSignal,
    checkpoint_dir,
    latest_checkpoint,
    restart_count,
    save_atomic,
)


@pytest.fixture
def keep_usr1() -> Iterator[None]:
    """SIGUSR1's handler as it was before the test (a stop on the warning keeps the flag)."""
    before = signal.getsignal(signal.SIGUSR1)
    yield
    signal.signal(signal.SIGUSR1, before)


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
    tmp_path: Path, sig: signal.Signals, keep_usr1: None
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

    first = SlurmRequeue(dirpath=tmp_path)
    t1 = _quiet_cpu_trainer(tmp_path, 12, first)
    t1.fit(Model(), data)
    assert first.saved_path == tmp_path / "hpc_ckpt_1.ckpt" and first.saved_path.is_file()
    assert t1.global_step == 6  # stopped right after the signalled step, nothing beyond
    assert SlurmRequeue.resume_path(tmp_path) == str(tmp_path / "hpc_ckpt_1.ckpt")
    # A job whose attempt does not resume (a new run's first) never loads it.
    os.environ["HPC_RESUMING"] = "0"
    try:
        assert SlurmRequeue.resume_path(tmp_path) is None
    finally:
        del os.environ["HPC_RESUMING"]

    second = SlurmRequeue(dirpath=tmp_path)
    t2 = _quiet_cpu_trainer(tmp_path, 12, second)
    t2.fit(Model(), data, ckpt_path=SlurmRequeue.resume_path(tmp_path))
    assert t2.global_step == 12
    assert second.saved_path is None


def _quiet_cpu_trainer(root: Path, max_steps: int, callback: Any) -> Any:
    """A Lightning Trainer on the CPU with only `callback`: no logger, progress bar,
    checkpointing or summary of its own (the SlurmRequeue tests)."""
    import lightning

    return lightning.Trainer(
        accelerator="cpu",
        max_steps=max_steps,
        default_root_dir=root,
        callbacks=[callback],
        logger=False,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    )


def _handles_usr1_in_proc() -> bool:
    """What hpc_files' proc_tree.sh reads: SIGUSR1's bit in SigCgt of /proc/self/status."""
    with open("/proc/self/status") as status:
        cgt = next(line for line in status if line.startswith("SigCgt:")).split()[1]
    return bool(int(cgt, 16) & (1 << (signal.SIGUSR1 - 1)))


def test_lightning_a_rank_warned_after_the_others_stopped_still_takes_the_warning(
    tmp_path: Path, keep_usr1: None
) -> None:
    """The warning reaches the ranks one by one (each node's task_wrapper.sh): in DDP the
    first ones make every rank agree, save and stop at the next batch end, and a rank whose
    own warning comes after that must still handle SIGUSR1 (no flag set here, as on that
    rank). Before, Lightning put back the handler from before training, SIG_DFL: the rank's
    wrapper saw no handler and logged "no process of the program handles SIGUSR1", and a
    SIGUSR1 sent just then killed the rank. A fit that ends without a stop gives the
    program its own handler back. SIGUSR1 is handled from setup, before training starts."""
    import lightning
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from hpc_toolkit.lightning_requeue import SlurmRequeue

    seen: dict[str, bool] = {}

    class Model(lightning.LightningModule):  # type: ignore[misc, name-defined]
        def __init__(self, cb: SlurmRequeue | None) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)
            self.cb = cb

        def on_fit_start(self) -> None:  # after setup, before Lightning's signal connector
            seen["fit_start"] = _handles_usr1_in_proc()

        def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
            if self.cb is not None and self.global_step == 3:
                self.cb.requested = True  # what another rank's warning does: all agree to stop
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = DataLoader(TensorDataset(torch.randn(64, 2), torch.randn(64, 1)), batch_size=4)

    def fit(cb: SlurmRequeue, stop: bool) -> None:
        _quiet_cpu_trainer(tmp_path, 8, cb).fit(Model(cb if stop else None), data)

    def mine(signum: int, frame: object) -> None:
        pass

    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    stopped = SlurmRequeue(dirpath=tmp_path)
    fit(stopped, stop=True)
    assert stopped.saved_path is not None and seen["fit_start"]
    assert signal.getsignal(signal.SIGUSR1) == stopped._handle and _handles_usr1_in_proc()
    os.kill(os.getpid(), signal.SIGUSR1)  # the late warning: taken, not fatal

    signal.signal(signal.SIGUSR1, mine)
    ran_out = SlurmRequeue(dirpath=tmp_path / "other")
    fit(ran_out, stop=False)
    assert ran_out.saved_path is None
    assert signal.getsignal(signal.SIGUSR1) is mine


def test_lightning_ranks_stop_once_every_rank_has_the_warning_or_one_waited_long_enough() -> None:
    """The warning reaches the ranks one by one: the stop waits for the slowest rank's own
    warning (so every rank's program takes one), but never longer than wait_all_ranks_s
    after the first (a rank that gets none must not block the save). Two ranks: what the
    all_reduce (sum) of both ranks' tensors gives, each rank decides the same."""

    from hpc_toolkit.lightning_requeue import SlurmRequeue

    def batch_end(a: SlurmRequeue, b: SlurmRequeue) -> bool:
        agreed = a._mine() + b._mine()
        assert a._decide(agreed) == b._decide(agreed)
        return a._decide(agreed)

    a, b = SlurmRequeue(wait_all_ranks_s=0.3), SlurmRequeue(wait_all_ranks_s=0.3)
    assert not batch_end(a, b)  # no warning yet
    a.requested = True
    assert not batch_end(a, b)  # rank a has it, b not yet
    b.requested = True
    assert batch_end(a, b)  # both: stop now

    a, b = SlurmRequeue(wait_all_ranks_s=0.3), SlurmRequeue(wait_all_ranks_s=0.3)
    a.requested = True
    assert not batch_end(a, b)
    time.sleep(0.35)
    assert batch_end(a, b)  # b never got one: stop anyway, 0.3 s after a's


def test_resuming_follows_the_job_and_never_takes_toolkit_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hpc_toolkit.requeue import latest_checkpoint, resuming

    monkeypatch.setenv("HPC_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.delenv("HPC_RESUMING", raising=False)
    (tmp_path / ".hpc_run").write_text("run=x/0\n")
    assert latest_checkpoint() is None and not resuming()  # outside a job: a checkpoint?
    (tmp_path / "a.pt").write_bytes(b"w")
    assert resuming()
    monkeypatch.setenv("HPC_RESUMING", "0")  # a new run's first attempt: never
    assert not resuming()
    monkeypatch.setenv("HPC_RESUMING", "1")
    assert resuming()


def test_hf_save_on_warning_saves_and_stops_at_the_step_after_the_signal(keep_usr1: None) -> None:
    """One process (no torch.distributed): the flag is its own; the handler stays a flag."""
    from types import SimpleNamespace

    from transformers import TrainerControl

    from hpc_toolkit.hf_requeue import SaveOnWarning

    cb = SaveOnWarning()
    args = SimpleNamespace(device="cpu", output_dir="out")
    state = SimpleNamespace(global_step=3, is_world_process_zero=True)
    control = TrainerControl()
    cb.on_train_begin(args, state, control)
    cb.on_step_end(args, state, control)
    assert not control.should_save and not control.should_training_stop
    os.kill(os.getpid(), signal.SIGUSR1)
    state.global_step = 4
    cb.on_step_end(args, state, control)
    assert control.should_save and control.should_training_stop and cb.saved_step == 4
    cb.on_train_end(args, state, control)
    assert signal.getsignal(signal.SIGUSR1) != signal.SIG_DFL  # a late warning is a flag


def test_hf_save_on_warning_puts_the_handlers_back_when_not_warned(keep_usr1: None) -> None:
    from types import SimpleNamespace

    from transformers import TrainerControl

    from hpc_toolkit.hf_requeue import SaveOnWarning

    before = signal.getsignal(signal.SIGUSR1)
    cb = SaveOnWarning()
    args = SimpleNamespace(device="cpu", output_dir="out")
    state = SimpleNamespace(global_step=1, is_world_process_zero=True)
    cb.on_train_begin(args, state, TrainerControl())
    assert signal.getsignal(signal.SIGUSR1) != before
    cb.on_train_end(args, state, TrainerControl())
    assert signal.getsignal(signal.SIGUSR1) == before
