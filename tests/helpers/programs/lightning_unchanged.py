"""A Lightning DDP script as a user writes it, knowing nothing of hpc_files or requeue.

    python lightning_unchanged.py --num_nodes 2 --devices 2 --max-steps 80 --out outputs

No callback, no SLURMEnvironment plugin, no ckpt_path: Lightning's defaults (on Slurm it
would use its own auto-requeue, which hangs in multi-process DDP). Each rank writes
OUT/rank_R.json at the end (its global step, the restart count, the checkpoint it
resumed from). Used by tests/integration/requeue_programs.bats.
"""

import argparse
import json
import os
import time
from pathlib import Path

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Model(L.LightningModule):
    def __init__(self, step_sleep: float) -> None:
        super().__init__()
        self.step_sleep = step_sleep
        self.net = nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        time.sleep(self.step_sleep)
        if self.global_rank == 0 and self.global_step % 10 == 0:
            print(f"[train] step {self.global_step}", flush=True)
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--num_nodes", type=int, default=1)
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=50)
    p.add_argument("--step-sleep", type=float, default=0.15)
    p.add_argument("--out", default="outputs")
    args = p.parse_args()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, 8, generator=g)
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=32)
    trainer = L.Trainer(accelerator="cpu", devices=args.devices, num_nodes=args.num_nodes,
                        strategy="ddp" if args.devices * args.num_nodes > 1 else "auto",
                        max_steps=args.max_steps, enable_progress_bar=False,
                        enable_model_summary=False, logger=False, enable_checkpointing=False)
    trainer.fit(Model(args.step_sleep), data)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank_{trainer.global_rank}.json").write_text(json.dumps({
        "global_step": trainer.global_step,
        "restart_count": int(os.environ.get("SLURM_RESTART_COUNT", "0")),
        "resumed_from": trainer.ckpt_path,
    }))
    print(f"rank {trainer.global_rank} ended at step {trainer.global_step}", flush=True)


if __name__ == "__main__":
    main()
