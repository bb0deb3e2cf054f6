"""A Dask computation on the job's Dask cluster (the `dask` launcher of hpc_files).

hpc_files starts a scheduler on the first node and one worker per node, then runs this
once with DASK_SCHEDULER_FILE and DASK_SCHEDULER_ADDRESS set (a plain Client() would
do too). Writes dask_result.json to $HPC_CHECKPOINT_DIR.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from distributed import Client


def square_where(x: int) -> tuple[int, str]:
    return x * x, os.environ.get("SLURMD_NODENAME", socket.gethostname())


def main() -> None:
    client = Client(scheduler_file=os.environ["DASK_SCHEDULER_FILE"])
    workers = client.scheduler_info()["workers"]
    futures = client.map(square_where, range(200), pure=False)
    results = client.gather(futures)
    total = sum(value for value, _ in results)
    nodes = sorted({node for _, node in results})
    record = {"total": total, "expected": sum(x * x for x in range(200)), "nodes": nodes,
              "workers": len(workers)}
    out = Path(os.environ.get("HPC_CHECKPOINT_DIR", "outputs"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "dask_result.json").write_text(json.dumps(record))
    print(f"dask: total {total} computed on {nodes} by {len(workers)} workers", flush=True)
    client.close()


if __name__ == "__main__":
    main()
