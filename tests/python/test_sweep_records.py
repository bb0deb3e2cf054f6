"""Reading what wandb 0.31 writes for an offline run (its run-ID.wandb record log)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hpc_toolkit.sweep.records import (
    RecordError,
    find_run_dir,
    iter_payloads,
    read_run,
    run_file,
    summary_metric,
)

SCRIPT = """
import wandb
run = wandb.init(config={"big": "x" * 100_000})
for i in range(3):
    wandb.log({"loss": 1.0 / (i + 1), "val/acc": 0.5 + i / 10, "nested": {"m": i}})
run.summary["best"] = 0.25
run.finish()
"""


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real offline run with a sweep's environment (as an offline sweep starts it)."""
    base = tmp_path_factory.mktemp("wandb")
    params = base / "wandb" / "sweep-sw000001" / "config-run00001.yaml"
    params.parent.mkdir(parents=True)
    params.write_text("wandb_version: 1\n\nlr:\n  value: 0.1\nname:\n  value: a b\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(base),
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(base),
        "WANDB_SWEEP_ID": "sw000001",
        "WANDB_RUN_ID": "run00001",
        "WANDB_SWEEP_PARAM_PATH": str(params),
        "WANDB_PROJECT": "proj",
    }
    subprocess.run([sys.executable, "-c", SCRIPT], env=env, check=True, capture_output=True)
    run_dir = find_run_dir(base, "run00001")
    assert run_dir is not None
    return run_dir


def test_config_sweep_id_and_summary(offline_run: Path) -> None:
    path = run_file(offline_run)
    assert path is not None and path.name == "run-run00001.wandb"
    run = read_run(path)
    assert run.run_id == "run00001" and run.sweep_id == "sw000001" and run.project == "proj"
    assert run.config["lr"] == 0.1 and run.config["name"] == "a b"
    assert len(run.config["big"]) == 100_000  # a record spread over several 32 KiB blocks
    assert summary_metric(run.summary, "loss") == pytest.approx(1 / 3)
    assert summary_metric(run.summary, "val/acc") == pytest.approx(0.7)
    assert summary_metric(run.summary, "nested.m") == 2
    assert summary_metric(run.summary, "best") == 0.25
    assert summary_metric(run.summary, "missing") is None
    assert run.exit_code == 0


def test_a_file_cut_short_keeps_the_whole_records(offline_run: Path, tmp_path: Path) -> None:
    path = run_file(offline_run)
    assert path is not None
    data = path.read_bytes()
    whole = iter_payloads(data)
    cut = iter_payloads(data[: len(data) - 10])
    assert 0 < len(cut) < len(whole)


def test_not_a_run_file(tmp_path: Path) -> None:
    with pytest.raises(RecordError):
        iter_payloads(b"hello world, not wandb")
    assert find_run_dir(tmp_path, "nope") is None
