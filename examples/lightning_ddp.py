"""A small Lightning model trained with DDP on however many nodes and devices the job has.

On a laptop:        python examples/lightning_ddp.py --max-steps 20
On the cluster:     the same line in experiment_configurations.txt, submitted with
    bash hpc_files/job_submitter.sh --which-distributed lightning --num-nodes 2 --gpus 2
hpc_files starts one task per GPU (one per node on CPU) with srun and exports
HPC_NUM_NODES, HPC_DEVICES_PER_NODE and HPC_ACCELERATOR, which are the defaults below:
the command line is never rewritten. Checkpoints go to $HPC_CHECKPOINT_DIR.

Wall time and preemption: the SlurmRequeue callback of hpc_toolkit saves hpc_ckpt_N.ckpt
when hpc_files warns of the wall time (all ranks agree at a batch end, no deadlock), the
job is requeued, and the rerun resumes from that checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.plugins.environments import SLURMEnvironment
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from hpc_toolkit.lightning_requeue import SlurmRequeue


class Regressor(L.LightningModule):
    def __init__(self, lr: float, step_sleep: float = 0.0) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        if self.hparams["step_sleep"]:
            time.sleep(self.hparams["step_sleep"])  # stands in for a real model's step time
        if self.global_rank == 0 and self.global_step % 10 == 0:
            print(f"[train] step {self.global_step} at {time.time():.3f}", flush=True)
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
    parser.add_argument("--step-sleep", type=float, default=0.0, help="seconds added to each step")
    parser.add_argument("--num_nodes", type=int, default=int(env.get("HPC_NUM_NODES", "1")))
    parser.add_argument("--devices", type=int, default=int(env.get("HPC_DEVICES_PER_NODE", "1")))
    parser.add_argument("--accelerator", default=env.get("HPC_ACCELERATOR", "auto"))
    args = parser.parse_args()

    ckpt_dir = Path(env.get("HPC_CHECKPOINT_DIR", "outputs"))
    distributed = args.num_nodes * args.devices > 1
    # Lightning's own auto-requeue deadlocks on several nodes: SlurmRequeue does it safely.
    under_slurm = "SLURM_NTASKS" in env and "SLURM_JOB_ID" in env
    plugins = [SLURMEnvironment(auto_requeue=False)] if under_slurm else []
    requeue = SlurmRequeue(dirpath=ckpt_dir)
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
        callbacks=[requeue],
    )
    model = Regressor(args.lr, args.step_sleep)
    resume = SlurmRequeue.resume_path(ckpt_dir)
    if resume and trainer.global_rank == 0:
        print(f"[train] resuming from {resume}", flush=True)
    trainer.fit(model, data(), ckpt_path=resume)
    rank = trainer.global_rank
    if requeue.saved_path is not None:
        print(f"rank {rank} stopped at step {trainer.global_step} for a requeue", flush=True)
        return
    result = {
        "rank": rank,
        "world_size": trainer.world_size,
        "node": env.get("SLURMD_NODENAME", "laptop"),
        "global_step": trainer.global_step,
        "restart_count": int(env.get("HPC_RESTART_COUNT", "0")),
        "resumed_from": resume,
        "loss": float(trainer.callback_metrics.get("train_loss", torch.tensor(float("nan")))),
    }
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    (ckpt_dir / f"lightning_rank_{rank}.json").write_text(json.dumps(result))
    print(f"rank {rank}/{trainer.world_size} finished at step {trainer.global_step}", flush=True)


if __name__ == "__main__":
    main()
