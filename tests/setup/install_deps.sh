#!/usr/bin/env bash
# Summary: install what the tests, the demo and the local cluster need, skipping what is
# already there: Debian packages (Slurm, munge, MariaDB, bats, shellcheck, ...) and the
# test venv (torch CPU, lightning, wandb, dask, the hpc_toolkit package) and a JAX venv.
#
# Usage: bash tests/setup/install_deps.sh      (as root on Debian/Ubuntu)
#
# The venv (HPC_TEST_VENV, default /opt/hpc_files/test-venv) is what the tests' normal user
# (hpcalice) and their jobs run with, so it is made from Debian's /usr/bin/python3 (the
# machine's other pythons may live under /root, mode 700), at a path every user can read and
# outside /tmp (a private /tmp per job hides /tmp), with hpc_toolkit installed as a copy
# (not editable: the repository may sit in a folder only root can enter). The tests put
# each project's own python/ first (tests/helpers/common.bash), so a stale copy here is
# never what they test.
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
venv=${HPC_TEST_VENV:-/opt/hpc_files/test-venv}
jax_venv=${HPC_TEST_JAX_VENV:-/opt/hpc_files/jax-venv}
base_python=${HPC_TEST_BASE_PYTHON:-/usr/bin/python3}
APT_PACKAGES=(slurm-wlm slurmdbd munge mariadb-server bats shellcheck bubblewrap
  pigz zstd rsync parallel procps psmisc python3-venv python3-yaml openssh-server strace
  nodejs) # (a Node.js program's warning: tests/unit/requeue_signals.bats)

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
    "$venv/bin/python" -c 'import torch, lightning, wandb, sweeps, typer, yaml, pytest, dask.distributed, submitit, material, accelerate, transformers, hydra, hydra_plugins.hydra_submitit_launcher, torch_geometric, hpc_toolkit' 2>/dev/null
}

install_venv() {
  if venv_ready; then
    # The venv outlives the checkout (a fixed path, kept between runs on one machine): its
    # copy of hpc_toolkit is this tree's, refreshed each time (a few seconds, no network).
    "$venv/bin/python" -m pip install -q --no-deps --no-index --no-build-isolation --force-reinstall "$root/python" ||
      { say "could not refresh hpc_toolkit in $venv: see the pip messages above"; exit 1; }
    return 0
  fi
  say "building $venv (torch CPU, lightning, wandb, dask, hpc_toolkit; a few minutes the first time)"
  [[ -x $venv/bin/python ]] || { mkdir -p -- "${venv%/*}" && "$base_python" -m venv "$venv"; }
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q torch==2.13.0
  "$venv/bin/python" -m pip install -q -r "$root/tests/setup/requirements.txt"
  "$venv/bin/python" -m pip install -q "$root/python"
  venv_ready || { say "the venv at $venv is still incomplete: see the pip messages above"; exit 1; }
}

# install_jax_venv: a venv of its own with jax[cpu] for the JAX recipe's test
# (tests/integration/programs.bats; HPC_TEST_JAX_VENV): jaxlib is 85 MB and wants numpy 2,
# which the test venv's pinned stack should not be moved to for one test.
install_jax_venv() {
  "$jax_venv/bin/python" -c 'import jax' 2>/dev/null && return 0
  say "building $jax_venv (jax[cpu] 0.10.2, for the JAX recipe's test)"
  [[ -x $jax_venv/bin/python ]] || { mkdir -p -- "${jax_venv%/*}" && "$base_python" -m venv "$jax_venv"; }
  "$jax_venv/bin/python" -m pip install -q "jax[cpu]==0.10.2"
  "$jax_venv/bin/python" -c 'import jax' || { say "jax does not import in $jax_venv: see the pip messages above"; exit 1; }
}

# venv_for_users: the test user (and its jobs) must run the venv's python: refuse one made
# from an interpreter under a folder other users cannot enter (e.g. pyenv under /root).
venv_for_users() {
  local real dir
  real=$(readlink -f -- "$venv/bin/python")
  dir=$real
  while [[ $dir == /* && $dir != / ]]; do
    dir=${dir%/*}
    [[ -n $dir ]] || break
    [[ $(stat -c %A -- "$dir") == d????????x ]] || {
      say "the venv $venv runs $real, under $dir which other users cannot enter: remove the venv and run again (it is then made from $base_python), or set HPC_TEST_VENV"
      exit 1
    }
  done
  chmod -R a+rX -- "$venv" "$jax_venv"
}

install_mermaid
install_apt
install_venv
install_jax_venv
venv_for_users
say "ready"
