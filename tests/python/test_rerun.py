"""hpc_toolkit.rerun: which tasks of a submission go again (job_submitter.sh --rerun)."""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from hpc_toolkit.rerun import Refusal, compress, main, plan, read_script
from hpc_toolkit.submissions import parse_line

STAMP = "2026-11-24T10:00:00+0000"


def _script(path: Path, array: str | None, offset: int, commands: Path) -> None:
    lines = ["#!/bin/bash", '#SBATCH --job-name="ex"']
    if array is not None:
        lines.append(f'#SBATCH --array="{array}"')
    lines += ['#SBATCH --time="00:05:00"', "#", f"export HPC_COMMANDS_FILE='{commands}'"]
    if offset:
        lines.append(f"export HPC_TASK_OFFSET='{offset}'")
    path.write_text("\n".join(lines) + "\n")


class Project:
    """A scratch folder with a ledger and the kept scripts, all dated at STAMP."""

    def __init__(self, root: Path) -> None:
        self.scratch = root / "scratch" / "proj"
        self.jobs = self.scratch / "hpc_outputs" / "jobs"
        self.jobs.mkdir(parents=True)
        self.ledger = self.jobs / "submissions.tsv"
        self.when = datetime(2026, 11, 24, 10, 0, 0, tzinfo=timezone.utc).timestamp()

    def submit(self, sub: str, parts: list[tuple[str, int, str | None, int]], n_lines: int,
               extra: str = "") -> None:  # fmt: skip
        """parts: (job id, task count, --array spec or None, offset)."""
        commands = self.jobs / f"{sub}.commands"
        commands.write_text("".join(f"echo {i}\n" for i in range(n_lines)))
        os.utime(commands, (self.when, self.when))
        text = ""
        for k, (job, n, array, offset) in enumerate(parts):
            script = self.jobs / (
                f"{sub}.sbatch" if len(parts) == 1 else f"{sub}-part{k + 1}.sbatch"
            )
            _script(script, array, offset, commands)
            os.utime(script, (self.when, self.when))
            log = (
                f"{self.scratch}/hpc_outputs/ex-%A_%a.out"
                if array
                else f"{self.scratch}/hpc_outputs/ex-%j.out"
            )
            text += f"{STAMP}\t{job}\tex\t{n}\t{script}\t{sub}\tjob\t{offset}\t{log}{extra}\n"
        with open(self.ledger, "a") as fh:
            fh.write(text)


def sacct(rows: str, live: str | None = None):  # type: ignore[no-untyped-def]
    """A runner: sacct answers `rows`; nothing else is asked, unless `live` is given: then
    squeue and scontrol (asked for tasks sacct has not heard of) answer `live`."""
    calls: list[list[str]] = []

    def run(argv: list[str]):  # type: ignore[no-untyped-def]
        calls.append(argv)
        if live is not None and argv[0] in ("squeue", "scontrol"):
            return subprocess.CompletedProcess(argv, 0, live, "")
        assert argv[0] == "sacct" and "-c" not in argv, argv
        return subprocess.CompletedProcess(argv, 0, rows, "")

    run.calls = calls  # type: ignore[attr-defined]
    return run


@pytest.fixture
def proj(tmp_path: Path) -> Project:
    return Project(tmp_path)


def test_compress() -> None:
    assert compress([3, 1, 4, 5, 7, 1]) == "1,3-5,7"
    assert compress([0]) == "0"


def test_read_script_takes_array_cap_and_quoted_exports(tmp_path: Path) -> None:
    s = tmp_path / "x.sbatch"
    s.write_text(
        "#!/bin/bash\n#SBATCH --array=\"0-3,7%2\"\nexport HPC_COMMANDS_FILE='/a b/it'\\''s'\n"
        "export HPC_TASK_OFFSET='1001'\nexport BAD='unclosed\n"
    )
    info = read_script(s)
    assert info.indices == [0, 1, 2, 3, 7]
    assert info.exports == {"HPC_COMMANDS_FILE": "/a b/it's", "HPC_TASK_OFFSET": "1001"}


def test_two_failures_of_five(proj: Project) -> None:
    proj.submit("ex-1", [("100", 5, "0-4", 0)], 5)
    run = sacct("100_0|COMPLETED|0:0\n100_1|FAILED|3:0\n100_2|COMPLETED|0:0\n"
                "100_3|TIMEOUT|0:0\n100_4|COMPLETED|0:0\n")  # fmt: skip
    group, todo, tasks = plan(proj.scratch, "100", run)
    assert group.submission_id == "ex-1"
    assert [(j.job_id, idx) for j, idx, _ in todo] == [("100", [1, 3])]
    assert tasks == [
        (1, "100_1", "FAILED", "3:0", "-", "-"),
        (3, "100_3", "TIMEOUT", "0:0", "-", "-"),
    ]
    assert len(run.calls) == 1  # one sacct call for the whole submission


def test_split_array_any_job_id_names_it(proj: Project) -> None:
    proj.submit("ex-2", [("200", 2, "0-1", 0), ("201", 2, "0-1", 2), ("202", 1, "0", 4)], 5)
    run = sacct("200_0|COMPLETED|0:0\n200_1|OUT_OF_MEMORY|0:125\n201_0|COMPLETED|0:0\n"
                "201_1|COMPLETED|0:0\n202_0|NODE_FAIL|0:0\n")  # fmt: skip
    _, todo, tasks = plan(proj.scratch, "201_1", run)
    assert [(j.job_id, idx, j.task_offset) for j, idx, _ in todo] == [
        ("200", [1], 0),
        ("202", [0], 4),
    ]
    assert [t[0] for t in tasks] == [1, 4]


def test_a_single_job(proj: Project) -> None:
    proj.submit("ex-3", [("300", 1, None, 0)], 1)
    _, todo, tasks = plan(proj.scratch, "300", sacct("300|CANCELLED by 0|0:15\n"))
    assert [(j.job_id, idx) for j, idx, _ in todo] == [("300", [])]
    assert tasks == [(0, "300", "CANCELLED", "0:15", "-", "-")]


@pytest.mark.parametrize("state", ["RUNNING", "PENDING", "REQUEUED", "SUSPENDED", "COMPLETING"])
def test_refused_while_a_task_is_not_finished(proj: Project, state: str) -> None:
    proj.submit("ex-4", [("400", 3, "0-2", 0)], 3)
    run = sacct(f"400_0|FAILED|1:0\n400_1|{state}|0:0\n400_2|COMPLETED|0:0\n")
    with pytest.raises(
        Refusal, match=rf"1 task\(s\) .* still queued or running: task 1 \(400_1 {state}\)"
    ):
        plan(proj.scratch, "400", run)


def test_a_pending_array_known_only_as_a_whole(proj: Project) -> None:
    proj.submit("ex-5", [("500", 3, "0-2", 0)], 3)
    with pytest.raises(Refusal, match="still queued or running"):
        plan(proj.scratch, "500", sacct("500_[0-2]|PENDING|0:0\n"))


def test_unknown_states_are_refused_not_guessed(proj: Project) -> None:
    proj.submit("ex-6", [("600", 2, "0-1", 0)], 2)
    with pytest.raises(Refusal, match=r"no longer knows how task 1 \(600_1\)"):
        plan(proj.scratch, "600", sacct("600_0|FAILED|1:0\n", live=""))


def test_without_accounting_the_states_come_from_scontrol(proj: Project, stub) -> None:  # type: ignore[no-untyped-def]
    proj.submit("ex-7", [("700", 2, "0-1", 0)], 2)
    stub("sacct", stderr="sacct: error: accounting storage is disabled", rc=1)
    stub("squeue", stdout="700_0|COMPLETED|-|0:01|node1\n700_1|FAILED|-|0:01|node1\n")
    stub("scontrol", stdout="JobId=701 ArrayJobId=700 ArrayTaskId=1 JobState=FAILED ExitCode=2:0\n"
         "JobId=700 ArrayJobId=700 ArrayTaskId=0 JobState=COMPLETED ExitCode=0:0\n")  # fmt: skip
    _, todo, tasks = plan(proj.scratch, "700")
    assert tasks == [(1, "700_1", "FAILED", "2:0", "-", "-")]


def test_already_rerun_points_to_the_rerun(proj: Project) -> None:
    proj.submit("ex-8", [("800", 2, "0-1", 0)], 2)
    proj.submit("ex-9", [("900", 1, "1", 0)], 2, extra="\tex-8")
    with pytest.raises(Refusal, match=r"already rerun as job\(s\) 900: .*--rerun 900"):
        plan(proj.scratch, "800", sacct(""))


def test_a_failed_venv_job_is_refused(proj: Project) -> None:
    proj.submit("ex-10", [("1001", 2, "0-1", 0)], 2)
    text = proj.ledger.read_text()
    proj.ledger.write_text(f"{STAMP}\t1000\tex\t1\t\tex-10\tvenv\t0\t/x/ex-venv-%j.out\n" + text)
    run = sacct("1000|FAILED|1:0\n1001_0|CANCELLED|0:0\n1001_1|CANCELLED|0:0\n")
    with pytest.raises(Refusal, match="venv job 1000 .* ended FAILED"):
        plan(proj.scratch, "1001", run)


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        ("script_mtime", r"ex-11.sbatch was changed after job 1100"),
        ("commands_mtime", r"ex-11.commands was changed after job 1100"),
        ("offset", r"HPC_TASK_OFFSET '2' where the ledger says 0"),
        ("array", r"--array line that does not name the ledger's 3"),
        ("gone", r"the batch script of job 1100, .* is gone"),
    ],
)
def test_edited_or_missing_kept_files(proj: Project, edit: str, why: str) -> None:
    proj.submit("ex-11", [("1100", 3, "0-2", 0)], 3)
    script, commands = proj.jobs / "ex-11.sbatch", proj.jobs / "ex-11.commands"
    later = proj.when + 3600
    if edit == "script_mtime":
        os.utime(script, (later, later))
    elif edit == "commands_mtime":
        os.utime(commands, (later, later))
    elif edit == "offset":
        script.write_text(script.read_text() + "export HPC_TASK_OFFSET='2'\n")
        os.utime(script, (proj.when, proj.when))
    elif edit == "array":
        script.write_text(script.read_text().replace("0-2", "0-1"))
        os.utime(script, (proj.when, proj.when))
    else:
        script.unlink()
    with pytest.raises(Refusal, match=why):
        plan(
            proj.scratch,
            "1100",
            sacct("1100_0|FAILED|1:0\n1100_1|COMPLETED|0:0\n1100_2|COMPLETED|0:0\n"),
        )


@pytest.mark.parametrize(
    "script", ["/etc/passwd", "{jobs}/../../x.sbatch", "{jobs}/sub/x.sbatch", "x.sbatch"]
)
def test_a_ledger_naming_a_script_elsewhere_is_refused(proj: Project, script: str) -> None:
    proj.submit("ex-12", [("1200", 1, None, 0)], 1)
    text = proj.ledger.read_text().split("\t")
    text[4] = script.format(jobs=proj.jobs)
    proj.ledger.write_text("\t".join(text))
    with pytest.raises(Refusal, match="not the toolkit's own"):
        plan(proj.scratch, "1200", sacct("1200|FAILED|1:0\n"))


@pytest.mark.parametrize("job_id", ["", "abc", "1e9", "12 34", "$(id)", "1" * 19, "12_x", "-1"])
def test_bad_job_ids(proj: Project, job_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    proj.submit("ex-13", [("1300", 1, None, 0)], 1)
    assert main(["--scratch-dir", str(proj.scratch), "--", job_id]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "is not a Slurm job id" in err


def test_main_prints_the_plan(proj: Project, stub, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    proj.submit("ex-14", [("1400", 2, "0-1", 0), ("1401", 1, "0", 2)], 3)
    stub("sacct", stdout="1400_0|COMPLETED|0:0\n1400_1|PREEMPTED|0:0\n1401_0|DEADLINE|0:0\n")
    assert main(["--scratch-dir", str(proj.scratch), "1401"]) == 0
    out = capsys.readouterr().out.splitlines()
    log = f"{proj.scratch}/hpc_outputs/ex-%A_%a.out"
    assert out == [
        "submission\tex-14\tex\t1400,1401",
        f"script\t{proj.jobs}/ex-14-part1.sbatch\t1\t1\t0\t{log}\t-",
        f"script\t{proj.jobs}/ex-14-part2.sbatch\t0\t1\t2\t{log}\t-",
        "task\t1\t1400_1\tPREEMPTED\t0:0\t-\t-",
        "task\t2\t1401_0\tDEADLINE\t0:0\t-\t-",
    ]
    stub("sacct", stdout="1400_0|COMPLETED|0:0\n1400_1|COMPLETED|0:0\n1401_0|COMPLETED|0:0\n")
    assert main(["--scratch-dir", str(proj.scratch), "1400"]) == 3
    assert capsys.readouterr().out.startswith("Nothing to rerun: every task of submission ex-14")


def test_the_ledger_takes_a_tenth_field() -> None:
    line = f"{STAMP}\t5\tex\t2\t/s/p/hpc_outputs/jobs/ex-2.sbatch\tex-2\tjob\t0\t/s/ex-%A_%a.out"
    assert parse_line(line).rerun_of == ""
    assert parse_line(line + "\tex-1").rerun_of == "ex-1"
    for bad in ("", "$(id)", "a b", "../x"):
        with pytest.raises(ValueError, match="rerun_of"):
            parse_line(f"{line}\t{bad}")
    with pytest.raises(ValueError, match="task count"):
        parse_line(line.replace("\t2\t", "\t99999999999999999999\t", 1))


def test_a_packed_job_names_its_lines_and_what_each_did(proj: Project) -> None:
    # --pack (outcome files <commands>.lines/I): 7 lines, 3 per job; job 1 has lines 3-5.
    proj.submit("ex-15", [("1500", 3, "0-2", 0)], 7)
    script = proj.jobs / "ex-15.sbatch"
    script.write_text(script.read_text() + "export HPC_PACK='3'\nexport HPC_PACK_LINES='3'\n"
                      "export HPC_PACK_TOTAL='7'\n")  # fmt: skip
    os.utime(script, (proj.when, proj.when))
    outcomes = proj.jobs / "ex-15.lines"
    outcomes.mkdir()
    (outcomes / "3").write_text("state=done exit=0 job=1500_1 attempt=1 seconds=2\n")
    (outcomes / "4").write_text("state=failed exit=3 job=1500_1 attempt=1 seconds=2\n")
    (outcomes / "6").write_text("state=running exit=- job=1500_2 attempt=1 seconds=0\n")
    run = sacct("1500_0|COMPLETED|0:0\n1500_1|FAILED|3:0\n1500_2|TIMEOUT|0:0\n")
    _, todo, tasks = plan(proj.scratch, "1500", run)
    assert [idx for _, idx, _ in todo] == [[1, 2]]
    assert tasks == [
        (1, "1500_1", "FAILED", "3:0", "3-5",
         "lines that did not complete: 4 (failed, exit 3), 5 (never started); "
         "done, not run again: 3"),
        (2, "1500_2", "TIMEOUT", "0:0", "6", "lines that did not complete: 6 (running)"),
    ]  # fmt: skip
