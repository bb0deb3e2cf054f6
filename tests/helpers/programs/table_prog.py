"""One row of the requeue table (tests/integration/requeue_table.bats): a training loop
of STEPS steps of 0.2 s that behaves as MODE says when the warning comes.

    python3 table_prog.py MODE STEPS

MODE:
  finish     no handler; runs its steps and exits 0 (warned near its end: it finishes)
  fail       no handler; runs its steps and exits 3
  save       SIGUSR1 handler: at the next step saves ckpt.json and exits 0; resumes from
             it when HPC_RESUMING=1
  nosave     SIGUSR1 handler: exits 0 at once, saving nothing
  savefail   SIGUSR1 handler: saves ckpt.json, exits 1; resumes like save
  periodic   no handler; saves ckpt.json every 5 steps; resumes like save
  overwrite  SIGUSR1 handler; saves step-N.json every 5 steps and at the warning, and
             never resumes (it starts over every attempt)

Marks (not checkpoints) go to $HPC_EXP_DIR/marks: ready_T_A_R once running (T the task's
line, A the attempt, R the rank). At the end: done_T_R in the checkpoint folder holds
"STEPS ATTEMPT RESUMED_FROM".
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

mode, total = sys.argv[1], int(sys.argv[2])
rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or "0"
task = os.environ.get("HPC_TASK_INDEX", "0")
attempt = int(os.environ.get("HPC_RESTART_COUNT", "0")) + 1
ck = Path(os.environ["HPC_CHECKPOINT_DIR"])
marks = Path(os.environ["HPC_EXP_DIR"]) / "marks"
marks.mkdir(parents=True, exist_ok=True)
mine = ck / (f"ckpt_{rank}.json" if rank != "0" else "ckpt.json")
warned = False


def on_usr1(signum: int, frame: object) -> None:
    global warned
    warned = True


def save(path: Path, step: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"step": step}))
    os.replace(tmp, path)


step = 0
resumed_from = -1
resuming = os.environ.get("HPC_RESUMING") == "1"
if mode in ("save", "savefail", "periodic") and resuming and mine.exists():
    step = resumed_from = json.loads(mine.read_text())["step"]
if mode in ("save", "nosave", "savefail", "overwrite"):
    signal.signal(signal.SIGUSR1, on_usr1)
print(f"[table] task {task} rank {rank} attempt {attempt} mode {mode} starts at step {step}"
      f" (HPC_RESUMING={os.environ.get('HPC_RESUMING')})", flush=True)  # fmt: skip
(marks / f"ready_{task}_{attempt}_{rank}").touch()
while step < total:
    time.sleep(0.2)
    step += 1
    if mode == "periodic" and step % 5 == 0:
        save(mine, step)
    if mode == "overwrite" and step % 5 == 0:
        save(ck / f"step-{step}.json", step)
    if warned:
        print(f"[table] task {task} rank {rank} warned at step {step}", flush=True)
        if mode == "nosave":
            sys.exit(0)
        if mode == "overwrite":
            save(ck / f"step-{step}.json", step)
            sys.exit(0)
        save(mine, step)
        sys.exit(1 if mode == "savefail" else 0)
(ck / f"done_{task}_{rank}").write_text(f"{step} {attempt} {resumed_from}\n")
print(f"[table] task {task} rank {rank} done: {step} steps, attempt {attempt}", flush=True)
sys.exit(3 if mode == "fail" else 0)
