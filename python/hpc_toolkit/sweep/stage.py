"""Submission side of offline sweeps, called by hpc_files/lib/sweep.sh.

    python -m hpc_toolkit.sweep.stage check FILE [--num-agents N] [--max-points N]
        [--sweep-id ID --exp-name E]
    python -m hpc_toolkit.sweep.stage resume FOLDER
    python -m hpc_toolkit.sweep.stage preview FILE --sweep-id ID --count N [--first K]

check prints "METHOD<TAB>POINTS", and with --sweep-id a second line: the sweep.json of the
new sweep (job_submitter.sh writes the folder just before sbatch, so that a submission
that stops early leaves nothing). resume prints
"METHOD<TAB>POINTS<TAB>EXP_NAME<TAB>SWEEP_ID<TAB>RANGES" (RANGES: the points to run again,
e.g. "1 3-5", empty when none). preview prints "point I: COMMAND" for the first K points
(default 3) as the job will run them, for --dry-run (random and bayes points need W&B's
search code, `sweeps`, imported only then). Errors go to stderr as "PROG: message" with
exit 1. Only PyYAML is imported (no `sweeps`, no typer): about 50 ms.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from hpc_toolkit.sweep.command import DEFAULT_COMMAND, build_argv, expand_envvars, shell_line
from hpc_toolkit.sweep.folder import SweepFolder, info_text
from hpc_toolkit.sweep.grid import grid_size
from hpc_toolkit.sweep.ledger import ENDED, FINISHED, RUNNING, Attempt, latest
from hpc_toolkit.sweep.search import load_sweeps, point_params
from hpc_toolkit.sweep.spec import SweepError, SweepSpec, load_sweep


def bounded_points(spec: SweepSpec, num_agents: int | None, max_points: int | None) -> int:
    """num_points, refused above max_points (the cluster's MaxJobCount)."""
    count = num_points(spec, num_agents)
    if max_points is not None and count > max_points:
        raise SweepError(
            f"{spec.source}: {count:,} runs are more than the {max_points:,} jobs this cluster "
            "holds at once (MaxJobCount): lower run_cap or --num-agents, or give the grid "
            "fewer values"
        )
    return count


def num_points(spec: SweepSpec, num_agents: int | None) -> int:
    """How many points (array tasks) the sweep has."""
    cap = spec.run_cap
    if spec.method == "grid":
        try:
            size = grid_size(spec)
        except SweepError as exc:
            raise SweepError(f"{spec.source}: {exc}") from None
        if num_agents is not None:
            raise SweepError(
                f"{spec.source}: --num-agents is for random and bayes sweeps; a grid sweep "
                f"runs each of its {size} points once (run_cap: N runs fewer)"
            )
        return min(size, cap) if cap is not None else size
    if num_agents is None:
        if cap is None:
            raise SweepError(
                f"{spec.source}: a {spec.method} sweep has no fixed number of runs: pass "
                "--num-agents N (one run per array task) or set 'run_cap: N' in the file"
            )
        return cap
    if cap is not None and num_agents > cap:
        raise SweepError(
            f"{spec.source}: --num-agents {num_agents} is more than the file's run_cap {cap}"
        )
    return num_agents


def ranges(indices: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2 5 7-8"."""
    out: list[str] = []
    items = sorted(set(indices))
    start = prev = None
    for i in [*items, None]:
        if start is not None and (i is None or i != prev + 1):  # type: ignore[operator]
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if i is not None and start is None:
            start = i
        prev = i
    return " ".join(out)


def live_tasks(jobs: Iterable[str], name: str = "") -> set[str] | None:
    """Array tasks ("123_4") and jobs Slurm still has queued or running, of the job name
    `name` when given (a number Slurm handed out again is another job's: never this sweep's
    point); None if unknown."""
    import subprocess  # here: submitting a new sweep does not need it (8 ms)

    ids = sorted({j.split("_")[0] for j in jobs if j})
    if not ids:
        return set()
    try:
        done = subprocess.run(
            ["squeue", "-h", "-r", "-o", "%i|%j", "-j", ",".join(ids)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0 and "Invalid job id" not in done.stderr:
        return None
    out: set[str] = set()
    for line in done.stdout.splitlines():
        task, sep, job_name = line.strip().partition("|")
        if task and (not name or not sep or job_name == name):
            out.add(task)
    return out


def lost(attempt: Attempt, live: set[str] | None) -> bool:
    """A run recorded as running whose Slurm task has ended (killed hard, node lost)."""
    if attempt.state != RUNNING or live is None or not attempt.job:
        return False
    return attempt.job not in live and attempt.job.split("_")[0] not in live


def rerun_points(num_points: int, last: Mapping[int, Attempt], live: set[str] | None) -> list[int]:
    """Points to run again: never started, failed, killed, or lost (see `lost`)."""
    out = []
    for point in range(num_points):
        a = last.get(point)
        if a is None or (a.state in ENDED and a.state != FINISHED) or lost(a, live):
            out.append(point)
    return out


def live_of(last: Mapping[int, Attempt], name: str = "") -> set[str] | None:
    """Slurm's live tasks among the running points' jobs (set() when none is running)."""
    running = [a.job for a in last.values() if a.state == RUNNING]
    return live_tasks(running, name) if running else set()


JOBS = "jobs.tsv"  # one line per sbatch job of the sweep: JOB_ID<TAB>TASK_OFFSET


def submitted_jobs(folder: Path) -> dict[str, int]:
    """The sweep's Slurm jobs (job_submitter.sh writes jobs.tsv), each with the point its
    array index 0 runs; lines that are not two numbers are skipped."""
    jobs: dict[str, int] = {}
    try:
        text = (folder / JOBS).read_text(encoding="utf-8")
    except FileNotFoundError:
        return jobs
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) == 2 and all(f.isdigit() and len(f) <= 18 for f in fields):
            jobs[fields[0]] = int(fields[1])
    return jobs


def queued_points(jobs: Mapping[str, int], live: set[str] | None) -> set[int] | None:
    """Points whose array task Slurm still has queued or running ("123_4" is point
    offset+4; a whole job "123" is its offset); None when squeue could not be asked."""
    if live is None:
        return None
    out: set[int] = set()
    for task in live:
        job, _, index = task.partition("_")
        if job not in jobs:
            continue
        if not index:
            out.add(jobs[job])
        elif index.isdigit():
            out.add(jobs[job] + int(index))
    return out


def to_rerun(folder: SweepFolder) -> list[int]:
    """Points of the sweep that have not finished and are not running now, nor queued
    (a point whose array task still waits in Slurm's queue is taken: 7 starts for 4 points
    were seen when it was not)."""
    last = latest(folder.ledger.events())
    name = folder.exp_name  # the sweep's jobs' Slurm name
    live = live_of(last, name)
    if live is None:
        print("note: squeue could not be asked; running points are left alone", file=sys.stderr)
    jobs = submitted_jobs(folder.path)
    queued = queued_points(jobs, live_tasks(jobs, name)) if jobs else set()
    if queued is None:
        raise SweepError(
            "squeue could not be asked which points of the sweep are still queued: "
            "nothing was submitted; try again when Slurm answers"
        )
    return [p for p in rerun_points(folder.num_points, last, live) if p not in queued]


def preview(
    spec: SweepSpec, sweep_id: str, count: int, first: int, environ: Mapping[str, str]
) -> list[str]:
    """The first points' commands as the agent builds them (sweep_agent.sh, agent.py)."""
    config = spec.config
    sweeps = None
    if spec.method != "grid":
        try:
            sweeps = load_sweeps()
        except RuntimeError:
            return [
                f"({spec.method} points are drawn in the job; W&B's search code, wandb[sweeps], "
                f"is not in this Python to show them) each runs: {template_line(spec, environ)}"
            ]
    lines: list[str] = []
    for point in range(min(first, count)):
        if spec.method == "bayes" and point > 0:
            lines.append("(bayes: the next points follow from the finished runs' metric)")
            break
        try:
            params = point_params(spec, sweep_id, point, {}, sweeps)
        except Exception as exc:  # noqa: BLE001 (a preview never stops the dry run)
            lines.append(f"(point {point} cannot be computed here: {exc}; the job computes it)")
            break
        argv = build_argv(
            config.get("command"), config.get("program"), params, "<args_json_file>", environ
        )
        lines.append(f"point {point}: {shell_line(argv)}")
    if spec.method == "random":
        lines.append("(random: the submission draws its own values; these show the form)")
    return lines


def template_line(spec: SweepSpec, environ: Mapping[str, str]) -> str:
    """The sweep's command with its parameter macros (${args}, ...) left as written."""
    template = spec.config.get("command")
    words = expand_envvars(list(template) if template else list(DEFAULT_COMMAND), environ)
    fixed = {
        "${interpreter}": "python",
        "${program}": str(spec.config.get("program")),
        "${env}": "/usr/bin/env",
    }
    return " ".join(fixed.get(w, w) for w in words)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hpc_toolkit.sweep.stage")
    parser.add_argument("--prog", default="hpc")
    sub = parser.add_subparsers(dest="action", required=True)
    check = sub.add_parser("check")
    check.add_argument("file", type=Path)
    check.add_argument("--num-agents", type=int)
    check.add_argument("--max-points", type=int)
    check.add_argument("--sweep-id")
    check.add_argument("--exp-name", default="")
    resume = sub.add_parser("resume")
    resume.add_argument("folder", type=Path)
    pre = sub.add_parser("preview")
    pre.add_argument("file", type=Path)
    pre.add_argument("--sweep-id", required=True)
    pre.add_argument("--count", type=int, required=True)
    pre.add_argument("--first", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        if args.action == "preview":
            spec = load_sweep(args.file)
            for line in preview(spec, args.sweep_id, args.count, args.first, os.environ):
                print(line)
            return 0
        if args.action == "resume":
            folder = SweepFolder.load(args.folder)
            folder.spec()
            todo = ranges(to_rerun(folder))
            print(
                f"{folder.method}\t{folder.num_points}\t{folder.exp_name}\t{folder.sweep_id}\t{todo}"
            )
            return 0
        spec = load_sweep(args.file)
        count = bounded_points(spec, args.num_agents, args.max_points)
        for note in spec.notes:
            print(f"{args.prog}: note: {note}", file=sys.stderr)
        print(f"{spec.method}\t{count}")
        if args.sweep_id:
            print(info_text(spec, args.sweep_id, args.exp_name, count))
        return 0
    except (SweepError, OSError) as exc:
        print(f"{args.prog}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
