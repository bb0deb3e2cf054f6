"""A run's command, environment and parameter file are what `wandb agent` gives a run.

The reference is wandb's own Agent._command_run, driven with its process class replaced
by a recorder (no server, no subprocess).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpc_toolkit.sweep.command import build_argv, param_file_text, prepare_run

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from wandb import wandb_agent


class Recorder:
    """Stands in for wandb_agent.AgentProcess: keeps the command and environment."""

    last: dict[str, Any] = {}

    def __init__(self, command: list[str], env: dict[str, str], **_: Any) -> None:
        Recorder.last = {"command": command, "env": env}


def wandb_gives(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    template: list[Any] | None,
    args: dict[str, Any],
    program: str = "train.py",
) -> dict[str, Any]:
    monkeypatch.setattr(wandb_agent, "AgentProcess", Recorder)
    monkeypatch.setenv("WANDB_SWEEP_ID", "sw123456")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "theirs"))
    agent = object.__new__(wandb_agent.Agent)
    agent._sweep_command = (
        list(template) if template else list(wandb_agent.Agent.DEFAULT_SWEEP_COMMAND)
    )
    agent._function = None
    agent._in_jupyter = False
    agent._run_processes = {}
    agent._forward_signals = False
    environ_before = dict(os.environ)
    try:
        agent._command_run({"run_id": "run00001", "args": args, "program": program})
    finally:
        # _command_run sets WANDB_RUN_ID and WANDB_SWEEP_PARAM_PATH in os.environ.
        for key in set(os.environ) - set(environ_before):
            monkeypatch.delenv(key)
    return Recorder.last


ARGS = {
    "lr": {"value": 0.001},
    "tiny": {"value": 1e-05},
    "flag": {"value": True},
    "off": {"value": False},
    "name": {"value": "run a"},
    "layers": {"value": [1, 2]},
    "opt": {"value": {"mom": 0.9}},
    "none": {"value": None},
}
TEMPLATES: list[list[Any] | None] = [
    None,
    ["${env}", "python", "${program}", "${args}"],
    ["python", "-u", "${program}", "${args_no_equals}"],
    ["${interpreter}", "${program}", "${args_no_hyphens}", "${args_no_boolean_flags}"],
    ["python", "train.py", "${args_json}", "--cfg", "${args_json_file}"],
    ["python", "${program}", "${args_append_hydra}", "${args_override_hydra}", "${unknown}"],
    ["${envvar:HOME}/bin/run", "--seed", 3, "${args_dict}", "x${envvar:NOPE_NOT_SET}"],
]


@pytest.mark.parametrize("template", TEMPLATES)
def test_argv_and_env_match_wandb_agent(
    template: list[Any] | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    ref = wandb_gives(monkeypatch, tmp_path, template, ARGS)
    config: dict[str, Any] = {"program": "train.py"}
    if template is not None:
        config["command"] = template
    wandb_dir = tmp_path / "theirs"  # same WANDB_DIR, so the file paths compare equal
    launch = prepare_run(config, ARGS, "sw123456", "run00001", wandb_dir, dict(os.environ))
    assert launch.argv == [str(c) for c in ref["command"]]
    for key in ("WANDB_SWEEP_ID", "WANDB_RUN_ID", "WANDB_SWEEP_PARAM_PATH", "WANDB_DIR"):
        assert launch.env[key] == ref["env"][key], key
    assert launch.env["WANDB_MODE"] == "offline"
    # The parameter file wandb wrote and ours read back the same.
    theirs = yaml.safe_load(Path(ref["env"]["WANDB_SWEEP_PARAM_PATH"]).read_text())
    assert yaml.safe_load(launch.param_text) == theirs
    if template is not None and "${args_json_file}" in template:
        assert (
            launch.json_text
            == (wandb_dir / "wandb" / "sweep-sw123456" / "config-run00001.json").read_text()
        )
    else:
        assert launch.json_text is None


VALUES = [
    0.1, 1e-05, 1e16, -2.5e-300, float("inf"), float("-inf"), 3, -7, 10**20, True, False, None,
    "", "on", "yes", "null", "1e-4", "a: b", "- x", "#c", "caf\u00e9", "tab\there", "line\nbreak",
    "quote\"s", "back\\slash", "\x7f", "\u2028", "\ufeff", "\U0001f600", [1, "x", None],
    {"a": [1, {"b": 0.5}]}, {"yes": "no"}, [], {},
]  # fmt: skip


@pytest.mark.parametrize("value", VALUES)
def test_param_file_reads_back_like_wandbs(value: Any, tmp_path: Path) -> None:
    from wandb.sdk.lib import config_util

    args = {"p": {"value": value}, "true": {"value": 1}}
    theirs, ours = tmp_path / "theirs.yaml", tmp_path / "ours.yaml"
    config_util.save_config_file_from_dict(str(theirs), args)
    ours.write_text(param_file_text(args))
    assert yaml.safe_load(ours.read_text()) == yaml.safe_load(theirs.read_text())
    # What wandb.init() takes from the file (its own reader).
    assert config_util.dict_from_config_file(str(ours)) == {"p": value, "true": 1}


def test_nan_reads_back_as_nan() -> None:
    loaded = yaml.safe_load(param_file_text({"p": {"value": float("nan")}}))
    assert loaded["p"]["value"] != loaded["p"]["value"]


def test_project_and_entity_of_the_sweep_reach_the_run(tmp_path: Path) -> None:
    config = {"program": "t.py", "project": "proj", "entity": "team"}
    launch = prepare_run(
        config, {"a": {"value": 1}}, "s1", "r1", tmp_path, {"WANDB_PROJECT": "old"}
    )
    assert launch.env["WANDB_PROJECT"] == "proj" and launch.env["WANDB_ENTITY"] == "team"
    assert launch.argv == ["/usr/bin/env", "python", "t.py", "--a=1"]


def test_build_argv_leaves_unknown_macros_out() -> None:
    argv = build_argv(["run", "${nothing}", "${args}"], None, {"a": {"value": 2}}, "f.json", {})
    assert argv == ["run", "--a=2"]
