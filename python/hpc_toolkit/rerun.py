"""Which tasks of a submission to run again: the plan behind `job_submitter.sh --rerun JOB_ID`.

    python3 -m hpc_toolkit.rerun --scratch-dir DIR JOB_ID

Standard library only, so job_submitter.sh runs it with any python3 (no venv needed).
It reads the ledger, finds the submission JOB_ID belongs to, asks Slurm for its tasks'
states the way `hpc status` does (slurm.query_tasks: sacct, then the job completion log,
then squeue, then scontrol) and prints the plan on stdout, one tab-separated record a line:

    submission  SUBMISSION_ID  EXP_NAME  JOB_IDS(comma-separated)
    script      SCRIPT  INDICES  COUNT  OFFSET  LOG  DATA_JOBS   one per job to resubmit
    task        NUMBER  SLURM_ID  STATE  EXIT_CODE  LINES  DETAIL   one per task rerun

LINES and DETAIL are `-` but for a packed job (--pack): its lines and what each did.

INDICES are the array indices to run again (`1,3-4`), `-` for a job that is not an array;
DATA_JOBS the --data archive's list of jobs that use it (staging.sh), `-` without --data.
Exit 0 with a plan; 3 when every task completed (nothing to do; says so on stdout); 2
with a message on stderr when it refuses (bad id, tasks still queued or running, states
unknown, a script or commands file edited since or missing).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from hpc_toolkit import slurm
from hpc_toolkit.packing import packing_of
from hpc_toolkit.paths import Home, homes_dir, plan_of
from hpc_toolkit.slurm import FINISHED, Runner, query_tasks, run_command, slurm_conf_settings
from hpc_toolkit.submissions import (
    SUBMISSION_ID,
    Group,
    ScriptInfo,
    SlurmJob,
    by_job_number,
    group_submissions,
    ledger_path,
    read_script,
    read_submissions,
    ref_key,
)
from hpc_toolkit.tracking import expected_tasks

# A script or commands file whose mtime is later than the ledger's time of its submission
# by more than this was edited since (the files are written just before sbatch; the slack
# covers a file server's clock a little ahead of the login node's).
EDIT_SLACK_S = 60
JOB_ID = re.compile(r"([0-9]{1,18})(?:_[0-9]{1,9})?")
SHOWN = 10  # tasks named in a refusal; the rest are counted


Rerun = tuple[int, str, str, str, str, str]  # number, Slurm id, state, exit, lines, detail


class Refusal(Exception):
    """Why the rerun cannot go ahead, and what to do (exit 2)."""


def compress(numbers: Sequence[int]) -> str:
    """`1,3-5` for [1, 3, 4, 5] (sorted, no duplicates)."""
    out: list[str] = []
    nums = sorted(set(numbers))
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ",".join(out)


def find_group(job_id: str, groups: list[Group]) -> Group:
    """The submission of a job id (its latest, when Slurm handed the number out again), or
    the submission of that id."""
    for g in groups:
        if g.submission_id == job_id and not job_id.isdigit():
            return g
    m = JOB_ID.fullmatch(job_id)
    if m is None:
        raise Refusal(
            f"--rerun {job_id[:100]!r} is not a Slurm job id nor a recorded submission id: "
            "give a job id that job_submitter.sh printed (any job of the submission; "
            "`hpc status` lists them), or a submission id (`hpc status --json`)"
        )
    found = by_job_number(groups, m[1], slurm_conf_settings().get("clustername", ""))
    if found is not None:
        return found
    raise Refusal(
        f"job {m[1]} is not in this project's ledger: give a job id of one of its "
        "submissions (`hpc status` lists them)"
    )


def _check_paths(scratch: Path, job: SlurmJob) -> None:
    jobs_dir = homes_dir(scratch)
    script = job.script_path
    home = Home.of_script(script)
    # The ledger is a file anyone with access may edit: what it names must be one of the
    # toolkit's own scripts before anything reads or resubmits it: a home's job.sbatch or
    # job-partN.sbatch, or an older version's jobs/EXP-STAMP.sbatch.
    if (
        not script.is_absolute()
        or (home.legacy and script.parent != jobs_dir)
        or (not home.legacy and home.folder.parent != jobs_dir)
        or not SUBMISSION_ID.fullmatch(home.folder.name)
        or not script.name.endswith(".sbatch")
        or ".." in script.parts
        or not SUBMISSION_ID.fullmatch(job.submission_id)
        or "\n" in job.log
        or not job.log.startswith("/")
    ):
        raise Refusal(
            f"the ledger line of job {job.job_id} names script {str(script)[:200]!r}, log "
            f"{job.log[:200]!r} and submission {job.submission_id[:100]!r}, not the "
            f"toolkit's own (scripts are kept in {jobs_dir}): the ledger was edited, or the "
            "line was written by an older version; submit the lines again without --rerun"
        )


def _mtime_after(path: Path, job: SlurmJob) -> bool:
    return path.stat().st_mtime > job.submitted_at.timestamp() + EDIT_SLACK_S


def check_files(scratch: Path, job: SlurmJob) -> ScriptInfo:
    """The job's kept script and commands file, unchanged since it was submitted."""
    _check_paths(scratch, job)
    script = job.script_path
    again = "submit the lines again without --rerun (a new submission)"
    if not script.is_file():
        raise Refusal(f"the batch script of job {job.job_id}, {script}, is gone: {again}")
    if _mtime_after(script, job):
        raise Refusal(
            f"{script} was changed after job {job.job_id} was submitted: a rerun would not "
            f"run what failed with the same settings; restore it, or {again}"
        )
    # The plan is read from the manifest beside the script (an older version's script
    # has none: its own lines); edited after the submission, it is refused like the script.
    plan = plan_of(script)
    source = plan if plan.is_file() else script
    if source is plan and _mtime_after(plan, job):
        raise Refusal(
            f"{plan} was changed after job {job.job_id} was submitted: a rerun would not "
            f"run what failed with the same settings; restore it, or {again}"
        )
    info = read_script(script)
    offset = info.exports.get("HPC_TASK_OFFSET", "0")
    wrong = ""
    if not offset.isdigit() or int(offset) != job.task_offset:
        wrong = f"HPC_TASK_OFFSET {offset[:20]!r} where the ledger says {job.task_offset}"
    elif job.is_array and (info.indices is None or len(info.indices) != job.num_tasks):
        wrong = f"an --array line that does not name the ledger's {job.num_tasks} task(s)"
    elif not job.is_array and info.indices is not None:
        wrong = "an --array line for a job the ledger records as a single job"
    if wrong:
        raise Refusal(f"{source} has {wrong}: it or the ledger was edited; {again}")
    commands = Path(info.exports.get("HPC_COMMANDS_FILE", ""))
    if not commands.is_absolute() or not commands.is_file():
        raise Refusal(f"the commands file of job {job.job_id} ({commands}) is gone: {again}")
    if _mtime_after(commands, job):
        raise Refusal(
            f"{commands} was changed after job {job.job_id} was submitted: its lines may no "
            f"longer be the ones that failed; restore it, or {again}"
        )
    # What else the script runs from must still be there, or every task fails at its start.
    for name, what in (
        ("source_dir", "the project folder (or --snapshot copy) it runs in"),
        ("HPC_DATA_ARCHIVE", "its --data archive (pruned once no queued job used it)"),
        ("HPC_CONTAINER", "its container image"),
    ):
        value = info.exports.get(name)
        if value is not None and not Path(value).exists():
            raise Refusal(f"{what}, {value}, is gone: {again}")
    return info


def data_jobs_file(info: ScriptInfo) -> str:
    """The --data archive's KEY-SHA.jobs file (staging.sh), where new job ids go; "-"."""
    archive = info.exports.get("HPC_DATA_ARCHIVE", "")
    if not archive:
        return "-"
    base = re.sub(r"\.tar(\.zst|\.gz)?$", "", archive)
    return base + ".jobs" if base != archive else "-"


def packed_lines(info: ScriptInfo, number: int, slurm_id: str) -> tuple[str, str]:
    """For a task of a packed job (--pack; the job side writes one outcome file per line,
    <commands>.lines/I): its lines (`6-8`) and what each did in that job, else ("-", "-").
    The whole task runs again, its lines that were done too."""
    if not info.exports.get("HPC_PACK_LINES"):  # not packed (no Packing made per task)
        return "-", "-"
    packing = packing_of(info.exports, Path("."), "")
    lines = packing.lines_of(number) if packing is not None else range(0)
    if packing is None or not lines:
        return "-", "-"
    failed: list[str] = []
    done: list[str] = []
    for line in lines:
        outcome = packing.outcome(line)
        if outcome is None:
            failed.append(f"{line} (never started)")
        elif outcome.job != slurm_id:
            failed.append(f"{line} (no outcome from this job)")
        elif outcome.completed:
            done.append(str(line))
        else:
            failed.append(f"{line} ({outcome.describe()})")
    detail = "lines that did not complete: " + ", ".join(failed)
    if done:
        detail += "; done, not run again: " + ", ".join(done)
    first, last = lines[0], lines[-1]
    return (str(first) if first == last else f"{first}-{last}"), detail


def _listing(items: list[str]) -> str:
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def plan(
    scratch: Path, job_id: str, run: Runner = run_command, warn: Callable[[str], None] | None = None
) -> tuple[Group, list[tuple[SlurmJob, list[int], str]], list[Rerun]]:
    """The submission; the (job, array indices, data jobs file) to resubmit; the tasks
    rerun (number, Slurm id, state, exit code, packed lines, detail). Raises Refusal."""

    def on_bad(msg: str) -> None:
        if warn is not None:
            warn(msg)

    groups = group_submissions(read_submissions(ledger_path(scratch), on_bad_line=on_bad))
    group = find_group(job_id, groups)
    later = [g for g in groups if g.rerun_of == group.submission_id]
    if later:
        ids = ",".join(j.job_id for j in later[-1].jobs)
        raise Refusal(
            f"submission {group.submission_id} (job {job_id}) was already rerun as job(s) "
            f"{ids}: rerun that one instead (--rerun {later[-1].jobs[0].job_id}), so that "
            "what its rerun fixed is not run twice"
        )
    here = slurm_conf_settings().get("clustername", "")
    if here and group.cluster and group.cluster != here:
        raise Refusal(
            f"submission {group.submission_id} was made on cluster {group.cluster}, not on "
            f"this one ({here}): its job numbers here are other jobs'. Run --rerun on "
            f"{group.cluster}"
        )
    q = query_tasks(group.refs, run, expected_tasks([group]))
    active: list[str] = []
    unknown: list[str] = []
    rerun: dict[str, list[int]] = {}
    tasks: list[tuple[int, str, str, str]] = []
    for job, index, number in group.tasks():
        slurm_id = job.job_id if index is None else f"{job.job_id}_{index}"
        st = q.state_of(ref_key(job), index)
        what = "the venv job" if number is None else f"task {number}"
        if st is None:
            unknown.append(f"{what} ({slurm_id})")
        elif st.state not in FINISHED:
            active.append(f"{what} ({slurm_id} {st.state})")
        elif number is None:
            if st.state != "COMPLETED":
                raise Refusal(
                    f"the venv job {job.job_id} of this submission ended {st.state}, so its "
                    "tasks had no venv: fix requirements.txt and submit again with --setup-venv"
                )
        elif st.state != "COMPLETED":
            rerun.setdefault(job.job_id, []).append(-1 if index is None else index)
            tasks.append((number, slurm_id, st.state, st.exit_code))
    if active:
        shown = _listing(active)
        raise Refusal(
            f"{len(active)} task(s) of submission {group.submission_id} are still queued or "
            f"running: {shown}. Wait until they end (hpc status {job_id}), or cancel them "
            f"(hpc cancel {job_id}), then run --rerun {job_id} again"
        )
    if unknown:
        shown = _listing(unknown)
        asked = ", ".join(q.sources) or "none answered"
        notes = "; ".join(q.notes)
        raise Refusal(
            f"Slurm no longer knows how {shown} of submission {group.submission_id} ended "
            f"(sources: {asked}{'; ' + notes if notes else ''}): without accounting (sacct) "
            "or a job completion log, finished jobs are forgotten after MinJobAge; check "
            "their logs (hpc logs) and submit the lines again without --rerun"
        )
    todo: list[tuple[SlurmJob, list[int], str]] = []
    infos: dict[str, ScriptInfo] = {}
    for job in group.jobs:
        if job.job_id in rerun:
            info = infos[job.job_id] = check_files(scratch, job)
            indices = [] if info.indices is None else rerun[job.job_id]
            todo.append((job, indices, data_jobs_file(info)))
    out = [
        (n, sid, state, code, *packed_lines(infos[sid.split("_")[0]], n, sid))
        for n, sid, state, code in sorted(tasks)
    ]
    return group, todo, out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hpc_toolkit.rerun", description=__doc__)
    parser.add_argument("--scratch-dir", type=Path, required=True)
    parser.add_argument("--prog", default="job_submitter.sh")
    parser.add_argument("job_id")
    args = parser.parse_args(argv)

    def warn(msg: str) -> None:
        print(f"{args.prog}: warning: {msg}", file=sys.stderr)

    prog, slurm.PROGRESS_PROG = slurm.PROGRESS_PROG, args.prog  # said as job_submitter.sh
    try:
        with slurm.progress(f"working out which tasks of {args.job_id} to run again..."):
            group, todo, tasks = plan(args.scratch_dir, args.job_id, warn=warn)
    except Refusal as exc:
        print(f"{args.prog}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{args.prog}: cannot read the submission's files ({exc})", file=sys.stderr)
        return 2
    finally:
        slurm.PROGRESS_PROG = prog
    if not todo:
        print(
            f"Nothing to rerun: every task of submission {group.submission_id} "
            f"(job(s) {','.join(group.job_ids)}) completed"
        )
        return 3
    out = [f"submission\t{group.submission_id}\t{group.exp_name}\t{','.join(group.job_ids)}"]
    for job, indices, data_jobs in todo:
        spec = compress(indices) if indices else "-"
        count = len(indices) or 1
        out.append(
            f"script\t{job.script_path}\t{spec}\t{count}\t{job.task_offset}\t{job.log}\t{data_jobs}"
        )
    out.extend("\t".join(("task", str(n), *rest)) for n, *rest in tasks)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
