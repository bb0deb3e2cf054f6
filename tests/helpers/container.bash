# shellcheck shell=bash
# Test images for the Singularity stand-in (tests/helpers/fake_singularity/singularity):
# a "SIF" file or a sandbox folder whose root is the host's system folders, read-only,
# plus the test venv as the image's Python (torch, lightning, dask). See that file's header.

FAKE_SINGULARITY_DIR=$REPO_ROOT/tests/helpers/fake_singularity

# image_venv: the venv that plays the image's Python environment.
image_venv() {
  # Its real path: a .venv that is a link to a shared venv (a git worktree's) is bound
  # into the image where it really lies.
  local venv=$TEST_VENV
  (cd -- "$venv" 2>/dev/null && pwd -P) || printf '%s' "$venv"
}

# _image_rootfs: the host paths that make the image's root, one a line: the system
# folders, the venv and the Python installation the venv was made from.
_image_rootfs() {
  local venv home p
  venv=$(image_venv)
  for p in /usr /bin /sbin /lib /lib32 /lib64 /libx32 /etc; do
    [[ -e $p || -L $p ]] && printf '%s\n' "$p"
  done
  home=$(sed -n 's/^home *= *//p' "$venv/pyvenv.cfg")
  home=$(cd -- "$home/.." && pwd -P)
  [[ $home == /usr || $home == /usr/* ]] || printf '%s\n' "$home"
  printf '%s\n' "$venv"
  # Packages installed editable (hpc_toolkit): their source folders, as if installed.
  local finder
  for finder in "$venv"/lib/python*/site-packages/__editable___*_finder.py; do
    [[ -f $finder ]] || continue
    sed -n "s/^MAPPING[^=]*= *{'[^']*': *'\(.*\)'}.*/\1/p" "$finder" | xargs -r -n 1 dirname
  done
}

# _image_environment: the image's %environment: its Python first on PATH.
_image_environment() {
  # shellcheck disable=SC2016 # $PATH is expanded inside the container
  printf 'export PATH=%q/bin:"$PATH"\n' "$(image_venv)"
}

# make_sif_image FILE: a file with a SIF header (launch line padded to 32 bytes, then
# SIF_MAGIC at offset 32) followed by the stand-in's description of the image.
make_sif_image() {
  local file=$1 line
  mkdir -p -- "$(dirname -- "$file")"
  {
    printf '#!/usr/bin/env run-singularity\n\0'
    printf 'SIF_MAGIC\0'
    printf '\n# hpc_files test image for tests/helpers/fake_singularity/singularity\n'
    while IFS= read -r line; do
      printf 'rootfs %s\n' "$line"
    done < <(_image_rootfs)
    printf '%%environment\n'
    _image_environment
  } >"$file"
}

# make_sandbox_image DIR: a sandbox folder (.singularity.d with env/ and the rootfs list).
make_sandbox_image() {
  local dir=$1
  mkdir -p -- "$dir/.singularity.d/env"
  _image_rootfs >"$dir/.singularity.d/hpc_fake_rootfs"
  _image_environment >"$dir/.singularity.d/env/90-environment.sh"
}

# use_fake_singularity: the stand-in first on PATH (as `singularity`). Inside the Slurm
# 24.11/26.05 roots (tests/setup/slurm_chroot.sh: a chroot) the kernel gives a normal user
# no user namespace (CLONE_NEWUSER is refused to a chrooted process), which bubblewrap
# needs, and Debian 13's and sid's bwrap no longer run setuid: there an integration test
# of the stand-in submits as root, the closest that runs (README: Testing).
use_fake_singularity() {
  export PATH=$FAKE_SINGULARITY_DIR:$PATH
  if [[ -n ${TEST_AS_USER:-} ]] && ! as_user bwrap --ro-bind / / true 2>/dev/null; then
    echo "# no user namespace for $HPC_TEST_USER here (a chroot?): the container stand-in runs as root" >&3
    TEST_AS_USER=""
    # The test's folder, handed to the test user by its setup, is root's again: the
    # submission refuses a home whose folders another user owns (submit.sh,
    # hpc_home_chain_check), and root is the one submitting now.
    chown -R -h root: "$BATS_TEST_TMPDIR"
  fi
}
