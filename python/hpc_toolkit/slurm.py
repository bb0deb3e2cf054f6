"""Job and task states from Slurm, from whichever source still knows them.

Sources, in order, each called ONCE for all the jobs shown (never once per job):
  1. `sacct` (slurmdbd accounting: knows every job, pending to long finished);
  2. the job completion log (`JobCompType=jobcomp/filetxt`: the JobCompLoc file read
     directly, else `sacct -c`), which knows finished jobs on clusters without slurmdbd;
  3. `squeue -t all`, which knows live jobs and those finished less than MinJobAge ago;
  4. `scontrol show job`, the same memory as squeue but with exit codes.
A source that fails or leaves jobs unknown hands the rest on to the next one. Every
command is called by name through PATH, so tests put stubs first on PATH.

Slurm hands job numbers out again (a cluster started from a fresh state, two clusters that
share $SCRATCH, numbers that wrapped): a row counts as a submission's job only when its
name and its submit time fit what the ledger recorded (JobRef), never by number alone.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

TIMEOUT_S = 60.0  # a hung slurmdbd should not hang `hpc status` for ever
# The first five columns are the task's; JobName and Submit say whose job it is (JobRef).
SACCT_FIELDS = "JobID,State,ExitCode,Elapsed,NodeList,JobName,Submit"
SQUEUE_FORMAT = "%i|%T|-|%M|%N|%j|%V"
EFFICIENCY_FIELDS = (
    "JobID,State,ElapsedRaw,TotalCPU,AllocCPUS,ReqMem,MaxRSS,TimelimitRaw,NNodes,"
    "AllocTRES,TRESUsageInAve"
)
FINISHED = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
     "PREEMPTED", "BOOT_FAIL", "DEADLINE", "REVOKED"}
)  # fmt: skip

# 123, 123_4, 123_[0-9%4], 123+0 (heterogeneous jobs); steps (123.batch) do not match.
_JOB_ID = re.compile(
    r"(?P<job>[0-9]+)(?:_(?:(?P<index>[0-9]+)|\[(?P<range>[^\]]*)\]))?(?:\+[0-9]+)?"
)

Key = tuple[str, "int | None"]  # (the job's key: its id, or JobRef's key; array index or None)
Runner = Callable[[list[str]], "subprocess.CompletedProcess[str] | str"]


def _epoch(text: str) -> float | None:
    """Slurm's time stamps (`2026-11-28T12:15:20`, local time); None for Unknown, empty."""
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class JobRef:
    """Which of the jobs Slurm numbered `job_id` is the one a submission made: the one of
    its name, submitted in [not_before, before) (epoch seconds; None: no bound). A row that
    does not say its name or submit time (an older source) is taken. `cluster`: where it
    was submitted ("" when not known); on another cluster its number is another job's, and
    no source is asked."""

    job_id: str
    name: str = ""
    not_before: float | None = None
    before: float | None = None
    cluster: str = ""

    def accepts(self, name: str, submitted: str) -> bool:
        if self.name and name and name != self.name:
            return False
        t = _epoch(submitted) if submitted else None
        if t is None:
            return True
        if self.not_before is not None and t < self.not_before:
            return False
        return self.before is None or t < self.before


_Index = dict[str, list[tuple[str, JobRef]]]


def _index(wanted: Iterable[str] | Mapping[str, JobRef]) -> _Index:
    """job number -> [(key, JobRef)]: plain job ids are their own keys and take any row."""
    out: _Index = {}
    if isinstance(wanted, Mapping):
        for key, ref in wanted.items():
            out.setdefault(ref.job_id, []).append((key, ref))
        return out
    for job in wanted:
        out.setdefault(job, []).append((job, JobRef(job)))
    return out


@dataclass
class TaskState:
    """What one source said about one task (or a whole non-array job)."""

    state: str
    exit_code: str = "-"
    elapsed: str = "-"
    node: str = "-"


@dataclass
class TaskQuery:
    """Per task states; `sources` lists the sources that answered, `notes` what failed."""

    tasks: dict[Key, TaskState] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, Counter[str]]:
        out: dict[str, Counter[str]] = {}
        for (job, _index), task in self.tasks.items():
            out.setdefault(job, Counter())[task.state] += 1
        return out

    def known_jobs(self) -> set[str]:
        return {job for job, _index in self.tasks}

    def state_of(self, job: str, index: int | None) -> TaskState | None:
        """Task `index` of `job` (None: a plain job). An array job known by its job id
        alone (whole in the queue; cancelled before accounting split it into its tasks,
        as sacct then shows it) gives every task its state."""
        found = self.tasks.get((job, index))
        if found is None and index is not None:
            found = self.tasks.get((job, None))
        return found


def expand_range(spec: str) -> list[int]:
    """The indices an array range names: `0-3%2` is 0..3, `1,3,5-7`, `0-15:4` is 0,4,8,12."""
    out: list[int] = []
    for part in spec.split("%", 1)[0].split(","):
        m = re.fullmatch(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?", part.strip())
        if m is None:
            continue
        first = int(m[1])
        last = int(m[2]) if m[2] else first
        out.extend(range(first, last + 1, max(int(m[3]) if m[3] else 1, 1)))
    return out


def _accepting(
    refs: list[tuple[str, JobRef]], name: str, submitted: str, rejected: set[str] | None
) -> list[str]:
    """The keys whose JobRef takes a row of this name and submit time; the others' keys
    go into `rejected` (a row of their number that is another job's)."""
    keys = []
    for key, ref in refs:
        if ref.accepts(name, submitted):
            keys.append(key)
        elif rejected is not None:
            rejected.add(key)
    return keys


def _keys(
    job_col: str,
    wanted: _Index,
    name: str = "",
    submitted: str = "",
    rejected: set[str] | None = None,
) -> list[Key]:
    m = _JOB_ID.fullmatch(job_col.strip())
    if m is None or m["job"] not in wanted:
        return []
    keys = _accepting(wanted[m["job"]], name, submitted, rejected)
    if m["index"] is not None:
        return [(k, int(m["index"])) for k in keys]
    if m["range"] is not None:
        return [(k, i) for k in keys for i in expand_range(m["range"])]
    return [(k, None) for k in keys]


def _rows(text: str, min_cols: int) -> Iterator[list[str]]:
    """The `|`-separated rows of sacct or squeue output that have at least min_cols columns."""
    for line in text.splitlines():
        cols = line.split("|")
        if len(cols) >= min_cols:
            yield cols


def parse_rows(
    text: str, wanted: Iterable[str] | Mapping[str, JobRef], rejected: set[str] | None = None
) -> dict[Key, TaskState]:
    """`JobID|State|ExitCode|Elapsed|NodeList[|JobName|Submit]` rows (sacct, squeue) of the
    wanted jobs; the last row of a task wins (sacct -D lists a requeued job's runs in order)."""
    wanted_ids = _index(wanted)
    out: dict[Key, TaskState] = {}
    for cols in _rows(text, 2):
        words = cols[1].split()
        state = words[0].rstrip("+") if words else "UNKNOWN"
        extra = [c.strip() or "-" for c in cols[2:5]] + ["-"] * (5 - max(len(cols), 2))
        # Another job's name may hold a '|': the submit time is the last column.
        name, submitted = ("|".join(cols[5:-1]), cols[-1]) if len(cols) >= 7 else ("", "")
        for key in _keys(cols[0], wanted_ids, name, submitted, rejected):
            out[key] = TaskState(state, extra[0], extra[1], _node(extra[2]))
    return out


def _node(text: str) -> str:
    return "-" if text in ("", "None assigned", "(null)") else text


def _hms(seconds: float) -> str:
    s = max(int(seconds), 0)
    days, s = divmod(s, 86400)
    text = f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{days}-{text}" if days else text


def _pairs(line: str) -> dict[str, str]:
    return dict(re.findall(r"(?:^|\s)([A-Za-z/:]+)=(\S*)", line))


def _key_from_pairs(
    kv: dict[str, str], wanted: _Index, name_key: str, rejected: set[str] | None = None
) -> list[Key]:
    array_job, task = kv.get("ArrayJobId", ""), kv.get("ArrayTaskId", "")
    job = kv.get("JobId", "")
    indices: list[int | None] = [None]
    if array_job and array_job != "4294967294" and task and task != "4294967294":
        job = array_job
        indices = [int(task)] if task.isdigit() else list(expand_range(task))
    if job not in wanted:
        return []
    name, submitted = kv.get(name_key, ""), kv.get("SubmitTime", "")
    keys = _accepting(wanted[job], name, submitted, rejected)
    return [(key, i) for key in keys for i in indices]


def _elapsed(start: str, end: str) -> str:
    try:
        return _hms((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())
    except ValueError:
        return "-"


def parse_jobcomp(
    lines: Iterable[str],
    wanted: Iterable[str] | Mapping[str, JobRef],
    rejected: set[str] | None = None,
) -> dict[Key, TaskState]:
    """jobcomp/filetxt lines (`JobId=5 ... JobState=FAILED ... ExitCode=1:0`); the last wins."""
    wanted_ids = _index(wanted)
    out: dict[Key, TaskState] = {}
    for line in lines:
        if "JobState=" not in line:
            continue
        kv = _pairs(line)
        state = kv.get("JobState", "UNKNOWN")
        ts = TaskState(
            state,
            kv.get("ExitCode", "-") or "-",
            _elapsed(kv.get("StartTime", ""), kv.get("EndTime", "")),
            _node(kv.get("NodeList", "")),
        )
        for key in _key_from_pairs(kv, wanted_ids, "Name", rejected):
            out[key] = ts
    return out


def parse_scontrol(
    text: str, wanted: Iterable[str] | Mapping[str, JobRef], rejected: set[str] | None = None
) -> dict[Key, TaskState]:
    """`scontrol show job -o` (one job per line)."""
    wanted_ids = _index(wanted)
    out: dict[Key, TaskState] = {}
    for line in text.splitlines():
        kv = _pairs(line)
        ts = TaskState(
            kv.get("JobState", "UNKNOWN"),
            kv.get("ExitCode", "-") or "-",
            kv.get("RunTime", "-") or "-",
            _node(kv.get("NodeList", "")),
        )
        for key in _key_from_pairs(kv, wanted_ids, "JobName", rejected):
            out[key] = ts
    return out


# A wait longer than this is said on stderr (progress), as PROGRESS_PROG: message.
PROGRESS_AFTER_S = 2.0
PROGRESS_PROG = "hpc"


@contextmanager
def progress(message: str, after: float | None = None) -> Iterator[None]:
    """`message` on stderr if the block still runs `after` seconds (PROGRESS_AFTER_S) on:
    a wait that is short on a quiet cluster and long on a busy one is never silent."""
    timer = threading.Timer(
        PROGRESS_AFTER_S if after is None else after,
        lambda: print(f"{PROGRESS_PROG}: {message}", file=sys.stderr, flush=True),
    )
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def run_command(argv: list[str]) -> subprocess.CompletedProcess[str] | str:
    """The finished command, or why it could not be run at all."""
    try:
        with progress(f"waiting for {argv[0]} (Slurm is slow to answer; at most {TIMEOUT_S:g} s)"):
            return subprocess.run(
                argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
            )
    except FileNotFoundError:
        return f"{argv[0]} is not on PATH"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{argv[0]} could not be run ({exc})"


def _failure(done: subprocess.CompletedProcess[str]) -> str:
    said = done.stderr.strip().splitlines()
    name = " ".join(str(a) for a in done.args[:2]) if done.args[1:2] == ["-c"] else done.args[0]
    return f"{name} failed (exit {done.returncode}{': ' + said[-1] if said else ''})"


def slurm_conf_settings(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Settings of slurm.conf ($SLURM_CONF, else /etc/slurm/slurm.conf); {} if unreadable.

    Read as a file, not through `scontrol show config`, so that finding the job completion
    log costs no call to slurmctld.
    """
    env = os.environ if environ is None else environ
    path = Path(env.get("SLURM_CONF") or "/etc/slurm/slurm.conf")
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"\s*([A-Za-z]+)\s*=\s*(\S+)", line.split("#", 1)[0])
        if m:
            out[m[1].lower()] = m[2]
    return out


def _from_jobcomp(
    ids: Mapping[str, JobRef], run: Runner, q: TaskQuery, rejected: set[str]
) -> dict[Key, TaskState]:
    conf = slurm_conf_settings()
    comp_type = conf.get("jobcomptype", "jobcomp/none")
    if comp_type == "jobcomp/none":
        return {}
    loc = conf.get("jobcomploc", "")
    if comp_type == "jobcomp/filetxt" and loc:
        try:
            with open(loc, encoding="utf-8", errors="replace") as fh:
                found = parse_jobcomp(fh, ids, rejected)
            q.sources.append(f"jobcomp file {loc}")
            return found
        except OSError as exc:
            q.notes.append(f"cannot read the job completion log {loc} ({exc.strerror})")
    done = run(["sacct", "-c", "-P", "-n", "-o", SACCT_FIELDS])
    if isinstance(done, str) or done.returncode != 0:
        q.notes.append(done if isinstance(done, str) else _failure(done))
        return {}
    q.sources.append("sacct -c")
    return parse_rows(done.stdout, ids, rejected)


def query_tasks(
    job_ids: Sequence[str] | Mapping[str, JobRef],
    run: Runner = run_command,
    expected: Mapping[str, Sequence[int | None]] | None = None,
) -> TaskQuery:
    """States per task of `job_ids` (or of JobRefs by key: the rows their submissions made),
    from the first sources that know them (module doc). `expected`: the array indices each
    key should have; a key with any of them unknown is asked of the next source too. While
    an array runs, slurmdbd lags: sacct has the pending range and the tasks it was told
    of, not the tasks that started or ended in the last seconds, which squeue still knows."""
    q = TaskQuery()
    if not job_ids:
        return q
    if isinstance(job_ids, Mapping):
        refs = dict(job_ids)
    else:
        refs = {i: JobRef(i) for i in dict.fromkeys(job_ids)}
    here = slurm_conf_settings().get("clustername", "")
    away = [r for r in refs.values() if here and r.cluster and r.cluster != here]
    if away:
        q.notes.append(
            f"job(s) {', '.join(r.job_id for r in away[:5])}{' ...' if len(away) > 5 else ''} "
            f"were submitted on cluster {away[0].cluster}, not this one ({here}): their numbers "
            "here are other jobs', so their states are not asked (run hpc status there)"
        )
    refs = {k: r for k, r in refs.items() if r not in away}
    if not refs:
        return q
    keys = list(refs)
    rejected: set[str] = set()  # keys that met a row of their number: another job's

    def unknown() -> dict[str, JobRef]:
        known = q.known_jobs()
        out = {k: refs[k] for k in keys if k not in known}
        for k, indices in (expected or {}).items():
            if k in refs and k not in out and any(q.state_of(k, i) is None for i in indices):
                out[k] = refs[k]
        return out

    def numbers(wanted: Mapping[str, JobRef]) -> str:
        return ",".join(dict.fromkeys(r.job_id for r in wanted.values()))

    def take(found: dict[Key, TaskState], source: str | None, fill_only: bool = False) -> None:
        added = False
        for key, ts in found.items():
            old = q.tasks.get(key)
            if old is None and not fill_only:
                q.tasks[key] = ts
                added = True
            elif old is not None and old.exit_code == "-" and ts.exit_code != "-":
                old.exit_code = ts.exit_code
                added = True
        if added and source and source not in q.sources:
            q.sources.append(source)

    # -D: every job sacct knows by each number (without it, only the latest one).
    sacct = run(["sacct", "-D", "-X", "-P", "-n", "-o", SACCT_FIELDS, "-j", numbers(refs)])
    if not isinstance(sacct, str) and sacct.returncode == 0:
        take(parse_rows(sacct.stdout, refs, rejected), "sacct")
        q.sources[:] = ["sacct"]
        if not unknown():
            return q
    else:
        q.notes.append(sacct if isinstance(sacct, str) else _failure(sacct))
    take(_from_jobcomp(unknown(), run, q, rejected), None)
    missing = unknown()
    live_without_code = any(t.exit_code == "-" for t in q.tasks.values())
    if not missing and not live_without_code:
        return q
    squeue = run(["squeue", "-t", "all", "-h", "-o", SQUEUE_FORMAT])
    if isinstance(squeue, str) or squeue.returncode != 0:
        q.notes.append(squeue if isinstance(squeue, str) else _failure(squeue))
    else:
        take(parse_rows(squeue.stdout, missing, rejected), "squeue -t all")
    # squeue has no exit codes; scontrol has them (and is the last resort for the states).
    if unknown() or any(t.exit_code == "-" and t.state in FINISHED for t in q.tasks.values()):
        sc = run(["scontrol", "-o", "show", "job"])
        if isinstance(sc, str) or sc.returncode != 0:
            q.notes.append(sc if isinstance(sc, str) else _failure(sc))
        else:
            found = parse_scontrol(sc.stdout, refs, rejected)
            take(found, "scontrol show job", fill_only=True)
            take(found, "scontrol show job")
    gone = unknown()
    reused = list(dict.fromkeys(r.job_id for k, r in gone.items() if k in rejected))
    left = list(dict.fromkeys(r.job_id for k, r in gone.items() if k not in rejected))
    if reused:
        q.notes.append(
            f"job number(s) {', '.join(reused[:5])}{' ...' if len(reused) > 5 else ''} "
            "belong to another job now (Slurm handed the number out again): their own state "
            "is not known any more, shown UNKNOWN (the ATTEMPTS column is the job's own record)"
        )
    if left:
        q.notes.append(
            f"no source knows job(s) {', '.join(left[:5])}{' ...' if len(left) > 5 else ''}"
        )
    return q


# --- efficiency -----------------------------------------------------------------------


@dataclass
class Usage:
    """Resource use of one task from sacct (the job line plus its steps)."""

    state: str = "-"
    elapsed_s: int = 0
    total_cpu_s: float = 0.0
    cpus: int = 0
    req_mem_mb: float | None = None
    max_rss_mb: float = 0.0
    limit_s: int | None = None
    gpu_util: str | None = None


def seconds(text: str) -> float:
    """sacct durations: `[D-]HH:MM:SS[.mmm]`, `MM:SS.mmm`; 0 when empty."""
    text = text.strip()
    if not text or text in ("INVALID", "UNLIMITED", "Partition_Limit"):
        return 0.0
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
    parts = [float(p) for p in text.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0.0)
    return days * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


_UNITS = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 * 1024}


def megabytes(text: str) -> float | None:
    """`4000M`, `16Gn`, `2Gc`, `123456K`, bytes without a unit; None when empty."""
    m = re.fullmatch(r"([0-9.]+)([KMGT]?)[nc]?", text.strip())
    if m is None:
        return None
    value = float(m[1])
    return value * _UNITS[m[2]] if m[2] else value / (1024 * 1024)


def parse_usage(text: str, wanted: Iterable[str]) -> dict[Key, Usage]:
    """sacct rows in EFFICIENCY_FIELDS order, steps folded into their task."""
    wanted_ids = _index(wanted)
    out: dict[Key, Usage] = {}
    for cols in _rows(text, 11):
        job_col, _, step = cols[0].partition(".")
        keys = _keys(job_col, wanted_ids)
        if len(keys) != 1:
            continue
        u = out.setdefault(keys[0], Usage())
        rss = megabytes(cols[6]) or 0.0
        u.max_rss_mb = max(u.max_rss_mb, rss)
        gpu = re.search(r"gres/gpuutil=([0-9.]+)", cols[10])
        if gpu:
            u.gpu_util = f"{gpu[1]}%"
        if step:
            continue
        u.state = (cols[1].split() or ["-"])[0]
        u.elapsed_s = int(cols[2] or 0)
        u.total_cpu_s = seconds(cols[3])
        u.cpus = int(cols[4] or 0)
        req = megabytes(cols[5])
        if req is not None and cols[5].strip().endswith("c"):
            req *= max(u.cpus, 1)  # per CPU (older Slurm's suffix)
        u.req_mem_mb = req
        u.limit_s = int(cols[7]) * 60 if cols[7].isdigit() else None
    return out


def query_usage(job_ids: Sequence[str], run: Runner = run_command) -> dict[Key, Usage] | str:
    """Usage per task from one sacct call, or why it is not available."""
    if not job_ids:
        return {}
    done = run(["sacct", "-P", "-n", "-o", EFFICIENCY_FIELDS, "-j", ",".join(job_ids)])
    if isinstance(done, str):
        return done
    if done.returncode != 0:
        return _failure(done)
    return parse_usage(done.stdout, job_ids)


def advice(u: Usage) -> str:
    """One line where a request is far off what the task used; "" when it looks right."""
    tips: list[str] = []
    if u.state in ("PENDING", "RUNNING", "-") or u.elapsed_s < 1:
        return ""
    if u.cpus > 1 and u.elapsed_s >= 60:
        used = u.total_cpu_s / u.elapsed_s
        if used < u.cpus / 2:
            want = max(1, int(used + 0.999))
            tips.append(f"used {used:.1f} of {u.cpus} CPUs: ask for --cpus {want}")
    if u.req_mem_mb and u.max_rss_mb and u.max_rss_mb < u.req_mem_mb / 4:
        want_mb = max(u.max_rss_mb * 1.5, 256)
        mem = f"{want_mb / 1024:.0f}G" if want_mb >= 1024 else f"{want_mb:.0f}M"
        tips.append(f"peak memory {u.max_rss_mb:.0f}M of {u.req_mem_mb:.0f}M: ask for --mem {mem}")
    if u.state == "OUT_OF_MEMORY" and u.req_mem_mb:
        tips.append(f"ran out of memory: ask for more than --mem {u.req_mem_mb:.0f}M")
    if u.state == "TIMEOUT":
        tips.append("hit its time limit: ask for more --time, or checkpoint and requeue")
    elif u.limit_s and u.elapsed_s >= 300 and u.elapsed_s < u.limit_s / 4:
        tips.append(
            f"used {_hms(u.elapsed_s)} of {_hms(u.limit_s)}: a shorter --time starts sooner"
        )
    return "; ".join(tips)


def efficiency_cells(u: Usage) -> list[str]:
    """CPU EFF, MEM PEAK/REQ, TIME USED/LIMIT, GPU UTIL for a table row."""
    cpu = f"{100 * u.total_cpu_s / (u.elapsed_s * u.cpus):.0f}%" if u.elapsed_s and u.cpus else "-"
    req = f"{u.req_mem_mb:.0f}M" if u.req_mem_mb else "?"
    mem = f"{u.max_rss_mb:.0f}M/{req}"
    limit = _hms(u.limit_s) if u.limit_s else "none"
    return [cpu, mem, f"{_hms(u.elapsed_s)}/{limit}", u.gpu_util or "not available"]
