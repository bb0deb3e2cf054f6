"""The submissions ledger and locating the project's scratch folder."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hpc_toolkit.submissions import (
    SUBMIT_SLACK_S,
    LocateError,
    SlurmJob,
    by_job_number,
    find_project_root,
    find_scratch_dir,
    group_submissions,
    ledger_path,
    parse_line,
    read_submissions,
    ref_key,
)

GOOD = "2024-05-01T12:30:00+0200\t1001\ttrain\t1\t/s/p/hpc_outputs/jobs/train-1.sbatch"
ARRAY = "2024-05-01T13:00:00+0000\t1002\tsweep\t3\t/s/p/hpc_outputs/jobs/sweep-2.sbatch"


def test_parse_line() -> None:
    sub = parse_line(GOOD + "\n")
    assert sub == SlurmJob(
        datetime(2024, 5, 1, 12, 30, tzinfo=timezone(timedelta(hours=2))),
        "1001",
        "train",
        1,
        Path("/s/p/hpc_outputs/jobs/train-1.sbatch"),
        "1001",
    )
    assert not sub.is_array
    assert parse_line(ARRAY).is_array


def test_parse_line_takes_colon_offsets() -> None:
    assert parse_line(GOOD.replace("+0200", "+02:00")).submitted_at.utcoffset() == timedelta(
        hours=2
    )


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("2024-05-01T12:30:00+0000\t1001\ttrain\t1", "4 tab-separated fields"),
        ("yesterday\t1001\ttrain\t1\t/x", "not ISO 8601"),
        ("2024-05-01T12:30:00+0000\tabc\ttrain\t1\t/x", "job id"),
        ("2024-05-01T12:30:00+0000\t1001\ttrain\t0\t/x", "task count"),
        ("2024-05-01T12:30:00+0000\t1001\t\t1\t/x", "empty"),
    ],
)
def test_parse_line_says_what_is_wrong(line: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_line(line)


def test_read_skips_malformed_lines_with_a_warning(tmp_path: Path) -> None:
    ledger = tmp_path / "submissions.tsv"
    ledger.write_bytes(
        f"{GOOD}\nnot a ledger line\n\n\xff\xfe garbage\n{ARRAY}\n".encode("latin-1")
    )
    warnings: list[str] = []
    subs = read_submissions(ledger, on_bad_line=warnings.append)
    assert [s.job_id for s in subs] == ["1001", "1002"]
    assert len(warnings) == 2
    assert warnings[0].startswith(f"{ledger}:2: skipped a malformed line")
    assert warnings[1].startswith(f"{ledger}:4: ")


def test_read_missing_ledger_is_empty(tmp_path: Path) -> None:
    assert read_submissions(tmp_path / "nope.tsv", on_bad_line=pytest.fail) == []


def test_find_project_root(tmp_path: Path) -> None:
    project = tmp_path / "my proj"
    (project / "hpc_files").mkdir(parents=True)
    (project / "src" / "deep").mkdir(parents=True)
    assert find_project_root(project / "src" / "deep") == project
    assert find_project_root(project) == project
    assert find_project_root(tmp_path) is None


def test_find_scratch_dir(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "hpc_files").mkdir(parents=True)
    env = {"SCRATCH": "/scratch/me/"}
    assert find_scratch_dir(None, env, project) == Path("/scratch/me/proj")
    named = {**env, "HPC_PROJECT_NAME": "other"}
    assert find_scratch_dir(None, named, tmp_path) == Path("/scratch/me/other")
    assert find_scratch_dir(Path("/x"), {}, tmp_path) == Path("/x")
    # job_submitter.sh's HPC_PROJECT_DIR names the project too.
    moved = {**env, "HPC_PROJECT_DIR": str(tmp_path / "elsewhere" / "proj2")}
    assert find_scratch_dir(None, moved, tmp_path) == Path("/scratch/me/proj2")
    # Inside a job, the plan's value (the batch script's HPC_SCRATCH_DIR) wins.
    in_job = {**named, "HPC_SCRATCH_DIR": "/planned/proj"}
    assert find_scratch_dir(None, in_job, tmp_path) == Path("/planned/proj")
    assert ledger_path(Path("/x")) == Path("/x/hpc_outputs/jobs/submissions.tsv")


def test_find_scratch_dir_errors(tmp_path: Path) -> None:
    with pytest.raises(LocateError, match="SCRATCH is not set"):
        find_scratch_dir(None, {}, tmp_path)
    with pytest.raises(LocateError, match="no hpc_files/ folder"):
        find_scratch_dir(None, {"SCRATCH": "/s"}, tmp_path)


# --- job numbers Slurm hands out again -------------------------------------------------

LINE12 = (
    "{when}\t{job}\t{exp}\t2\t/s/p/hpc_outputs/jobs/{exp}-x.sbatch\t{sub}\tjob\t0\t"
    "/s/p/hpc_outputs/{exp}-%A_%a.out\t\t{cluster}\talice"
)


def _line(when: str, job: str, exp: str, sub: str, cluster: str = "c1") -> str:
    return LINE12.format(when=when, job=job, exp=exp, sub=sub, cluster=cluster)


def test_a_line_names_its_cluster_and_user() -> None:
    j = parse_line(_line("2026-11-28T12:00:00+0000", "1", "ex", "ex-a"))
    assert (j.cluster, j.user, j.rerun_of) == ("c1", "alice", "")
    with pytest.raises(ValueError, match="cluster"):
        parse_line(_line("2026-11-28T12:00:00+0000", "1", "ex", "ex-a", cluster="a b"))


def test_each_submission_of_a_reused_number_gets_its_own_time_window() -> None:
    lines = [
        _line("2026-11-28T12:00:00+0000", "1", "ex", "ex-old"),
        _line("2026-11-28T12:00:20+0000", "1", "ex", "ex-new"),  # the cluster numbered afresh
        _line("2026-11-28T12:00:10+0000", "1", "ex", "ex-far", cluster="c2"),  # another cluster
    ]
    groups = group_submissions([parse_line(x) for x in lines])
    old, new, far = (g.refs[ref_key(g.jobs[0])] for g in groups)
    t0 = datetime(2026, 11, 28, 12, 0, 0, tzinfo=timezone.utc).timestamp()
    assert (old.name, old.cluster) == ("ex", "c1")
    assert old.not_before == t0 - SUBMIT_SLACK_S
    assert old.before == t0 + 10  # halfway to the next job of that number on c1
    assert new.not_before == t0 + 10 and new.before is None
    assert far.not_before == t0 + 10 - SUBMIT_SLACK_S and far.before is None
    slurm = datetime.fromtimestamp(t0 + 19).strftime("%Y-%m-%dT%H:%M:%S")  # local, as Slurm
    assert new.accepts("ex", slurm) and not old.accepts("ex", slurm)
    assert not new.accepts("other", slurm)


def test_a_job_number_names_the_latest_submission_of_this_cluster_first() -> None:
    lines = [
        _line("2026-11-28T12:00:00+0000", "1", "ex", "ex-here"),
        _line("2026-11-28T12:00:10+0000", "1", "ex", "ex-there", cluster="c2"),
    ]
    groups = group_submissions([parse_line(x) for x in lines])
    assert by_job_number(groups, "1", "c1").submission_id == "ex-here"  # type: ignore[union-attr]
    assert by_job_number(groups, "1", "c2").submission_id == "ex-there"  # type: ignore[union-attr]
    assert by_job_number(groups, "1", "").submission_id == "ex-there"  # type: ignore[union-attr]
    assert by_job_number(groups, "2", "c1") is None


def test_log_text_is_the_log_paths_text_for_any_pattern() -> None:
    # hpc status writes every task's log with log_text (the folder's Path made once per
    # job); it must say what log_path says, for odd patterns too.
    for log in ["/s/p/hpc_outputs/e-%A_%a.out", "/s/p/hpc_outputs/e-%j.out", "rel/e-%j.out",
                "e-%j.out", "/e.out", "//x/e.out", "./e-%a", "a/./e.out", "a//e.out", "a/",
                "/", ".", "a/.", "%%a/e-%a%j", "x/%A%%j"]:  # fmt: skip
        job = SlurmJob(datetime(2026, 1, 1), "123", "e", 3, Path("s.sbatch"), log=log)
        for index in (None, 0, 7):
            assert job.log_text(Path("/s"), index) == str(job.log_path(Path("/s"), index)), log
    job = SlurmJob(datetime(2026, 1, 1), "9", "e", 1, Path("s.sbatch"))
    assert job.log_text(Path("/s"), None) == "/s/hpc_outputs/e-9.out"
