"""The ledger: appends from many processes stay whole; read-then-append under the lock is
atomic; attempts and states come out right; a torn line is skipped."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from hpc_toolkit.sweep.ledger import (
    FAILED,
    FINISHED,
    RUNNING,
    Ledger,
    attempts,
    latest,
    run_ids,
)


def claim_next(folder: str, n: int) -> None:
    """Like a bayes task: read everything, take the next free point, record it."""
    ledger = Ledger(Path(folder))
    for _ in range(n):
        with ledger.locked():
            taken = {e["point"] for e in ledger.events()}
            point = max(taken, default=-1) + 1
            ledger.append({"event": "start", "point": point, "run_id": f"r{point}", "params": {}})


def test_concurrent_claims_never_take_the_same_point(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=claim_next, args=(str(tmp_path), 15)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    points = [e["point"] for e in Ledger(tmp_path).events()]
    assert sorted(points) == list(range(90))


def test_attempts_and_states(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    with ledger.locked():
        ledger.append({"event": "start", "point": 0, "run_id": "a", "params": {"x": {"value": 1}}})
        ledger.append({"event": "end", "point": 0, "run_id": "a", "state": FAILED, "exit_code": 3})
        ledger.append({"event": "start", "point": 0, "run_id": "b", "params": {"x": {"value": 1}}})
        ledger.append({"event": "start", "point": 1, "run_id": "c", "params": {}})
        ledger.append(
            {
                "event": "end",
                "point": 0,
                "run_id": "b",
                "state": FINISHED,
                "exit_code": 0,
                "metric": 0.5,
            }
        )
    # A node that died mid-write leaves half a line: skipped.
    with ledger.path.open("a") as f:
        f.write('{"event": "start", "point": 2, "ru')
    events = ledger.events()
    tries = attempts(events)
    assert [a.run_id for a in tries[0]] == ["a", "b"]
    assert tries[0][0].state == FAILED and tries[0][0].exit_code == 3
    last = latest(events)
    assert last[0].state == FINISHED and last[0].metric == 0.5
    assert last[1].state == RUNNING
    assert 2 not in last
    assert 2 not in tries
    assert run_ids(events) == {"a", "b", "c"}


def test_no_ledger_yet(tmp_path: Path) -> None:
    assert Ledger(tmp_path).events() == []
