"""A small Lightning model trained with DDP on however many nodes and devices the job has.

On a laptop:        python examples/lightning_ddp.py --max-steps 20
On the cluster:     the same line in experiment_configurations.txt, submitted with
    bash hpc_files/job_submitter.sh --which-distributed lightning --num-nodes 2 --gpus 2
hpc_files starts one task per GPU (one per node on CPU) with srun and exports
HPC_NUM_NODES, HPC_DEVICES_PER_NODE and HPC_ACCELERATOR, which are the defaults below:
the command line is never rewritten. Checkpoints go to $HPC_CHECKPOINT_DIR.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.plugins.environments import SLURMEnvironment
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Regressor(L.LightningModule):
    def __init__(self, lr: float) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss, prog_bar=False)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"])


def data(n: int = 4096) -> DataLoader[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g)
    y = x.sum(dim=1, keepdim=True) + 0.01 * torch.randn(n, 1, generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, num_workers=0)


def main() -> None:
    env = os.environ
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--max-steps", type=int, default=50)
    parser.add_argument("--num_nodes", type=int, default=int(env.get("HPC_NUM_NODES", "1")))
    parser.add_argument("--devices", type=int, default=int(env.get("HPC_DEVICES_PER_NODE", "1")))
    parser.add_argument("--accelerator", default=env.get("HPC_ACCELERATOR", "auto"))
    args = parser.parse_args()

    ckpt_dir = Path(env.get("HPC_CHECKPOINT_DIR", "outputs"))
    distributed = args.num_nodes * args.devices > 1
    plugins = [SLURMEnvironment(auto_requeue=False)] if "SLURM_NTASKS" in env and "SLURM_JOB_ID" in env else []
    trainer = L.Trainer(
        accelerator=args.accelerator,
        devices=args.devices,
        num_nodes=args.num_nodes,
        strategy="ddp" if distributed else "auto",
        max_steps=args.max_steps,
        default_root_dir=ckpt_dir,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        plugins=plugins,
    )
    model = Regressor(args.lr)
    trainer.fit(model, data())
    rank = trainer.global_rank
    result = {
        "rank": rank,
        "world_size": trainer.world_size,
        "node": env.get("SLURMD_NODENAME", "laptop"),
        "global_step": trainer.global_step,
        "loss": float(trainer.callback_metrics.get("train_loss", torch.tensor(float("nan")))),
    }
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    (ckpt_dir / f"lightning_rank_{rank}.json").write_text(json.dumps(result))
    print(f"rank {rank}/{trainer.world_size} finished at step {trainer.global_step}", flush=True)


if __name__ == "__main__":
    main()
