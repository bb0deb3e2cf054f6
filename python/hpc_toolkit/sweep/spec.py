"""Read and check a sweep file in W&B's format, with PyYAML only.

Submitting must stay quick, and the `sweeps` package imports numpy, scipy and
scikit-learn, so this module judges a sweep file on its own: the same parameter forms as
W&B's schema (`value`, `values`, `min`/`max`, every `distribution`, nested `parameters`),
tried in the same order, and the same refusals, each said with the line of the file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

METHODS = ("grid", "random", "bayes")
GOALS = ("minimize", "maximize")
IMPUTES = ("latest", "best", "worst")

# Every top-level key of W&B's sweep schema; a typo ("paramters") is refused by name.
TOP_KEYS = (
    "apiVersion",
    "kind",
    "controller",
    "description",
    "program",
    "job",
    "image_uri",
    "entity",
    "project",
    "method",
    "command",
    "name",
    "run_cap",
    "metric",
    "metrics",
    "scheduler",
    "early_terminate",
    "parameters",
)

# distribution -> (required keys, optional keys with W&B's defaults).
DISTRIBUTIONS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "constant": (("value",), {}),
    "categorical": (("values",), {}),
    "categorical_w_probabilities": (("values", "probabilities"), {}),
    "int_uniform": (("min", "max"), {}),
    "uniform": (("min", "max"), {}),
    "q_uniform": (("min", "max"), {"q": 1.0}),
    "log_uniform": (("min", "max"), {}),
    "log_uniform_values": (("min", "max"), {}),
    "inv_log_uniform": (("min", "max"), {}),
    "inv_log_uniform_values": (("min", "max"), {}),
    "q_log_uniform": (("min", "max"), {"q": 1.0}),
    "q_log_uniform_values": (("min", "max"), {"q": 1.0}),
    "normal": ((), {"mu": 0.0, "sigma": 1.0}),
    "q_normal": ((), {"mu": 0, "sigma": 1, "q": 1.0}),
    "log_normal": ((), {"mu": 0.0, "sigma": 1.0}),
    "q_log_normal": ((), {"mu": 0, "sigma": 1, "q": 1.0}),
    "beta": ((), {"a": 1, "b": 1}),
    "q_beta": ((), {"a": 1, "b": 1, "q": 1.0}),
}
# What a grid can enumerate (W&B's grid search turns int_uniform and q_uniform into lists).
GRID_KINDS = ("constant", "categorical", "int_uniform", "q_uniform")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
LOOKS_NUMERIC = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


class SweepError(ValueError):
    """A sweep file that W&B would refuse, or that cannot run offline; says where."""


@dataclass(frozen=True)
class Param:
    """One searchable or constant parameter; `path` is its place in nested `parameters`."""

    path: tuple[str, ...]
    kind: str  # a key of DISTRIBUTIONS
    config: Mapping[str, Any]  # with W&B's defaults filled in
    yaml_path: tuple[str, ...] = ()  # its keys in the file, "parameters" links included

    @property
    def name(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class SweepSpec:
    """A checked sweep file. `config` is the file as parsed (JSON-compatible)."""

    config: Mapping[str, Any]
    params: tuple[Param, ...]  # depth-first, keys sorted at each level, as W&B orders them
    source: str = "<sweep>"
    notes: tuple[str, ...] = field(default=())

    @property
    def method(self) -> str:
        return str(self.config["method"])

    @property
    def run_cap(self) -> int | None:
        cap = self.config.get("run_cap")
        return int(cap) if cap is not None else None

    @property
    def metric_name(self) -> str | None:
        metric = self.config.get("metric")
        return str(metric["name"]) if isinstance(metric, Mapping) else None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _where(path: Sequence[str]) -> str:
    return ".".join(path) if path else "the top level"


class _Checker:
    """Walks the parsed file; every refusal names the key path (the line is added later)."""

    def __init__(self) -> None:
        self.params: list[Param] = []

    def fail(self, path: Sequence[str], message: str) -> SweepError:
        err = SweepError(f"{_where(path)}: {message}")
        err.path = tuple(path)  # type: ignore[attr-defined]
        return err

    def number(self, path: Sequence[str], value: object) -> None:
        if _is_number(value):
            return
        if isinstance(value, str) and LOOKS_NUMERIC.fullmatch(value.strip()):
            raise self.fail(
                path,
                f"{value!r} is read as text by YAML (PyYAML needs a dot in floats such as "
                "1e-4): write it as 1.0e-4 or 0.0001",
            )
        raise self.fail(path, f"must be a number, not {value!r}")

    def parameters(self, path: tuple[str, ...], block: object, names: tuple[str, ...] = ()) -> None:
        if not isinstance(block, Mapping) or not block:
            raise self.fail(
                path,
                "the sweep is empty: list at least one parameter, e.g. "
                "'parameters: {lr: {values: [0.01, 0.1]}}'",
            )
        for key in sorted(block, key=str):
            if not isinstance(key, str) or not NAME.fullmatch(key):
                raise self.fail(
                    path,
                    f"parameter name {key!r} must start with a letter or _ and hold only "
                    "letters, digits, _ . -",
                )
            self.parameter((*path, key), block[key], (*names, key))

    def parameter(self, path: tuple[str, ...], spec: object, names: tuple[str, ...]) -> None:
        if not isinstance(spec, Mapping):
            raise self.fail(
                path,
                f"must be a mapping such as '{{values: [1, 2]}}' or '{{value: 3}}', not {spec!r}",
            )
        if "parameters" in spec:
            if set(spec) != {"parameters"}:
                raise self.fail(path, "a nested 'parameters:' block must be the only key")
            self.parameters((*path, "parameters"), spec["parameters"], names)
            return
        kind = self.kind(path, spec)
        required, optional = DISTRIBUTIONS[kind]
        allowed = {*required, *optional, "distribution"}
        extra = sorted(str(k) for k in spec if k not in allowed)
        if extra:
            raise self.fail(
                path,
                f"unexpected key(s) {', '.join(extra)} for distribution {kind} "
                f"(it takes {', '.join(sorted(allowed))})",
            )
        missing = [k for k in required if k not in spec]
        if missing:
            raise self.fail(path, f"distribution {kind} needs {', '.join(missing)}")
        config: dict[str, Any] = {**optional, **spec, "distribution": kind}
        self.values(path, kind, config)
        self.params.append(Param(names, kind, config, path))

    def kind(self, path: tuple[str, ...], spec: Mapping[str, Any]) -> str:
        """The distribution, named or implied, in the order W&B's schema tries them."""
        named = spec.get("distribution")
        if named is not None:
            if named not in DISTRIBUTIONS:
                raise self.fail(
                    path,
                    f"unknown distribution {named!r}: use one of {', '.join(DISTRIBUTIONS)}",
                )
            return str(named)
        if "values" in spec:
            return "categorical_w_probabilities" if "probabilities" in spec else "categorical"
        if "value" in spec:
            return "constant"
        if "min" in spec and "max" in spec:
            both_int = _is_int(spec["min"]) and _is_int(spec["max"])
            return "int_uniform" if both_int else "uniform"
        raise self.fail(
            path,
            "give 'value: X', 'values: [...]', 'min:' and 'max:', or a 'distribution:'",
        )

    def values(self, path: tuple[str, ...], kind: str, config: Mapping[str, Any]) -> None:
        if "values" in config:
            values = config["values"]
            if not isinstance(values, list) or not values:
                raise self.fail((*path, "values"), "must be a non-empty list such as [1, 2]")
        if kind == "categorical_w_probabilities":
            probs = config["probabilities"]
            if not isinstance(probs, list) or len(probs) != len(config["values"]):
                raise self.fail((*path, "probabilities"), "must be a list as long as 'values'")
            for i, p in enumerate(probs):
                self.number((*path, "probabilities", str(i)), p)
            if not math.isclose(sum(probs), 1.0, rel_tol=1e-6, abs_tol=1e-8):
                raise self.fail((*path, "probabilities"), f"must sum to 1, not {sum(probs)}")
        for key in ("min", "max", "q", "mu", "sigma", "a", "b"):
            if key in config:
                self.number((*path, key), config[key])
        if kind == "int_uniform" and not (_is_int(config["min"]) and _is_int(config["max"])):
            raise self.fail(path, "distribution int_uniform needs whole numbers for min and max")
        if "min" in config and "max" in config and not config["min"] < config["max"]:
            raise self.fail(path, f"min {config['min']} is not less than max {config['max']}")
        if "q" in config and not config["q"] > 0:
            raise self.fail((*path, "q"), "must be greater than 0")


def _check_top(checker: _Checker, config: Mapping[str, Any]) -> None:
    unknown = sorted(str(k) for k in config if k not in TOP_KEYS)
    if unknown:
        raise checker.fail((unknown[0],), f"unknown key (a sweep file takes {', '.join(TOP_KEYS)})")
    method = config.get("method")
    if method is None:
        raise checker.fail(("method",), f"missing: say 'method: grid' ({', '.join(METHODS)})")
    if method not in METHODS:
        extra = " ('custom' needs a W&B server)" if method == "custom" else ""
        raise checker.fail(
            ("method",), f"unknown method {method!r}: use one of {', '.join(METHODS)}{extra}"
        )
    metric = config.get("metric")
    if metric is not None:
        if not isinstance(metric, Mapping) or not isinstance(metric.get("name"), str):
            raise checker.fail(("metric",), "must be a mapping with a 'name:' (the logged key)")
        if metric.get("goal", "minimize") not in GOALS:
            raise checker.fail(("metric", "goal"), f"must be one of {', '.join(GOALS)}")
        if metric.get("impute", "worst") not in IMPUTES:
            raise checker.fail(("metric", "impute"), f"must be one of {', '.join(IMPUTES)}")
    elif method == "bayes":
        raise checker.fail(
            ("metric",), "a bayes sweep needs 'metric: {name: KEY, goal: minimize|maximize}'"
        )
    cap = config.get("run_cap")
    if cap is not None and not (_is_int(cap) and cap > 0):
        raise checker.fail(("run_cap",), f"must be a positive whole number, not {cap!r}")
    command = config.get("command")
    if command is not None and (
        not isinstance(command, list)
        or not command
        or not all(isinstance(c, (str, int, float)) for c in command)
    ):
        raise checker.fail(
            ("command",), "must be a list of words, e.g. [python, train.py, ${args}]"
        )
    for key in ("project", "entity", "name"):
        if key in config and not isinstance(config[key], str):
            raise checker.fail((key,), "must be text")


def _check_program(checker: _Checker, config: Mapping[str, Any]) -> None:
    command = config.get("command")
    words = [str(c) for c in command] if command else ["${program}"]
    if "${program}" in words and not isinstance(config.get("program"), str):
        raise checker.fail(
            ("program",),
            "missing: name the training script (program: train.py), or give a 'command:' "
            "block without ${program}",
        )


def _line_of(text: str, path: Sequence[str]) -> int | None:
    """1-based line of the key at `path` in the YAML text (best effort)."""
    import yaml

    try:
        node: Any = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    line: int | None = None
    for key in path:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if k.value == key:
                    line, node = k.start_mark.line + 1, v
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and key.isdigit() and int(key) < len(node.value):
            node = node.value[int(key)]
            line = node.start_mark.line + 1
        else:
            return line
    return line


# A sweep file is a few levels deep and a few hundred values long. Deeper nesting makes
# PyYAML recurse (RecursionError), and aliases of aliases (a "billion laughs" file) expand
# to more values than memory holds: both refused with a message, before they are built.
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 100_000


def _check_shape(text: str, source: str, yaml: Any) -> None:
    """Refuse YAML nested deeper than MAX_YAML_DEPTH, or larger than MAX_YAML_NODES values
    once its aliases are expanded, or an alias that contains itself."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise SweepError(
                    f"{source}: line {event.start_mark.line + 1}: nested more than "
                    f"{MAX_YAML_DEPTH} levels deep: a sweep file needs a few levels"
                )
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
    sizes: dict[int, int] = {}
    busy: set[int] = set()

    def size(node: Any) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in busy:
            raise SweepError(
                f"{source}: line {node.start_mark.line + 1}: an alias (*name) refers to the "
                "value that contains it: write the values out"
            )
        busy.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total += sum(size(v) for v in node.value)
        busy.discard(key)
        if total > MAX_YAML_NODES:
            raise SweepError(
                f"{source}: its aliases (*name) expand to more than {MAX_YAML_NODES:,} "
                "values: write the values out, or use fewer aliases of aliases"
            )
        sizes[key] = total
        return total

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is not None:
        size(root)


def parse_sweep(text: str, source: str = "<sweep>") -> SweepSpec:
    """Parse and check sweep YAML; SweepError with `source`, line and what to do."""
    try:
        import yaml
    except ImportError:  # pragma: no cover - depends on the interpreter
        raise SweepError(
            f"{source}: reading a sweep file needs PyYAML in this Python: pip install pyyaml"
        ) from None
    try:
        _check_shape(text, source, yaml)
        config = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        raise SweepError(
            f"{source}: {where}: not valid YAML ({exc.problem or exc.context})"
        ) from None
    except yaml.YAMLError as exc:
        raise SweepError(f"{source}: not valid YAML ({exc})") from None
    if config is None:
        raise SweepError(f"{source}: the file is empty: write a W&B sweep (see sweeper.yml)")
    if not isinstance(config, Mapping):
        raise SweepError(f"{source}: must be a mapping of keys (method:, parameters: ...)")
    return check_config(config, source, text)


def check_config(config: Mapping[str, Any], source: str, text: str = "") -> SweepSpec:
    """Check a parsed sweep (a file's, or the copy kept in a sweep's folder)."""
    checker = _Checker()
    try:
        _check_top(checker, config)
        checker.parameters(("parameters",), config.get("parameters"))
    except SweepError as exc:
        path: tuple[str, ...] = getattr(exc, "path", ())
        line = _line_of(text, path) if text else None
        where = f"line {line}: " if line else ""
        raise SweepError(f"{source}: {where}{exc}") from None
    params = tuple(checker.params)
    if config["method"] == "grid":
        for p in params:
            if p.kind not in GRID_KINDS:
                line = _line_of(text, p.yaml_path) if text else None
                where = f"line {line}: " if line else ""
                raise SweepError(
                    f"{source}: {where}parameters.{p.name}: a grid cannot enumerate "
                    f"distribution {p.kind}: give 'values: [...]' (or int_uniform, q_uniform), "
                    "or use method random or bayes"
                )
    elif not any(p.kind != "constant" for p in params):
        raise SweepError(
            f"{source}: a {config['method']} sweep needs at least one parameter that varies"
        )
    try:
        _check_program(checker, config)
    except SweepError as exc:
        line = _line_of(text, ("program",)) if text else None
        raise SweepError(f"{source}: {f'line {line}: ' if line else ''}{exc}") from None
    notes: list[str] = []
    if "early_terminate" in config:
        notes.append("early_terminate is ignored offline (it needs the W&B server)")
    return SweepSpec(config=config, params=params, source=source, notes=tuple(notes))


def load_sweep(path: Path) -> SweepSpec:
    """Read and check the sweep file at `path`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SweepError(
            f"{path}: no such file: write a W&B sweep file (see sweeper.yml)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SweepError(f"{path}: cannot be read ({exc})") from None
    return parse_sweep(text, str(path))
