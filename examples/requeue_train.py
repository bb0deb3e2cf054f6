"""A training loop that survives wall time and preemption with two lines of hpc_toolkit.

    python examples/requeue_train.py --steps 60 --step-sleep 0.5

Each step is appended to progress.log in the checkpoint folder; when hpc_files warns of
the wall time (SIGUSR1), the loop saves its state at the next step boundary and exits,
hpc_files requeues the job, and the rerun continues from the saved step. The same
pattern fits any PyTorch loop: save model and optimizer state instead of the counter.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from hpc_toolkit.requeue import RequeueSignal, checkpoint_dir, restart_count, save_atomic


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--step-sleep", type=float, default=0.5)
    parser.add_argument("--fail-at", type=int, default=-1, help="exit 3 at this step (tests)")
    args = parser.parse_args()

    stop = RequeueSignal()  # 1: the flag, set by SIGUSR1 (wall time) or SIGTERM
    ckpt = checkpoint_dir() / "state.json"
    # Resume only this run's checkpoint (HPC_RESUMING=1 in the job; hpc_toolkit.requeue's
    # resuming() says the same): never one another run left there.
    resume = os.environ.get("HPC_RESUMING", "1") != "0" and ckpt.exists()
    state = json.loads(ckpt.read_text()) if resume else {"step": 0, "value": 0.0}
    attempt = restart_count() + 1
    print(f"[train] attempt {attempt} starts at step {state['step']}", flush=True)
    # Results (plots, metrics, samples) go to $HPC_RESULTS_DIR on fast local disk; hpc_files
    # copies that folder to shared scratch at the end of every attempt.
    results = Path(os.environ.get("HPC_RESULTS_DIR", "results"))
    results.mkdir(parents=True, exist_ok=True)
    (results / f"attempt_{attempt}.txt").write_text(f"started at step {state['step']}\n")

    with open(checkpoint_dir() / "progress.log", "a", encoding="utf-8") as progress:
        while state["step"] < args.steps:
            if stop:  # 2: at a step boundary, save and leave; hpc_files requeues the job
                save_atomic(ckpt, json.dumps(state).encode())
                print(f"[train] checkpoint at step {state['step']}; exiting for a requeue", flush=True)
                return 0
            if state["step"] == args.fail_at:
                print(f"[train] failing at step {args.fail_at} (--fail-at)", file=sys.stderr)
                return 3
            time.sleep(args.step_sleep)
            state["value"] += 1.0
            state["step"] += 1
            progress.write(f"{attempt} {state['step']}\n")
            progress.flush()

    save_atomic(ckpt, json.dumps(state).encode())
    (checkpoint_dir() / "done.json").write_text(json.dumps({**state, "attempts": attempt}))
    print(f"[train] done: {state['step']} steps in {attempt} attempt(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
