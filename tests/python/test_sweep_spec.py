"""Sweep files: what W&B accepts is accepted, what it refuses is refused with the line."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from hpc_toolkit.sweep.spec import DISTRIBUTIONS, SweepError, load_sweep, parse_sweep

GOOD = """\
program: train.py
method: grid
metric:
  name: loss
  goal: minimize
parameters:
  lr:
    values: [0.01, 0.1]
  layers:
    value: 2
  opt:
    parameters:
      momentum:
        values: [0.8, 0.9]
"""


def refused(text: str) -> str:
    with pytest.raises(SweepError) as info:
        parse_sweep(text, "sweeper.yml")
    return str(info.value)


def test_a_good_grid_is_read_with_nested_parameters_in_w_and_b_order() -> None:
    spec = parse_sweep(GOOD, "sweeper.yml")
    assert spec.method == "grid"
    assert [p.name for p in spec.params] == ["layers", "lr", "opt.momentum"]
    assert [p.kind for p in spec.params] == ["constant", "categorical", "categorical"]
    assert spec.metric_name == "loss"


def test_malformed_yaml_says_line_and_column() -> None:
    msg = refused("method: grid\nparameters:\n  lr: {values: [1, 2\n")
    assert msg.startswith("sweeper.yml: line ")
    assert "column" in msg and "not valid YAML" in msg


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "method: hyperopt\nparameters: {a: {value: 1}}\n",
            "line 1: method: unknown method 'hyperopt'",
        ),
        ("method: custom\nparameters: {a: {value: 1}}\n", "needs a W&B server"),
        ("parameters: {a: {values: [1]}}\n", "method: missing"),
        (
            "method: random\nparameters:\n  lr: {distribution: lognormal, min: 0, max: 1}\n",
            "line 3: parameters.lr: unknown distribution 'lognormal'",
        ),
        (
            "method: grid\nparameters:\n  a: {values: [1]}\n  lr: {min: 0.1, max: 1.0}\n",
            "line 4: parameters.lr: a grid cannot enumerate distribution uniform",
        ),
        (
            "method: grid\nparameters:\n  lr: {distribution: log_uniform_values, min: 1, max: 2}\n",
            "cannot enumerate distribution log_uniform_values",
        ),
        ("method: grid\nparameters: {}\n", "the sweep is empty"),
        ("method: grid\n", "the sweep is empty"),
        ("", "the file is empty"),
        (
            "method: grid\nparameters:\n  a: {values: []}\n",
            "parameters.a.values: must be a non-empty list",
        ),
        ("method: random\nparameters:\n  lr: {min: 1e-4, max: 0.1}\n", "write it as 1.0e-4"),
        (
            "method: random\nparameters:\n  lr: {min: 1.0, max: 0.5}\n",
            "min 1.0 is not less than max 0.5",
        ),
        ("method: grid\nparamters: {a: {value: 1}}\n", "line 2: paramters: unknown key"),
        ("method: bayes\nparameters: {a: {min: 0.0, max: 1.0}}\n", "a bayes sweep needs 'metric:"),
        (
            "method: random\nparameters: {a: {values: [1, 2], probabilities: [0.5, 0.6]}}\n",
            "must sum to 1",
        ),
        ("method: grid\nparameters: {a: {values: [1, 2], extra: 3}}\n", "unexpected key(s) extra"),
        ("method: grid\nparameters: {a: 3}\n", "must be a mapping"),
        ("method: grid\nparameters: {1a: {value: 3}}\n", "parameter name '1a'"),
        ("method: grid\nrun_cap: 0\nparameters: {a: {value: 3}}\n", "run_cap: must be a positive"),
        (
            "method: grid\ncommand: python train.py\nparameters: {a: {value: 3}}\n",
            "command: must be a list",
        ),
        (
            "method: random\nparameters: {a: {value: 3}}\n",
            "needs at least one parameter that varies",
        ),
        ("- method: grid\n", "must be a mapping of keys"),
    ],
)
def test_bad_sweeps_are_refused_with_where_and_what(text: str, expected: str) -> None:
    assert expected in refused(text)


def test_the_default_command_needs_a_program() -> None:
    assert "program: missing" in refused("method: grid\nparameters: {a: {value: 1}}\n")
    spec = parse_sweep("method: grid\ncommand: [echo, '${args}']\nparameters: {a: {value: 1}}\n")
    assert spec.config["command"] == ["echo", "${args}"]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SweepError, match="no such file"):
        load_sweep(tmp_path / "nope.yml")


def test_early_terminate_is_noted_not_refused() -> None:
    spec = parse_sweep(
        "method: grid\nprogram: t.py\nearly_terminate: {type: hyperband, min_iter: 3}\n"
        "parameters: {a: {values: [1]}}\n"
    )
    assert any("early_terminate" in n for n in spec.notes)


# Every parameter form W&B's schema knows, as a distribution name of ours and of `sweeps`.
FORMS: list[tuple[dict[str, Any], str]] = [
    ({"value": 1}, "constant"),
    ({"values": [1, 2]}, "categorical"),
    ({"values": [1, 2], "distribution": "categorical"}, "categorical"),
    ({"values": [1, 2], "probabilities": [0.3, 0.7]}, "categorical_w_probabilities"),
    ({"min": 1, "max": 3}, "int_uniform"),
    ({"min": 1.0, "max": 3.0}, "uniform"),
    ({"min": 1, "max": 3.5}, "uniform"),
    ({"distribution": "q_uniform", "min": 0, "max": 3}, "q_uniform"),
    ({"distribution": "log_uniform", "min": -3, "max": 0}, "log_uniform"),
    ({"distribution": "log_uniform_values", "min": 0.001, "max": 0.1}, "log_uniform_values"),
    ({"distribution": "inv_log_uniform_values", "min": 1, "max": 10}, "inv_log_uniform_values"),
    (
        {"distribution": "q_log_uniform_values", "min": 1, "max": 100, "q": 2},
        "q_log_uniform_values",
    ),
    ({"distribution": "normal", "mu": 1, "sigma": 2}, "normal"),
    ({"distribution": "q_normal"}, "q_normal"),
    ({"distribution": "log_normal"}, "log_normal"),
    ({"distribution": "q_log_normal", "q": 3}, "q_log_normal"),
    ({"distribution": "beta", "a": 2, "b": 3}, "beta"),
    ({"distribution": "q_beta", "q": 0.1}, "q_beta"),
]


def test_every_distribution_is_covered() -> None:
    assert {kind for _, kind in FORMS} == set(DISTRIBUTIONS) - {"inv_log_uniform", "q_log_uniform"}


@pytest.mark.parametrize(("param", "kind"), FORMS)
def test_parameter_forms_are_classified_as_w_and_b_does(param: dict[str, Any], kind: str) -> None:
    import yaml

    sweep = {
        "method": "random",
        "program": "t.py",
        "parameters": {"x": param, "y": {"values": [1]}},
    }
    text = yaml.safe_dump(sweep)
    ours = {p.name: p for p in parse_sweep(text).params}["x"]
    assert ours.kind == kind
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sweeps.params import HyperParameter

    theirs = HyperParameter("x", dict(param))
    assert theirs.type == "param_" + {
        "constant": "single_value",
        "categorical_w_probabilities": "categorical_w_probabilities",
        "log_uniform": "loguniform",
        "log_uniform_values": "loguniform_v2",
        "inv_log_uniform_values": "inv_loguniform_v2",
        "q_log_uniform_values": "qloguniform_v2",
        "q_uniform": "quniform",
        "log_normal": "lognormal",
        "q_log_normal": "qlognormal",
        "q_normal": "qnormal",
        "q_beta": "qbeta",
    }.get(kind, kind)
    # The defaults W&B fills in are ours too.
    for key, value in theirs.config.items():
        assert ours.config[key] == value


def test_the_repository_example_is_a_valid_grid_of_six() -> None:
    from hpc_toolkit.sweep.grid import grid_size

    root = Path(__file__).resolve().parents[2]
    spec = load_sweep(root / "sweeper.yml")
    assert spec.method == "grid" and grid_size(spec) == 6
    assert (root / spec.config["program"]).is_file()
    assert spec.metric_name == "loss"


def _alias_bomb(levels: int) -> str:
    lines = ["program: t.py", "method: grid", "a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    lines += ["parameters:", "  p:", f"    values: *a{levels - 1}"]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_before_it_is_built() -> None:
    with pytest.raises(SweepError, match=r"aliases \(\*name\) expand to more than 100,000"):
        parse_sweep(_alias_bomb(7), "bomb.yml")


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    text = (
        "program: t.py\nmethod: grid\nparameters:\n  p:\n    values: " + "[" * 10000 + "]" * 10000
    )
    with pytest.raises(SweepError, match="nested more than 64 levels deep"):
        parse_sweep(text, "deep.yml")


def test_an_alias_inside_itself_is_refused() -> None:
    with pytest.raises(SweepError, match="refers to the value that contains it"):
        parse_sweep("program: t.py\nmethod: grid\nparameters: &p\n  x: *p\n", "rec.yml")


def test_a_few_aliases_are_fine() -> None:
    text = "program: t.py\nmethod: grid\nparameters:\n  a: {values: &v [1, 2]}\n  b: {values: *v}\n"
    assert [p.name for p in parse_sweep(text).params] == ["a", "b"]
