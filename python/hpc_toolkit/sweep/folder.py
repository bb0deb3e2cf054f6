"""The folder of an offline sweep: $SCRATCH/<project>/sweeps/<sweep id>/.

    sweep.json      the checked sweep, its id, method, number of points, experiment name
    sweep.yaml      the sweep file as submitted (for people)
    ledger.jsonl    every run's start and end (ledger.py); ledger.lock guards it
    wandb/          WANDB_DIR of the runs: offline-run-*/ and sweep-<id>/config-<run>.yaml

It lives on the shared filesystem, so every task of every node sees the same ledger.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hpc_toolkit.sweep.ledger import Ledger
from hpc_toolkit.sweep.spec import SweepError, SweepSpec, check_config

SWEEP_ID = re.compile(r"[a-z0-9]{4,32}")
# The command line's --exp-name check (hpc_lib.sh is_exp_name): the name becomes a folder.
EXP_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}")
METHODS = ("grid", "random", "bayes")
MAX_POINTS = 1_000_000
INFO = "sweep.json"


@dataclass(frozen=True)
class SweepFolder:
    """A sweep folder and what its sweep.json says."""

    path: Path
    info: dict[str, Any]

    @classmethod
    def load(cls, path: Path) -> SweepFolder:
        try:
            info = json.loads((path / INFO).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise SweepError(
                f"{path} is not an offline sweep's folder (no {INFO}): give the sweep id that "
                "job_submitter.sh printed, or the folder's path"
            ) from None
        except (OSError, ValueError) as exc:
            raise SweepError(f"{path / INFO} cannot be read ({exc})") from None
        if not isinstance(info, dict) or "config" not in info or "sweep_id" not in info:
            raise SweepError(f"{path / INFO} is not a sweep description")
        _check_info(info, path / INFO)
        return cls(path, info)

    @property
    def sweep_id(self) -> str:
        return str(self.info["sweep_id"])

    @property
    def method(self) -> str:
        return str(self.info["config"]["method"])

    @property
    def num_points(self) -> int:
        return int(self.info["num_points"])

    @property
    def exp_name(self) -> str:
        return str(self.info.get("exp_name", ""))

    @property
    def wandb_dir(self) -> Path:
        return self.path

    @property
    def ledger(self) -> Ledger:
        return Ledger(self.path)

    def spec(self) -> SweepSpec:
        return check_config(self.info["config"], str(self.path / INFO))


def _check_info(info: dict[str, Any], where: Path) -> None:
    """sweep.json may have been edited: each field the toolkit uses gets the checks its
    command-line counterpart gets (ids, names that become folders, bounded counts)."""
    sweep_id = info.get("sweep_id")
    if not isinstance(sweep_id, str) or not SWEEP_ID.fullmatch(sweep_id):
        raise SweepError(
            f"{where}: sweep_id {str(sweep_id)[:100]!r} is not a sweep id: fix the file"
        )
    config = info.get("config")
    method = config.get("method") if isinstance(config, dict) else None
    if method not in METHODS:
        raise SweepError(f"{where}: method {str(method)[:100]!r} is not grid, random or bayes")
    points = info.get("num_points")
    if isinstance(points, bool) or not isinstance(points, int) or not 1 <= points <= MAX_POINTS:
        raise SweepError(
            f"{where}: num_points {str(points)[:100]!r} is not a number of points from 1 to "
            f"{MAX_POINTS}: fix the file"
        )
    exp_name = info.get("exp_name", "")
    if not isinstance(exp_name, str) or (exp_name and not EXP_NAME.fullmatch(exp_name)):
        raise SweepError(
            f"{where}: exp_name {str(exp_name)[:100]!r} must be 1-100 letters, digits, '.', "
            "'_', '+' or '-', not starting with '.', '+' or '-' (it names folders): fix the file"
        )


def locate(sweep: str, scratch_dir: Path | None) -> Path:
    """A sweep given by id (under scratch_dir/sweeps) or by its folder's path."""
    if SWEEP_ID.fullmatch(sweep) and scratch_dir is not None:
        return scratch_dir / "sweeps" / sweep
    return Path(sweep)


def info_text(spec: SweepSpec, sweep_id: str, exp_name: str, num_points: int) -> str:
    """The content of sweep.json, on one line (job_submitter.sh writes it as it is)."""
    info = {
        "sweep_id": sweep_id,
        "method": spec.method,
        "num_points": num_points,
        "exp_name": exp_name,
        "source": spec.source,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config": spec.config,
    }
    # default=str: YAML dates and the like, which JSON lacks, are kept as their text.
    return json.dumps(info, default=str)
