"""Lightning on every GPU the job has, with the SlurmRequeue callback (tests/gpu/gpu.bats).

    python lightning_gpu.py [--out DIR] [--max-steps N] [--step-sleep S]

Devices and nodes come from HPC_DEVICES_PER_NODE and HPC_NUM_NODES (set by hpc_files);
DDP when there is more than one process (NCCL on GPUs). Checkpoints go to
$HPC_CHECKPOINT_DIR; a warned job saves hpc_ckpt_N.ckpt, is requeued and resumes. Each rank
writes DIR/lightning_rank_<R>.json: world size, strategy, backend, its device and GPU,
the final step and where it resumed from.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import lightning as L
import torch
import torch.distributed as dist
from lightning.pytorch.plugins.environments import SLURMEnvironment
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from hpc_toolkit.lightning_requeue import SlurmRequeue


class Model(L.LightningModule):
    def __init__(self, step_sleep: float) -> None:
        super().__init__()
        self.step_sleep = step_sleep
        self.net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1))
        self.devices_seen: set[str] = set()

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        if self.step_sleep:
            time.sleep(self.step_sleep)
        x, y = batch
        self.devices_seen.add(str(x.device))
        if self.global_rank == 0 and self.global_step % 10 == 0:
            print(f"[train] step {self.global_step} on {x.device}", flush=True)
        loss = nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def data() -> DataLoader[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8192, 64, generator=g)
    return DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=64, shuffle=True)


def main() -> None:
    env = os.environ
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=os.environ.get("HPC_CHECKPOINT_DIR", "outputs"),
                        help="output folder (default: $HPC_CHECKPOINT_DIR)")
    parser.add_argument("--max-steps", type=int, default=40)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        visible = env.get("CUDA_VISIBLE_DEVICES")
        raise SystemExit(f"lightning_gpu: no CUDA device (CUDA_VISIBLE_DEVICES={visible!r})")
    nodes = int(env.get("HPC_NUM_NODES", "1"))
    devices = int(env.get("HPC_DEVICES_PER_NODE", "1"))
    ckpt_dir = Path(env.get("HPC_CHECKPOINT_DIR", "outputs"))
    requeue = SlurmRequeue(dirpath=ckpt_dir)
    trainer = L.Trainer(
        accelerator=env.get("HPC_ACCELERATOR", "gpu"),
        devices=devices,
        num_nodes=nodes,
        strategy="ddp" if nodes * devices > 1 else "auto",
        max_steps=args.max_steps,
        default_root_dir=ckpt_dir,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        plugins=[SLURMEnvironment(auto_requeue=False)] if "SLURM_NTASKS" in env else [],
        callbacks=[requeue],
    )
    model = Model(args.step_sleep)
    resume = SlurmRequeue.resume_path(ckpt_dir)
    if resume and trainer.global_rank == 0:
        print(f"[train] resuming from {resume}", flush=True)
    trainer.fit(model, data(), ckpt_path=resume)
    rank = trainer.global_rank
    if requeue.saved_path is not None:
        print(f"rank {rank} stopped at step {trainer.global_step} for a requeue", flush=True)
        return
    root = trainer.strategy.root_device
    record = {
        "rank": rank,
        "world_size": trainer.world_size,
        "strategy": type(trainer.strategy).__name__,
        "backend": str(dist.get_backend()) if dist.is_available() and dist.is_initialized() else None,
        "root_device": str(root),
        "devices_seen": sorted(model.devices_seen),
        "name": torch.cuda.get_device_name(root) if root.type == "cuda" else None,
        "uuid": str(torch.cuda.get_device_properties(root).uuid) if root.type == "cuda" else None,
        "global_step": trainer.global_step,
        "restart_count": int(env.get("HPC_RESTART_COUNT", "0")),
        "resumed_from": resume,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"lightning_rank_{rank}.json").write_text(json.dumps(record))
    print(f"rank {rank}/{trainer.world_size} finished at step {trainer.global_step} on {root}", flush=True)


if __name__ == "__main__":
    main()
