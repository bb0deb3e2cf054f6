"""`hpc doctor`: what a cluster offers, in one screen, and a profile that fits it.

Reads `scontrol show config`, `scontrol show partition -o` and `sinfo` (and, with --probe,
what a one-second job sees); the pure functions below turn the recorded text into the
report and the profile, so tests feed them recorded output.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from hpc_toolkit.slurm import Runner, run_command, seconds
from hpc_toolkit.why import parse_records

MIN_VERSION = (22, 5)  # hpc_files/lib/cluster.sh: HPC_SLURM_MIN_VERSION
NEWEST_TESTED = 26  # 22.05, 24.11 and 26.05 are tested (docs/cluster-admins.md)
PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
PROBE_MARK = "hpc-doctor-probe"


def parse_config(text: str) -> dict[str, str]:
    """`scontrol show config`: `Key = value` lines."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()
    return out


def parse_version(text: str) -> tuple[int, int, int] | None:
    """`slurm 24.11.5`, `slurm-wlm 22.05.8`, `22.05.8` -> (22, 5, 8)."""
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None


def version_verdict(version: tuple[int, int, int] | None) -> str:
    if version is None:
        return "unknown: job_submitter.sh refuses a Slurm that does not say its version"
    if version[:2] < MIN_VERSION:
        return "too old: job_submitter.sh refuses Slurm older than 22.05"
    if version[0] > NEWEST_TESTED:
        return f"supported, newer than the versions tested (22.05 to {NEWEST_TESTED}.x)"
    return f"supported (tested: 22.05 to {NEWEST_TESTED}.x)"


@dataclass
class Partition:
    name: str
    state: str = "?"
    default: bool = False
    max_time: str = "UNLIMITED"
    max_nodes: str = "UNLIMITED"
    nodes: int = 0
    cpus: str = "?"
    mem_mb: str = "?"
    gres: list[str] = field(default_factory=list)
    preempt: str = "OFF"
    grace_s: str = "0"
    tier: str = "1"

    @property
    def max_gpus_per_node(self) -> int:
        best = 0
        for g in self.gres:
            m = re.match(r"gpu(?::[^:(]+)?:(\d+)", g)
            if m:
                best = max(best, int(m[1]))
        return best

    @property
    def gpu_types(self) -> list[str]:
        out = []
        for g in self.gres:
            m = re.match(r"gpu:([^:(]+):\d+", g)
            if m and m[1] not in out:
                out.append(m[1])
        return out


def parse_partitions(show_partition: str, sinfo: str) -> list[Partition]:
    """`scontrol show partition -o` plus `sinfo -h -o '%R|%c|%m|%G|%D|%l'` (one row per
    partition and kind of node)."""
    parts: dict[str, Partition] = {}
    for rec in parse_records(show_partition):
        name = rec.get("PartitionName", "?")
        parts[name] = Partition(
            name=name,
            state=rec.get("State", "?"),
            default=rec.get("Default") == "YES",
            max_time=rec.get("MaxTime", "UNLIMITED"),
            max_nodes=rec.get("MaxNodes", "UNLIMITED"),
            nodes=int(rec.get("TotalNodes", "0") or 0),
            preempt=rec.get("PreemptMode", "OFF"),
            grace_s=rec.get("GraceTime", "0"),
            tier=rec.get("PriorityTier", "1"),
        )
    for row in sinfo.splitlines():
        cols = row.split("|")
        if len(cols) < 6:
            continue
        name = cols[0].rstrip("*")
        p = parts.setdefault(name, Partition(name=name))
        p.cpus, p.mem_mb = cols[1], cols[2]
        for g in cols[3].split(","):
            if g and g != "(null)" and g not in p.gres:
                p.gres.append(g)
    return list(parts.values())


def accounting(cfg: dict[str, str]) -> str:
    storage = cfg.get("AccountingStorageType", "")
    comp = cfg.get("JobCompType", "")
    if storage.endswith("slurmdbd"):
        return "slurmdbd: sacct knows every job (hpc status, --efficiency, --rerun)"
    if comp.endswith("filetxt"):
        return (
            f"no slurmdbd; a job completion log ({cfg.get('JobCompLoc', '?')}): hpc status "
            "reads finished jobs from it, no --efficiency"
        )
    if comp and not comp.endswith("none"):
        return f"no slurmdbd; job completion through {comp}: hpc status sees live jobs only"
    return "none: hpc status sees only jobs still in Slurm's memory (MinJobAge)"


def cgroup(cfg: dict[str, str]) -> str:
    track, task = cfg.get("ProctrackType", "?"), cfg.get("TaskPlugin", "?")
    if "cgroup" in track and "cgroup" in task:
        return f"yes ({track}, {task}): a job gets only the cores, memory and GPUs it asked for"
    if "cgroup" in track:
        return f"processes tracked ({track}) but not confined ({task})"
    return f"no ({track}, {task}): jobs on a node are not confined to what they asked for"


def private_tmp(cfg: dict[str, str]) -> str:
    container = cfg.get("JobContainerType", "") or cfg.get("NamespaceType", "")
    if "tmpfs" in container or container.endswith("/linux"):
        return f"yes ({container}): each job has its own /tmp on each node"
    if container and not container.endswith("none"):
        return f"maybe ({container})"
    return "no: /tmp on a node is shared by every job there"


def tmpdir_guess(cfg: dict[str, str]) -> str:
    task_prolog = cfg.get("TaskProlog", "(null)")
    if task_prolog not in ("", "(null)"):
        return f"a TaskProlog runs ({task_prolog}): maybe; `hpc doctor --probe` tells"
    return "no TaskProlog: probably not; `hpc doctor --probe` tells"


@dataclass
class Probe:
    slurm_tmpdir: str
    tmpdir: str
    node: str


def parse_probe(text: str) -> Probe | None:
    for line in text.splitlines():
        if line.startswith(PROBE_MARK + "|"):
            cols = line.split("|") + ["", "", ""]
            return Probe(cols[1], cols[2], cols[3])
    return None


def _hms(secs: float) -> str:
    s = int(secs)
    days, s = divmod(s, 86400)
    hms = f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{days}-{hms}" if days else hms


def suggest_profile(parts: list[Partition], probe: Probe | None) -> dict[str, str]:
    """The profile keys (hpc_files/clusters/*.conf) that fit this cluster."""
    default = next((p for p in parts if p.default), None)
    limit = seconds(default.max_time) if default else 0
    time = _hms(min(limit, 3600)) if limit else "01:00:00"
    gpus = max([p.max_gpus_per_node for p in parts] or [0])
    provides = "auto" if probe is None else ("yes" if probe.slurm_tmpdir else "no")
    local = "/tmp"
    if probe is not None and not probe.slurm_tmpdir and probe.tmpdir.startswith("/"):
        local = probe.tmpdir
    return {
        "HPC_DEFAULT_ACCOUNT": "",
        "HPC_DEFAULT_PARTITION": default.name if default else "",
        "HPC_DEFAULT_TIME": time,
        "HPC_DEFAULT_CPUS_PER_TASK": "1",
        "HPC_DEFAULT_MEM": "",
        "HPC_MAX_GPUS_PER_NODE": str(gpus),
        "HPC_GPU_DIRECTIVE": "gres",
        "HPC_MAX_ARRAY_PARALLEL": "",
        "HPC_MODULES": "",
        "HPC_PROVIDES_TMPDIR": provides,
        "HPC_LOCAL_SCRATCH": local,
        "HPC_VENV_PATH": "",
        "HPC_VENV_TO_LOCAL": "no",
        "HPC_VENV_LOCAL_DIR": "/tmp/hpc_venvs_%u",
        "HPC_SIGNAL_GRACE": "120",
        "HPC_MAX_RESTARTS": "10",
    }


def _q(value: str) -> str:
    """A value as a double-quoted shell word (the profile is sourced by bash)."""
    return '"' + re.sub(r'(["\\$`])', r"\\\1", value) + '"'


def profile_text(keys: dict[str, str], cluster: str, version: str, when: datetime) -> str:
    lines = [
        f"# Cluster profile for {cluster} (Slurm {version}), written by `hpc doctor --write` "
        f"on {when:%Y-%m-%d}.",
        "# Check HPC_DEFAULT_ACCOUNT and HPC_MODULES; docs/reference.md lists every key.",
        "",
    ]
    lines += [f"{k}={_q(v)}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


def write_profile(path: Path, text: str, force: bool) -> None:
    """Atomically; refuses to replace an existing profile unless `force`."""
    if path.exists() and not force:
        raise FileExistsError(f"{path} exists: pass --force to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class Facts:
    version_text: str
    config: dict[str, str]
    partitions: list[Partition]
    probe: Probe | None = None
    probe_note: str = ""


def report(f: Facts) -> list[str]:
    cfg = f.config
    version = parse_version(cfg.get("SLURM_VERSION", "") or f.version_text)
    vtext = ".".join(f"{n:02d}" if i == 1 else str(n) for i, n in enumerate(version or ()))
    out = [
        f"Cluster {cfg.get('ClusterName', '?')}: Slurm {vtext or '?'}, {version_verdict(version)}",
        "",
        "Partitions:",
    ]
    rows = [["NAME", "STATE", "MAX TIME", "NODES", "MAX NODES", "CPUS/NODE", "MEM/NODE",
             "GPUS (gres)", "PREEMPTION"]]  # fmt: skip
    for p in f.partitions:
        preempt = p.preempt if p.preempt != "OFF" else "-"
        if p.preempt != "OFF" and p.grace_s not in ("0", ""):
            preempt += f" (grace {p.grace_s} s)"
        mem = f"{p.mem_mb}M" if p.mem_mb.isdigit() else p.mem_mb
        rows.append([p.name + ("*" if p.default else ""), p.state, p.max_time, str(p.nodes),
                     p.max_nodes, p.cpus, mem, ",".join(p.gres) or "-", preempt])  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]  # fmt: skip
    types = sorted({t for p in f.partitions for t in p.gpu_types})
    if types:
        out.append(f"  GPU types (--gpu-type): {', '.join(types)}")
    if any(p.preempt not in ("OFF", "") for p in f.partitions):
        out.append(
            f"  Preemption: {cfg.get('PreemptType', '?')} ({cfg.get('PreemptMode', '?')}); a "
            "preempted job gets SIGUSR1 and is requeued (docs/requeue.md)"
        )
    out += [
        "",
        f"Accounting:     {accounting(cfg)}",
        f"MaxArraySize:   {cfg.get('MaxArraySize', '?')} (array indices 0 to "
        f"{int(cfg.get('MaxArraySize', '1001') or 1001) - 1}; longer configs are split)",
        f"cgroup:         {cgroup(cfg)}",
        f"Private /tmp:   {private_tmp(cfg)}",
    ]
    if f.probe is not None:
        where = f"on {f.probe.node}" if f.probe.node else ""
        seen = f"yes ({f.probe.slurm_tmpdir})" if f.probe.slurm_tmpdir else "no"
        tmp = f.probe.tmpdir or "-"
        out.append(f"SLURM_TMPDIR:   {seen}: seen by a probe job {where} (TMPDIR={tmp})")
    else:
        out.append(f"SLURM_TMPDIR:   {f.probe_note or tmpdir_guess(cfg)}")
    return out


def _ask(run: Runner, argv: list[str]) -> str:
    done = run(argv)
    if isinstance(done, str):
        raise RuntimeError(done)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeError(
            f"{' '.join(argv[:3])} failed (exit {done.returncode}"
            f"{': ' + said[-1] if said else ''}): is this a Slurm login node?"
        )
    return done.stdout


def gather(run: Runner = run_command) -> Facts:
    cfg = parse_config(_ask(run, ["scontrol", "show", "config"]))
    version_text = cfg.get("SLURM_VERSION", "") or _ask(run, ["scontrol", "--version"])
    parts = parse_partitions(
        _ask(run, ["scontrol", "show", "partition", "-o"]),
        _ask(run, ["sinfo", "-h", "-o", "%R|%c|%m|%G|%D|%l"]),
    )
    return Facts(version_text, cfg, parts)


def probe_argv(partition: str | None, account: str | None) -> list[str]:
    argv = ["srun", "--quiet", "-N1", "-n1", "-t", "1", "-J", PROBE_MARK]
    if partition:
        argv += ["-p", partition]
    if account:
        argv += ["-A", account]
    return [*argv, "sh", "-c",
            f'printf "{PROBE_MARK}|%s|%s|%s\\n" "${{SLURM_TMPDIR-}}" "${{TMPDIR-}}" '
            '"${SLURMD_NODENAME-}"']  # fmt: skip


def run_probe(run: Runner, partition: str | None, account: str | None) -> Probe | str:
    done = run(probe_argv(partition, account))
    if isinstance(done, str):
        return f"the probe job could not run: {done}"
    found = parse_probe(done.stdout)
    if done.returncode != 0 or found is None:
        said = done.stderr.strip().splitlines()
        return f"the probe job failed (exit {done.returncode}{': ' + said[-1] if said else ''})"
    return found


def profile_path(clusters_dir: Path, name: str) -> Path:
    if not PROFILE_NAME.match(name):
        raise ValueError(
            f"profile name {name!r} is not valid: letters, digits, '.', '_' and '-' "
            "(it becomes hpc_files/clusters/NAME.conf)"
        )
    return clusters_dir / f"{name}.conf"


def show_profile(keys: dict[str, str]) -> list[str]:
    return ["", "Suggested profile (hpc_files/clusters/NAME.conf; `--write NAME` writes it):",
            *(f"  {k}={_q(v)}" for k, v in keys.items())]  # fmt: skip
