"""Test helper: writes this process's argv, environment and place as JSON.

Usage: python argv_dump.py OUT_NAME [ARGS...]; the file is written to
$HPC_CHECKPOINT_DIR/OUT_NAME.json (the toolkit makes that folder in every job).
"""

import json
import os
import socket
import sys

out = os.path.join(os.environ.get("HPC_CHECKPOINT_DIR", "."), sys.argv[1] + ".json")
record = {
    "argv": sys.argv[2:],
    "cwd": os.getcwd(),
    "prefix": sys.prefix,
    "node": os.environ.get("SLURMD_NODENAME", socket.gethostname()),
    "env": {k: v for k, v in os.environ.items() if k.startswith(("HPC_", "SLURM_", "CUDA_")) or k in (
        "source_dir", "project_name", "scratch_dir", "exp_name", "OMP_NUM_THREADS", "VIRTUAL_ENV", "TMPDIR")},
}
with open(out + ".tmp", "w", encoding="utf-8") as f:
    json.dump(record, f)
os.replace(out + ".tmp", out)
print("dumped", out, flush=True)
