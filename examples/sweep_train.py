"""The training script of the example sweep (sweeper.yml): fits y = 3x + 1 and logs the loss.

Nothing in it knows about Slurm or sweeps. A W&B agent (online) or hpc_files' offline
sweep runs it as `python examples/sweep_train.py --lr=0.05 --epochs=10 ...` with the
sweep's parameters; `wandb.init()` also reads them (run.config), so either way works.
On a laptop:    python examples/sweep_train.py --lr 0.05 --epochs 10
                (WANDB_MODE=offline to keep the run local)
"""

from __future__ import annotations

import argparse
import random

import wandb


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--fail", action="store_true", help="exit with code 3 (to see a failed run)")
    args = parser.parse_args()

    run = wandb.init(config=vars(args))
    config = run.config  # the sweep's values when a sweep started this run
    rng = random.Random(0)
    data = [(x, 3 * x + 1 + rng.gauss(0, 0.01)) for x in (rng.uniform(-1, 1) for _ in range(256))]
    w = b = 0.0
    loss = float("nan")
    for epoch in range(int(config.epochs)):
        loss = 0.0
        for start in range(0, len(data), int(config.batch_size)):
            batch = data[start : start + int(config.batch_size)]
            gw = gb = 0.0
            for x, y in batch:
                err = w * x + b - y
                gw += 2 * err * x / len(batch)
                gb += 2 * err / len(batch)
                loss += err * err / len(data)
            w -= float(config.lr) * gw
            b -= float(config.lr) * gb
        wandb.log({"loss": loss, "epoch": epoch})
    print(f"done: lr={config.lr} epochs={config.epochs} loss={loss:.6f}", flush=True)
    run.finish(exit_code=3 if args.fail else 0)
    return 3 if args.fail else 0


if __name__ == "__main__":
    raise SystemExit(main())
