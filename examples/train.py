"""A laptop-sized training script: fits y = 3x + 1 by SGD, with no dependencies.

It is the example job of hpc_files: run it on a laptop with
    python examples/train.py --lr 0.05 --epochs 20 --name "run a"
and on the cluster by putting that same line in experiment_configurations.txt.
Inside a job it writes its result to $HPC_CHECKPOINT_DIR (the toolkit makes that folder);
elsewhere to ./outputs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--name", default="run")
    parser.add_argument("--layers", default="", help="comma-separated widths (echoed only)")
    parser.add_argument("--fail", action="store_true", help="exit with code 3 (to see a FAILED job)")
    args = parser.parse_args()

    rng = random.Random(0)
    data = [(x, 3 * x + 1 + rng.gauss(0, 0.01)) for x in (rng.uniform(-1, 1) for _ in range(256))]
    w = b = 0.0
    loss = 0.0
    for epoch in range(args.epochs):
        loss = 0.0
        for x, y in data:
            err = w * x + b - y
            w -= args.lr * err * x
            b -= args.lr * err
            loss += err * err / len(data)
        print(f"epoch {epoch} loss {loss:.6f}", flush=True)

    out_dir = Path(os.environ.get("HPC_CHECKPOINT_DIR", "outputs"))
    out_dir.mkdir(parents=True, exist_ok=True)
    result = {"name": args.name, "lr": args.lr, "layers": args.layers, "w": w, "b": b, "loss": loss}
    (out_dir / f"result_{args.name.replace(os.sep, '_')}.json").write_text(json.dumps(result))
    print(f"done: {json.dumps(result)}", flush=True)
    if args.fail:
        print("failing on purpose (--fail)", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
