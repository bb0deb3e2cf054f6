"""A Python loop with its own SIGUSR1 handler (no hpc_toolkit), for the requeue tests.

    python sig_train.py STEPS [STEP_SECONDS]

On SIGUSR1 it saves its step to $HPC_CHECKPOINT_DIR/py_step and exits 0; a rerun resumes.
"""

import os
import signal
import sys
import time
from pathlib import Path

total = int(sys.argv[1])
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
ck = Path(os.environ["HPC_CHECKPOINT_DIR"])
marks = Path(os.environ["HPC_EXP_DIR"]) / "marks"
marks.mkdir(parents=True, exist_ok=True)
attempt = int(os.environ.get("HPC_RESTART_COUNT", "0")) + 1
state = ck / "py_step"
step = int(state.read_text()) if state.exists() else 0
warned = False


def on_usr1(signum, frame):
    global warned
    warned = True


signal.signal(signal.SIGUSR1, on_usr1)
print(f"[py] attempt {attempt} starts at step {step}", flush=True)
(marks / f"ready_{attempt}_0").touch()
while step < total:
    if warned:
        state.write_text(str(step))
        print(f"[py] saved step {step}; exiting for a requeue", flush=True)
        sys.exit(0)
    time.sleep(pause)
    step += 1
(ck / "done_0").write_text(f"{step} {attempt}\n")
print(f"[py] done: {step} steps in {attempt} attempt(s)", flush=True)
