"""A run's command line and environment, built the way `wandb agent` builds them.

Copied from wandb 0.31 (wandb_agent.Agent._command_run and sdk/launch/sweeps/utils.py)
so that the job needs neither wandb's import time nor a server:
the `command:` block (default `${env} ${interpreter} ${program} ${args}`), its macros
(${args}, ${args_no_equals}, ${args_json_file}, ${envvar:NAME} ...), the parameter file
`$WANDB_DIR/wandb/sweep-ID/config-RUN.yaml` and the variables WANDB_SWEEP_ID,
WANDB_RUN_ID and WANDB_SWEEP_PARAM_PATH. tests/python/test_sweep_command.py compares the
result with wandb's own functions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_COMMAND = ("${env}", "${interpreter}", "${program}", "${args}")
ENVVAR_MACRO = re.compile(r"\$\{envvar\:([A-Z0-9_]*)\}")


def macro_values(args: Mapping[str, Any]) -> dict[str, Any]:
    """wandb's create_sweep_command_args: the forms a run's parameters can take."""
    flags: list[str] = []
    no_hyphens: list[str] = []
    no_booleans: list[str] = []
    no_equals: list[str] = []
    hydra_append: list[str] = []
    hydra_override: list[str] = []
    as_dict: dict[str, Any] = {}
    for param, config in args.items():
        value = config["value"]
        flag = f"{param}={value}"
        flags.append("--" + flag)
        no_hyphens.append(flag)
        no_equals += [f"--{param}", str(value)]
        hydra_append.append("+" + flag)
        hydra_override.append("++" + flag)
        if isinstance(value, bool):
            if value:
                no_booleans.append("--" + param)
        else:
            no_booleans.append("--" + flag)
        as_dict[param] = value
    return {
        "args": flags,
        "args_no_equals": no_equals,
        "args_no_hyphens": no_hyphens,
        "args_no_boolean_flags": no_booleans,
        "args_json": [json.dumps(as_dict)],
        "args_dict": as_dict,
        "args_append_hydra": hydra_append,
        "args_override_hydra": hydra_override,
    }


def expand_envvars(words: Sequence[Any], environ: Mapping[str, str]) -> list[str]:
    """${envvar:NAME} -> $NAME (or NAME itself when unset, as wandb does)."""
    out: list[str] = []
    for word in words:
        text = str(word)
        for m in reversed(list(ENVVAR_MACRO.finditer(text))):
            text = text[: m.start()] + environ.get(m[1], m[1]) + text[m.end() :]
        out.append(text)
    return out


def build_argv(
    template: Sequence[Any] | None,
    program: str | None,
    args: Mapping[str, Any],
    json_file: str,
    environ: Mapping[str, str],
) -> list[str]:
    """The argv `wandb agent` would run for a run with parameters `args`."""
    words = expand_envvars(list(template) if template else list(DEFAULT_COMMAND), environ)
    values = macro_values(args)
    values["interpreter"] = ["python"]
    values["program"] = [program]
    values["args_json_file"] = [json_file]
    values["env"] = ["/usr/bin/env"]
    argv: list[str] = []
    for word in words:
        if word.startswith("${") and word.endswith("}"):
            argv += [str(v) for v in values.get(word[2:-1]) or []]
        else:
            argv.append(word)
    return argv


# What PyYAML reads as it is inside double quotes (its Reader refuses other characters).
# Line separators (U+2028, U+2029) and the BOM are left out: PyYAML would fold or drop them.
_YAML_PRINTABLE = re.compile(
    "[\t\n\r\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]*"
)


class _NeedsYaml(ValueError):
    """A value the small writer below does not handle; PyYAML writes the file then."""


def _yaml_scalar(value: Any) -> str:
    """One value as YAML that PyYAML reads back equal (flow style, like JSON)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:
            return ".nan"
        if value in (float("inf"), float("-inf")):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        # YAML 1.1 floats need a dot: 1e-05 would be read back as text.
        return text.replace("e", ".0e", 1) if "e" in text and "." not in text else text
    if isinstance(value, str):
        if not _YAML_PRINTABLE.fullmatch(value):
            raise _NeedsYaml(value)
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_scalar(v) for v in value) + "]"
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise _NeedsYaml(value)
        return (
            "{" + ", ".join(f"{_yaml_scalar(k)}: {_yaml_scalar(v)}" for k, v in value.items()) + "}"
        )
    raise _NeedsYaml(value)


def param_file_text(args: Mapping[str, Any]) -> str:
    """The parameter file wandb.init() reads (what wandb's save_config_file_from_dict
    writes, read back equal), written without PyYAML's import time (60 ms a task)."""
    try:
        body = "".join(
            f"{_yaml_scalar(k)}:\n  value: {_yaml_scalar(v['value'])}\n" for k, v in args.items()
        )
        return "wandb_version: 1\n\n" + body if body else "wandb_version: 1"
    except _NeedsYaml:
        pass
    import yaml

    text = "wandb_version: 1"
    if args:
        text += "\n\n" + yaml.dump(
            dict(args),
            Dumper=yaml.SafeDumper,
            default_flow_style=False,
            allow_unicode=True,
            sort_keys=False,
        )
    return text


@dataclass(frozen=True)
class RunLaunch:
    """Everything needed to start one run: argv, environment, files to write first."""

    argv: list[str]
    env: dict[str, str]
    param_file: Path
    param_text: str
    json_file: Path
    json_text: str | None  # written only when the command uses ${args_json_file}


def prepare_run(
    config: Mapping[str, Any],
    args: Mapping[str, Any],
    sweep_id: str,
    run_id: str,
    wandb_dir: Path,
    environ: Mapping[str, str],
) -> RunLaunch:
    """The launch of one offline run: what an agent gives it, plus WANDB_MODE=offline."""
    sweep_dir = wandb_dir / "wandb" / f"sweep-{sweep_id}"
    param_file = sweep_dir / f"config-{run_id}.yaml"
    json_file = sweep_dir / f"config-{run_id}.json"
    template = config.get("command")
    argv = build_argv(template, config.get("program"), args, str(json_file), environ)
    env = dict(environ)
    env.update(
        WANDB_MODE="offline",
        WANDB_DIR=str(wandb_dir),
        WANDB_SWEEP_ID=sweep_id,
        WANDB_RUN_ID=run_id,
        WANDB_SWEEP_PARAM_PATH=str(param_file),
    )
    for key, var in (("project", "WANDB_PROJECT"), ("entity", "WANDB_ENTITY")):
        if isinstance(config.get(key), str):
            env[var] = config[key]
    uses_json = template is not None and "${args_json_file}" in [str(w) for w in template]
    json_text = macro_values(args)["args_json"][0] if uses_json else None
    return RunLaunch(argv, env, param_file, param_file_text(args), json_file, json_text)


def shell_line(argv: Sequence[str]) -> str:
    """The argv as one line a person can paste into a shell."""
    import shlex

    return " ".join(shlex.quote(a) for a in argv)
