"""NCCL all_reduce across every rank, each on its own GPU (tests/gpu/gpu.bats).

Runs under the `script` launcher and under `torchrun` (both export RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT). Every rank adds rank+1; each writes
OUT/rank_<R>.json with the backend, its GPU (index, name, UUID) and the sum. Fails unless
CUDA works and the sum is right.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=os.environ.get("HPC_CHECKPOINT_DIR", "outputs"),
                        help="output folder (default: $HPC_CHECKPOINT_DIR)")
    args = parser.parse_args()
    env = os.environ
    if not torch.cuda.is_available():
        visible = env.get("CUDA_VISIBLE_DEVICES")
        raise SystemExit(f"nccl_allreduce: no CUDA device (CUDA_VISIBLE_DEVICES={visible!r})")
    local_rank = int(env.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.tensor([float(rank + 1)], device="cuda")
    dist.all_reduce(value)
    torch.cuda.synchronize()
    props = torch.cuda.get_device_properties(local_rank)
    record = {
        "rank": rank,
        "world_size": world,
        "local_rank": local_rank,
        "backend": str(dist.get_backend()),
        "device": str(value.device),
        "name": props.name,
        "uuid": str(props.uuid),
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        "sum": value.item(),
        "expected": world * (world + 1) / 2,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank_{rank}.json").write_text(json.dumps(record))
    print(f"rank {rank}/{world} {record['backend']} on {record['device']} ({props.name}): "
          f"sum {record['sum']} (expected {record['expected']})", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if record["sum"] != record["expected"]:
        raise SystemExit(f"rank {rank}: wrong sum {record['sum']} != {record['expected']}")


if __name__ == "__main__":
    main()
