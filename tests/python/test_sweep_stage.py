"""Submission side of offline sweeps: how many tasks, the folder, what a resume reruns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpc_toolkit.sweep.folder import SweepFolder
from hpc_toolkit.sweep.ledger import Ledger
from hpc_toolkit.sweep.spec import SweepError, parse_sweep
from hpc_toolkit.sweep.stage import main, num_points, ranges
from real_sweep_folder import write_sweep_folder

from conftest import Stub

GRID = "program: t.py\nmethod: grid\nparameters:\n  a: {values: [1, 2, 3]}\n  b: {min: 1, max: 4}\n"
RANDOM = "program: t.py\nmethod: random\nparameters:\n  a: {min: 0.0, max: 1.0}\n"


def test_number_of_points() -> None:
    assert num_points(parse_sweep(GRID), None) == 12
    assert num_points(parse_sweep(GRID + "run_cap: 5\n"), None) == 5
    assert num_points(parse_sweep(RANDOM), 7) == 7
    assert num_points(parse_sweep(RANDOM + "run_cap: 9\n"), None) == 9
    with pytest.raises(SweepError, match="is for random and bayes sweeps"):
        num_points(parse_sweep(GRID), 3)
    with pytest.raises(SweepError, match="no fixed number of runs"):
        num_points(parse_sweep(RANDOM), None)
    with pytest.raises(SweepError, match="more than the file's run_cap 2"):
        num_points(parse_sweep(RANDOM + "run_cap: 2\n"), 3)


def test_ranges() -> None:
    assert ranges([]) == ""
    assert ranges([5]) == "5"
    assert ranges([0, 1, 2, 5, 7, 8, 2]) == "0-2 5 7-8"


def test_check_prints_method_points_and_the_new_sweep_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "sweeper.yml"
    sweep.write_text(GRID)
    assert main(["check", str(sweep)]) == 0
    assert capsys.readouterr().out == "grid\t12\n"
    assert main(["check", str(sweep), "--sweep-id", "abcd1234", "--exp-name", "e"]) == 0
    first, info_line = capsys.readouterr().out.splitlines()
    assert first == "grid\t12"
    info = json.loads(info_line)
    assert info["num_points"] == 12 and info["sweep_id"] == "abcd1234" and info["exp_name"] == "e"
    assert info["config"]["parameters"]["b"] == {"min": 1, "max": 4}
    # What job_submitter.sh writes from it is a folder SweepFolder reads.
    folder = tmp_path / "abcd1234"
    folder.mkdir()
    (folder / "sweep.json").write_text(info_line + "\n")
    assert SweepFolder.load(folder).num_points == 12


def test_errors_say_where_and_print_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "bad.yml"
    sweep.write_text("method: grid\nparameters:\n  lr: {min: 0.1, max: 1.0}\n")
    ids = ["--sweep-id", "abcd1234", "--exp-name", "e"]
    assert main(["--prog", "job_submitter.sh", "check", str(sweep), *ids]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith(
        f"job_submitter.sh: {sweep}: line 3: parameters.lr: a grid cannot"
    )
    assert captured.out == ""


def make(tmp_path: Path, points: int) -> Path:
    folder = tmp_path / "abcd1234"
    write_sweep_folder(folder, parse_sweep(GRID), "abcd1234", "exp", points, GRID)
    return folder


def log(folder: Path, point: int, run: str, job: str, state: str | None) -> None:
    ledger = Ledger(folder)
    ledger.append({"event": "start", "point": point, "run_id": run, "params": {}, "job": job})
    if state:
        ledger.append({"event": "end", "point": point, "run_id": run, "state": state})


def test_resume_reruns_what_did_not_finish(
    tmp_path: Path, stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make(tmp_path, 8)
    log(folder, 0, "r0", "10_0", "finished")
    log(folder, 1, "r1", "10_1", "failed")
    log(folder, 2, "r2", "10_2", "killed")
    log(folder, 3, "r3", "10_3", None)  # running, and Slurm still runs it
    log(folder, 4, "r4", "10_4", None)  # "running", but its task is gone (killed hard)
    log(folder, 5, "r5", "11_0", "failed")
    log(folder, 5, "r6", "11_1", "finished")  # failed once, then finished
    # 10_4's number is another job's now (Slurm numbered afresh): point 4 is not running.
    stub("squeue", stdout="10_3|exp\n10_4|another\n")
    assert main(["resume", str(folder)]) == 0
    assert capsys.readouterr().out == "grid\t8\texp\tabcd1234\t1-2 4 6-7\n"
    assert (tmp_path / "bin" / "squeue.args").read_text().split("\n")[:5] == [
        "-h", "-r", "-o", "%i|%j", "-j"
    ]  # fmt: skip
    assert SweepFolder.load(folder).num_points == 8


def test_resume_leaves_running_points_alone_when_slurm_cannot_be_asked(
    tmp_path: Path, stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make(tmp_path, 2)
    log(folder, 0, "r0", "10_0", None)
    stub("squeue", stderr="slurm_load_jobs error: Unable to contact slurm controller", rc=1)
    assert main(["resume", str(folder)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "grid\t2\texp\tabcd1234\t1\n"
    assert "squeue could not be asked" in captured.err


def test_more_points_than_the_cluster_holds_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    axes = "".join(f"  p{i}: {{values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}}\n" for i in range(40))
    (tmp_path / "g.yml").write_text("program: t.py\nmethod: grid\nparameters:\n" + axes)
    assert main(["check", str(tmp_path / "g.yml"), "--max-points", "10000"]) == 1
    assert "jobs this cluster holds at once (MaxJobCount)" in capsys.readouterr().err
    (tmp_path / "r.yml").write_text(RANDOM + "run_cap: 99999999999999999999\n")
    assert main(["check", str(tmp_path / "r.yml"), "--max-points", "10000"]) == 1
    assert (
        main(
            [
                "check",
                str(tmp_path / "g.yml").replace("g.yml", "r.yml"),
                "--num-agents",
                "5",
                "--max-points",
                "10000",
            ]
        )
        == 0
    )


def test_a_huge_grid_axis_is_refused_without_building_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.yml").write_text(
        "program: t.py\nmethod: grid\nparameters:\n  x: {min: 0, max: 100000000000000}\n"
    )
    assert main(["check", str(tmp_path / "m.yml")]) == 1
    err = capsys.readouterr().err
    assert "m.yml: parameters.x: 100,000,000,000,001 values on one grid axis" in err


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("exp_name", "../../..", "exp_name '../../..' must be 1-100 letters"),
        ("exp_name", "a/b", "exp_name 'a/b' must be"),
        ("exp_name", "$(touch x)", "exp_name '$(touch x)' must be"),
        ("exp_name", "-rf", "exp_name '-rf' must be"),
        ("exp_name", "x" * 101, "must be 1-100"),
        ("exp_name", 7, "exp_name '7' must be"),
        ("num_points", 10**30, "num_points '1000000000000000000000000000000' is not a number"),
        ("num_points", -1, "num_points '-1' is not a number"),
        ("num_points", True, "num_points 'True' is not a number"),
        ("num_points", "8", "num_points '8' is not a number"),
        ("sweep_id", "../x", "sweep_id '../x' is not a sweep id"),
    ],
)
def test_a_tampered_sweep_json_is_refused(
    tmp_path: Path, key: str, value: object, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """sweep.json lives on scratch and may be edited: its fields get the command line's checks."""
    folder = make(tmp_path, 4)
    info = json.loads((folder / "sweep.json").read_text())
    info[key] = value
    (folder / "sweep.json").write_text(json.dumps(info))
    assert main(["resume", str(folder)]) == 1
    assert message in capsys.readouterr().err


def test_hostile_job_labels_in_the_ledger_never_reach_squeue(
    tmp_path: Path, stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make(tmp_path, 2)
    log(folder, 0, "r0", "10_0 --help", None)
    log(folder, 1, "r1", "$(touch x)", None)
    stub("squeue", stdout="")
    assert main(["resume", str(folder)]) == 0
    assert not (tmp_path / "bin" / "squeue.args").exists()
    assert capsys.readouterr().out == "grid\t2\texp\tabcd1234\t\n"


def test_resume_counts_queued_points_as_taken(
    tmp_path: Path, stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    # Jobs 20 (points 0-5 as indices 0-5) and 21 (a resume: index 0 is point 4); points 1
    # and 3 never started and still wait in job 20; point 4 waits in job 21.
    folder = make(tmp_path, 6)
    (folder / "jobs.tsv").write_text("20\t0\n21\t4\nbad line\n22\tx\n")
    log(folder, 0, "r0", "20_0", "finished")
    log(folder, 2, "r2", "20_2", "failed")
    stub("squeue", stdout="20_1\n20_3\n21_0\n")
    assert main(["resume", str(folder)]) == 0
    assert capsys.readouterr().out == "grid\t6\texp\tabcd1234\t2 5\n"
    args = (tmp_path / "bin" / "squeue.args").read_text().split("\n")
    assert args[-2] == "20,21" or "20,21" in args


def test_resume_refuses_when_the_queue_cannot_be_read(
    tmp_path: Path, stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make(tmp_path, 2)
    (folder / "jobs.tsv").write_text("20\t0\n")
    stub("squeue", stderr="slurm_load_jobs error: Unable to contact slurm controller", rc=1)
    assert main(["resume", str(folder)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "still queued" in captured.err


NANO = (
    "program: train.py\nmethod: grid\n"
    'command: ["${env}", "python", "${program}", "${args}"]\n'
    "parameters:\n  learning_rate: {values: [0.001, 0.0001]}\n  batch_size: {values: [8, 16, 32]}\n"
)


def test_preview_shows_the_first_points_commands_as_they_will_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --dry-run sees that the arguments fit the program (nanoGPT's --name=value)."""
    f = tmp_path / "s.yml"
    f.write_text(NANO)
    assert main(["preview", str(f), "--sweep-id", "abcd1234", "--count", "6", "--first", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "point 0: /usr/bin/env python train.py --batch_size=8 --learning_rate=0.001",
        "point 1: /usr/bin/env python train.py --batch_size=8 --learning_rate=0.0001",
        "point 2: /usr/bin/env python train.py --batch_size=16 --learning_rate=0.001",
    ]


def test_preview_of_a_random_sweep_without_w_and_b_search_code_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import hpc_toolkit.sweep.stage as stage

    def missing() -> None:
        raise RuntimeError("need sweeps")

    monkeypatch.setattr(stage, "load_sweeps", missing)
    f = tmp_path / "s.yml"
    f.write_text(RANDOM)
    assert main(["preview", str(f), "--sweep-id", "abcd1234", "--count", "4"]) == 0
    out = capsys.readouterr().out
    assert "drawn in the job" in out
    assert "python t.py ${args}" in out
