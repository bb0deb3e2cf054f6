"""Task states from stub sacct/squeue/scontrol scripts and a job completion log."""

# ruff: noqa: E501  (rows as Slurm prints them)

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from hpc_toolkit import slurm
from hpc_toolkit.slurm import (
    JobRef,
    TaskState,
    Usage,
    advice,
    efficiency_cells,
    expand_range,
    megabytes,
    parse_jobcomp,
    parse_rows,
    parse_scontrol,
    parse_usage,
    query_tasks,
    query_usage,
    run_command,
    seconds,
)

from conftest import Stub

SACCT_ROWS = """\
1001|COMPLETED|0:0|00:10:00|node1
1002_0|COMPLETED|0:0|00:05:00|node2
1002_1|FAILED|1:0|00:00:03|node3
1002_2|CANCELLED by 4242|0:15|00:01:00|node1
1003_[2-5%2]|PENDING|0:0|00:00:00|None assigned
1003_0|RUNNING|0:0|00:00:30|node1
1003_1|RUNNING|0:0|00:00:30|node2
9999|RUNNING|0:0|00:00:01|node4
"""
JOBCOMP = """\
JobId=2001 UserId=u(1) GroupId=g(1) Name=x JobState=COMPLETED Partition=p TimeLimit=5 StartTime=2026-11-24T10:00:00 EndTime=2026-11-24T10:01:05 NodeList=node1 NodeCnt=1 ProcCnt=1 WorkDir=/w ExitCode=0:0
JobId=2003 UserId=u(1) GroupId=g(1) Name=x JobState=FAILED Partition=p TimeLimit=5 StartTime=2026-11-24T10:00:00 EndTime=2026-11-24T10:00:03 NodeList=node2 NodeCnt=1 ProcCnt=1 WorkDir=/w ArrayJobId=2002 ArrayTaskId=1 ExitCode=4:0
JobId=2002 UserId=u(1) GroupId=g(1) Name=x JobState=COMPLETED Partition=p TimeLimit=5 StartTime=2026-11-24T10:00:00 EndTime=2026-11-24T10:00:03 NodeList=node3 NodeCnt=1 ProcCnt=1 WorkDir=/w ArrayJobId=2002 ArrayTaskId=0 ExitCode=0:0
"""


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A slurm.conf without slurmdbd: JobCompType=jobcomp/filetxt, the log in tmp_path."""
    log = tmp_path / "jobcomp.txt"
    log.write_text(JOBCOMP)
    path = tmp_path / "slurm.conf"
    path.write_text(f"ClusterName=x\nJobCompType=jobcomp/filetxt  # comment\nJobCompLoc={log}\n")
    monkeypatch.setenv("SLURM_CONF", str(path))
    return log


@pytest.fixture(autouse=True)
def no_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "absent.conf"))


def test_expand_range() -> None:
    assert expand_range("0-3%2") == [0, 1, 2, 3]
    assert expand_range("1,5-6") == [1, 5, 6]


def test_parse_rows_per_task_of_wanted_jobs() -> None:
    tasks = parse_rows(SACCT_ROWS + "1001.batch|COMPLETED|0:0|x|y\n", ["1001", "1002", "1003"])
    assert tasks[("1001", None)] == TaskState("COMPLETED", "0:0", "00:10:00", "node1")
    assert tasks[("1002", 1)].state == "FAILED"
    assert tasks[("1002", 2)].state == "CANCELLED"
    assert tasks[("1003", 5)] == TaskState("PENDING", "0:0", "00:00:00", "-")
    assert ("1003", 6) not in tasks
    assert not [k for k in tasks if k[0] == "9999"]


def test_sacct_one_call_for_all_jobs(stub: Stub) -> None:
    sacct = stub("sacct", SACCT_ROWS)
    q = query_tasks(["1001", "1002", "1003"])
    assert q.sources == ["sacct"]
    assert q.notes == []
    assert q.counts["1002"]["FAILED"] == 1
    assert q.counts["1003"] == {"PENDING": 4, "RUNNING": 2}
    argv = Path(f"{sacct}.args").read_text().splitlines()
    assert argv == ["-D", "-X", "-P", "-n", "-o", "JobID,State,ExitCode,Elapsed,NodeList,JobName,Submit",
                    "-j", "1001,1002,1003"]  # fmt: skip


def test_no_jobs_runs_nothing(stub: Stub) -> None:
    sacct = stub("sacct")
    assert query_tasks([]).tasks == {}
    assert not Path(f"{sacct}.args").exists()


def test_jobcomp_file_then_squeue_then_scontrol(stub: Stub, conf: Path) -> None:
    stub("sacct", stderr="sacct: error: Slurm accounting storage is disabled\n", rc=1)
    squeue = stub("squeue", "3001_0|RUNNING|-|0:30|node1\n3001_[1-2]|PENDING|-|0:00|\n")
    scontrol = stub(
        "scontrol", "JobId=3002 JobState=COMPLETED ExitCode=0:0 RunTime=00:00:09 NodeList=node4\n"
    )
    q = query_tasks(["2001", "2002", "3001", "3002"])
    assert q.sources == [f"jobcomp file {conf}", "squeue -t all", "scontrol show job"]
    assert "sacct failed (exit 1: sacct: error: Slurm accounting storage is disabled)" in q.notes
    assert q.tasks[("2001", None)] == TaskState("COMPLETED", "0:0", "00:01:05", "node1")
    assert q.tasks[("2002", 1)] == TaskState("FAILED", "4:0", "00:00:03", "node2")
    assert q.tasks[("3001", 2)].state == "PENDING"
    assert q.tasks[("3002", None)] == TaskState("COMPLETED", "0:0", "00:00:09", "node4")
    assert Path(f"{squeue}.args").read_text().split() == ["-t", "all", "-h", "-o", "%i|%T|-|%M|%N|%j|%V"]
    assert Path(f"{scontrol}.args").read_text().split() == ["-o", "show", "job"]


def test_squeue_finished_tasks_get_exit_codes_from_scontrol(stub: Stub) -> None:
    stub("sacct", rc=1)
    stub("squeue", "4001_0|FAILED|-|0:03|node1\n")
    stub(
        "scontrol",
        "JobId=4002 ArrayJobId=4001 ArrayTaskId=0 JobState=FAILED ExitCode=3:0 RunTime=00:00:03 NodeList=node1\n",
    )
    q = query_tasks(["4001"])
    assert q.tasks[("4001", 0)] == TaskState("FAILED", "3:0", "0:03", "node1")


def test_tasks_slurmdbd_has_not_heard_of_come_from_squeue(stub: Stub) -> None:
    # While an array runs, sacct has the tasks slurmdbd was told of and the pending range,
    # not a task that started or ended in the last seconds (seen: 7-16 of 100 short tasks
    # shown UNKNOWN, their attempts "1: finished"); squeue -t all and scontrol still know it.
    stub("sacct", "5001_0|COMPLETED|0:0|00:00:01|node1\n5001_[3-4]|PENDING|0:0|00:00:00|\n")
    stub("squeue", "5001_1|COMPLETED|-|0:01|node2\n5001_2|RUNNING|-|0:01|node3\n")
    stub(
        "scontrol",
        "JobId=5003 ArrayJobId=5001 ArrayTaskId=1 JobState=COMPLETED ExitCode=0:0 RunTime=00:00:01 NodeList=node2\n",
    )
    q = query_tasks(["5001"], expected={"5001": [0, 1, 2, 3, 4]})
    assert q.tasks[("5001", 1)] == TaskState("COMPLETED", "0:0", "0:01", "node2")
    assert q.tasks[("5001", 2)].state == "RUNNING"
    assert q.tasks[("5001", 3)].state == "PENDING"
    assert q.sources == ["sacct", "squeue -t all", "scontrol show job"]
    # Without the tasks it should have, the known job stops at sacct (the old behaviour).
    assert ("5001", 1) not in query_tasks(["5001"]).tasks


def test_nothing_answers(stub: Stub) -> None:
    q = query_tasks(["1001"])
    assert q.tasks == {}
    assert q.sources == []
    assert "sacct is not on PATH" in q.notes
    assert "no source knows job(s) 1001" in q.notes


def test_parse_jobcomp_and_scontrol_keep_wanted_only() -> None:
    assert set(parse_jobcomp(JOBCOMP.splitlines(), ["2002"])) == {("2002", 0), ("2002", 1)}
    pending = "JobId=5 ArrayJobId=5 ArrayTaskId=1-3%2 JobState=PENDING ExitCode=0:0 RunTime=00:00:00 NodeList=(null)\n"
    assert set(parse_scontrol(pending, ["5"])) == {("5", 1), ("5", 2), ("5", 3)}


def test_units() -> None:
    assert seconds("1-01:00:00") == 90000
    assert seconds("02:03.500") == 123.5
    assert megabytes("16G") == 16384
    assert megabytes("4000Mn") == 4000
    assert megabytes("2048K") == 2
    assert megabytes("") is None


EFF_ROWS = """\
7001|COMPLETED|600|20:00.000|16|8G||60|1|billing=16,cpu=16,mem=8G,node=1|
7001.batch|COMPLETED|600|20:00.000|16||1048576K||1||cpu=00:20:00
7002|TIMEOUT|3600|01:00:00|1|1000M||60|1|cpu=1,mem=1000M,gres/gpu=1|
7002.batch|TIMEOUT|3600|01:00:00|1||900M||1||gres/gpuutil=87
"""


def test_usage_and_advice(stub: Stub) -> None:
    stub("sacct", EFF_ROWS)
    usage = query_usage(["7001", "7002"])
    assert not isinstance(usage, str)
    a = usage[("7001", None)]
    assert (a.cpus, a.elapsed_s, a.total_cpu_s, a.req_mem_mb, a.max_rss_mb) == (
        16,
        600,
        1200,
        8192,
        1024,
    )
    assert efficiency_cells(a) == ["12%", "1024M/8192M", "00:10:00/01:00:00", "not available"]
    assert advice(a) == (
        "used 2.0 of 16 CPUs: ask for --cpus 2; peak memory 1024M of 8192M: ask for --mem 2G; used 00:10:00 of 01:00:00: a shorter --time starts sooner"
    )
    b = usage[("7002", None)]
    assert efficiency_cells(b)[3] == "87%"
    assert "hit its time limit" in advice(b)


def test_usage_without_sacct(stub: Stub) -> None:
    stub("sacct", stderr="sacct: error: Slurm accounting storage is disabled\n", rc=1)
    got = query_usage(["1"])
    assert got == "sacct failed (exit 1: sacct: error: Slurm accounting storage is disabled)"


def test_advice_quiet_when_close() -> None:
    assert advice(Usage("COMPLETED", 600, 2300, 4, 4000, 3000, 900)) == ""


def test_parse_usage_ignores_other_jobs() -> None:
    assert parse_usage(EFF_ROWS, ["7002"]).keys() == {("7002", None)}


# --- job numbers handed out again (a cluster started afresh, two clusters, one $SCRATCH) ---

T0 = datetime(2026, 11, 28, 12, 0, 0).timestamp()  # local time, as Slurm prints it
REUSED = """\
1|FAILED|3:0|00:00:01|node1|old|2026-11-28T12:00:00
1|COMPLETED|0:0|00:00:01|node2|new|2026-11-28T12:05:00
"""


def _refs() -> dict[str, JobRef]:
    return {
        "1@old": JobRef("1", "old", T0 - 60, None),
        "1@new": JobRef("1", "new", T0 + 240, None),
    }


def test_rows_of_a_reused_number_go_to_the_job_of_their_name() -> None:
    tasks = parse_rows(REUSED, _refs())
    assert tasks[("1@old", None)].state == "FAILED"
    assert tasks[("1@new", None)].state == "COMPLETED"


def test_rows_of_one_name_go_by_submit_time() -> None:
    rows = REUSED.replace("|new|", "|old|")
    refs = {
        "1@a": JobRef("1", "old", T0 - 60, T0 + 240),
        "1@b": JobRef("1", "old", T0 + 240, None),
    }
    tasks = parse_rows(rows, refs)
    assert tasks[("1@a", None)].state == "FAILED"
    assert tasks[("1@b", None)].state == "COMPLETED"
    # An older job of the number (before the ledger's time less the slack) is nobody's.
    assert parse_rows(rows, {"1@c": JobRef("1", "old", T0 + 600, None)}) == {}


def test_reused_number_in_the_completion_log_and_scontrol() -> None:
    lines = [
        "JobId=7 Name=old JobState=FAILED SubmitTime=2026-11-28T12:00:00 ArrayJobId=1 ArrayTaskId=1 ExitCode=3:0",
        "JobId=1 Name=new JobState=COMPLETED SubmitTime=2026-11-28T12:05:00 ArrayJobId=1 ArrayTaskId=1 ExitCode=0:0",
    ]
    found = parse_jobcomp(lines, _refs())
    assert found[("1@old", 1)].state == "FAILED"
    assert found[("1@new", 1)].state == "COMPLETED"
    sc = "JobId=1 JobName=new JobState=RUNNING SubmitTime=2026-11-28T12:05:00 ExitCode=0:0\n"
    assert set(parse_scontrol(sc, _refs())) == {("1@new", None)}


def test_query_never_reads_a_reused_number_as_the_old_job(stub: Stub) -> None:
    # sacct knows only the new job 1 (the old one's accounting is gone); the old submission
    # is unknown, never COMPLETED.
    stub("sacct", REUSED.splitlines()[1] + "\n")
    stub("squeue", "")
    stub("scontrol", "")
    q = query_tasks(_refs())
    assert q.state_of("1@new", None) is not None
    assert q.state_of("1@old", None) is None
    assert any(n.startswith("job number(s) 1 belong to another job now") for n in q.notes)
    assert not any("no source knows" in n for n in q.notes)


def test_a_job_of_another_cluster_is_not_asked(
    stub: Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "here.conf").write_text("ClusterName=here\n")
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "here.conf"))
    sacct = stub("sacct", REUSED)
    q = query_tasks({"1@old": JobRef("1", "old", T0 - 60, None, cluster="other")})
    assert q.tasks == {}
    assert not Path(f"{sacct}.args").exists()
    assert any("submitted on cluster other, not this one (here)" in n for n in q.notes)
    q = query_tasks({"1@new": JobRef("1", "new", T0 + 240, None, cluster="here")})
    assert q.state_of("1@new", None) is not None


def test_a_slow_slurm_is_said_on_stderr_a_quick_one_is_not(
    hermetic: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Anything a user waits on for more than a moment says so (here after 0.2 s, not 2 s).
    monkeypatch.setattr(slurm, "PROGRESS_AFTER_S", 0.2)
    monkeypatch.setattr(slurm, "PROGRESS_PROG", "hpc")
    slow = hermetic / "sacct"
    slow.write_text("#!/bin/sh\n/bin/sleep 0.6\necho '1|COMPLETED'\n")
    slow.chmod(0o755)
    done = run_command(["sacct", "-X"])
    assert not isinstance(done, str) and done.stdout == "1|COMPLETED\n"
    assert capsys.readouterr().err == (
        "hpc: waiting for sacct (Slurm is slow to answer; at most 60 s)\n"
    )
    slow.write_text("#!/bin/sh\necho quick\n")
    run_command(["sacct", "-X"])
    assert capsys.readouterr().err == ""
