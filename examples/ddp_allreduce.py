"""Hand-written torch.distributed: every rank adds its rank+1 with all_reduce.

Runs under the `script` launcher (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
exported by hpc_files) and under `torchrun` (which sets the same variables), on CPU
(gloo) here and on GPUs (nccl) on a cluster. Each rank writes rank_<R>.json to
$HPC_CHECKPOINT_DIR (or ./outputs) with what it saw.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tag", default="allreduce", help="names the output folder")
    args = parser.parse_args()

    use_cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    value = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    expected = world * (world + 1) / 2
    record = {
        "rank": rank,
        "world_size": world,
        "local_rank": local_rank,
        "node": os.environ.get("SLURMD_NODENAME", socket.gethostname()),
        "sum": value.item(),
        "expected": expected,
        "env": {k: os.environ.get(k) for k in (
            "RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT",
            "CUDA_VISIBLE_DEVICES", "SLURM_PROCID", "SLURM_JOB_ID")},
    }
    out = Path(os.environ.get("HPC_CHECKPOINT_DIR", "outputs")) / args.tag
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank_{rank}.json").write_text(json.dumps(record))
    print(f"rank {rank}/{world} on {record['node']}: sum {value.item()} (expected {expected})", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if value.item() != expected:
        raise SystemExit(f"rank {rank}: wrong sum {value.item()} != {expected}")


if __name__ == "__main__":
    main()
