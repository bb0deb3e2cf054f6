"""A training loop written as Accelerate's docs show it (no launcher code, no cluster code).

    python accelerate_loop.py            # under torchrun / a launcher that sets RANK ...
    accelerate launch accelerate_loop.py

Prints, on the main process, how many processes took part and the sum of their ranks.
"""

import torch
from accelerate import Accelerator


def main() -> None:
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    ranks = accelerator.gather(torch.tensor([accelerator.process_index]))
    if accelerator.is_main_process:
        print(f"accelerate: num_processes={accelerator.num_processes}"
              f" rank_sum={int(ranks.sum())} type={accelerator.distributed_type}", flush=True)


if __name__ == "__main__":
    main()
