"""The job's Python start-up hook (virtual_env_hpc_files/python_hooks/sitecustomize.py), in
a fresh interpreter as a job's task starts one: a Trainer left at its defaults gets the
job's counts, one with other counts and a torch.distributed world that is not the job's
stop with exit 2 and a message. On the cluster: tests/integration/programs.bats."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HOOKS = Path(__file__).resolve().parents[2] / "virtual_env_hpc_files" / "python_hooks"


def run(code: str, nodes: int, per_node: int) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(HOOKS), HPC_NUM_NODES=str(nodes),
               HPC_DEVICES_PER_NODE=str(per_node), PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=600)  # a loaded machine: imports take long


TRAINER = ("import lightning as L\n"
           "t = L.Trainer({args}, logger=False, enable_progress_bar=False)\n"
           "print('COUNTS', t.num_nodes, t.num_devices, type(t.strategy).__name__)")


def test_trainer_defaults_become_the_jobs_counts() -> None:
    out = run(TRAINER.format(args="accelerator='cpu'"), nodes=2, per_node=2)
    assert out.returncode == 0, out.stderr
    assert "COUNTS 2 2 DDPStrategy" in out.stdout
    assert "Trainer(num_nodes=2, devices=2) from the job" in out.stdout


def test_trainer_counts_the_job_lacks_stop_with_both_named() -> None:
    out = run(TRAINER.format(args="accelerator='cpu', num_nodes=1, devices=[0]"), nodes=2,
              per_node=2)
    assert out.returncode == 2
    assert "Trainer(num_nodes=1, devices=[0]) does not fit this job: 2 node(s) x 2" in out.stderr
    assert "COUNTS" not in out.stdout


def test_trainer_counts_that_fit_are_kept() -> None:
    out = run(TRAINER.format(args="accelerator='cpu', num_nodes=2, devices=1"), nodes=2,
              per_node=1)
    assert out.returncode == 0, out.stderr
    assert "COUNTS 2 1 DDPStrategy" in out.stdout
    assert "from the job" not in out.stdout


def test_a_world_size_that_is_not_the_jobs_stops_before_init() -> None:
    code = ("import torch.distributed as dist\n"
            "dist.init_process_group('gloo', init_method='tcp://127.0.0.1:{port}', rank=0,"
            " world_size=1)\nprint('WORLD', dist.get_world_size())")
    out = run(code.format(port=29611), nodes=2, per_node=1)
    assert out.returncode == 2
    assert "init_process_group: world_size=1, but this job runs 2 process(es)" in out.stderr
    out = run(code.format(port=29612), nodes=1, per_node=1)
    assert out.returncode == 0, out.stderr
    assert "WORLD 1" in out.stdout
