"""The job side of an offline sweep, run here without Slurm: what a run gets, what the
ledger records, failures, reruns, signals, and the metric from a real offline W&B run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpc_toolkit.sweep.agent import main
from hpc_toolkit.sweep.folder import SweepFolder
from hpc_toolkit.sweep.ledger import FAILED, FINISHED, KILLED, Ledger, latest
from hpc_toolkit.sweep.spec import parse_sweep
from real_sweep_folder import write_sweep_folder

# The "training script": records what it was given; fails when asked to.
RECORDER = """
import json, os, sys, time, signal
out = os.environ["RECORD_DIR"]
def term(*_):
    open(os.path.join(out, "got_term"), "w").close()
    sys.exit(143)
signal.signal(signal.SIGTERM, term)
keys = [k for k in os.environ if k.startswith("WANDB_")]
record = {"argv": sys.argv[1:], "env": {k: os.environ[k] for k in keys}, "cwd": os.getcwd()}
with open(os.path.join(out, os.environ["WANDB_RUN_ID"] + ".json"), "w") as f:
    json.dump(record, f)
if "--fail=True" in sys.argv:
    sys.exit(3)
if "--sleep=True" in sys.argv:
    open(os.path.join(out, "sleeping"), "w").close()
    time.sleep(60)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hermetic: Path) -> Path:
    (tmp_path / "record").mkdir()
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "rec.py").write_text(RECORDER)
    # A wrapper, not a link: a linked venv python would not find the venv's packages.
    wrapper = hermetic / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("RECORD_DIR", str(tmp_path / "record"))
    monkeypatch.chdir(tmp_path / "proj")
    return tmp_path


def make_sweep(root: Path, text: str, points: int) -> Path:
    folder = root / "sweeps" / "abcd1234"
    write_sweep_folder(folder, parse_sweep(text, "sweeper.yml"), "abcd1234", "exp", points, text)
    return folder


def records(root: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in (root / "record").glob("*.json")}


GRID = """\
program: rec.py
method: grid
project: myproj
parameters:
  lr: {values: [0.1, 0.01]}
  fail: {values: [false, true]}
"""


def test_a_point_runs_as_a_wandb_agent_would_run_it(project: Path) -> None:
    folder = make_sweep(project, GRID, 4)
    assert main([str(folder), "--point", "1"]) == 0
    ((run_id, rec),) = records(project).items()
    assert rec["argv"] == ["--fail=False", "--lr=0.01"]
    env = rec["env"]
    assert env["WANDB_MODE"] == "offline" and env["WANDB_SWEEP_ID"] == "abcd1234"
    assert env["WANDB_RUN_ID"] == run_id and env["WANDB_PROJECT"] == "myproj"
    assert env["WANDB_DIR"] == str(folder)
    param_file = Path(env["WANDB_SWEEP_PARAM_PATH"])
    assert param_file == folder / "wandb" / "sweep-abcd1234" / f"config-{run_id}.yaml"
    loaded = yaml.safe_load(param_file.read_text())
    assert loaded == {"wandb_version": 1, "fail": {"value": False}, "lr": {"value": 0.01}}
    assert rec["cwd"] == str(project / "proj")
    last = latest(Ledger(folder).events())
    assert list(last) == [1] and last[1].state == FINISHED and last[1].exit_code == 0
    assert last[1].params == {"fail": {"value": False}, "lr": {"value": 0.01}}


def test_point_from_the_task_index(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = make_sweep(project, GRID, 4)
    monkeypatch.setenv("HPC_TASK_INDEX", "0")
    assert main([str(folder)]) == 0
    assert list(latest(Ledger(folder).events())) == [0]


def test_a_failing_run_fails_the_task_and_a_rerun_repeats_the_point(project: Path) -> None:
    folder = make_sweep(project, GRID, 4)
    assert main([str(folder), "--point", "2"]) == 3
    assert main([str(folder), "--point", "2"]) == 3
    events = Ledger(folder).events()
    starts = [e for e in events if e["event"] == "start"]
    assert [e["point"] for e in starts] == [2, 2]
    assert starts[0]["params"] == starts[1]["params"]
    assert starts[0]["run_id"] != starts[1]["run_id"]
    assert latest(events)[2].state == FAILED and latest(events)[2].exit_code == 3


def test_a_bayes_point_is_chosen_once_and_rerun_with_the_same_values(project: Path) -> None:
    text = (
        "program: rec.py\nmethod: bayes\nmetric: {name: loss}\n"
        "parameters:\n  x: {min: 0.0, max: 1.0}\n  fail: {values: [true]}\n"
    )
    folder = make_sweep(project, text, 3)
    assert main([str(folder), "--point", "0"]) == 3
    assert main([str(folder), "--point", "0"]) == 3
    assert main([str(folder), "--point", "1"]) == 3
    starts = [e for e in Ledger(folder).events() if e["event"] == "start"]
    assert starts[0]["params"] == starts[1]["params"]
    assert len({e["run_id"] for e in starts}) == 3
    assert 0.0 <= starts[2]["params"]["x"]["value"] <= 1.0


def test_a_task_without_a_point(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = make_sweep(project, GRID, 4)
    assert main([str(folder), "--point", "4"]) == 2
    assert "has no point" in capsys.readouterr().out
    assert main([str(project / "nowhere")]) == 2


def test_default_command_runs_python_from_path(project: Path) -> None:
    folder = make_sweep(
        project,
        GRID.replace("rec.py", "rec.py\ncommand: [python, '${program}', '${args_no_hyphens}']"),
        4,
    )
    assert main([str(folder), "--point", "0"]) == 0
    (rec,) = records(project).values()
    assert rec["argv"] == ["fail=False", "lr=0.1"]


def test_sigterm_reaches_the_run_and_the_point_is_killed(project: Path) -> None:
    text = "program: rec.py\nmethod: grid\nparameters:\n  sleep: {values: [true]}\n"
    folder = make_sweep(project, text, 1)
    root = Path(__file__).resolve().parents[2] / "python"
    code = "import sys; from hpc_toolkit.sweep.agent import main; sys.exit(main(sys.argv[1:]))"
    agent = subprocess.Popen(
        [sys.executable, "-c", code, str(folder), "--point", "0"],
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not (project / "record" / "sleeping").exists():
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.05)
    agent.send_signal(signal.SIGTERM)
    assert agent.wait(timeout=30) == 143
    assert (project / "record" / "got_term").exists()
    assert latest(Ledger(folder).events())[0].state == KILLED


WANDB_SCRIPT = """
import wandb
run = wandb.init()
for i in range(3):
    wandb.log({"loss": run.config.lr * (3 - i)})
run.finish()
"""


def test_the_metric_comes_from_the_offline_wandb_run(project: Path) -> None:
    (project / "proj" / "wb.py").write_text(WANDB_SCRIPT)
    text = (
        "program: wb.py\nmethod: grid\nmetric: {name: loss, goal: minimize}\n"
        "parameters:\n  lr: {values: [0.5, 2.0]}\n"
    )
    folder = make_sweep(project, text, 2)
    assert main([str(folder), "--point", "1"]) == 0
    a = latest(Ledger(folder).events())[1]
    assert a.state == FINISHED and a.metric == 2.0
    assert a.run_dir is not None and Path(a.run_dir).name.endswith(a.run_id)
    assert SweepFolder.load(folder).num_points == 2
