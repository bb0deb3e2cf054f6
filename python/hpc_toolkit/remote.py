"""`hpc status|logs|cancel --remote HOST`: the same command, run on HOST's login node in the
project's copy there (job_submitter.sh --remote put it in HPC_REMOTE_DIR, else
~/<project>), over the SSH connection job_submitter.sh opened (hpc_files/lib/remote.sh:
the same ControlPath, so an open connection is reused and an MFA prompt comes once).

The command runs in a login shell of HOST (its Slurm, its $SCRATCH), with the project's
own hpc_toolkit (python/) first on the path and the first Python there that has typer:
the project's .venv, else python3.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from hpc_toolkit.console import die
from hpc_toolkit.submissions import find_project_root

# Run by `bash -lc` on the login node: $1 the project folder, then the hpc arguments.
_REMOTE_SCRIPT = r"""d=$1; shift
case $d in "~") d=$HOME ;; "~/"*) d=$HOME/${d#"~/"} ;; esac
first="submit once with job_submitter.sh --remote (it copies the project there)"
cd -- "$d" 2>/dev/null || {
  echo "hpc: no folder $d on $(hostname): $first, or set HPC_REMOTE_DIR" >&2; exit 3; }
[ -f hpc_files/job_submitter.sh ] || {
  echo "hpc: no toolkit in $d on $(hostname) (hpc_files/job_submitter.sh): $first" >&2; exit 3; }
for py in .venv/bin/python python3; do
  if PYTHONPATH=$PWD/python "$py" -c 'import typer' >/dev/null 2>&1; then
    PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} exec "$py" -m hpc_toolkit "$@"
  fi
done
echo "hpc: no Python with typer on $(hostname) (tried $d/.venv/bin/python, python3):" \
  "pip install -e python in the project's venv there (--setup-venv builds it)" >&2
exit 3
"""
_ASSIGN = re.compile(r"""^\s*(HPC_REMOTE(?:_DIR)?)=(?:"([^"$`\\]*)"|'([^']*)'|([^\s"'$`\\#]*))""")


def control_dir(environ: Mapping[str, str]) -> Path:
    """The folder of the connection's socket, as hpc_files/lib/remote.sh chooses it."""
    d = environ.get("HPC_SSH_CONTROL_DIR") or f"{environ.get('HOME', '~')}/.ssh"
    if len(d) > 50:
        d = f"{environ.get('TMPDIR') or '/tmp'}/hpc-ssh-{os.getuid()}"
        if len(d) > 50:
            d = f"/tmp/hpc-ssh-{os.getuid()}"
    return Path(d)


def ssh_argv(host: str, environ: Mapping[str, str]) -> list[str]:
    d = control_dir(environ)
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = d.stat()
    if d.is_symlink() or st.st_uid != os.getuid():
        raise RemoteError(
            f"{d} is not your own folder: set HPC_SSH_CONTROL_DIR to a folder of yours"
        )
    if st.st_mode & 0o077:
        d.chmod(0o700)
    argv = ["ssh"]
    if environ.get("HPC_SSH_CONFIG"):
        argv += ["-F", environ["HPC_SSH_CONFIG"]]
    persist = environ.get("HPC_SSH_PERSIST") or "30m"
    return [*argv, "-o", "ControlMaster=auto", "-o", f"ControlPath={d}/hpc-%C",
            "-o", f"ControlPersist={persist}", "-o", "ConnectTimeout=30",
            "-o", "ServerAliveInterval=30"]  # fmt: skip


class RemoteError(RuntimeError):
    """The command could not be sent (a bad host name, no ssh)."""


def profile_keys(project: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """HPC_REMOTE and HPC_REMOTE_DIR of the profile $HPC_CLUSTER names (else generic), when
    written as plain assignments (the form `hpc doctor --write` writes)."""
    name = environ.get("HPC_CLUSTER") or "generic"
    path = Path(name) if "/" in name or name.endswith(".conf") else (
        project / "hpc_files" / "clusters" / f"{name}.conf")  # fmt: skip
    out: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        m = _ASSIGN.match(line)
        if m:
            out[m[1]] = next(v for v in m.groups()[1:] if v is not None)
    return out


def remote_dir(project: Path, environ: Mapping[str, str]) -> str:
    """Where the project lies on the login node: HPC_REMOTE_DIR, else ~/<project folder>."""
    d = environ.get("HPC_REMOTE_DIR") or profile_keys(project, environ).get("HPC_REMOTE_DIR")
    return d or f"~/{project.name}"


def command_line(directory: str, words: Sequence[str]) -> str:
    """The one string ssh hands the login node's shell (POSIX quoting: any login shell)."""
    return shlex.join(["bash", "-lc", _REMOTE_SCRIPT, "hpc-remote", directory, *words])


def run_remote(
    host: str, project: Path, words: Sequence[str], environ: Mapping[str, str], tty: bool = False
) -> int:
    """Run `hpc WORDS` on HOST in the project's copy; its output passes through as it comes.
    Returns its exit code; 255 (ssh's own failure) comes back as a RemoteError."""
    if not host or host.startswith("-") or "\n" in host:
        raise RemoteError(f"--remote {host!r} is not a host name")
    argv = ssh_argv(host, environ)
    if tty:
        argv.append("-t")
    try:
        done = subprocess.run(
            [*argv, host, command_line(remote_dir(project, environ), words)],
            stdin=subprocess.DEVNULL if not tty else None, stderr=subprocess.PIPE, text=True,
            check=False,
        )  # fmt: skip
    except FileNotFoundError as exc:
        raise RemoteError("ssh not found on PATH: install OpenSSH's client") from exc
    said = [line for line in done.stderr.splitlines() if line.strip()]
    if done.returncode == 255:
        last = said[-1] if said else "no answer"
        raise RemoteError(f"cannot reach {host} over ssh ({last}): check that 'ssh {host}' works")
    for line in said:
        print(line, file=sys.stderr)
    return done.returncode


RemoteOpt = Annotated[
    str | None,
    typer.Option(
        "--remote",
        metavar="HOST",
        help="Run it on HOST's login node over ssh, in the project's copy there"
        " (default: the profile's HPC_REMOTE; none: here).",
    ),
]


def words(command: str, args: Sequence[str | None], opts: Mapping[str, object]) -> list[str]:
    """`hpc COMMAND` as words: the arguments given, then each option given (True: a flag)."""
    out = [command, *(a for a in args if a is not None)]
    for opt, value in opts.items():
        if value is True:
            out.append(opt)
        elif value is not None and value is not False:
            out += [opt, str(value)]
    return out


def host_for(given: str | None) -> str | None:
    """Where to run: --remote HOST, else the HPC_REMOTE of the profile $HPC_CLUSTER names
    (else generic), as job_submitter.sh decides; None (here) for `none` or no host."""
    if given is None:
        project = find_project_root(Path.cwd()) or Path.cwd()
        given = profile_keys(project, os.environ).get("HPC_REMOTE")
    return None if not given or given == "none" else given


def forward(host: str, argv: Sequence[str], tty: bool = False) -> NoReturn:
    """Run `hpc ARGV` on HOST's login node, and end with its exit code. The login node's
    copy gets --remote none: its profile's HPC_REMOTE must not send it on again."""
    project = find_project_root(Path.cwd()) or Path.cwd()
    try:
        rc = run_remote(host, project, [*argv, "--remote", "none"], os.environ, tty)
    except RemoteError as exc:
        die(str(exc))
    raise typer.Exit(rc)
