"""The `hpc` command: one typer app, one function per command.

Later command groups (`hpc sweep ...`) live in their own module as a typer app and are
added at the bottom with one `app.add_typer(...)` line.
"""

from __future__ import annotations

import errno
import getpass
import json
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from hpc_toolkit import __version__
from hpc_toolkit import doctor as doc
from hpc_toolkit.attempts import Attempt, attempts_dir, attempts_summary, read_attempts
from hpc_toolkit.console import ScratchOpt, command_app, die, render_table, warn
from hpc_toolkit.jobenv import JobEnv, JobEnvError
from hpc_toolkit.kept import kept_lines, kept_paths
from hpc_toolkit.packing import Packing, packing_of
from hpc_toolkit.project_writes import shared_write_lines
from hpc_toolkit.remote import RemoteOpt, forward, host_for, words
from hpc_toolkit.rerun import compress
from hpc_toolkit.slurm import (
    FINISHED,
    TaskQuery,
    TaskState,
    advice,
    efficiency_cells,
    expand_range,
    progress,
    query_tasks,
    query_usage,
    run_command,
)
from hpc_toolkit.submissions import (
    Group,
    LocateError,
    SlurmJob,
    find_project_root,
    find_scratch_dir,
    group_submissions,
    ledger_path,
    read_script,
    read_submissions,
    ref_key,
)
from hpc_toolkit.tracking import (
    TargetError,
    Task,
    missing_experiment,
    query_groups,
    resolve,
    tasks_of,
)
from hpc_toolkit.why import JOB_ID, WhyError, explain_job

app = command_app("hpc", "Helpers for jobs submitted with hpc_files/job_submitter.sh.")
POLL_S = 5.0  # polling etiquette: Slurm is asked at most once per POLL_S seconds
FOLLOW_READ_S = 0.5  # how often -f looks at the log file itself (no Slurm call)


def _load(scratch_dir: Path | None) -> tuple[Path, list[Group]]:
    try:
        scratch = find_scratch_dir(scratch_dir, os.environ, Path.cwd())
    except LocateError as exc:
        die(str(exc))
    ledger = ledger_path(scratch)
    with progress(f"reading the submissions ledger {ledger} (a long one: it is read whole)"):
        try:
            jobs = read_submissions(ledger, on_bad_line=warn)
        except OSError as exc:
            die(_unreadable(ledger, exc))
    return scratch, group_submissions(jobs)


def _unreadable(path: Path, exc: OSError) -> str:
    """`cannot read PATH: why; what to do` for a ledger that is there but cannot be read."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        todo = "make it and its folders readable to you (ls -ld shows whose they are)"
        return f"cannot read {path}: {exc.strerror}; {todo}, or pass --scratch-dir"
    if exc.errno == errno.EISDIR:
        todo = "the ledger is a file (job_submitter.sh appends a line to it per job)"
        return f"cannot read {path}: {exc.strerror}; {todo}: move that folder away"
    return (
        f"cannot read {path}: {exc.strerror or exc}; the ledger is the file job_submitter.sh "
        "appends a line to per job: look at what is there (ls -ld)"
    )


def _quiet_load(scratch_dir: Path | None) -> list[Group]:
    """The recorded submissions, [] when the ledger cannot be found or read (no message)."""
    try:
        ledger = ledger_path(find_scratch_dir(scratch_dir, os.environ, Path.cwd()))
        return group_submissions(read_submissions(ledger, on_bad_line=lambda _line: None))
    except (LocateError, OSError):
        return []


def _target(target: str, groups: list[Group]) -> tuple[Group, str | None]:
    try:
        return resolve(target, groups)
    except TargetError as exc:
        die(str(exc), exc.code)


def _say_sources(q: TaskQuery) -> None:
    for note in q.notes:
        warn(note)
    typer.echo(f"States from: {', '.join(q.sources) or 'no source (unknown)'}")


def _rerun_chain(groups: list[Group]) -> dict[str, list[str]]:
    """Per submission id, the lines that link it to its reruns (job_submitter.sh --rerun)."""
    by_id = {g.submission_id: g for g in groups}
    out: dict[str, list[str]] = {}

    def ids(g: Group) -> str:
        return ",".join(j.job_id for j in g.jobs if j.kind == "job")

    for g in groups:
        orig = by_id.get(g.rerun_of) if g.rerun_of else None
        if g.rerun_of:
            was = f"jobs {ids(orig)}" if orig else "no longer in the ledger"
            out.setdefault(g.submission_id, []).append(
                f"   rerun of {g.rerun_of} ({was}): {g.num_tasks} task(s) that did not complete"
            )
        if orig is not None:
            out.setdefault(orig.submission_id, []).append(
                f"   rerun as {g.submission_id} (jobs {ids(g)})"
            )
    return out


def _no_scratch_dir(scratch_dir: Path | None) -> None:
    if scratch_dir is not None:
        die("--scratch-dir names a folder of this machine: leave it out with --remote", 2)


@app.command()
def status(
    target: Annotated[
        str | None, typer.Argument(help="JOB, JOB_TASK or EXP (default: recent submissions).")
    ] = None,
    exp_name: Annotated[
        str | None, typer.Option("--exp-name", help="Only this experiment's submissions.")
    ] = None,
    scratch_dir: ScratchOpt = None,
    last: Annotated[int, typer.Option("--last", min=1, help="How many submissions to show.")] = 20,
    summary: Annotated[
        bool, typer.Option("--summary", help="One line per submission, no task rows.")
    ] = False,
    efficiency: Annotated[
        bool,
        typer.Option("--efficiency", help="CPU, memory, time and GPU use per task, from sacct."),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (submissions, tasks, attempts) instead.")
    ] = False,
    remote: RemoteOpt = None,
) -> None:
    """Show submissions and per task: state, exit code, elapsed, node, attempts and log.

    States come from sacct, else the job completion log, else squeue -t all, else
    scontrol show job: one call per source for all the jobs shown. Attempts (each time
    Slurm started the task, and how it ended) come from the job's own record.
    """
    remote = host_for(remote)
    if remote:
        _no_scratch_dir(scratch_dir)
        opts = {"--exp-name": exp_name, "--last": last, "--summary": summary,
                "--efficiency": efficiency, "--json": as_json}  # fmt: skip
        forward(remote, words("status", [target], opts))
    scratch, groups = _load(scratch_dir)
    chain = _rerun_chain(groups)
    only_task: str | None = None
    if target is not None:
        group, only_task = _target(target, groups)
        if exp_name is not None and group.exp_name != exp_name:
            die(
                f"submission {group.submission_id} is of experiment {group.exp_name!r}, not of "
                f"{exp_name!r}: leave out --exp-name or the target (`hpc status --exp-name "
                f"{exp_name}` lists that experiment's submissions)"
            )
        groups = [group]
    elif exp_name is not None:
        groups = [g for g in groups if g.exp_name == exp_name]
        if not groups:
            die(missing_experiment(exp_name))
    groups = groups[-last:]
    if not groups:
        warn(f"no submissions recorded in {ledger_path(scratch)}")
        return
    ids = [i for g in groups for i in g.job_ids]
    q = query_groups(groups)
    usage = query_usage(ids) if efficiency else {}
    attempts = _Attempts()
    if as_json:
        typer.echo(json.dumps(_status_json(groups, q, scratch, attempts, only_task), indent=2))
        return
    _say_sources(q)
    if isinstance(usage, str):
        typer.echo(f"Efficiency: not available ({usage}; it needs slurmdbd accounting)")
        usage = {}
    out: list[str] = []
    for g in groups:
        tasks = tasks_of(g, q)
        counts: Counter[str] = Counter(t.state_name for t in tasks if t.number is not None)
        states = ", ".join(f"{s} {n}" for s, n in sorted(counts.items()))
        ids_text = ",".join(j.job_id for j in g.jobs if j.kind == "job")
        venv = [j.job_id for j in g.jobs if j.kind == "venv"]
        out.append(
            f"== {g.exp_name}  jobs {ids_text}{f' (venv job {venv[0]})' if venv else ''}  "
            f"{g.num_tasks} task(s)  submitted {g.submitted_at.strftime('%Y-%m-%d %H:%M')}  "
            f"{states}"
        )
        out.extend(chain.get(g.submission_id, []))
        out.extend(shared_write_lines(j.script_path for j in g.jobs if j.kind == "job"))
        out.extend(kept_lines(j.script_path for j in g.jobs if j.kind == "job"))
        if summary:
            continue
        if only_task is not None:
            tasks = [t for t in tasks if t.slurm_id == only_task]
        header = ["TASK", "JOB", "STATE", "EXIT", "ELAPSED", "NODE", "ATTEMPTS"]
        if efficiency:
            header += ["CPU EFF", "MEM PEAK/REQ", "TIME USED/LIMIT", "GPU UTIL"]
        rows = []
        tips = []
        for t in tasks:
            st = t.state or TaskState("UNKNOWN")
            row = ["venv" if t.number is None else str(t.number), t.slurm_id, st.state,
                   st.exit_code, st.elapsed, st.node, attempts_summary(attempts.of(t))]  # fmt: skip
            if efficiency:
                u = usage.get((t.job.job_id, t.index))
                row += efficiency_cells(u) if u else ["-", "-", "-", "not available"]
                tip = advice(u) if u else ""
                if tip:
                    tips.append(f"  task {row[0]} ({t.slurm_id}): {tip}")
            rows.append([*row, t.log_text(scratch)])
        out.append(render_table([*header, "LOG"], rows).rstrip("\n"))
        out.extend(tips)
    typer.echo("\n".join(out))


class _Attempts:
    """Each task's attempts, from the attempts folder its batch script names (read once)."""

    def __init__(self) -> None:
        self._dirs: dict[Path, Path | None] = {}
        self._files: dict[Path, set[str]] = {}

    def of(self, task: Task) -> list[Attempt]:
        if task.number is None:
            return []
        script = task.job.script_path
        if script not in self._dirs:
            try:
                self._dirs[script] = attempts_dir(read_script(script).exports)
            except OSError:
                self._dirs[script] = None
        folder = self._dirs[script]
        if folder is None:
            return []
        # The folder listed once: a task that never started has no file (no open each).
        if folder not in self._files:
            try:
                self._files[folder] = set(os.listdir(folder))
            except OSError:
                self._files[folder] = set()
        name = str(task.number)
        return read_attempts(folder / name) if name in self._files[folder] else []


def _status_json(
    groups: list[Group], q: TaskQuery, scratch: Path, attempts: _Attempts, only: str | None
) -> dict[str, object]:
    """`hpc status --json`: what the table shows, with every attempt in full."""
    subs = []
    for g in groups:
        tasks = []
        for t in tasks_of(g, q):
            if only is not None and t.slurm_id != only:
                continue
            st = t.state or TaskState("UNKNOWN")
            tried = attempts.of(t)
            tasks.append({
                "task": t.number, "job": t.slurm_id, "state": st.state,
                "exit_code": st.exit_code, "elapsed": st.elapsed, "node": st.node,
                "log": str(t.log(scratch)), "attempts": len(tried),
                "attempt_list": [a.to_dict() for a in tried],
            })  # fmt: skip
        subs.append({
            "submission": g.submission_id, "exp_name": g.exp_name,
            "submitted_at": g.submitted_at.isoformat(), "job_ids": g.job_ids,
            "rerun_of": g.rerun_of, "tasks": tasks,
            "results_kept": [str(p) for p in kept_paths(j.script_path for j in g.jobs
                                                         if j.kind == "job")],
        })  # fmt: skip
    return {"sources": q.sources, "notes": q.notes, "submissions": subs}


@app.command()
def report(
    target: Annotated[str, typer.Argument(help="JOB, JOB_TASK or EXP.")],
    scratch_dir: ScratchOpt = None,
) -> None:
    """Resource efficiency of a submission (the same as `hpc status TARGET --efficiency`)."""
    status(target, None, scratch_dir, 20, False, True, False)


def _pick_one(group: Group, task_id: str | None, task_no: int | None, q: TaskQuery) -> Task:
    tasks = [t for t in tasks_of(group, q) if t.number is not None or len(group.jobs) == 1]
    if task_id is not None:
        chosen = [t for t in tasks_of(group, q) if t.slurm_id == task_id]
    elif task_no is not None:
        chosen = [t for t in tasks if t.number == task_no]
    else:
        chosen = tasks if len(tasks) == 1 else []
    if not chosen:
        if task_id is None and task_no is None:
            die(
                f"submission {group.submission_id} has {len(tasks)} tasks: name one as "
                f"JOB_TASK (e.g. {tasks[0].slurm_id}) or with --task N",
                2,
            )
        die(f"no such task in submission {group.submission_id}", 2)
    return chosen[0]


def _not_regular(path: Path) -> bool:
    """A log path that exists but is no regular file (a device, a fifo: an edited ledger's
    log field): reading it could never end, so it is never read."""
    return path.exists() and not path.is_file()


def _refuse_not_regular(path: Path) -> None:
    if _not_regular(path):
        die(f"{path} is not a regular file: not read (the ledger names it as a log: edited?)", 1)


def _tail(path: Path, lines: int) -> str:
    if _not_regular(path):
        return "(no log: not a regular file)\n"
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        return f"(no log: {exc.strerror})\n"
    text = data.decode("utf-8", errors="replace")
    kept = text.splitlines(keepends=True)[-lines:] if lines > 0 else [text]
    out = "".join(kept)
    return out if out.endswith("\n") or not out else out + "\n"


def _follow(task: Task, path: Path, group: Group) -> None:
    """Print the log at `path` as it grows; wait for it while pending; stop when the task ends."""
    key = ref_key(task.job)
    job_ids = {key: group.refs[key]}
    last_poll = 0.0
    done = False
    offset = 0
    said_waiting = False
    _refuse_not_regular(path)
    while True:
        now = time.monotonic()
        if now - last_poll >= POLL_S:
            last_poll = now
            st = query_tasks(job_ids).state_of(key, task.index)
            done = st is not None and st.state in FINISHED
        if path.exists():
            _refuse_not_regular(path)
            with open(path, "rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
            if chunk:
                offset += len(chunk)
                sys.stdout.write(chunk.decode("utf-8", errors="replace"))
                sys.stdout.flush()
        elif not said_waiting and not done:
            warn(f"waiting for {path} (task {task.slurm_id} has not started it)")
            said_waiting = True
        if done:
            if not path.exists():
                die(f"task {task.slurm_id} ended without writing {path}")
            return
        time.sleep(FOLLOW_READ_S)


class _Packings:
    """The packing (--pack) of each Slurm job of a submission, read once from its script."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.seen: dict[str, Packing | None] = {}

    def of(self, job: SlurmJob) -> Packing | None:
        if job.job_id not in self.seen:
            packing = None
            # Only a regular file (read_script): the ledger can be edited (a fifo or a device
            # would hang); a script or plan that cannot be read is no packing.
            if job.kind == "job" and job.script_path.name:
                try:
                    exports = read_script(job.script_path).exports
                except OSError:
                    exports = {}
                packing = packing_of(exports, self.scratch, job.exp_name)
            self.seen[job.job_id] = packing
        return self.seen[job.job_id]


def _line_note(packing: Packing, task: Task, line: int) -> str:
    """What line `line` of packed task `task` did, from its outcome file."""
    outcome = packing.outcome(line)
    if outcome is None:
        return "never started"
    if outcome.job != task.slurm_id:
        return f"last run by {outcome.job}: {outcome.describe()}"
    return outcome.describe()


def _line_completed(packing: Packing, task: Task, line: int) -> bool:
    outcome = packing.outcome(line)
    return outcome is not None and outcome.job == task.slurm_id and outcome.completed


def _span(lines: range) -> str:
    if not lines:  # a task number past the last line (an edited ledger)
        return "none"
    return str(lines[0]) if len(lines) == 1 else f"{lines[0]}-{lines[-1]}"


def _line_header(packing: Packing, task: Task, line: int) -> str:
    path = packing.line_log(task.job.job_id, line)
    note = _line_note(packing, task, line)
    where = f": {path}" if path.exists() else ""
    return f"==> line {line} (task {task.number}, {task.slurm_id}) {note}{where} <=="


def _find_line(group: Group, line: int, packings: _Packings) -> tuple[Task, Path]:
    """The task that runs line `line` and the line's log (a packed job's line log, else
    the log of the task that runs it: task I runs line I)."""
    known: list[int] = []
    for t in tasks_of(group, TaskQuery()):
        if t.number is None:
            continue
        packing = packings.of(t.job)
        lines = packing.lines_of(t.number) if packing else range(t.number, t.number + 1)
        known.extend(lines)
        if line in lines:
            return t, (packing.line_log(t.job.job_id, line) if packing else t.log(packings.scratch))
    die(f"no line {line} in submission {group.submission_id}: its lines are {compress(known)}", 2)


@app.command()
def logs(
    target: Annotated[str, typer.Argument(help="JOB, JOB_TASK or EXP.")],
    task_no: Annotated[
        int | None,
        typer.Option("--task", min=0, help="Task N of the submission (line N+1; packed: job N)."),
    ] = None,
    line_no: Annotated[
        int | None,
        typer.Option(
            "--line", min=0, help="Line I's own log (HPC_TASK_INDEX=I; a packed job's line)."
        ),
    ] = None,
    follow: Annotated[
        bool, typer.Option("-f", "--follow", help="Follow the log until the task ends.")
    ] = False,
    failed: Annotated[
        bool, typer.Option("--failed", help="The tail of every failed task's (or line's) log.")
    ] = False,
    lines: Annotated[
        int, typer.Option("-n", "--lines", min=0, help="Lines of each tail (--failed; 0: all).")
    ] = 30,
    scratch_dir: ScratchOpt = None,
    remote: RemoteOpt = None,
) -> None:
    """Print a job's or array task's log; -f follows it, --failed shows what failed.

    A packed job (--pack, --lines-per-job) also wrote one log per line: they follow its
    own log, and --line I shows line I's.
    """
    remote = host_for(remote)
    if remote:
        _no_scratch_dir(scratch_dir)
        opts = {"--task": task_no, "--line": line_no, "--follow": follow, "--failed": failed,
                "--lines": lines}  # fmt: skip
        forward(remote, words("logs", [target], opts), tty=follow and sys.stdin.isatty())
    scratch, groups = _load(scratch_dir)
    group, task_id = _target(target, groups)
    packings = _Packings(scratch)
    if line_no is not None and (task_id is not None or task_no is not None or failed):
        die("--line names one line: give it without --task, JOB_TASK or --failed", 2)
    if failed:
        if follow:
            die("--failed and -f do not go together", 2)
        _failed_logs(group, scratch, packings, lines)
        return
    if line_no is not None:
        task, path = _find_line(group, line_no, packings)
        packing = packings.of(task.job)
        done_by = packing.outcome(line_no) if packing is not None else None
        if done_by is not None and (not done_by.completed or done_by.job == task.slurm_id):
            done_by = None
        if done_by is not None and not path.exists():
            # A packed --rerun does not run again a line that was done: nothing to wait for.
            warn(
                f"line {line_no} was done by {done_by.job}, so {task.slurm_id} does not run it "
                f"again: hpc logs {done_by.job.split('_')[0]} --line {line_no}"
            )
            return
        if follow:
            _follow(task, path, group)
            return
        if packing is not None and not path.exists():
            warn(
                f"line {line_no} (task {task.number}, {task.slurm_id}) has no log: "
                f"{_line_note(packing, task, line_no)} (`hpc status {task.slurm_id}`)"
            )
            return
        _show_whole([(task, path)])
        return
    if follow:
        task = _pick_one(group, task_id, task_no, TaskQuery())
        _follow(task, task.log(scratch), group)
        return
    chosen = (
        [_pick_one(group, task_id, task_no, TaskQuery())]
        if task_id is not None or task_no is not None
        else [t for t in tasks_of(group, TaskQuery()) if t.number is not None]
    )
    if not any(packings.of(t.job) for t in chosen):
        _show_whole([(t, t.log(scratch)) for t in chosen])
        return
    for t in chosen:
        packing = packings.of(t.job)
        span = f", packed lines {_span(packing.lines_of(t.number or 0))}" if packing else ""
        typer.echo(f"==> task {t.number} ({t.slurm_id}){span}: {t.log(scratch)} <==")
        _print_whole(t.log(scratch), t)
        if packing is None:
            continue
        for i in packing.lines_of(t.number or 0):
            typer.echo(_line_header(packing, t, i))
            path = packing.line_log(t.job.job_id, i)
            if path.exists():
                _print_whole(path, t)


def _show_whole(chosen: list[tuple[Task, Path]]) -> None:
    for t, path in chosen:
        if len(chosen) > 1:
            typer.echo(f"==> task {t.number} ({t.slurm_id}): {path} <==")
        _print_whole(path, t)


def _print_whole(path: Path, task: Task) -> None:
    _refuse_not_regular(path)
    if not path.exists():
        warn(f"no log yet at {path} (pending? `hpc status {task.slurm_id}`; -f waits for it)")
        return
    typer.echo(_tail(path, 0), nl=False)


def _failed_logs(group: Group, scratch: Path, packings: _Packings, lines: int) -> None:
    """The tail of each failed task's log; for a packed job, of its lines that did not
    complete (its own log's tail when none of them has a log)."""
    q = query_groups([group])
    _say_sources(q)
    bad = [t for t in tasks_of(group, q) if t.failed]
    if not bad:
        typer.echo(f"No failed task in submission {group.submission_id}.")
        return
    for t in bad:
        st = t.state or TaskState("UNKNOWN")
        packing = packings.of(t.job) if t.number is not None else None
        span = f", packed lines {_span(packing.lines_of(t.number or 0))}" if packing else ""
        typer.echo(
            f"==> task {t.number if t.number is not None else 'venv'} ({t.slurm_id}) "
            f"{st.state} exit {st.exit_code} on {st.node}{span}: {t.log(scratch)} <=="
        )
        if packing is None:
            typer.echo(_tail(t.log(scratch), lines), nl=False)
            continue
        left = [i for i in packing.lines_of(t.number or 0) if not _line_completed(packing, t, i)]
        notes = ", ".join(f"{i} ({_line_note(packing, t, i)})" for i in left)
        typer.echo(f"lines that did not complete: {notes or 'none'}")
        with_log = [i for i in left if packing.line_log(t.job.job_id, i).exists()]
        for i in with_log:
            typer.echo(_line_header(packing, t, i))
            typer.echo(_tail(packing.line_log(t.job.job_id, i), lines), nl=False)
        if not with_log:
            typer.echo(_tail(t.log(scratch), lines), nl=False)


@dataclass
class _Queued:
    """One job number in squeue: the name and submit time of the job that holds it, and
    which of its array tasks are queued or running (`whole`: the job itself, no task)."""

    name: str
    submitted: str
    tasks: set[int] = field(default_factory=set)
    whole: bool = False

    def holds(self, task_id: str) -> bool:
        index = task_id.partition("_")[2]
        return self.whole or (index.isdigit() and int(index) in self.tasks)


def _queue() -> dict[str, _Queued] | None:
    """This user's queued and running jobs by job number (squeue); None when squeue could
    not say (then no job is taken for ended)."""
    done = run_command(["squeue", "-h", "-u", getpass.getuser(), "-o", "%i|%j|%V"])
    if isinstance(done, str) or done.returncode != 0:
        return None
    out: dict[str, _Queued] = {}
    for row in done.stdout.splitlines():
        job, sep, rest = row.partition("|")
        name, _, submitted = rest.rpartition("|") if "|" in rest else (rest, "", "")
        if not sep:
            continue
        number, _, index = job.strip().partition("_")
        queued = out.setdefault(number, _Queued(name, submitted))
        if index:  # 502_0 running, 502_[1-3%2] waiting
            queued.tasks.update(expand_range(index.strip("[]")))
        else:
            queued.whole = True
    return out


# scancel's words (Slurm 22.05 to 24.11) for a job or task that ended before it was asked.
_SCANCEL_ENDED = re.compile(
    r"Kill job error on job id ([0-9_]+): "
    r"(?:Invalid job id specified|Job/step already completing or completed)"
)


def _nothing_to_cancel(group: Group, task_id: str | None) -> str:
    if task_id is not None:
        return (
            f"nothing to cancel: task {task_id} of submission {group.submission_id} has ended; "
            f"`hpc status {task_id}` shows how it ended"
        )
    return (
        f"nothing to cancel: every job of submission {group.submission_id} has ended; "
        f"`hpc status {group.submission_id}` shows how they ended"
    )


@app.command()
def cancel(
    target: Annotated[str, typer.Argument(help="JOB, JOB_TASK or EXP (its latest submission).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    scratch_dir: ScratchOpt = None,
    remote: RemoteOpt = None,
) -> None:
    """Cancel a submission: all its arrays, its venv job (or one JOB_TASK)."""
    remote = host_for(remote)
    if remote:
        asked = f"Cancel {target} on {remote}?"
        if not yes and not (sys.stdin.isatty() and typer.confirm(asked, err=True)):
            die(f"nothing cancelled (not on a terminal: --yes cancels {target} on {remote})", 2)
        _no_scratch_dir(scratch_dir)
        forward(remote, words("cancel", [target], {"--yes": True}))
    _scratch, groups = _load(scratch_dir)
    group, task_id = _target(target, groups)
    # By number and by the name the job was given: a number the ledger holds can belong to
    # another job now (Slurm numbering afresh, two clusters sharing $SCRATCH), and scancel
    # with --name leaves a job of another name alone. One of this user's jobs that squeue
    # no longer shows has ended: scancel would only say "Invalid job id specified".
    queue = _queue()
    me = getpass.getuser()
    by_name: dict[str, list[str]] = {}
    left_alone = 0
    for j in group.jobs:
        if task_id is not None and task_id.split("_")[0] != j.job_id:
            continue
        name = j.slurm_name
        queued = queue.get(j.job_id) if queue is not None else None
        if queue is not None and queued is None and j.user in ("", me):
            continue  # ended
        if queued is not None and queued.name != name:
            warn(
                f"job {j.job_id} is another job now (named {queued.name!r}, not {name!r}): "
                "left alone"
            )
            left_alone += 1
            continue
        if queued is not None and not group.refs[ref_key(j)].accepts(name, queued.submitted):
            warn(
                f"job {j.job_id} is another job of that name now (submitted {queued.submitted}, "
                f"not when submission {group.submission_id} was): left alone"
            )
            left_alone += 1
            continue
        if queued is not None and task_id is not None and not queued.holds(task_id):
            continue  # that task ended
        by_name.setdefault(name, []).append(task_id or j.job_id)
    ids = [i for batch in by_name.values() for i in batch]
    if not ids and not left_alone:
        die(_nothing_to_cancel(group, task_id))
    if not ids:
        die(
            f"nothing cancelled: the jobs of submission {group.submission_id} have ended "
            "(their numbers belong to other jobs now)"
        )
    what = f"{', '.join(ids)} ({group.exp_name}, {group.num_tasks} task(s))"
    if not yes:
        if not sys.stdin.isatty():
            die(f"not on a terminal: pass --yes to cancel {what}", 2)
        if not typer.confirm(f"Cancel {what}?", default=False, err=True):
            die("nothing cancelled")
    # The arrays first, then the venv job they wait for: with the venv job cancelled first,
    # 22.05 recorded a waiting array as one job, not as its tasks (it also does so, now and
    # then, for an array cancelled just after its submission: TaskQuery.state_of copes).
    venv_names = {j.slurm_name for j in group.jobs if j.kind == "venv"}
    gone: set[str] = set()
    for name, batch in sorted(by_name.items(), key=lambda nb: nb[0] in venv_names):
        done = run_command(["scancel", f"--name={name}", *batch])
        if isinstance(done, str):
            die(done)
        if done.returncode != 0:
            said = [line for line in done.stderr.strip().splitlines() if line.strip()]
            # Ended between squeue and scancel (or squeue could not say): not an error.
            ended_now = [m[1] for m in map(_SCANCEL_ENDED.search, said) if m]
            if not said or len(ended_now) < len(said):
                die(f"scancel failed (exit {done.returncode}): {done.stderr.strip()}")
            gone.update(ended_now)
    cancelled = [i for i in ids if i not in gone]
    if not cancelled:
        die(_nothing_to_cancel(group, task_id))
    what = f"{', '.join(cancelled)} ({group.exp_name}, {group.num_tasks} task(s))"
    typer.echo(f"Cancelled {what}")


@app.command()
def why(
    target: Annotated[str, typer.Argument(help="JOB, JOB_TASK, or EXP (its latest submission).")],
    scratch_dir: ScratchOpt = None,
    remote: RemoteOpt = None,
) -> None:
    """Why a job waits, in words, and what to change (from scontrol show job)."""
    remote = host_for(remote)
    if remote:
        _no_scratch_dir(scratch_dir)
        forward(remote, words("why", [target], {}))
    ids = [target]
    if not JOB_ID.match(target):
        _scratch, groups = _load(scratch_dir)
        group, _task = _target(target, groups)
        ids = group.job_ids
    else:
        # Any job of the cluster is explained, recorded or not; the ledger, when it can be
        # read, refuses a task that does not exist and a name that is an experiment's too.
        recorded = _quiet_load(scratch_dir)
        try:
            group, _task = resolve(target, recorded)
        except TargetError as exc:
            if exc.code != 1:
                die(str(exc), exc.code)
        else:
            if target.split("_")[0] not in group.job_ids:  # an experiment named by digits
                ids = group.job_ids
    failed = False
    for job_id in ids:
        try:
            typer.echo("\n".join(explain_job(job_id)))
        except WhyError as exc:
            warn(str(exc))
            failed = True
    if failed:
        raise typer.Exit(1)


@app.command()
def doctor(
    probe: Annotated[
        bool, typer.Option("--probe", help="Run a tiny job to see whether jobs get SLURM_TMPDIR.")
    ] = False,
    partition: Annotated[
        str | None, typer.Option("--partition", "-p", help="The probe job's partition.")
    ] = None,
    account: Annotated[
        str | None, typer.Option("--account", "-A", help="The probe job's account.")
    ] = None,
    write: Annotated[
        str | None,
        typer.Option(
            "--write", metavar="NAME", help="Write the profile to hpc_files/clusters/NAME.conf."
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="--write replaces one there.")] = False,
) -> None:
    """Describe this cluster in one screen (run on a login node) and suggest a profile."""
    target: Path | None = None
    if write is not None:
        root = find_project_root(Path.cwd())
        if root is None:
            die(f"--write: no hpc_files/ in {Path.cwd()} or above: run it in your project", 2)
        try:
            target = doc.profile_path(root / "hpc_files" / "clusters", write)
        except ValueError as exc:
            die(str(exc), 2)
        if target.exists() and not force:
            die(f"{target} exists: pass --force to replace it", 2)
    try:
        facts = doc.gather()
    except RuntimeError as exc:
        die(str(exc))
    if probe:
        found = doc.run_probe(run_command, partition, account)
        if isinstance(found, str):
            facts.probe_note = f"not known: {found}"
        else:
            facts.probe = found
    keys = doc.suggest_profile(facts.partitions, facts.probe)
    typer.echo("\n".join([*doc.report(facts), *doc.show_profile(keys)]))
    if target is not None:
        cfg = facts.config
        text = doc.profile_text(
            keys, cfg.get("ClusterName", "?"), cfg.get("SLURM_VERSION", "?"), datetime.now()
        )
        doc.write_profile(target, text, force)
        typer.echo(f"Wrote {target}: use it with --cluster {write}")


@app.command()
def env(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of shell.")] = False,
    allow_outside: Annotated[
        bool, typer.Option("--allow-outside", help="Print whatever is set, even outside a job.")
    ] = False,
) -> None:
    """Print the job's environment (`export` lines, or JSON with --json)."""
    try:
        job = JobEnv.from_environ()
    except JobEnvError as exc:
        die(str(exc))
    if not job.in_job and not allow_outside:
        die("not inside a Slurm job (SLURM_JOB_ID is not set); --allow-outside prints it anyway")
    typer.echo(job.to_json() if as_json else job.to_shell(), nl=False)


@app.command()
def version() -> None:
    """Print the hpc_toolkit version."""
    typer.echo(__version__)


# Command groups from their own modules (each a console.command_app) are added here.
from hpc_toolkit.sweep.cli import app as sweep_app  # noqa: E402

app.add_typer(sweep_app, name="sweep")
