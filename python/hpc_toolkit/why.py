"""`hpc why JOB`: why a job waits, in words, and what to change.

Reads what Slurm itself says (`scontrol show job -o`, and for some reasons the partition,
the reservations or the QOS) and turns its pending reason into a sentence and an action.
A reason this module does not know is shown as Slurm words it. Pure functions of the
recorded text (tests feed them recorded output); `explain_job` is the one that calls Slurm.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from hpc_toolkit.slurm import Runner, run_command, seconds

_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=")
ENDED = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
     "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
)  # fmt: skip
RUNNING = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED", "SIGNALING"})
_UNSET = {"", "(null)", "None", "N/A", "Unknown"}


def parse_records(text: str) -> list[dict[str, str]]:
    """`scontrol show ... -o` output: one dict per line. A value may hold spaces (a job
    name, a reason): it runs up to the next ` Key=`."""
    out = []
    for line in text.splitlines():
        marks = list(_KEY.finditer(line))
        if not marks:
            continue
        rec = {}
        for i, m in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
            rec[m.group(1)] = line[m.end() : end].strip()
        out.append(rec)
    return out


def _set(value: str | None) -> bool:
    return value is not None and value not in _UNSET


def _when(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _span(secs: float) -> str:
    """A duration as --time takes it (D-HH:MM:SS or HH:MM:SS)."""
    s = max(int(secs), 0)
    days, s = divmod(s, 86400)
    hms = f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{days}-{hms}" if days else hms


@dataclass
class Context:
    """What else Slurm said, for the reasons that need it (empty when not asked)."""

    partitions: dict[str, dict[str, str]] = field(default_factory=dict)
    reservations: list[dict[str, str]] = field(default_factory=list)
    up_partitions: list[str] = field(default_factory=list)
    now: datetime = field(default_factory=datetime.now)


def reason_of(job: dict[str, str]) -> str:
    """The pending reason as squeue shows it (scontrol writes its spaces as `_`)."""
    return job.get("Reason", "None").replace("_", " ").strip()


def _other_partitions(ctx: Context, own: str) -> str:
    others = [p for p in ctx.up_partitions if p not in own.split(",")]
    return f" (up now: {', '.join(others)})" if others else ""


def _reserved_room(job: dict[str, str], ctx: Context) -> list[str]:
    """For a job held back by a reservation (a maintenance), which one, and the longest
    --time that ends before it starts."""
    limit = seconds(job.get("TimeLimit", ""))
    out = []
    for res in ctx.reservations:
        start, end = _when(res.get("StartTime", "")), _when(res.get("EndTime", ""))
        if start is None or end is None or end <= ctx.now:
            continue
        flags = res.get("Flags", "")
        kind = "maintenance" if "MAINT" in flags.split(",") else "reservation"
        name = res.get("ReservationName", "?")
        nodes = res.get("Nodes", "?")
        if start <= ctx.now:
            out.append(
                f"  {kind} {name} holds {nodes} now, until {end:%Y-%m-%d %H:%M}: the job can "
                f"start on those nodes after it ends"
            )
            continue
        room = (start - ctx.now).total_seconds()
        line = f"  {kind} {name} takes {nodes} from {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M}"
        if limit > room:
            line += (
                f"; the job's --time ({_span(limit)}) runs into it: with --time {_span(room - 60)}"
                f" or less it can start before it (resubmit, or "
                f"`scontrol update JobId={job.get('JobId', 'JOB')} TimeLimit={_span(room - 60)}`),"
                f" else it waits until {end:%Y-%m-%d %H:%M}"
            )
        out.append(line)
    return out


def _limit_words(reason: str) -> str:
    """QOSMaxWallDurationPerJobLimit -> 'max wall duration per job' (the limit's own name)."""
    core = re.sub(r"^(QOS|Assoc)(Grp|Max)?", "", reason)
    core = re.sub(r"(Limit|MinutesLimit)$", "", core)
    words = re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", core).lower()
    return words.replace("cpu", "CPU").replace("mem", "memory").replace("gres", "GPUs/gres").strip()


def explain_pending(job: dict[str, str], ctx: Context) -> list[str]:
    """A pending job's reason in words: what it means, then what to change."""
    reason = reason_of(job)
    head = reason.split(",")[0].strip()
    part = job.get("Partition", "?")
    jid = job.get("JobId", "JOB")
    p = ctx.partitions.get(part.split(",")[0], {})
    start = job.get("StartTime", "")
    est = (
        f" Slurm's estimate of its start: {start}."
        if _set(start) and (_when(start) or ctx.now) > ctx.now
        else ""
    )
    said = f"Slurm says: {reason}."
    if head in ("None", ""):
        return [f"{said} The scheduler has not looked at it yet: ask again in a minute."]
    if head == "Priority":
        return [
            f"{said} Jobs of higher priority are ahead of it in partition {part}; it starts "
            f"when they have.{est}",
            "  To start sooner: ask for less (--time, --gpus, --mem, --num-nodes), since "
            "backfill starts small short jobs in gaps; `sprio -j " + jid + "` shows its "
            "priority, `sshare -U` your fair share (lower after much recent use).",
        ]
    if head == "Resources":
        return [
            f"{said} It is next in line, but the nodes it needs are busy; it starts when they "
            f"free up.{est}",
            f"  It asked for {job.get('TRES', '?')} on {job.get('NumNodes', '?')} node(s) for "
            f"{job.get('TimeLimit', '?')}: less of any of these, or another partition"
            f"{_other_partitions(ctx, part)}, can start it sooner.",
        ]
    if head in ("PartitionDown", "PartitionInactive"):
        state = p.get("State", "DOWN" if head == "PartitionDown" else "INACTIVE")
        return [
            f"{said} Partition {part} is {state}: the admins closed it (maintenance, an "
            "outage) and no job starts there until they set it UP again.",
            f"  Wait, or cancel and resubmit with --partition NAME{_other_partitions(ctx, part)}"
            f"; `sinfo -s` lists the partitions.",
        ]
    if head == "PartitionTimeLimit":
        return [
            f"{said} Its --time ({job.get('TimeLimit', '?')}) is above partition {part}'s "
            f"MaxTime ({p.get('MaxTime', '?')}): it will never start there.",
            f"  Cancel it and resubmit with --time {p.get('MaxTime', 'within MaxTime')} or less,"
            " or in a partition that allows longer jobs.",
        ]
    if head == "PartitionNodeLimit":
        return [
            f"{said} It asks for more nodes ({job.get('NumNodes', '?')}) than partition {part} "
            f"allows (MinNodes {p.get('MinNodes', '?')}, MaxNodes {p.get('MaxNodes', '?')}) or "
            "than it has up.",
            "  Cancel it and resubmit with fewer nodes (--num-nodes), or in another partition.",
        ]
    if head == "Dependency":
        return [
            f"{said} It waits for another job: {job.get('Dependency', '?')}. "
            "It becomes eligible when that one ends as asked.",
            "  `squeue -j JOBID` shows the job it waits for; with --setup-venv that is the "
            "venv's job.",
        ]
    if head == "DependencyNeverSatisfied":
        return [
            f"{said} The job it waited for did not end as required ({job.get('Dependency', '?')}"
            "): this job will never start.",
            f"  Cancel it (`scancel {jid}`), fix what made the other job fail (`hpc logs` of "
            "it), and submit again (`--rerun JOB` resubmits what did not complete).",
        ]
    if head == "BeginTime":
        return [
            f"{said} It may not start before {job.get('EligibleTime', '?')} (--begin, or a "
            "requeued job's short wait before it may run again).",
            "  Nothing to do: it becomes eligible then.",
        ]
    if head in ("JobHeldUser", "JobHeldAdmin"):
        who = "you (or your submission: --hold)" if head == "JobHeldUser" else "an admin"
        act = f"`scontrol release {jid}`" if head == "JobHeldUser" else "ask your admins why"
        return [f"{said} It is held by {who}: it never starts while held.", f"  Release it: {act}."]
    if head == "ReqNodeNotAvail" or head.startswith("Reserved") or head == "ReqNodeNotAvail":
        out = [
            f"{said} A node it could run on is down, drained or reserved (a maintenance), so "
            "it cannot start now."
        ]
        room = _reserved_room(job, ctx)
        out.extend(room or ["  `sinfo -R` shows why nodes are out, `scontrol show res` "
                            "the reservations."])  # fmt: skip
        if not room:
            out.append("  A shorter --time that ends before a maintenance can start it now.")
        return out
    if head in ("Reservation", "ReservationDeleted"):
        return [
            f"{said} It waits for its reservation ({job.get('Reservation', '?')}) to start, "
            "or the reservation is gone.",
            "  `scontrol show res` shows it; without --reservation it runs like any job.",
        ]
    if head.startswith("QOS") and head != "QOSNotAllowed":
        lim = _limit_words(head)
        qos = job.get("QOS", "?")
        if head.startswith("QOSGrp"):
            text = (
                f"The QOS {qos} has a limit on its {lim} for all its jobs together, and the jobs "
                "running under it reach it: this one starts when some of them end."
            )
        else:
            text = (
                f"The QOS {qos} allows at most so much {lim}; this job, with your other jobs, "
                "is over it: it starts when your running jobs end, or never if it alone is over."
            )
        return [
            f"{said} {text}",
            f"  `sacctmgr show qos {qos} format=Name,MaxWall,MaxTRESPU,MaxJobsPU,GrpTRES` shows "
            "the limits: ask for less (--time, --gpus, --cpus, fewer tasks at once with "
            "--max-parallel), or another QOS (--sbatch-option=--qos=NAME).",
        ]
    if head.startswith("Assoc"):
        lim = _limit_words(head)
        group = "your account's" if "Grp" in head else "your"
        return [
            f"{said} {group.capitalize()} limit on {lim} (account {job.get('Account', '?')}) is "
            "reached by the jobs running now: this one starts when some of them end (or never, "
            "if it alone is over the limit).",
            "  `sacctmgr show assoc user=$USER format=Account,Partition,MaxJobs,MaxTRES,GrpTRES,"
            "MaxWall` shows the limits; ask for less, use --max-parallel, or another account "
            "(--account).",
        ]
    if head in ("InvalidAccount", "InvalidQOS", "QOSNotAllowed", "AccountNotAllowed"):
        return [
            f"{said} Account {job.get('Account', '?')} / QOS {job.get('QOS', '?')} may not run "
            f"in partition {part}: it will never start.",
            "  Cancel it and resubmit with an --account (and QOS) you belong to: "
            "`sacctmgr show assoc user=$USER`.",
        ]
    if head == "BadConstraints":
        return [
            f"{said} No node has what it asks for together ({job.get('Features', '')} "
            f"{job.get('TRES', '')}): it will never start.",
            "  Cancel it and resubmit with a request a node can meet (`sinfo -o '%N %c %m %G'`).",
        ]
    if head in ("NodeDown", "launch failed requeued held"):
        return [
            f"{said} A node it was given failed; Slurm put the job back in the queue.",
            f"  If it stays held: `scontrol release {jid}`.",
        ]
    return [
        f"{said} (Slurm's own words; `man squeue`, JOB REASON CODES, explains each.)",
        f"  `scontrol show job {jid}` shows everything it asked for.",
    ]


def explain_record(job: dict[str, str], ctx: Context) -> list[str]:
    """One job (or array task) of `scontrol show job -o`, in words."""
    jid = job.get("JobId", "?")
    array = job.get("ArrayJobId")
    tasks = job.get("ArrayTaskId")
    name = f"{array}_{tasks}" if _set(array) and _set(tasks) else jid
    state = job.get("JobState", "UNKNOWN")
    base = array if _set(array) else jid
    head = f"Job {name} ({job.get('JobName', '?')}) is {state}"
    if state == "PENDING":
        return [f"{head} in partition {job.get('Partition', '?')}.", *explain_pending(job, ctx)]
    if state in RUNNING:
        return [
            f"{head} on {job.get('NodeList', '?')} since {job.get('StartTime', '?')} "
            f"(run time {job.get('RunTime', '?')} of {job.get('TimeLimit', '?')}).",
            f"  It does not wait: `hpc status {base}` for its tasks, `hpc logs {name} -f` "
            "to follow its log.",
        ]
    if state in ENDED:
        return [
            f"{head} (exit {job.get('ExitCode', '?')}, ended {job.get('EndTime', '?')}).",
            f"  It does not wait: `hpc status {base}` shows how each task ended, "
            f"`hpc logs {base}` its log (`--failed`: the failed tasks' tails).",
        ]
    return [f"{head}: Slurm says {reason_of(job)}.", f"  `hpc status {base}`, `hpc logs {name}`."]


def _group(records: list[dict[str, str]]) -> list[tuple[dict[str, str], list[str]]]:
    """Records with the same state and reason together (an array's tasks): the first of
    each, and the names of all."""
    seen: dict[tuple[str, str], tuple[dict[str, str], list[str]]] = {}
    for rec in records:
        key = (rec.get("JobState", ""), rec.get("Reason", ""))
        task = rec.get("ArrayTaskId")
        label = f"{rec.get('ArrayJobId')}_{task}" if _set(task) else rec.get("JobId", "?")
        seen.setdefault(key, (rec, []))[1].append(label)
    return list(seen.values())


def explain(records: list[dict[str, str]], ctx: Context) -> list[str]:
    out: list[str] = []
    for rec, labels in _group(records):
        lines = explain_record(rec, ctx)
        if len(labels) > 1:
            more = " ..." if len(labels) > 6 else ""
            lines[0] = f"{len(labels)} tasks ({', '.join(labels[:6])}{more}): {lines[0]}"
        out.extend(lines)
    return out


JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")


class WhyError(RuntimeError):
    """Slurm could not be asked, or does not know the job."""


def _ask(run: Runner, argv: list[str]) -> str:
    done = run(argv)
    if isinstance(done, str):
        raise WhyError(done)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()
        if "Invalid job id" in said:
            raise WhyError(
                f"Slurm no longer knows job {argv[-1]} (it ended more than MinJobAge ago, or "
                f"never was): `hpc status {argv[-1]}` and `hpc logs {argv[-1]}` show how it ended"
            )
        raise WhyError(f"{' '.join(argv[:3])} failed (exit {done.returncode}): {said}")
    return done.stdout


def explain_job(job_id: str, run: Runner = run_command, now: datetime | None = None) -> list[str]:
    """Ask Slurm about `job_id` and explain it; only what its reason needs is asked."""
    records = parse_records(_ask(run, ["scontrol", "show", "job", "-o", job_id]))
    if "_" in job_id:
        records = [r for r in records if f"{r.get('ArrayJobId')}_{r.get('ArrayTaskId')}" ==
                   job_id] or records  # fmt: skip
    if not records:
        raise WhyError(f"scontrol said nothing about job {job_id}")
    ctx = Context(now=now or datetime.now())
    heads = {reason_of(r).split(",")[0] for r in records if r.get("JobState") == "PENDING"}
    if heads & {"PartitionDown", "PartitionInactive", "PartitionTimeLimit", "PartitionNodeLimit",
                "Resources"}:  # fmt: skip
        for rec in parse_records(_try(run, ["scontrol", "show", "partition", "-o"])):
            ctx.partitions[rec.get("PartitionName", "")] = rec
        ctx.up_partitions = [n for n, p in ctx.partitions.items() if p.get("State") == "UP"]
    if any(h.startswith(("ReqNodeNotAvail", "Reserved")) for h in heads):
        ctx.reservations = parse_records(_try(run, ["scontrol", "show", "reservation", "-o"]))
    return explain(records, ctx)


def _try(run: Runner, argv: Sequence[str]) -> str:
    """Extra context: its absence only makes the explanation shorter."""
    done = run(list(argv))
    return "" if isinstance(done, str) or done.returncode != 0 else done.stdout
