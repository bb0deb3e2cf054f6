#!/usr/bin/env bash
# Summary: copy the toolkit into a project (or update the copy already there).
#
# Usage: bash hpc_files/install_into_project.sh PROJECT_DIR
#
# Copies hpc_files/, virtual_env_hpc_files/, singularity_hpc_files/, plai_cleanups/ and
# python/ into PROJECT_DIR (this README and docs/*.md in hpc_files/), replacing an older
# copy of those folders. Your own files are never overwritten: experiment_configurations.txt
# and sweeper.yml, and the example scripts they run (examples/train.py,
# examples/sweep_train.py), are written only when the project has none. Every example
# the manual names (examples/: Lightning DDP, torch.distributed, Dask, requeue) comes
# with it in hpc_files/examples/, replaced on update like the rest of hpc_files/.
set -euo pipefail

HPC_PROG=install_into_project.sh
here=${BASH_SOURCE[0]}
[[ $here == /* ]] || here=$PWD/$here
here=${here%/*}
# shellcheck source=hpc_files/lib/hpc_lib.sh
source "$here/lib/hpc_lib.sh"

TOOLKIT_FOLDERS=(hpc_files virtual_env_hpc_files singularity_hpc_files plai_cleanups python)
TEMPLATES=(experiment_configurations.txt sweeper.yml)
# The scripts those templates run: without them the first default submission fails on
# the node. Copied when the project has none of that name.
TEMPLATE_EXAMPLES=(examples/train.py examples/sweep_train.py)

main() {
  if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n 's/^# \{0,1\}//; 2,12p' "${BASH_SOURCE[0]}"
    return 0
  fi
  HPC_DIE_STATUS=2 # a refusal of the arguments is a usage error
  (($# == 1)) || die_usage "give the project folder: bash hpc_files/install_into_project.sh PROJECT_DIR"
  local root target=$1 folder file
  root=$(cd -- "$here/.." && pwd -P)
  [[ -d $target ]] || die "project folder '$target' does not exist: create it first"
  target=$(cd -- "$target" && pwd -P)
  [[ $target != "$root" ]] || die "'$target' is the toolkit itself: give your project's folder"
  HPC_DIE_STATUS=1
  for folder in "${TOOLKIT_FOLDERS[@]}"; do
    [[ -d $root/$folder ]] || continue
    rm -rf -- "${target:?}/$folder.new"
    cp -R -- "$root/$folder" "$target/$folder.new"
    rm -rf -- "$target/$folder.new/build" "$target/$folder.new"/*.egg-info
    # tools' caches are the toolkit's copy's own, not the project's
    find "$target/$folder.new" -depth -type d \( -name __pycache__ -o -name .mypy_cache -o -name .ruff_cache -o -name .pytest_cache \) -exec rm -rf -- {} + 2>/dev/null || true
    rm -rf -- "${target:?}/$folder"
    mv -- "$target/$folder.new" "$target/$folder"
  done
  # The manual travels with the toolkit: error messages point to its sections, and it
  # points to the examples (examples/X there is hpc_files/examples/X here).
  [[ ! -f $root/README.md ]] || cp -- "$root/README.md" "$target/hpc_files/README.md"
  [[ ! -d $root/examples ]] || cp -R -- "$root/examples" "$target/hpc_files/examples"
  for file in "${TEMPLATES[@]}"; do
    [[ -e $target/$file || ! -f $root/$file ]] || cp -- "$root/$file" "$target/$file"
  done
  # The README's pages (its links, docs/PAGE.md, hold in hpc_files/ as they do here).
  if [[ -d $root/docs ]]; then
    mkdir -p -- "$target/hpc_files/docs"
    cp -- "$root"/docs/*.md "$target/hpc_files/docs/"
  fi
  for file in "${TEMPLATE_EXAMPLES[@]}"; do
    [[ -e $target/$file || ! -f $root/$file ]] && continue
    mkdir -p -- "$target/${file%/*}" && cp -- "$root/$file" "$target/$file"
  done
  printf 'hpc_files installed in %s\n' "$target"
  printf 'Next: write your command in %s/experiment_configurations.txt, then\n' "$target"
  printf '  export SCRATCH=/path/to/scratch   # if your cluster does not set it\n'
  printf '  bash hpc_files/job_submitter.sh --gpus 1 --time 01:00:00 --exp-name first_try\n'
}

main "$@"
