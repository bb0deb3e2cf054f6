"""The points of a grid sweep, in the order W&B's `sweeps` package gives them.

Point i is found by counting in mixed radix over the parameters (the last one turning
fastest), so a job computes its own point without the `sweeps` package and its numpy,
scipy and scikit-learn imports (about 0.6 s per task; 25 minutes of CPU for a 2,500-point
grid). tests/python/test_sweep_grid.py checks this module against `sweeps` itself: the
same points, in the same order, with the same values (duplicates dropped, int_uniform and
q_uniform expanded like numpy.arange, nested parameters re-nested).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hpc_toolkit.sweep.spec import Param, SweepError, SweepSpec

# Values one grid axis may have: an int_uniform of 0..1e14 would otherwise be built as a
# list and exhaust memory before its size could be judged.
MAX_AXIS_VALUES = 1_000_000

# How `sweeps` joins the names of nested parameters (HyperParameterSet.NESTING_DELIMITER);
# it decides the order of nested keys in a run's config, so it is copied exactly.
NESTING_DELIMITER = ".wbnest[599c28ca25da]."


@dataclass(frozen=True)
class Axis:
    """One parameter of the grid and its distinct values, in W&B's order."""

    flat_name: str
    values: tuple[Any, ...]


def _value_key(value: Any) -> object:
    """Equality as `sweeps` sees it (grid_search.yaml_hash: the YAML text of the value, with
    3.0 read as 3). Plain scalars get an equivalent key without importing PyYAML."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value is None or isinstance(value, (bool, int, str)):
        return (type(value).__name__, value)
    if isinstance(value, float):
        return ("float", repr(value))  # every NaN is one value, as in YAML
    import yaml

    return ("yaml", yaml.dump(value, default_flow_style=True, sort_keys=True))


def _arange(start: Any, stop: Any, step: Any) -> list[Any]:
    """numpy.arange(start, stop, step).tolist() without numpy (its length and its fill)."""
    count = math.ceil((stop - start) / step)
    if count <= 0:
        return []
    if all(isinstance(x, int) for x in (start, stop, step)):
        return [start + i * step for i in range(count)]
    # numpy fills floats as start + i * delta, with delta = (start + step) - start.
    begin = float(start)
    delta = (begin + step) - begin
    return [begin + i * delta for i in range(count)]


def _distinct(values: Sequence[Any]) -> tuple[Any, ...]:
    """First-seen order; for equal values the last one is kept, as `sweeps` does."""
    order: list[object] = []
    chosen: dict[object, Any] = {}
    for value in values:
        key = _value_key(value)
        if key not in chosen:
            order.append(key)
        chosen[key] = value
    return tuple(chosen[k] for k in order)


def _axis_length(param: Param) -> int:
    """How many values the axis would have, without making them."""
    cfg = param.config
    if param.kind == "int_uniform":
        return max(0, int(cfg["max"]) - int(cfg["min"]) + 1)
    if param.kind == "q_uniform":
        step = cfg["q"]
        return max(0, math.ceil((cfg["max"] - cfg["min"]) / step)) if step else 0
    if param.kind == "categorical":
        return len(cfg["values"])
    return 1


def _values(param: Param) -> list[Any]:
    cfg = param.config
    length = _axis_length(param)
    if length > MAX_AXIS_VALUES:
        raise SweepError(
            f"parameters.{'.'.join(param.path)}: {length:,} values on one grid axis, more "
            f"than {MAX_AXIS_VALUES:,}: narrow min/max, raise q, or use method random"
        )
    if param.kind == "int_uniform":
        return list(range(cfg["min"], cfg["max"] + 1))
    if param.kind == "q_uniform":
        return _arange(cfg["min"], cfg["max"], cfg["q"])
    if param.kind == "categorical":
        return list(cfg["values"])
    raise ValueError(f"parameter {param.name}: distribution {param.kind} is not a grid axis")


def _flat(param: Param) -> str:
    return NESTING_DELIMITER.join(param.path)


def axes(spec: SweepSpec) -> list[Axis]:
    """The grid's axes (constants excluded), first one turning slowest."""
    return [Axis(_flat(p), _distinct(_values(p))) for p in spec.params if p.kind != "constant"]


def grid_size(spec: SweepSpec) -> int:
    """How many distinct points the grid has (before any run_cap)."""
    return math.prod(len(a.values) for a in axes(spec))


def _renest(flat: dict[str, Any]) -> dict[str, Any]:
    """sweeps' HyperParameterSet.to_config: nested names become dicts, appended in order."""
    config = dict(flat)
    for key in sorted(flat):
        if NESTING_DELIMITER not in key:
            continue
        parts = key.split(NESTING_DELIMITER)
        node = config
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"nested parameter {key!r} clashes with a parameter")
        node[parts[-1]] = config.pop(key)
    return {k: {"value": v} for k, v in config.items()}


def grid_point(spec: SweepSpec, index: int) -> dict[str, Any]:
    """The run config of point `index` ({name: {"value": v}}), as `sweeps` would give it."""
    grid = axes(spec)
    size = math.prod(len(a.values) for a in grid)
    if not 0 <= index < size:
        raise IndexError(f"point {index} is outside the grid of {size} points")
    chosen: dict[str, Any] = {}
    rest = index
    for axis in reversed(grid):
        rest, digit = divmod(rest, len(axis.values))
        chosen[axis.flat_name] = axis.values[digit]
    flat: dict[str, Any] = {}
    for p in spec.params:
        flat[_flat(p)] = p.config["value"] if p.kind == "constant" else chosen[_flat(p)]
    return _renest(flat)


def plain(value: Any) -> Any:
    """numpy scalars and arrays (from `sweeps`) as plain Python values, recursively."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and type(value).__module__ == "numpy":
        return plain(tolist())
    return value
