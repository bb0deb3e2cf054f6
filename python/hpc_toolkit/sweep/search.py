"""The parameters of one point of an offline sweep.

grid: point i of the grid (grid.py, the order of W&B's grid search). random: a draw of
W&B's random search (the `sweeps` package) seeded with the sweep id and the point, so a
point drawn again (a resubmission, a requeue) has the same values. bayes: W&B's bayes
search given every run of the ledger so far (finished ones with their metric, running
ones as pending), chosen while the ledger's lock is held.
"""

from __future__ import annotations

import importlib
import random
import warnings
from collections.abc import Mapping
from typing import Any

from hpc_toolkit.sweep.grid import grid_point, plain
from hpc_toolkit.sweep.ledger import FAILED, FINISHED, KILLED, RUNNING, Attempt
from hpc_toolkit.sweep.spec import SweepSpec


def load_sweeps() -> Any:
    """The `sweeps` package (slow: numpy, scipy, scikit-learn), without its pydantic noise."""

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            sweeps = importlib.import_module("sweeps")
            # next_runs imports these on its first call, and importing them draws from
            # Python's random generator: done here, before any seeding, so that a seeded
            # draw is the same in every process.
            for name in ("grid_search", "random_search", "bayes_search"):
                importlib.import_module(f"sweeps.{name}")
        except ImportError:
            raise RuntimeError(
                "random and bayes sweeps need W&B's search code in the job's venv: "
                "pip install 'wandb[sweeps]'"
            ) from None
    return sweeps


def random_seed(sweep_id: str, point: int) -> str:
    return f"{sweep_id}:{point}"


def search_config(spec: SweepSpec) -> dict[str, Any]:
    """The sweep as `sweeps` takes it, with W&B's metric defaults filled in.

    Not `validate=True`: sweeps' schema filler drops nested `parameters:` blocks (0.3.0),
    and spec.py has already checked the file.
    """
    config = dict(spec.config)
    metric = config.get("metric")
    if isinstance(metric, dict):
        config["metric"] = {
            "goal": "minimize", "impute": "worst", "impute_while_running": "false", **metric
        }  # fmt: skip
    return config


def random_point(spec: SweepSpec, sweep_id: str, point: int, sweeps: Any) -> dict[str, Any]:
    state = random.getstate()
    try:
        random.seed(random_seed(sweep_id, point))
        run = sweeps.next_run(search_config(spec), [])
    finally:
        random.setstate(state)
    return dict(plain(run.config))


_STATES = {FINISHED: "finished", FAILED: "failed", KILLED: "killed", RUNNING: "running"}


def bayes_point(spec: SweepSpec, runs: Mapping[int, Attempt], sweeps: Any) -> dict[str, Any]:
    """W&B's bayes suggestion given the runs so far (their last attempts)."""
    metric = spec.metric_name or ""
    history = []
    for a in runs.values():
        summary = {metric: a.metric} if a.metric is not None else {}
        history.append(
            sweeps.SweepRun(
                name=a.run_id,
                config=a.params,
                state=_STATES.get(a.state, "failed"),
                summary_metrics=summary,
            )
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = sweeps.next_run(search_config(spec), history)
    return dict(plain(run.config))


def point_params(
    spec: SweepSpec,
    sweep_id: str,
    point: int,
    runs: Mapping[int, Attempt],
    sweeps: Any = None,
) -> dict[str, Any]:
    """The run config ({name: {"value": v}}) of `point`; `sweeps` for random and bayes."""
    if spec.method == "grid":
        return grid_point(spec, point)
    if sweeps is None:
        sweeps = load_sweeps()
    if spec.method == "random":
        return random_point(spec, sweep_id, point, sweeps)
    return bayes_point(spec, runs, sweeps)
