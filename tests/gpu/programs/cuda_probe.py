"""One CUDA step, and what the program saw: the GPU stage's plain job (tests/gpu/gpu.bats).

    python cuda_probe.py [--out DIR] [--tag NAME]

Fails unless CUDA works. Writes DIR/probe_<tag>.json: the GPU it used (name, UUID), the
CUDA_VISIBLE_DEVICES it was given, how many devices it sees, and when the process started
and its first CUDA step ended (epoch seconds), for the launch-time figure.
"""

from __future__ import annotations

import time

T_PROCESS = time.time()  # before torch is imported: the launch figure counts the import

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=os.environ.get("HPC_CHECKPOINT_DIR", "outputs"),
                        help="output folder (default: $HPC_CHECKPOINT_DIR)")
    parser.add_argument("--tag", default="", help="names the file (default: job, rank, pid)")
    args = parser.parse_args()
    env = os.environ
    if not torch.cuda.is_available():
        raise SystemExit(f"cuda_probe: no CUDA device (torch {torch.__version__}, "
                         f"CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES')!r})")
    device = torch.device("cuda", 0)
    a = torch.randn(1024, 1024, device=device)
    b = a @ a.T  # the first CUDA step: context, kernel, result back
    torch.cuda.synchronize()
    t_first = time.time()
    props = torch.cuda.get_device_properties(0)
    rank = env.get("HPC_AGENT_RANK", env.get("SLURM_PROCID", "0"))
    tag = args.tag or f"{env.get('SLURM_JOB_ID', 'hand')}_{rank}_{os.getpid()}"
    record = {
        "tag": tag,
        "node": env.get("SLURMD_NODENAME", socket.gethostname()),
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        "device_count": torch.cuda.device_count(),
        "device": str(b.device),
        "name": props.name,
        "uuid": str(props.uuid),
        "symmetric": bool(torch.allclose(b, b.T, atol=1e-2)),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "container": env.get("SINGULARITY_CONTAINER") or env.get("APPTAINER_CONTAINER"),
        "t_process": T_PROCESS,
        "t_first_cuda_step": t_first,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".probe_{tag}.json.tmp"
    tmp.write_text(json.dumps(record))
    tmp.replace(out / f"probe_{tag}.json")
    print(f"cuda_probe {tag}: {props.name} ({record['uuid']}) as {b.device}, "
          f"CUDA_VISIBLE_DEVICES={record['cuda_visible_devices']}, "
          f"{record['device_count']} device(s) seen", flush=True)


if __name__ == "__main__":
    main()
