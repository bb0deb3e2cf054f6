"""The light grid (no numpy, no `sweeps`) gives exactly what W&B's grid search gives."""

from __future__ import annotations

import json
import random
import warnings
from typing import Any

import pytest

from hpc_toolkit.sweep.grid import _arange, grid_point, grid_size, plain
from hpc_toolkit.sweep.spec import check_config

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import numpy as np
    import sweeps


def theirs(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every point of W&B's grid search, in its order (it ends its list with None)."""
    runs = sweeps.next_runs(config, [], n=5000)
    assert runs[-1] is None, "grid larger than the test expects"
    return [plain(r.config) for r in runs[:-1]]


def ours(config: dict[str, Any]) -> list[dict[str, Any]]:
    spec = check_config({"program": "t.py", **config}, "test")
    return [grid_point(spec, i) for i in range(grid_size(spec))]


CASES: list[dict[str, Any]] = [
    {"a": {"values": [1, 2, 3]}},
    {"b": {"values": ["x", "y"]}, "a": {"values": [1, 2]}, "c": {"value": 7}},
    {"a": {"min": 1, "max": 4}, "b": {"values": [True, False]}},
    {"q": {"distribution": "q_uniform", "min": 0, "max": 1, "q": 0.3}},
    {"q": {"distribution": "q_uniform", "min": 0.1, "max": 1.0, "q": 0.2}},
    {"q": {"distribution": "q_uniform", "min": 0, "max": 10, "q": 3}},
    {"q": {"distribution": "q_uniform", "min": 0, "max": 3}},
    {"q": {"distribution": "q_uniform", "min": 0, "max": 2.5, "q": 1}},
    {"dup": {"values": [1, 1.0, 2, "2", True, None, 1]}},
    {"d": {"values": [{"x": 1}, {"x": 1}, [1, 2], [1, 2.0]]}},
    {"nan": {"values": [float("nan"), 0.5, float("nan")]}},
    {
        "opt": {"parameters": {"lr": {"values": [0.1, 0.2]}, "mom": {"value": 0.9}}},
        "b": {"values": ["x", "y"]},
        "a": {"min": 1, "max": 2},
        "opt2": {"values": [3]},
        "a-b": {"values": [5, 6]},
    },
    {
        "outer": {
            "parameters": {"inner": {"parameters": {"z": {"values": [1, 2]}}}, "y": {"value": 0}}
        }
    },
]


@pytest.mark.parametrize("params", CASES)
def test_same_points_in_the_same_order(params: dict[str, Any]) -> None:
    config = {"method": "grid", "parameters": params}
    expected = theirs(json.loads(json.dumps(config)) if "nan" not in params else config)
    got = ours(config)
    assert json.dumps(got) == json.dumps(expected)  # order of keys too (it orders ${args})


def random_param(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(["values", "int", "q", "const"])
    if kind == "values":
        pool = [0, 1, 2, 0.5, 1.0, "a", "b", True, None, 3e-5]
        return {"values": [rng.choice(pool) for _ in range(rng.randint(1, 4))]}
    if kind == "int":
        lo = rng.randint(-3, 3)
        return {"min": lo, "max": lo + rng.randint(1, 3)}
    if kind == "q":
        lo = rng.choice([0, 0.1, -1, 2])
        return {
            "distribution": "q_uniform",
            "min": lo,
            "max": lo + rng.choice([1, 2.5, 0.7]),
            "q": rng.choice([0.1, 0.3, 1, 0.25]),
        }
    return {"value": rng.choice([1, "k", 2.5])}


@pytest.mark.parametrize("seed", range(40))
def test_random_grids_agree_with_sweeps(seed: int) -> None:
    rng = random.Random(seed)
    names = rng.sample(["a", "b", "c", "lr", "x_1", "z.y"], rng.randint(1, 4))
    params = {n: random_param(rng) for n in names}
    if rng.random() < 0.3:
        params["nest"] = {"parameters": {"k": random_param(rng), "j": random_param(rng)}}
    test_same_points_in_the_same_order(params)


@pytest.mark.parametrize("seed", range(200))
def test_arange_is_numpys(seed: int) -> None:
    rng = random.Random(seed)
    start = rng.choice([0, 1, -2, 0.1, 0.3, -0.7, 1e-3])
    step = rng.choice([1, 2, 0.1, 0.2, 0.3, 0.25, 1e-4, 0.7])
    stop = start + rng.choice([1, 2, 0.5, 3.3, 10]) * rng.choice([1, 1.0])
    assert _arange(start, stop, step) == np.arange(start, stop, step).tolist()


def test_point_out_of_range() -> None:
    spec = check_config(
        {"method": "grid", "program": "t", "parameters": {"a": {"values": [1]}}}, "t"
    )
    with pytest.raises(IndexError):
        grid_point(spec, 1)


def test_plain_turns_numpy_into_python() -> None:
    value = plain({"a": np.float64(0.5), "b": [np.int64(3)], "c": np.array([1, 2])})
    assert value == {"a": 0.5, "b": [3], "c": [1, 2]}
    assert type(value["a"]) is float and type(value["b"][0]) is int
