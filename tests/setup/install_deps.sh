#!/usr/bin/env bash
# Summary: install what the tests, the demo and the local cluster need, skipping what is
# already there: Debian packages (Slurm, munge, MariaDB, bats, shellcheck, ...) and the
# Python venv .venv (torch CPU, lightning, wandb, dask, the hpc_toolkit package).
#
# Usage: bash tests/setup/install_deps.sh      (as root on Debian/Ubuntu)
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
venv=${HPC_TEST_VENV:-$root/.venv}
APT_PACKAGES=(slurm-wlm slurmdbd munge mariadb-server bats shellcheck bubblewrap
  pigz zstd rsync parallel procps psmisc python3-venv)

say() { printf 'install_deps: %s\n' "$*" >&2; }

missing_apt() {
  local p
  for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || printf '%s\n' "$p"
  done
}

install_apt() {
  local missing
  mapfile -t missing < <(missing_apt)
  ((${#missing[@]})) || return 0
  ((EUID == 0)) || { say "run as root to install: ${missing[*]}"; exit 1; }
  say "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

venv_ready() {
  [[ -x $venv/bin/python ]] &&
    "$venv/bin/python" -c 'import torch, lightning, wandb, sweeps, typer, yaml, pytest, dask.distributed, submitit, hpc_toolkit' 2>/dev/null
}

install_venv() {
  venv_ready && return 0
  say "building $venv (torch CPU, lightning, wandb, dask, hpc_toolkit; a few minutes the first time)"
  [[ -x $venv/bin/python ]] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q torch==2.13.0
  "$venv/bin/python" -m pip install -q -r "$root/tests/setup/requirements.txt"
  "$venv/bin/python" -m pip install -q -e "$root/python"
  venv_ready || { say "the venv at $venv is still incomplete: see the pip messages above"; exit 1; }
}

install_apt
install_venv
say "ready"
