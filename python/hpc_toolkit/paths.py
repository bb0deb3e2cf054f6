"""A submission's home and the one table of its paths, as virtual_env_hpc_files/job_lib.sh
has it for bash (tests/python/test_paths.py checks that the two agree).

Every submission of job_submitter.sh has one folder, its home,
`$SCRATCH/<project>/hpc_outputs/jobs/<SUBMISSION_ID>/`: its batch script(s) and their
manifests (the plan, `NAME<TAB>VALUE` lines), its commands, its code record, its
attempts, its packed lines' outcomes, its write lists and its finished markers. The
ledger beside the homes (`jobs/submissions.tsv`) is their index. Submissions made before
homes kept the same files beside each other in `jobs/` (`EXP-STAMP.sbatch`,
`EXP-STAMP.commands`, `EXP-STAMP.attempts/` ...): `Home.legacy` names those, so that hpc
still shows them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

OUTPUTS = "hpc_outputs"
HOMES = "jobs"
LEDGER_NAME = "submissions.tsv"

# KEY: NAME in a home (script and plan: chunk N of several is job-partN.sbatch/.plan).
NAMES: dict[str, str] = {
    "script": "job.sbatch",
    "plan": "job.plan",
    "commands": "commands",
    "code": "code.git",
    "diff": "code.diff",
    "attempts": "attempts",
    "lines": "lines",
    "writes": "writes",
    "finished": "finished.",
    "rerun_lock": "rerun.lock",
    "interactive_rc": "interactive.rc",
    "node_env": "node_env.",
    "keepers_stop": "keepers.stop.",
}
# An older version's names: suffixes of jobs/EXP-STAMP (the commands file less .commands).
_LEGACY: dict[str, str] = {
    "script": ".sbatch",
    "commands": ".commands",
    "code": ".git",
    "diff": ".diff",
    "attempts": ".attempts",
    "lines": ".lines",
    "writes": ".writes",
}
_HOME_SCRIPT = re.compile(r"job(?:-part([1-9][0-9]{0,5}))?\.sbatch")


def outputs_dir(scratch: Path) -> Path:
    return scratch / OUTPUTS


def homes_dir(scratch: Path) -> Path:
    return scratch / OUTPUTS / HOMES


def ledger_file(scratch: Path) -> Path:
    return homes_dir(scratch) / LEDGER_NAME


@dataclass(frozen=True)
class Home:
    """The folder of one submission (`legacy`: an older version's jobs/EXP-STAMP, whose
    files lie beside each other under that prefix)."""

    folder: Path
    legacy: bool = False

    @classmethod
    def of(cls, scratch: Path, submission_id: str) -> Home:
        return cls(homes_dir(scratch) / submission_id)

    @classmethod
    def of_script(cls, script: Path) -> Home:
        """The home of a kept batch script (a home's job.sbatch, or an older jobs/X.sbatch)."""
        if _HOME_SCRIPT.fullmatch(script.name) and script.parent.parent.name == HOMES:
            return cls(script.parent)
        base = re.sub(r"(-part[0-9]+)?\.sbatch$", "", script.name)
        return cls(script.parent / base, legacy=True)

    @classmethod
    def of_exports(cls, exports: Mapping[str, str]) -> Home | None:
        """The home a job's variables name (HPC_HOME; an older job's HPC_COMMANDS_FILE)."""
        home = exports.get("HPC_HOME", "")
        if home:
            return cls(Path(home))
        commands = exports.get("HPC_COMMANDS_FILE", "")
        if not commands:
            return None
        return cls(Path(commands.removesuffix(".commands")), legacy=True)

    def path(self, key: str, part: int | None = None) -> Path:
        """The file or folder KEY of this home (part: the chunk's 1-based number of several)."""
        if self.legacy:
            if key not in _LEGACY:
                raise KeyError(f"{key}: no such file in an older version's submission")
            return Path(str(self.folder) + _LEGACY[key])
        name = NAMES[key]
        if part is not None and key in ("script", "plan"):
            stem, dot, ext = name.partition(".")
            name = f"{stem}-part{part}{dot}{ext}"
        return self.folder / name


def plan_of(script: Path) -> Path:
    """The manifest beside batch script `script` (job.sbatch: job.plan)."""
    return script.parent / (script.name.removesuffix(".sbatch") + ".plan")


def unescape(field: str) -> str:
    """A manifest field's value (job_lib.sh: a backslash, tab and newline escaped)."""
    if "\\" not in field:
        return field
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n"}.get(m[1], m[1]), field)


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def read_manifest(path: Path) -> dict[str, str]:
    """A manifest's NAME -> VALUE ('@' names: what sbatch was asked for; the others: the
    job's variables). Lines that are not NAME<TAB>VALUE (a comment) are skipped."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8", errors="replace", newline="\n") as fh:
        for line in fh:
            name, tab, value = line.rstrip("\n").partition("\t")
            if tab and name and not name.startswith("#"):
                out[name] = unescape(value)
    return out
