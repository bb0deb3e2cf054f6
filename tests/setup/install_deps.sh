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

# The docs site (mkdocs.yml; tests/run_tests.sh lint builds it and opens it in a browser):
# Debian's chromium for the browser test, and Mermaid, pinned, which the site serves itself
# so that its diagrams render with no network (mkdocs-material is in requirements.txt).
APT_PACKAGES+=(chromium)
MERMAID_VERSION=11.12.1
MERMAID_JS=$root/docs/assets/javascripts/mermaid.min.js

# install_mermaid: Mermaid's one-file build from the npm registry (npm pack: that package
# alone, checked against the registry's integrity hash), unless this version is there.
install_mermaid() {
  local stamp=$MERMAID_JS.version tmp
  [[ -s $MERMAID_JS && $(cat "$stamp" 2>/dev/null) == "$MERMAID_VERSION" ]] && return 0
  if ! command -v npm >/dev/null; then
    ((EUID == 0)) || { say "run as root to install npm (for Mermaid's script)"; exit 1; }
    say "apt-get install npm"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  fi
  say "mermaid $MERMAID_VERSION for the docs site"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "mermaid@$MERMAID_VERSION" >/dev/null &&
    tar -xzf "mermaid-$MERMAID_VERSION.tgz" package/dist/mermaid.min.js) ||
    { rm -rf "$tmp"; say "npm pack mermaid@$MERMAID_VERSION failed: see its message above"; exit 1; }
  mkdir -p "${MERMAID_JS%/*}"
  mv "$tmp/package/dist/mermaid.min.js" "$MERMAID_JS"
  printf '%s\n' "$MERMAID_VERSION" >"$stamp"
  rm -rf "$tmp"
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
    "$venv/bin/python" -c 'import torch, lightning, wandb, sweeps, typer, yaml, pytest, dask.distributed, submitit, material, hpc_toolkit' 2>/dev/null
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

install_mermaid
install_apt
install_venv
say "ready"
