"""Plain torch.distributed as its tutorial writes it: the world comes from the environment."""

import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    print(f"rank {rank}/{world} on {os.uname().nodename}: sum={value.item()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
