"""A submission's home: the one table of its paths in bash (virtual_env_hpc_files/job_lib.sh)
and in Python (hpc_toolkit.paths) says the same, and a manifest written by one is read
back whole by the other, hostile values included."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hpc_toolkit.paths import NAMES, Home, escape, homes_dir, ledger_file, plan_of, read_manifest
from hpc_toolkit.submissions import read_script

ROOT = Path(__file__).resolve().parents[2]
HOME_SH = ROOT / "virtual_env_hpc_files" / "job_lib.sh"


def _bash(script: str, *args: str, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(
        ["bash", "-c", f"source {HOME_SH}\n{script}", "bash", *args],
        check=True, capture_output=True, env=env or {"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    return out.stdout.decode()  # (not text=True: that would make a \r a \n)


@pytest.mark.parametrize("key", sorted(NAMES))
@pytest.mark.parametrize("part", [None, 1, 12])
def test_bash_and_python_name_every_file_alike(key: str, part: int | None) -> None:
    got = _bash(
        'hpc_home_path_to v "$1" "$2" "$3"; printf %s "$v"',
        "/s/p/hpc_outputs/jobs/e-1",
        key,
        str(part or ""),
    )
    assert got == str(Home(Path("/s/p/hpc_outputs/jobs/e-1")).path(key, part))


def test_bash_refuses_a_key_the_table_does_not_have() -> None:
    with pytest.raises(subprocess.CalledProcessError):
        _bash("hpc_home_path_to v /h nonesuch")
    with pytest.raises(KeyError):
        Home(Path("/h")).path("nonesuch")


def test_the_homes_their_index_and_a_scripts_manifest() -> None:
    got = _bash(
        "hpc_home_dir_to h /s/p e-1; hpc_ledger_file_to l /s/p\n"
        'hpc_home_plan_of_to m "$h/job-part2.sbatch"; printf "%s\\n" "$h" "$l" "$m"'
    ).splitlines()
    assert got == [
        str(homes_dir(Path("/s/p")) / "e-1"),
        str(ledger_file(Path("/s/p"))),
        str(plan_of(Path("/s/p/hpc_outputs/jobs/e-1/job-part2.sbatch"))),
    ]
    assert Home.of_script(Path("/s/p/hpc_outputs/jobs/e-1/job-part2.sbatch")) == Home(
        Path("/s/p/hpc_outputs/jobs/e-1")
    )


@pytest.mark.parametrize("key", ["commands", "code", "diff", "attempts", "lines", "writes"])
def test_a_job_of_an_older_version_finds_its_files_where_hpc_looks(key: str) -> None:
    # No HPC_HOME: the batch script of a submission made before homes (jobs/EXP-STAMP.*).
    env = {
        "PATH": "/usr/bin:/bin",
        "HPC_COMMANDS_FILE": "/s/p/hpc_outputs/jobs/e-20260101-000000-1.commands",
    }
    got = _bash('hpc_job_path_to v "$1"; printf %s "$v"', key, env=env)
    legacy = Home.of_exports(env)
    assert legacy is not None and legacy.legacy
    assert got == str(legacy.path(key))
    assert Home.of_script(Path("/s/p/hpc_outputs/jobs/e-20260101-000000-1-part2.sbatch")) == legacy


def test_a_job_of_this_version_finds_its_files_in_its_home() -> None:
    env = {"PATH": "/usr/bin:/bin", "HPC_HOME": "/s/h", "HPC_COMMANDS_FILE": "/elsewhere.commands"}
    assert _bash('hpc_job_path_to v attempts; printf %s "$v"', env=env) == "/s/h/attempts"
    assert Home.of_exports(env) == Home(Path("/s/h"))


HOSTILE = [
    "plain",
    "",
    "a\tb",
    "two\nlines",
    "back\\slash",
    "\\n not a newline",
    "\\c stops printf %b",
    "\\x41 \\0101 \\u00e9",
    "ends with \\",
    "'quoted' \"double\" $(rm -rf /) `x` ${HOME}",
    "carriage\rreturn",
    "unicode é ✓",
    "%s %b %%",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_value_written_by_bash_is_read_back_whole_by_python_and_bash(
    tmp_path: Path, value: str
) -> None:
    plan = tmp_path / "job.plan"
    _bash(
        'hpc_manifest_escape_to e "$2"; printf "# c\\nA\\t%s\\nB\\tafter\\n" "$e" >"$1"',
        str(plan),
        value,
    )
    assert read_manifest(plan) == {"A": value, "B": "after"}
    assert _bash('hpc_manifest_get_to v "$1" A; printf %s "$v"', str(plan)) == value
    assert escape(value) == _bash('hpc_manifest_escape_to e "$1"; printf %s "$e"', value)


def test_a_missing_name_or_file_is_not_an_empty_value(tmp_path: Path) -> None:
    plan = tmp_path / "job.plan"
    plan.write_text("A\tx\n")
    out = _bash(
        'hpc_manifest_get_to v "$1" B && echo found || echo missing\n'
        'hpc_manifest_get_to v "$1/no" A || echo nofile',
        str(plan),
    )
    assert out == "missing\nnofile\n"


def test_the_plan_is_read_from_the_manifest_not_the_script(tmp_path: Path) -> None:
    home = tmp_path / "hpc_outputs" / "jobs" / "e-1"
    home.mkdir(parents=True)
    script = home / "job.sbatch"
    # The script says otherwise: only the manifest counts.
    script.write_text("#!/bin/bash\n#SBATCH --array=0-9\nexport HPC_TASK_OFFSET='7'\n")
    (home / "job.plan").write_text("# the plan\n@array\t3-5%2\nHPC_TASK_OFFSET\t3\nX\ta\\tb\n")
    info = read_script(script)
    assert info.indices == [3, 4, 5]
    assert info.exports == {"HPC_TASK_OFFSET": "3", "X": "a\tb"}
    # An older version's script has no manifest: its lines are read.
    old = tmp_path / "hpc_outputs" / "jobs" / "e-0.sbatch"
    old.write_text("#!/bin/bash\n#SBATCH --array=\"0-1%1\"\nexport HPC_TASK_OFFSET='0'\n")
    assert read_script(old).indices == [0, 1]
    assert read_script(old).exports == {"HPC_TASK_OFFSET": "0"}
