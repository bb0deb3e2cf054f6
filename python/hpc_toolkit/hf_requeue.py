"""Save on the wall-time warning with a Hugging Face Transformers ``Trainer``.

One line in a Trainer script::

    from hpc_toolkit.hf_requeue import SaveOnWarning
    trainer = Trainer(..., callbacks=[SaveOnWarning()])

With the usual resume idiom (``get_last_checkpoint(args.output_dir)`` passed to
``trainer.train(resume_from_checkpoint=...)``) and ``--output_dir $HPC_CHECKPOINT_DIR``,
a job that is warned (SIGUSR1; SIGTERM on a preemption) saves ``checkpoint-N`` at the end
of the current step on every rank at once, stops, and exits 0; hpc_files then requeues it
and the next attempt resumes from that checkpoint. Under DDP every rank must stop at the
same step (a rank that saves while another waits in the next step's all-reduce hangs):
the flag is all-reduced (max) at every step end, which costs one tiny collective per step.
The signal handler only sets a flag (hpc_toolkit.requeue).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import TrainerCallback

from hpc_toolkit.requeue import RequeueSignal


class SaveOnWarning(TrainerCallback):
    """On the warning: save checkpoint-N at the next step end, on every rank, and stop."""

    def __init__(self) -> None:
        self.signal: RequeueSignal | None = None
        self.saved_step: int | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.signal is None:
            self.signal = RequeueSignal()

    def _agreed(self, args: Any) -> bool:
        mine = self.signal is not None and self.signal.requested
        dist = torch.distributed
        if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
            return mine
        flag = torch.tensor([1.0 if mine else 0.0], device=args.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item() > 0)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.saved_step is None and self._agreed(args):
            self.saved_step = state.global_step
            control.should_save = True
            control.should_training_stop = True
            if state.is_world_process_zero:
                step = state.global_step
                print(f"[hpc] warned: saving checkpoint-{step} in {args.output_dir} and"
                      " stopping; the job requeues and resumes from it", flush=True)  # fmt: skip
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # Stopped on the warning: the handler stays a flag (a late copy of the same warning
        # must not kill the process while it writes its outputs). Otherwise the handlers
        # from before are back.
        if self.signal is not None and self.saved_step is None:
            self.signal.uninstall()
            self.signal = None
