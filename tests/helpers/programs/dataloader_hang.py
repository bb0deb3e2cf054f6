"""A DataLoader loop whose workers ignore SIGTERM, so that Python hangs at exit (issue 35):

    python dataloader_hang.py STEPS [STEP_SECONDS]

Python's shutdown sends the DataLoader's worker processes SIGTERM and waits for them
forever; the same happens on a laptop. It resumes from $HPC_CHECKPOINT_DIR/step (saved on
SIGUSR1, at a step boundary, before it exits), and appends "ATTEMPT PID WORKER_PIDS" to
$HPC_CHECKPOINT_DIR/pids.log at every start: a log it keeps there, not a checkpoint.
Marks: $HPC_EXP_DIR/marks/ready_ATTEMPT_0 once running. Every step it does is appended
to $HPC_EXP_DIR/marks/steps ("ATTEMPT STEP").
"""

import os
import signal
import sys
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset


class Numbers(Dataset):
    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor([i])


def ignore_term(_worker: int) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


total = int(sys.argv[1])
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
ck = Path(os.environ["HPC_CHECKPOINT_DIR"])
marks = Path(os.environ["HPC_EXP_DIR"]) / "marks"
marks.mkdir(parents=True, exist_ok=True)
attempt = int(os.environ.get("HPC_RESTART_COUNT", "0")) + 1
state = ck / "step"
step = int(state.read_text()) if state.exists() else 0
warned = False


def on_usr1(signum: int, frame: object) -> None:
    global warned
    warned = True


signal.signal(signal.SIGUSR1, on_usr1)
loader = DataLoader(Numbers(), batch_size=4, num_workers=2, worker_init_fn=ignore_term,
                    persistent_workers=True)
batches = iter(loader)
next(batches)  # the workers run
workers = " ".join(str(w.pid) for w in batches._workers)  # type: ignore[attr-defined]
with open(ck / "pids.log", "a", encoding="utf-8") as log:
    log.write(f"{attempt} {os.getpid()} {workers}\n")
print(f"[dl] attempt {attempt} starts at step {step} (workers {workers})", flush=True)
(marks / f"ready_{attempt}_0").touch()
while step < total:
    if warned:
        tmp = ck / "step.tmp"
        tmp.write_text(str(step))
        tmp.replace(state)
        print(f"[dl] saved step {step}; exiting for a requeue", flush=True)
        sys.exit(0)
    next(batches)
    time.sleep(pause)
    step += 1
    with open(marks / "steps", "a", encoding="utf-8") as steps:
        steps.write(f"{attempt} {step}\n")
print(f"finished {step}", flush=True)
