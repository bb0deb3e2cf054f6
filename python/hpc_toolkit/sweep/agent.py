"""Job side of an offline sweep: array task i runs point i, as a W&B agent would.

    python -m hpc_toolkit.sweep.agent SWEEP_FOLDER [--point I]   (default: $HPC_TASK_INDEX)

Under the ledger's lock it takes the point's parameters (those of an earlier attempt of
the same point when there is one, so a resubmitted or requeued point reruns the same
values), picks a run id no run of the sweep has, and records the start. Then it writes the
parameter file, runs the command of the sweep's `command:` block with WANDB_MODE=offline,
WANDB_SWEEP_ID, WANDB_RUN_ID and WANDB_SWEEP_PARAM_PATH (so `wandb.init()` sees the sweep
config), passes on TERM, INT and USR1, reads the metric from the offline run, records the
end, and exits with the command's exit code. Started by virtual_env_hpc_files/sweep_agent.sh.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import string
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from hpc_toolkit.sweep.command import RunLaunch, prepare_run, shell_line
from hpc_toolkit.sweep.folder import SweepFolder
from hpc_toolkit.sweep.ledger import FAILED, FINISHED, KILLED, Attempt, attempts, run_ids
from hpc_toolkit.sweep.records import find_run_dir, read_run, run_file, summary_metric
from hpc_toolkit.sweep.search import load_sweeps, point_params
from hpc_toolkit.sweep.spec import SweepError, SweepSpec

RUN_ID_CHARS = string.ascii_lowercase + string.digits
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)
_SYSTEM_RANDOM = random.SystemRandom()  # os.urandom: tasks started together differ


def log(message: str) -> None:
    """One line in the job's log, as job_lib.sh's hpc_log writes it (tests/unit/job_lib.bats)."""
    node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename
    print(f"[hpc {time.strftime('%Y-%m-%d %H:%M:%S')} {node}] {message}", flush=True)


def new_run_id(taken: set[str]) -> str:
    """8 characters like W&B's run ids, unlike any run of this sweep."""
    while True:
        run_id = "".join(_SYSTEM_RANDOM.choice(RUN_ID_CHARS) for _ in range(8))
        if run_id not in taken:
            return run_id


def job_label() -> str:
    env = os.environ
    if env.get("SLURM_ARRAY_JOB_ID"):
        return f"{env['SLURM_ARRAY_JOB_ID']}_{env.get('SLURM_ARRAY_TASK_ID', '')}"
    return env.get("SLURM_JOB_ID", "")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def claim(folder: SweepFolder, spec: SweepSpec, point: int, sweeps: Any) -> Attempt:
    """Choose the point's parameters and a new run id, and record the start, atomically.

    A bayes point depends on every run so far and is kept once chosen, so the whole
    ledger is read under the lock. Grid and random points follow from the sweep id and
    the point alone: they are computed outside the lock and nothing is read (a 2,500-point
    grid would otherwise read the growing ledger 2,500 times).
    """
    ledger = folder.ledger
    params: dict[str, Any] | None = None
    if spec.method != "bayes":
        params = point_params(spec, folder.sweep_id, point, {}, sweeps)
    with ledger.locked():
        taken: set[str] = set()
        if params is None:
            events = ledger.events()
            tries = attempts(events)
            taken = run_ids(events)
            if point in tries:
                params = tries[point][-1].params
            else:
                runs = {p: t[-1] for p, t in tries.items()}
                params = point_params(spec, folder.sweep_id, point, runs, sweeps)
        attempt = Attempt(
            point=point,
            run_id=new_run_id(taken),
            params=params,
            started=now(),
            job=job_label(),
            node=os.environ.get("SLURMD_NODENAME", ""),
        )
        ledger.append(
            {
                "event": "start",
                "point": point,
                "run_id": attempt.run_id,
                "params": params,
                "time": attempt.started,
                "job": attempt.job,
                "node": attempt.node,
            }
        )
    return attempt


def write_files(launch: RunLaunch) -> None:
    launch.param_file.parent.mkdir(parents=True, exist_ok=True)
    launch.param_file.write_text(launch.param_text, encoding="utf-8")
    if launch.json_text is not None:
        launch.json_file.write_text(launch.json_text, encoding="utf-8")


def run_child(launch: RunLaunch, cwd: Path) -> tuple[int, int | None]:
    """Run the command; returns (exit code, signal that stopped the task or None)."""
    received: list[int] = []
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: FrameType | None) -> None:
        if signum != signal.SIGUSR1:
            received.append(signum)
        log(f"received {signal.Signals(signum).name}: passing it to the run")
        if child is not None:
            child.send_signal(signum)

    # Handlers first: a signal that lands while the command starts is not lost.
    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        child = subprocess.Popen(launch.argv, env=launch.env, cwd=cwd, stdin=subprocess.DEVNULL)
        if received:
            child.send_signal(received[0])
        code = child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    # A command killed by a signal reports -N; the shell convention is 128 + N.
    code = 128 - code if code < 0 else code
    return code, (received[0] if received else None)


def read_metric(
    folder: SweepFolder, run_id: str, metric: str | None
) -> tuple[float | None, str | None]:
    run_dir = find_run_dir(folder.wandb_dir, run_id)
    if run_dir is None:
        return None, None
    if metric is None:
        return None, str(run_dir)
    path = run_file(run_dir)
    if path is None:
        return None, str(run_dir)
    try:
        summary = read_run(path).summary
    except (OSError, ValueError, ImportError) as exc:
        log(f"could not read the metric from {path}: {exc}")
        return None, str(run_dir)
    return summary_metric(summary, metric), str(run_dir)


def run_point(folder: SweepFolder, point: int, cwd: Path) -> int:
    spec = folder.spec()
    if not 0 <= point < folder.num_points:
        log(f"ERROR: task {point} has no point: sweep {folder.sweep_id} has {folder.num_points}")
        return 2
    sweeps = load_sweeps() if spec.method != "grid" else None  # before the lock: slow
    attempt = claim(folder, spec, point, sweeps)
    launch = prepare_run(
        spec.config,
        attempt.params,
        folder.sweep_id,
        attempt.run_id,
        folder.wandb_dir,
        os.environ,
    )
    write_files(launch)
    values = " ".join(f"{k}={v['value']}" for k, v in attempt.params.items())
    where = f"point {point} of {folder.num_points}"
    log(f"sweep {folder.sweep_id} ({spec.method}) {where}, run {attempt.run_id}: {values}")
    log(f"run command: {shell_line(launch.argv)}")
    try:
        code, stopped_by = run_child(launch, cwd)
    except OSError as exc:
        log(f"ERROR: cannot start {launch.argv[0]}: {exc}")
        code, stopped_by = 127, None
    state = KILLED if stopped_by is not None else (FINISHED if code == 0 else FAILED)
    metric, run_dir = read_metric(folder, attempt.run_id, spec.metric_name)
    with folder.ledger.locked():
        folder.ledger.append(
            {
                "event": "end",
                "point": point,
                "run_id": attempt.run_id,
                "state": state,
                "exit_code": code,
                "metric": metric,
                "run_dir": run_dir,
                "time": now(),
            }
        )
    shown = f", {spec.metric_name}={metric}" if spec.metric_name else ""
    log(f"run {attempt.run_id} {state} (exit code {code}{shown})")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hpc_toolkit.sweep.agent", description=__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--point", type=int, default=None)
    args = parser.parse_args(argv)
    point = args.point
    if point is None:
        point = int(os.environ.get("HPC_TASK_INDEX", "0"))
    try:
        folder = SweepFolder.load(args.folder)
        return run_point(folder, point, Path.cwd())
    except (SweepError, RuntimeError) as exc:
        log(f"ERROR: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
