"""Job states from stub sacct/squeue scripts placed first on PATH."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpc_toolkit.slurm import count_range, parse_rows, query_states

from conftest import Stub

SACCT_ROWS = """\
1001|train|COMPLETED|0:0|00:10:00
1002_0|sweep|COMPLETED|0:0|00:05:00
1002_1|sweep|FAILED|1:0|00:00:03
1002_2|sweep|CANCELLED by 4242|0:15|00:01:00
1003_[2-9%2]|big|PENDING|0:0|00:00:00
1003_0|big|RUNNING|0:0|00:00:30
1003_1|big|RUNNING|0:0|00:00:30
9999|other|RUNNING|0:0|00:00:01
"""


@pytest.mark.parametrize(
    ("spec", "n"), [("0-9%4", 10), ("1,3,5-7", 5), ("0-15:4", 4), ("7", 1), ("x", 1)]
)
def test_count_range(spec: str, n: int) -> None:
    assert count_range(spec) == n


def test_parse_rows_counts_tasks_of_wanted_jobs() -> None:
    counts = parse_rows(
        SACCT_ROWS + "1001.batch|batch|COMPLETED|0:0|x\n", ["1001", "1002", "1003"], 2
    )
    assert counts["1001"] == {"COMPLETED": 1}
    assert counts["1002"] == {"COMPLETED": 1, "FAILED": 1, "CANCELLED": 1}
    assert counts["1003"] == {"PENDING": 8, "RUNNING": 2}
    assert "9999" not in counts


def test_sacct(stub: Stub) -> None:
    sacct = stub("sacct", SACCT_ROWS)
    q = query_states(["1001", "1002", "1003"])
    assert q.source == "sacct"
    assert q.note is None
    assert q.counts["1002"]["FAILED"] == 1
    argv = Path(f"{sacct}.args").read_text().splitlines()
    assert argv == [
        "-X",
        "-P",
        "-n",
        "-o",
        "JobID,JobName,State,ExitCode,Elapsed",
        "-j",
        "1001,1002,1003",
    ]


def test_no_jobs_runs_nothing(stub: Stub) -> None:
    sacct = stub("sacct")
    assert query_states([]).counts == {}
    assert not Path(f"{sacct}.args").exists()


def test_sacct_missing_falls_back_to_squeue(stub: Stub) -> None:
    squeue = stub("squeue", "1003_0|RUNNING\n1003_[1-9]|PENDING\n")
    q = query_states(["1001", "1003"])
    assert q.source == "squeue"
    assert q.counts == {"1003": {"RUNNING": 1, "PENDING": 9}}
    assert q.note is not None
    assert "sacct is not on PATH" in q.note
    assert "finished jobs" in q.note
    assert Path(f"{squeue}.args").read_text().splitlines() == [
        "-h",
        "-o",
        "%i|%T",
        "-j",
        "1001,1003",
    ]


def test_sacct_failing_falls_back_to_squeue(stub: Stub) -> None:
    stub("sacct", stderr="sacct: error: slurmdbd down\n", rc=1)
    stub("squeue", stderr="slurm_load_jobs error: Invalid job id specified\n", rc=1)
    q = query_states(["1001"])
    assert q.source == "squeue"
    assert q.counts == {}
    assert q.note is not None
    assert "sacct failed (exit 1: sacct: error: slurmdbd down)" in q.note


def test_neither_command_answers(stub: Stub) -> None:
    stub("sacct", stderr="sacct: fatal: no config\n", rc=1)
    stub("squeue", stderr="squeue: fatal: no config\n", rc=1)
    q = query_states(["1001"])
    assert q.source == "none"
    assert q.note is not None
    assert "sacct failed (exit 1: sacct: fatal: no config)" in q.note
    assert "squeue failed (exit 1: squeue: fatal: no config): job states are unknown" in q.note


def test_neither_command(stub: Stub) -> None:
    q = query_states(["1001"])
    assert q.source == "none"
    assert q.note is not None
    assert "sacct is not on PATH, and squeue is not on PATH" in q.note
