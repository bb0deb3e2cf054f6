"""The Lightning rows of the requeue table (tests/integration/requeue_table.bats): a plain
Lightning script (no callback, no ckpt_path, nothing of hpc_files: the toolkit's hook does
the saving and the resuming under -d lightning) of STEPS steps of 0.2 s.

    python table_lightning.py MODE STEPS

MODE:
  pause   warned during fit: the hook saves hpc_ckpt_N.ckpt at the next batch end and
          stops; the next attempt resumes from it
  after   warned after fit, while the script writes its outputs (10 s, no handler then):
          it finishes inside the window

Marks as table_prog.py's: $HPC_EXP_DIR/marks/ready_T_A_0 once training runs (pause) or
once fit has returned (after). At the end: done_T_0 in the checkpoint folder holds
"GLOBAL_STEP ATTEMPT RESUMED_FROM" (RESUMED_FROM: the step fit started at, -1 for 0).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

mode, total = sys.argv[1], int(sys.argv[2])
task = os.environ.get("HPC_TASK_INDEX", "0")
attempt = int(os.environ.get("HPC_RESTART_COUNT", "0")) + 1
ck = Path(os.environ["HPC_CHECKPOINT_DIR"])
marks = Path(os.environ["HPC_EXP_DIR"]) / "marks"
marks.mkdir(parents=True, exist_ok=True)
ready = marks / f"ready_{task}_{attempt}_0"


class Model(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(8, 1)
        self.started_at = -1

    def on_train_start(self) -> None:
        self.started_at = self.global_step if self.global_step > 0 else -1
        print(f"[table] task {task} attempt {attempt} mode {mode} starts at step"
              f" {self.global_step} (HPC_RESUMING={os.environ.get('HPC_RESUMING')})", flush=True)  # fmt: skip

    def training_step(self, batch, batch_idx):
        time.sleep(0.2)
        if mode == "pause" and batch_idx == 2:
            ready.touch()
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


x = torch.randn(4096, 8, generator=torch.Generator().manual_seed(0))
data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=total, enable_progress_bar=False,
                    enable_model_summary=False, logger=False, enable_checkpointing=False)
model = Model()
trainer.fit(model, data)
if mode == "after":
    ready.touch()
    for _ in range(50):  # "writing the outputs"
        time.sleep(0.2)
(ck / f"done_{task}_0").write_text(f"{trainer.global_step} {attempt} {model.started_at}\n")
print(f"[table] task {task} done: {trainer.global_step} steps, attempt {attempt}", flush=True)
