"""A single-machine script: its author wrote the world of one process into it."""

import torch.distributed as dist

dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29533", rank=0, world_size=1)
print("initialised a world of", dist.get_world_size(), flush=True)
