"""The attempts file's lines for stalls, failed preflights and lost nodes (issue 33)."""

from __future__ import annotations

from pathlib import Path

from hpc_toolkit.attempts import attempts_summary, read_attempts


def _file(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "0"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_preflight_failure_names_the_node_and_the_check(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "attempt=1 job=7 start=10 end=- outcome=running exit=-",
        "attempt=1 job=7 start=10 end=12 outcome=preflight-failed exit=0 node=node2 why=user-check",
        "attempt=2 job=7 start=30 end=90 outcome=finished exit=0",
    )
    tried = read_attempts(path)
    assert [a.outcome for a in tried] == ["preflight-failed", "finished"]
    assert tried[0].node == "node2" and tried[0].why == "user-check"
    assert tried[0].describe() == "preflight failed on node2: --preflight failed"
    assert attempts_summary(tried) == "2: preflight failed on node2: --preflight failed, finished"
    # hpc status --json: node and why where the line had them, not otherwise.
    assert tried[0].to_dict()["node"] == "node2" and tried[0].to_dict()["why"] == "user-check"
    assert "node" not in tried[1].to_dict() and "why" not in tried[1].to_dict()


def test_node_failure_and_stalls_in_words(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "attempt=1 job=8 start=10 end=20 outcome=node-failure exit=0 node=node3",
        "attempt=2 job=8 start=30 end=40 outcome=stalled-requeued exit=0",
        "attempt=3 job=8 start=50 end=60 outcome=stalled exit=79",
    )
    assert [a.describe() for a in read_attempts(path)] == [
        "node failure (node3)",
        "stalled: stopped and requeued",
        "stalled: stopped, not requeued (exit 79)",
    ]


def test_a_hostile_node_field_is_skipped(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "attempt=1 job=9 start=10 end=20 outcome=node-failure exit=0 node=$(rm -rf ~)",
        "attempt=1 job=9 start=10 end=20 outcome=node-failure exit=0 node=n1 why=Bad Words",
    )
    assert read_attempts(path) == []


def test_an_attempt_that_ended_with_no_word_shows_its_node(tmp_path: Path) -> None:
    # The job side writes the batch shell's node on the "running" line; when the attempt
    # never ended it (its node died), the next attempt records it, else it shows as lost.
    path = _file(
        tmp_path,
        "attempt=1 job=5 start=10 end=- outcome=running exit=- node=node1",
        "attempt=2 job=5 start=30 end=- outcome=running exit=- node=node2",
        "attempt=1 job=5 start=10 end=30 outcome=node-failure exit=- node=node1",
        "attempt=2 job=5 start=30 end=40 outcome=finished exit=0",
    )
    assert attempts_summary(read_attempts(path)) == "2: node failure (node1), finished"
    lost = _file(
        tmp_path,
        "attempt=1 job=6 start=10 end=- outcome=running exit=- node=node1",
        "attempt=2 job=6 start=30 end=- outcome=running exit=- node=node2",
    )
    assert [a.describe() for a in read_attempts(lost)] == [
        "ended with no record (killed?) on node1",
        "running",
    ]


def test_a_packed_line_stopped_for_a_stall_says_so() -> None:
    from hpc_toolkit.packing import Outcome

    assert Outcome("failed", "79", "7").describe() == "failed, exit 79 (stalled)"
    assert Outcome("failed", "3", "7").describe() == "failed, exit 3"
    assert Outcome("requeue", "143", "7").describe() == "requeue, exit 143"
