"""Point parameters: random draws repeat for the same sweep and point; bayes learns."""

from __future__ import annotations

import random
from typing import Any

from hpc_toolkit.sweep.ledger import FINISHED, RUNNING, Attempt
from hpc_toolkit.sweep.search import load_sweeps, point_params
from hpc_toolkit.sweep.spec import check_config

RANDOM = {
    "method": "random",
    "program": "t.py",
    "parameters": {
        "lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-1},
        "bs": {"values": [16, 32, 64]},
        "drop": {"min": 0.0, "max": 0.5},
        "layers": {"min": 1, "max": 8},
        "opt": {"parameters": {"mom": {"distribution": "normal", "mu": 0.9, "sigma": 0.01}}},
    },
}
BAYES: dict[str, Any] = {
    "method": "bayes",
    "program": "t.py",
    "metric": {"name": "loss", "goal": "minimize"},
    "parameters": {"x": {"min": 0.0, "max": 1.0}},
}


def test_random_points_repeat_per_sweep_and_point_and_differ_otherwise() -> None:
    spec = check_config(RANDOM, "t")
    sweeps = load_sweeps()
    first = [point_params(spec, "abc12345", i, {}, sweeps) for i in range(5)]
    random.seed(99)  # the process's own random state does not matter
    again = [point_params(spec, "abc12345", i, {}, sweeps) for i in reversed(range(5))][::-1]
    assert first == again
    other = [point_params(spec, "zzz99999", i, {}, sweeps) for i in range(5)]
    assert first != other
    assert len({repr(p) for p in first}) == 5
    for p in first:
        assert 1e-4 <= p["lr"]["value"] <= 1e-1 and type(p["lr"]["value"]) is float
        assert p["bs"]["value"] in (16, 32, 64) and isinstance(p["layers"]["value"], int)
        assert set(p["opt"]["value"]) == {"mom"}


def test_bayes_uses_the_finished_runs_metric() -> None:
    spec = check_config(BAYES, "t")
    sweeps = load_sweeps()
    # The metric is best near x = 0.9: after a few runs, bayes proposes near there.
    runs: dict[int, Attempt] = {}
    for i, x in enumerate([0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95]):
        runs[i] = Attempt(i, f"r{i}", {"x": {"value": x}}, state=FINISHED, metric=(x - 0.9) ** 2)
    proposals = [point_params(spec, "s", 7, runs, sweeps)["x"]["value"] for _ in range(3)]
    assert all(0.6 < x <= 1.0 for x in proposals), proposals


def test_bayes_with_no_runs_and_with_running_ones() -> None:
    spec = check_config(BAYES, "t")
    sweeps = load_sweeps()
    first = point_params(spec, "s", 0, {}, sweeps)
    assert 0.0 <= first["x"]["value"] <= 1.0
    running = {0: Attempt(0, "r0", first, state=RUNNING)}
    second = point_params(spec, "s", 1, running, sweeps)
    assert 0.0 <= second["x"]["value"] <= 1.0


def test_random_points_repeat_in_a_fresh_process() -> None:
    """A resubmitted task is a new process: the same point must come out."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys; from hpc_toolkit.sweep.search import point_params; "
        "from hpc_toolkit.sweep.spec import check_config; "
        "spec = check_config(json.loads(sys.argv[1]), 't'); "
        "print(json.dumps([point_params(spec, 'abc12345', i, {}) for i in (3, 0)]))"
    )
    outs = [
        subprocess.run(
            [sys.executable, "-c", code, json.dumps(RANDOM)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout  # fmt: skip
        for _ in range(2)
    ]
    spec = check_config(RANDOM, "t")
    here = [point_params(spec, "abc12345", i, {}, load_sweeps()) for i in (3, 0)]
    assert json.loads(outs[0]) == json.loads(outs[1]) == here
