"""`hpc doctor`: recorded `scontrol show config`, `scontrol show partition -o` and `sinfo`
of the local cluster (Slurm 22.05, with slurmdbd and with a completion log only) in, the
one-screen report and the suggested profile out."""

from __future__ import annotations

import subprocess
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpc_toolkit import doctor as doc
from hpc_toolkit.cli import app

from conftest import Stub

REC = Path(__file__).parent / "recorded"


def rec(name: str) -> str:
    return (REC / name).read_text()


def facts(config: str = "config_local_2205.txt") -> doc.Facts:
    parts = doc.parse_partitions(rec("partitions_local_2205.txt"), rec("sinfo_local_2205.txt"))
    return doc.Facts("", doc.parse_config(rec(config)), parts)


def test_report_of_the_local_cluster() -> None:
    out = "\n".join(doc.report(facts()))
    assert "Cluster hpclocal: Slurm 22.05.8, supported (tested: 22.05 to 26.x)" in out
    row = "tmpdir*      UP     UNLIMITED  4      UNLIMITED  4          4000M     gpu:4,gpu:a100:4"
    assert row in out
    assert "short        UP     00:05:00" in out
    assert "REQUEUE (grace 30 s)" in out
    assert "GPU types (--gpu-type): a100" in out
    assert "Accounting:     slurmdbd" in out
    assert "MaxArraySize:   10001" in out
    assert "cgroup:         no (proctrack/linuxproc, task/none)" in out
    assert "Private /tmp:   no" in out
    assert "a TaskProlog runs" in out


def test_report_of_a_cluster_with_a_completion_log_only() -> None:
    out = "\n".join(doc.report(facts("config_jobcomp_2205.txt")))
    assert "no slurmdbd; a job completion log (/tmp/hpc_local_cluster_rmtx/log/jobcomp.txt)" in out


def test_cgroup_and_private_tmp_when_configured() -> None:
    cfg = doc.parse_config(rec("config_local_2205.txt"))
    cfg |= {"ProctrackType": "proctrack/cgroup", "TaskPlugin": "task/cgroup,task/affinity",
            "JobContainerType": "job_container/tmpfs"}  # fmt: skip
    assert doc.cgroup(cfg).startswith("yes (proctrack/cgroup, task/cgroup,task/affinity)")
    assert doc.private_tmp(cfg).startswith("yes (job_container/tmpfs)")
    # 25.11 and later name it NamespaceType
    assert doc.private_tmp({"NamespaceType": "namespace/linux"}).startswith("yes")


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("slurm-wlm 22.05.8", "supported (tested"),
        ("slurm 24.11.5", "supported (tested"),
        ("slurm 26.05.5", "supported (tested"),
        ("slurm 21.08.8", "too old"),
        ("slurm 27.05.0", "supported, newer than the versions tested"),
        ("nonsense", "unknown"),
    ],
)
def test_version_verdict(text: str, verdict: str) -> None:
    assert doc.version_verdict(doc.parse_version(text)).startswith(verdict)


def test_profile_suggested_without_and_with_a_probe() -> None:
    keys = doc.suggest_profile(facts().partitions, None)
    assert keys["HPC_DEFAULT_PARTITION"] == "tmpdir"
    assert keys["HPC_MAX_GPUS_PER_NODE"] == "4"
    assert keys["HPC_PROVIDES_TMPDIR"] == "auto"
    probe = doc.parse_probe("noise\nhpc-doctor-probe|/localscratch/job_5|/tmp|node2\n")
    assert probe == doc.Probe("/localscratch/job_5", "/tmp", "node2")
    assert doc.suggest_profile(facts().partitions, probe)["HPC_PROVIDES_TMPDIR"] == "yes"
    none = doc.parse_probe("hpc-doctor-probe||/scratch/tmp|node2\n")
    keys = doc.suggest_profile(facts().partitions, none)
    assert (keys["HPC_PROVIDES_TMPDIR"], keys["HPC_LOCAL_SCRATCH"]) == ("no", "/scratch/tmp")


def test_default_time_within_the_default_partition() -> None:
    parts = [doc.Partition("short", default=True, max_time="00:05:00")]
    assert doc.suggest_profile(parts, None)["HPC_DEFAULT_TIME"] == "00:05:00"


def test_written_profile_is_sourced_by_bash_as_written(tmp_path: Path) -> None:
    keys = doc.suggest_profile(facts().partitions, None)
    keys["HPC_MODULES"] = 'a "b" $HOME `x`'
    path = doc.profile_path(tmp_path, "mine")
    doc.write_profile(path, doc.profile_text(keys, "c", "22.05.8", datetime(2026, 1, 2)), False)
    done = subprocess.run(
        ["/bin/bash", "-c", 'source "$1"; printf "%s|%s" "$HPC_MODULES" "$HPC_DEFAULT_PARTITION"',
         "x", str(path)], capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout == 'a "b" $HOME `x`|tmpdir'
    with pytest.raises(FileExistsError):
        doc.write_profile(path, "x", False)
    doc.write_profile(path, "x\n", True)
    assert path.read_text() == "x\n"


@pytest.mark.parametrize("name", ["../evil", "a/b", "", ".hidden", "a b"])
def test_bad_profile_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="not valid"):
        doc.profile_path(tmp_path, name)


def _slurm_stubs(stub: Stub) -> None:
    # One scontrol for both questions: config lines and partition records never mix up
    # (parse_config needs ' = ', parse_records 'Key=').
    stub("scontrol", stdout=rec("config_local_2205.txt") + rec("partitions_local_2205.txt"))
    stub("sinfo", stdout=rec("sinfo_local_2205.txt"))


def test_cli_write_refuses_to_overwrite(
    runner: CliRunner, stub: Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _slurm_stubs(stub)
    project = tmp_path / "proj"
    (project / "hpc_files" / "clusters").mkdir(parents=True)
    monkeypatch.chdir(project)
    first = runner.invoke(app, ["doctor", "--write", "here"])
    assert first.exit_code == 0, first.stderr
    conf = project / "hpc_files" / "clusters" / "here.conf"
    assert 'HPC_DEFAULT_PARTITION="tmpdir"' in conf.read_text()
    conf.write_text("# mine\n")
    again = runner.invoke(app, ["doctor", "--write", "here"])
    assert again.exit_code == 2
    assert "exists: pass --force" in again.stderr
    assert conf.read_text() == "# mine\n"
    forced = runner.invoke(app, ["doctor", "--write", "here", "--force"])
    assert forced.exit_code == 0 and "Wrote" in forced.stdout
    assert conf.read_text() != "# mine\n"


def test_cli_without_slurm(runner: CliRunner) -> None:
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 1
    assert "scontrol is not on PATH" in result.stderr


def test_gres_with_socket_bindings_and_other_kinds() -> None:
    p = doc.Partition("gpu", gres=["gpu:v100l:4(S:0-1)", "gpu:2", "mps:400"])
    assert (p.max_gpus_per_node, p.gpu_types) == (4, ["v100l"])
    assert doc.Partition("cpu").max_gpus_per_node == 0
