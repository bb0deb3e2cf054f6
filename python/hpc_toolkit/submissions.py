"""The submissions ledger that job_submitter.sh appends to, and where to find it.

`$SCRATCH/<project>/hpc_outputs/jobs/submissions.tsv` holds one tab-separated line per
Slurm job (hpc_files/lib/ledger.sh writes all lines of one submission in one append):
`submitted_at job_id exp_name num_tasks script submission_id kind task_offset log`, and
then `rerun_of` (the submission id a rerun, `job_submitter.sh --rerun`, reruns; empty for
others), `cluster` (slurm.conf's ClusterName; empty when unknown) and `user`. Lines from
older versions have the first five, nine or ten fields. The ledger is only ever
appended to by a shell, so a torn or hand-edited line is possible: it is skipped with a
warning, never fatal, because the other lines are still worth showing.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path

from hpc_toolkit.paths import (
    HOMES,
    LEDGER_NAME,
    OUTPUTS,
    ledger_file,
    outputs_dir,
    plan_of,
    read_manifest,
)
from hpc_toolkit.slurm import JobRef, expand_range

LEDGER = Path(OUTPUTS, HOMES, LEDGER_NAME)
# EXP-YYYYmmdd-HHMMSS-PID as ledger.sh writes it (the experiment name's characters).
SUBMISSION_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]{0,200}")
_ARRAY_LINE = re.compile(r'#SBATCH --array="?([0-9][0-9,\-:]*)(?:%([0-9]+))?"?\s*$')
_EXPORT_LINE = re.compile(r"export ([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
# The most tasks one ledger line (one sbatch call) may count. Slurm caps an array at
# MaxArraySize (at most 4000001, usually 1001) and sites' MaxJobCount far lower; a
# hand-edited count above this is a bad line, not a minute of listing tasks.
MAX_TASKS_PER_LINE = 1_000_000


class LocateError(RuntimeError):
    """The project's scratch folder cannot be worked out from the environment."""


@dataclass(frozen=True)
class SlurmJob:
    """One ledger line: one sbatch call (an array job when num_tasks > 1)."""

    submitted_at: datetime
    job_id: str
    exp_name: str
    num_tasks: int
    script_path: Path
    submission_id: str = ""
    kind: str = "job"  # job | venv
    task_offset: int = 0
    log: str = ""  # sbatch's --output pattern; "" on old lines
    rerun_of: str = ""  # the submission this one reruns (job_submitter.sh --rerun)
    cluster: str = ""  # slurm.conf's ClusterName where it was submitted; "" if unknown
    user: str = ""

    @property
    def slurm_name(self) -> str:
        """The name job_submitter.sh gave this job in Slurm (its --job-name)."""
        return f"{self.exp_name}-venv" if self.kind == "venv" else self.exp_name

    @property
    def is_array(self) -> bool:
        # A split array's last part may hold one task: still an array (`%a` in its log's
        # file name; a `%a` in the folders above, $SCRATCH's, is part of their names).
        return self.num_tasks > 1 or "%a" in self._log_name

    def log_path(self, scratch_dir: Path, index: int | None) -> Path:
        """The log of array index `index` (None: a plain job)."""
        if not self.log:
            suffix = f"_{index}" if index is not None else ""
            return outputs_dir(scratch_dir) / f"{self.exp_name}-{self.job_id}{suffix}.out"
        return Path(self.log_text(scratch_dir, index))

    def log_text(self, scratch_dir: Path, index: int | None) -> str:
        """str(log_path(...)), with the folder's Path made once per job, not per task
        (`hpc status` of 20,000 tasks spent 0.4 s making Paths)."""
        if not self.log:
            return str(self.log_path(scratch_dir, index))
        # Only the file name is sbatch's pattern (EXP-%j.out, EXP-%A_%a.out): a '%' in the
        # folders above ($SCRATCH may hold one) is part of their names.
        name = self._log_name.replace("%a", str(index or 0)).replace("%j", self.job_id)
        folder = self._log_folder
        if name in ("", "."):
            return folder or "."
        if folder in ("", "."):
            return name
        return folder + name if folder.endswith("/") else f"{folder}/{name}"

    @cached_property
    def _log_name(self) -> str:
        return self.log.rpartition("/")[2].replace("%A", self.job_id)

    @cached_property
    def _log_folder(self) -> str:
        """The log's folder as Path writes it; "" when the pattern names none."""
        folder, sep, _name = self.log.rpartition("/")
        return str(Path(folder + sep)) if sep else ""


@dataclass
class Group:
    """One submission: the Slurm jobs one job_submitter.sh run made (arrays, venv job)."""

    submission_id: str
    exp_name: str
    submitted_at: datetime
    jobs: list[SlurmJob] = field(default_factory=list)
    # What tells its jobs from others Slurm numbered the same (job_refs; group_submissions).
    refs: dict[str, JobRef] = field(default_factory=dict)

    @property
    def rerun_of(self) -> str:
        """The submission id this one reruns, "" for a first submission."""
        return self.jobs[0].rerun_of if self.jobs else ""

    @property
    def cluster(self) -> str:
        """The cluster it was submitted on ("" when its ledger lines do not say)."""
        return self.jobs[0].cluster if self.jobs else ""

    @property
    def job_ids(self) -> list[str]:
        return [j.job_id for j in self.jobs]

    @property
    def num_tasks(self) -> int:
        return sum(j.num_tasks for j in self.jobs if j.kind == "job")

    def tasks(self) -> list[tuple[SlurmJob, int | None, int | None]]:
        """(job, array index or None, task number in the submission or None for venv)."""
        out: list[tuple[SlurmJob, int | None, int | None]] = []
        for j in self.jobs:
            if j.kind != "job":
                out.append((j, None, None))
            elif not j.is_array:
                out.append((j, None, j.task_offset))
            else:
                out.extend((j, i, j.task_offset + i) for i in self._indices(j))
        return out

    @staticmethod
    def _indices(j: SlurmJob) -> range | list[int]:
        return range(j.num_tasks) if not j.script_path.name else _script_indices(j)


def _script_indices(j: SlurmJob) -> range | list[int]:
    # A split array's indices need not start at 0 (a subset, --resume-sweep): the plan's
    # --array says which. Plain arrays are 0..n-1. Only a regular file is read (read_script):
    # the ledger can be edited (a fifo would hang the reader); a home that cannot be read
    # (mode 000) leaves the plain indices.
    try:
        got = read_script(j.script_path).indices
    except (OSError, ValueError):
        return range(j.num_tasks)
    return got if got is not None and len(got) == j.num_tasks else range(j.num_tasks)


@dataclass(frozen=True)
class ScriptInfo:
    """What a kept batch script says about its array and its files."""

    indices: list[int] | None  # None: not an array
    exports: dict[str, str]


# Export values as the plan writes them ('...' without a quote inside, or a plain word):
# shlex.split's answer without shlex (hpc status reads 1,000 scripts of 40 exports).
_QUOTED_VALUE = re.compile(r"'([^']*)'")
_PLAIN_VALUE = re.compile(r"[^\s'\"\\]+")
# Scripts read in this process, by path, with the (mtime, size) they had: hpc status reads
# each job's script for its attempts, its shared writes and its kept folders.
_SCRIPTS: dict[Path, tuple[tuple[int, int], ScriptInfo]] = {}


def read_script(path: Path) -> ScriptInfo:
    """The plan of a kept batch script: its array's indices and the job's variables, from
    the manifest beside it (paths.py: job.plan). A script of an older version has none:
    its `#SBATCH --array` line and `export NAME=VALUE` lines are read instead."""
    plan = plan_of(path)
    try:
        st = os.stat(plan)
        if not os.path.isfile(plan):
            raise FileNotFoundError(plan)
        reader = _read_manifest
    except FileNotFoundError:
        plan, reader = path, _read_script
        st = os.stat(path)
        _regular(path, st)  # the ledger names it and can be edited: a fifo would hang
    stamp = (st.st_mtime_ns, st.st_size)
    kept = _SCRIPTS.get(plan)
    if kept is None or kept[0] != stamp:
        kept = _SCRIPTS[plan] = (stamp, reader(plan))
    info = kept[1]
    return ScriptInfo(None if info.indices is None else list(info.indices), dict(info.exports))


def _regular(path: Path, st: os.stat_result) -> None:
    """Raise OSError unless `st` (of `path`) is a regular file's."""
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))


def _read_manifest(path: Path) -> ScriptInfo:
    values = read_manifest(path)
    array = values.get("@array", "")
    indices = expand_range(array.partition("%")[0]) if array else None
    return ScriptInfo(indices, {k: v for k, v in values.items() if not k.startswith("@")})


def _read_script(path: Path) -> ScriptInfo:
    indices: list[int] | None = None
    exports: dict[str, str] = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.rstrip("\n")
            m = _ARRAY_LINE.match(line)
            if m:
                indices = expand_range(m[1])
                continue
            m = _EXPORT_LINE.match(line)
            if m:
                value = _QUOTED_VALUE.fullmatch(m[2]) or _PLAIN_VALUE.fullmatch(m[2])
                if value is not None:
                    exports[m[1]] = value[value.lastindex or 0]
                    continue
                try:
                    words = shlex.split(m[2])
                except ValueError:
                    continue
                if len(words) == 1:
                    exports[m[1]] = words[0]
    return ScriptInfo(indices, exports)


def _parse_time(text: str) -> datetime:
    # bash writes +0000 (no colon), which datetime.fromisoformat only takes from Python 3.11;
    # it is tried first all the same: strptime took 60 us a line (a 200,000-line ledger).
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S%z")


_DIGITS = re.compile(r"[0-9]+")
_COUNT = re.compile(r"[0-9]{1,9}")
_OFFSET = re.compile(r"[0-9]{1,18}")
_CLUSTER_USER = re.compile(r"[A-Za-z0-9_.@-]{0,128}")


def parse_line(line: str) -> SlurmJob:
    """One ledger line; ValueError saying what is wrong with it."""
    cols = line.rstrip("\r\n").split("\t")
    if len(cols) not in (5, 9, 10, 12):
        raise ValueError(f"{len(cols)} tab-separated fields instead of 5, 9, 10 or 12")
    when, job_id, exp_name, num_tasks, script = cols[:5]
    sub_id, kind, offset, log = cols[5:9] if len(cols) >= 9 else (job_id, "job", "0", "")
    rerun_of = cols[9] if len(cols) >= 10 else ""
    cluster, user = cols[10:12] if len(cols) == 12 else ("", "")
    if (len(cols) == 10 or rerun_of) and not SUBMISSION_ID.fullmatch(rerun_of):
        raise ValueError(f"rerun_of {rerun_of[:100]!r} is not a submission id")
    if not _DIGITS.fullmatch(job_id):
        raise ValueError(f"job id {job_id!r} is not a number")
    # Bounded: an edited count must not make a reader list 10**23 tasks.
    if not _COUNT.fullmatch(num_tasks) or not 1 <= int(num_tasks) <= MAX_TASKS_PER_LINE:
        raise ValueError(
            f"task count {num_tasks[:30]!r} is not a whole number from 1 to {MAX_TASKS_PER_LINE}: "
            f"more than {MAX_TASKS_PER_LINE} tasks is no sbatch call of this toolkit (edited?)"
        )
    if kind not in ("job", "venv") or not _OFFSET.fullmatch(offset):
        raise ValueError(f"kind {kind!r} or task offset {offset!r} is not valid")
    if not _CLUSTER_USER.fullmatch(cluster + user):
        raise ValueError(f"cluster {cluster[:70]!r} or user {user[:70]!r} is not valid")
    if not exp_name or (not script and kind == "job"):
        raise ValueError("empty experiment name or script path")
    try:
        submitted_at = _parse_time(when)
    except ValueError:
        raise ValueError(f"time {when!r} is not ISO 8601") from None
    return SlurmJob(
        submitted_at, job_id, exp_name, int(num_tasks), Path(script), sub_id or job_id,
        kind, int(offset), log, rerun_of, cluster, user,
    )  # fmt: skip


def read_submissions(path: Path, on_bad_line: Callable[[str], None]) -> list[SlurmJob]:
    """Every well-formed line of the ledger at `path`, oldest first; [] if it does not exist.
    OSError when it cannot be read (unreadable, a folder, not a regular file)."""
    try:
        _regular(path, os.stat(path))
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    subs: list[SlurmJob] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            subs.append(parse_line(line))
        except ValueError as exc:
            on_bad_line(f"{path}:{lineno}: skipped a malformed line ({exc})")
    return subs


# How far Slurm's submit time of a job may lie before the ledger's (written just after
# sbatch answered, from the submitting host's clock): a row submitted earlier is an older
# job that had the number.
SUBMIT_SLACK_S = 60.0


def ref_key(job: SlurmJob) -> str:
    """The key of `job`'s states in a TaskQuery made from job_refs (unique per submission)."""
    return f"{job.job_id}@{job.submission_id}"


def job_refs(jobs: Iterable[SlurmJob], ledger: Iterable[SlurmJob]) -> dict[str, JobRef]:
    """What makes each of `jobs` its own among every job Slurm numbered the same (keys:
    ref_key): its cluster, its name, and its submit time: from its ledger time (less
    SUBMIT_SLACK_S) up to the next ledger line of that number on that cluster, whose job
    took the number over (halfway between them when they lie closer than twice the slack)."""
    same: dict[str, list[tuple[float, str]]] = {}
    for j in ledger:
        same.setdefault(j.job_id, []).append((j.submitted_at.timestamp(), j.cluster))
    out: dict[str, JobRef] = {}
    for j in jobs:
        t = j.submitted_at.timestamp()
        # A line that does not name its cluster (an older version's) may be of either.
        times = sorted(
            x for x, c in same.get(j.job_id, []) if not c or not j.cluster or c == j.cluster
        )
        earlier = [x for x in times if x < t]
        later = [x for x in times if x > t]
        not_before = t - SUBMIT_SLACK_S
        if earlier:
            not_before = max(not_before, (earlier[-1] + t) / 2)
        before = None
        if later:
            before = max(later[0] - SUBMIT_SLACK_S, (t + later[0]) / 2)
        out[ref_key(j)] = JobRef(j.job_id, j.slurm_name, not_before, before, j.cluster)
    return out


def by_job_number(groups: list[Group], number: str, here: str) -> Group | None:
    """The latest submission holding job `number`, one of cluster `here` first (Slurm hands
    numbers out again: the same number on another cluster is another job)."""
    holding = [g for g in groups if number in g.job_ids]
    local = [g for g in holding if not here or not g.cluster or g.cluster == here]
    chosen = local or holding
    return chosen[-1] if chosen else None


def group_submissions(jobs: list[SlurmJob]) -> list[Group]:
    """Ledger lines grouped by submission, oldest first."""
    groups: dict[str, Group] = {}
    for j in jobs:
        g = groups.get(j.submission_id)
        if g is None:
            g = groups[j.submission_id] = Group(j.submission_id, j.exp_name, j.submitted_at)
        g.jobs.append(j)
    refs = job_refs(jobs, jobs)
    for g in groups.values():
        g.refs = {ref_key(j): refs[ref_key(j)] for j in g.jobs}
    return list(groups.values())


def find_project_root(cwd: Path) -> Path | None:
    """The nearest folder, from `cwd` up, that holds hpc_files/ (as job_submitter.sh sees it)."""
    for folder in (cwd, *cwd.parents):
        if (folder / "hpc_files").is_dir():
            return folder
    return None


def find_scratch_dir(override: Path | None, environ: Mapping[str, str], cwd: Path) -> Path:
    """`$SCRATCH/<project>`, the way job_submitter.sh names it, unless `override` is given.

    Inside a job the plan's own value wins (HPC_SCRATCH_DIR, exported by its batch
    script). Elsewhere the rule is job_submitter.sh's: the project is HPC_PROJECT_NAME,
    else the name of HPC_PROJECT_DIR, else of the nearest folder holding hpc_files/.
    """
    if override is not None:
        return override
    planned = environ.get("HPC_SCRATCH_DIR", "")
    if planned:
        return Path(planned)
    scratch = environ.get("SCRATCH", "")
    if not scratch:
        raise LocateError(
            "SCRATCH is not set: export SCRATCH=/path/to/scratch or pass --scratch-dir"
        )
    project = environ.get("HPC_PROJECT_NAME", "")
    if not project and environ.get("HPC_PROJECT_DIR", ""):
        project = Path(environ["HPC_PROJECT_DIR"]).name
    if not project:
        root = find_project_root(cwd)
        if root is None:
            raise LocateError(
                f"no hpc_files/ folder in {cwd} or above: run hpc inside your project, "
                "set HPC_PROJECT_NAME, or pass --scratch-dir"
            )
        project = root.name
    return Path(scratch) / project


def ledger_path(scratch_dir: Path) -> Path:
    return ledger_file(scratch_dir)
