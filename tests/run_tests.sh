#!/usr/bin/env bash
# Summary: run every test: shellcheck and the docs site (lint), bats unit tests, pytest,
# then the integration tests on the real local Slurm cluster (started here when it is not
# running).
#
# Usage: bash tests/run_tests.sh [--slurm VERSION] [unit|python|integration|lint|gpu]...   (default: all)
# Installs what is missing first (tests/setup/install_deps.sh; not for `gpu` alone, which
# runs offline). Unit test files run HPC_TEST_UNIT_JOBS at a time (default 2), integration tests HPC_TEST_JOBS (default 4), as the normal
# user hpcalice (tests/helpers/users.bash), with the venv HPC_TEST_VENV (default
# /opt/hpc_files/test-venv, made by tests/setup/install_deps.sh), on a local cluster whose
# nodes each have their own disk at /localscratch (HPC_LOCAL_NODE_DISKS, default pernode
# here; shared: one disk under per-node names). `gpu` (the
# real-GPU stage, tests/gpu/) runs where nvidia-smi lists a GPU; elsewhere it prints one
# line and counts as skipped. Ends with a line "N passed, N failed, N skipped".
# --slurm 22.05 (default) runs on this machine's Slurm; --slurm 24.11 or 26.05 runs the same parts
# inside a Debian 13 (24.11) or sid (26.05) root with that Slurm and a local cluster of its own
# (tests/setup/slurm_chroot.sh: built on first use, unmounted and stopped at the end).
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"
venv=${HPC_TEST_VENV:-/opt/hpc_files/test-venv}
export HPC_TEST_VENV=$venv
jobs=${HPC_TEST_JOBS:-4}
unit_jobs=${HPC_TEST_UNIT_JOBS:-2}
passed=0 failed=0 skipped=0
failures=()

say() { printf '\n=== %s\n' "$*"; }

# tally NAME FILE: count bats' TAP lines (ok / not ok) from FILE.
tally() {
  local ok notok
  local skip
  ok=$(grep -c '^ok ' "$2" || true)
  notok=$(grep -c '^not ok ' "$2" || true)
  skip=$(grep -c '^ok .* # skip' "$2" || true)
  passed=$((passed + ok - skip)) failed=$((failed + notok)) skipped=$((skipped + skip))
  ((notok == 0)) || failures+=("$1: $notok failed")
  # each failed test by name, with bats' lines of where and what and up to 40 lines of what
  # it printed (a job's log), so the last lines of a long, cut CI log say which and why
  local line
  while IFS= read -r line; do failures+=("$1: $line"); done < <(awk '/^not ok /{n=41; print; next} n>0 && /^#/{print; n--; next} {n=0}' "$2")
}

run_lint() {
  say "shellcheck"
  local files
  # Every script of the tree, tracked or new (not ignored), plus the extension-less ones.
  mapfile -t files < <(git ls-files -co --exclude-standard '*.sh' '*.bash' '*.bats' .ci/run tests/helpers/stubs tests/helpers/fake_singularity virtual_env_hpc_files/local_slurm)
  if shellcheck -x "${files[@]}"; then
    passed=$((passed + 1))
    echo "shellcheck: ${#files[@]} files clean"
  else
    failed=$((failed + 1)) failures+=("shellcheck")
  fi
  run_docs
}

# run_docs: the docs site (part of lint): mkdocs build --strict fails on any broken link or
# anchor; then tests/docs opens the built site in headless Chromium. Inside a Slurm root
# (--slurm 24.11) it is skipped: the docs do not depend on Slurm, and the host checked them.
run_docs() {
  if [[ -n ${HPC_SLURM_CHROOT:-} ]]; then
    echo "docs: checked on the host, not inside the Slurm $HPC_SLURM_CHROOT root: skipped"
    skipped=$((skipped + 1))
    return 0
  fi
  say "docs: mkdocs build --strict"
  local site=$root/tests/.tmp/site
  if [[ ! -s $root/docs/assets/javascripts/mermaid.min.js ]]; then
    echo "docs: docs/assets/javascripts/mermaid.min.js is missing: run bash tests/setup/install_deps.sh"
    failed=$((failed + 1)) failures+=("docs: no mermaid.min.js")
    return 0
  fi
  if NO_MKDOCS_2_WARNING=1 "$venv/bin/mkdocs" build --strict --quiet --site-dir "$site"; then
    passed=$((passed + 1))
    echo "mkdocs build --strict: no warning"
  else
    failed=$((failed + 1)) failures+=("mkdocs build --strict")
    return 0
  fi
  say "docs: the site in headless Chromium (pytest tests/docs)"
  local out rc=0 p f
  out=$(mktemp)
  HPC_DOCS_SITE=$site "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/docs 2>&1 | tee "$out" || rc=$?
  p=$(grep -oE '[0-9]+ passed' "$out" | tail -1 | grep -oE '[0-9]+' || echo 0)
  f=$(grep -oE '[0-9]+ (failed|errors?)' "$out" | awk '{s+=$1} END {print s+0}' || true)
  passed=$((passed + p)) failed=$((failed + f))
  if ((rc != 0 && f == 0)); then failed=$((failed + 1)); fi
  ((rc == 0)) || failures+=("docs site")
  rm -f "$out"
}

# run_bats NAME LABEL BATS_ARGS...: bats with its options and files or folder, tallied.
run_bats() {
  local name=$1 label=$2 out
  shift 2
  say "bats $label"
  out=$(mktemp)
  bats "$@" | tee "$out" || true
  tally "$name" "$out"
  rm -f "$out"
}

# run_unit: the unit tests, HPC_TEST_UNIT_JOBS files at a time (default 2: half the time
# of one at a time on 2 cores; each test has its own folder, HOME and stubs).
run_unit() {
  local parallel=()
  if command -v parallel >/dev/null && ((unit_jobs > 1)); then
    parallel=(--jobs "$unit_jobs" --no-parallelize-within-files)
  fi
  run_bats unit tests/unit "${parallel[@]}" tests/unit
}

run_python() {
  say "pytest tests/python"
  local out rc=0
  out=$(mktemp)
  # This tree's package first, whatever copy the venv holds.
  PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH} "$venv/bin/python" -m pytest -q tests/python 2>&1 | tee "$out" || rc=$?
  local p f
  p=$(grep -oE '[0-9]+ passed' "$out" | tail -1 | grep -oE '[0-9]+' || echo 0)
  f=$(grep -oE '[0-9]+ (failed|errors?)' "$out" | awk '{s+=$1} END {print s+0}' || true)
  passed=$((passed + p)) failed=$((failed + f))
  if ((rc != 0 && f == 0)); then failed=$((failed + 1)); fi
  ((rc == 0)) || failures+=("pytest")
  rm -f "$out"
}

# run_integration: the integration tests on the local cluster, its node-local disks per node
# at one path (HPC_LOCAL_NODE_DISKS=pernode unless set: $SLURM_TMPDIR is /localscratch/job_N
# on every node, with each node's own files, as on Compute Canada).
run_integration() {
  say "local Slurm cluster"
  eval "$(HPC_LOCAL_NODE_DISKS=${HPC_LOCAL_NODE_DISKS:-pernode} bash tests/cluster/local_cluster.sh start)"
  local parallel=()
  if command -v parallel >/dev/null && ((jobs > 1)); then
    parallel=(--jobs "$jobs" --no-parallelize-within-files)
  fi
  local since files=() f
  since=$(date +%Y-%m-%dT%H:%M:%S)
  # The longest files first (each runs its tests one after another; measured on 22.05: 10,
  # 5, 5 and 3 minutes), so that no long file starts last and runs alone at the end. bats
  # keeps the order it is given.
  for f in requeue_programs programs requeue staging cluster_pernode cluster_cgroup cluster_private_tmp shared_users; do
    [[ ! -f tests/integration/$f.bats ]] || files+=("tests/integration/$f.bats")
  done
  for f in tests/integration/*.bats; do
    [[ " ${files[*]} " == *" $f "* ]] || files+=("$f")
  done
  PATH=$venv/bin:$PATH run_bats integration tests/integration "${parallel[@]}" "${files[@]}"
  # Who submitted: the tests act as the normal user; root only where a test plays an admin.
  echo "jobs of this run by user: $(sacct -a -X -n -P -S "$since" -o User 2>/dev/null | sort | uniq -c | awk '{printf "%s %s, ", $2, $1}')"
}

# run_gpu: the real-GPU stage, or one line saying why not (counted as skipped).
run_gpu() {
  say "GPU stage (tests/gpu)"
  if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "gpu: no NVIDIA GPU on this machine (nvidia-smi found none): skipped"
    skipped=$((skipped + 1))
    return 0
  fi
  local out
  out=$(mktemp)
  bash tests/gpu/run_stage.sh | tee "$out" || true
  tally gpu "$out"
  grep -qE '^(not )?ok ' "$out" || { failed=$((failed + 1)) failures+=("gpu: the stage did not start"); }
  rm -f "$out"
}

main() {
  local slurm=""
  if [[ ${1:-} == --slurm || ${1:-} == --slurm=* ]]; then
    slurm=${1#--slurm}
    slurm=${slurm#=}
    if [[ -z $slurm ]]; then
      slurm=${2:-}
      shift
    fi
    shift
    [[ -n $slurm ]] || { echo "run_tests.sh: --slurm needs a version (22.05, 24.11 or 26.05)" >&2; exit 2; }
  fi
  # Inside the root (HPC_SLURM_CHROOT) the host installed everything already.
  [[ -n ${HPC_SLURM_CHROOT:-} || $* == gpu ]] || bash tests/setup/install_deps.sh
  case $slurm in
    "" | 22.05) ;;
    *)
      [[ -z ${HPC_SLURM_CHROOT:-} ]] || { echo "run_tests.sh: already inside the Slurm $HPC_SLURM_CHROOT root" >&2; exit 2; }
      exec bash tests/setup/slurm_chroot.sh run "$slurm" -- bash tests/run_tests.sh "$@"
      ;;
  esac
  local parts=("$@")
  ((${#parts[@]})) || parts=(lint unit python integration gpu)
  local part
  for part in "${parts[@]}"; do
    case $part in
      lint) run_lint ;;
      unit) run_unit ;;
      python) run_python ;;
      integration) run_integration ;;
      gpu) run_gpu ;;
      *) echo "run_tests.sh: unknown part '$part' (use lint, unit, python, integration, gpu)" >&2; exit 2 ;;
    esac
  done
  echo
  ((${#failures[@]} == 0)) || printf 'FAILED: %s\n' "${failures[@]}"
  echo "$passed passed, $failed failed, $skipped skipped"
  ((failed == 0))
}

main "$@"
