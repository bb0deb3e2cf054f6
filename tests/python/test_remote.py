"""`hpc status|logs|cancel --remote HOST` (hpc_toolkit.remote): the words sent, how they are
quoted for the login node's shell, where the project lies there, and the clear lines; ssh
is a stub on PATH. The real thing: tests/integration/remote.bats."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpc_toolkit import remote
from hpc_toolkit.cli import app

from conftest import Stub

HOSTILE = "a b'c\"d $HOME `x` \\ ;|&\n2"


def test_words_keep_what_was_given() -> None:
    opts = {"--last": 20, "--summary": True, "--json": False, "--exp-name": None}
    assert remote.words("status", [None], opts) == ["status", "--last", "20", "--summary"]


def test_command_line_gives_the_login_node_the_same_words(tmp_path: Path) -> None:
    show = tmp_path / "bash"
    show.write_text('#!/bin/sh\nshift 3\nprintf "%s\\n" "$@"\n')
    show.chmod(0o755)
    line = remote.command_line("~/my proj", ["logs", HOSTILE])
    done = subprocess.run(
        ["/bin/sh", "-c", line], env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout == f"~/my proj\nlogs\n{HOSTILE}\n"


def test_remote_dir_env_then_profile_then_home(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "hpc_files" / "clusters").mkdir(parents=True)
    assert remote.remote_dir(project, {}) == "~/proj"
    (project / "hpc_files" / "clusters" / "far.conf").write_text(
        'HPC_DEFAULT_TIME="01:00:00"\nHPC_REMOTE="login"   # the cluster\n'
        "HPC_REMOTE_DIR='/work/me/p q'\n"
    )
    env = {"HPC_CLUSTER": "far"}
    assert remote.profile_keys(project, env) == {
        "HPC_REMOTE": "login",
        "HPC_REMOTE_DIR": "/work/me/p q",
    }
    assert remote.remote_dir(project, env) == "/work/me/p q"
    assert remote.remote_dir(project, {**env, "HPC_REMOTE_DIR": "/x"}) == "/x"


def test_control_dir_short_enough_for_a_socket() -> None:
    assert remote.control_dir({"HOME": "/home/me"}) == Path("/home/me/.ssh")
    long_home = "/very/long/" + "x" * 60
    assert str(remote.control_dir({"HOME": long_home})).startswith("/tmp/hpc-ssh-")


def test_unreachable_host(runner: CliRunner, stub: Stub) -> None:
    stub("ssh", stderr="ssh: connect to host dead port 22: Connection refused\n", rc=255)
    result = runner.invoke(app, ["status", "--remote", "dead"])
    assert result.exit_code == 1
    assert result.stderr == (
        "hpc: cannot reach dead over ssh (ssh: connect to host dead port 22: Connection "
        "refused): check that 'ssh dead' works\n"
    )


def test_the_login_nodes_exit_code_comes_back(
    runner: CliRunner, stub: Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "proj" / "hpc_files").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "proj")
    ssh = stub("ssh", rc=3)
    result = runner.invoke(app, ["logs", "12_3", "--lines", "5", "--remote", "login"])
    assert result.exit_code == 3
    sent = Path(f"{ssh}.args").read_text()
    assert "\nControlMaster=auto\n" in sent
    assert sent.endswith("\nlogin\nbash -lc " + sent.split("\nlogin\nbash -lc ", 1)[1])
    # (--remote none: the login node's copy does not follow its profile's HPC_REMOTE again)
    assert sent.endswith("' hpc-remote '~/proj' logs 12_3 --lines 5 --remote none\n")


@pytest.mark.parametrize("argv", [["cancel", "exp", "--remote", "h"]])
def test_cancel_asks_first(runner: CliRunner, stub: Stub, argv: list[str]) -> None:
    ssh = stub("ssh")
    result = runner.invoke(app, argv)
    assert result.exit_code == 2
    assert "nothing cancelled (not on a terminal: --yes cancels exp on h)" in result.stderr
    assert not Path(f"{ssh}.args").exists()


def test_bad_host_and_scratch_dir(runner: CliRunner, stub: Stub, tmp_path: Path) -> None:
    stub("ssh")
    result = runner.invoke(app, ["status", "--remote", "-oProxyCommand=x"])
    assert result.exit_code == 1 and "is not a host name" in result.stderr
    result = runner.invoke(app, ["status", "--remote", "h", "--scratch-dir", str(tmp_path)])
    assert result.exit_code == 2 and "--scratch-dir names a folder of this machine" in result.stderr


def _profile_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "proj"
    (project / "hpc_files" / "clusters").mkdir(parents=True)
    (project / "hpc_files" / "clusters" / "far.conf").write_text('HPC_REMOTE="login"\n')
    monkeypatch.chdir(project)
    monkeypatch.setenv("HPC_CLUSTER", "far")


def test_the_profiles_remote_is_the_default(
    runner: CliRunner, stub: Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _profile_project(tmp_path, monkeypatch)
    ssh = stub("ssh", rc=0)
    result = runner.invoke(app, ["status", "--last", "3"])
    assert result.exit_code == 0, result.stderr
    sent = Path(f"{ssh}.args").read_text()
    assert "\nlogin\nbash -lc " in sent
    assert sent.endswith("' hpc-remote '~/proj' status --last 3 --remote none\n")


def test_remote_none_runs_here_whatever_the_profile_says(
    runner: CliRunner, stub: Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _profile_project(tmp_path, monkeypatch)
    ssh = stub("ssh", rc=0)
    result = runner.invoke(app, ["status", "--remote", "none", "--scratch-dir", str(tmp_path)])
    assert not Path(f"{ssh}.args").exists()
    assert "cannot reach" not in result.stderr
    assert "--scratch-dir names a folder of this machine" not in result.stderr
