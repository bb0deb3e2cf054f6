#!/usr/bin/env bats
# --venv-to-local on the real local cluster: the program runs the node-local copy of the
# venv (sys.prefix, VIRTUAL_ENV, the venv's own scripts) on each node, its packages import,
# a changed venv is packed again while a queued job keeps the one it was submitted with,
# the cleanup job removes stale copies and never a running job's, it works for a normal
# user, and an editable install is refused at submission.
#
# Small venvs: --without-pip plus a hand-made module in site-packages and a console script
# whose shebang names the venv (as pip writes them). The copies go to this test's own
# folder (the profile's HPC_VENV_LOCAL_DIR), so tests never race each other's copies.
# shellcheck disable=SC2030,SC2031 # each @test runs in a subshell of its own

load ../helpers/cluster
load ../helpers/users

setup() {
  integration_setup proj
  make_small_venv "$PROJECT/.venv" v1
  COPIES=$BATS_TEST_TMPDIR/venvs
  mkdir -p "$COPIES"
  PROFILE=$BATS_TEST_TMPDIR/local.conf
  printf 'source %q\nHPC_VENV_LOCAL_DIR=%q\n' "$REPO_ROOT/hpc_files/clusters/local.conf" \
    "$COPIES/%u" >"$PROFILE"
  HELD=() ALICE_DIR=""
}

teardown() {
  ((${#HELD[@]} == 0)) || scancel "${HELD[@]}" 2>/dev/null || true
  [[ -z $ALICE_DIR ]] || rm -rf -- "$ALICE_DIR"
}

# make_small_venv DIR VERSION [PYTHON]: a pip-less venv with the module smallpkg (WHO =
# VERSION) and bin/whereami, a script with the venv's own python in its shebang.
make_small_venv() {
  local dir=$1 python=${3:-python3} site
  [[ -d $dir/bin ]] || "$python" -m venv --without-pip "$dir"
  site=$(echo "$dir"/lib/python3*/site-packages)
  printf 'WHO = "%s"\n' "$2" >"$site/smallpkg.py"
  printf '#!%s/bin/python\nimport os, sys, smallpkg\nprint("SCRIPT", sys.prefix, smallpkg.WHO)\n' "$dir" >"$dir/bin/whereami"
  chmod +x "$dir/bin/whereami"
}

PROBE='python -c "import os, sys, smallpkg; print(\"PREFIX\", os.environ.get(\"SLURMD_NODENAME\"), sys.prefix, os.environ.get(\"VIRTUAL_ENV\"), smallpkg.WHO)"'

@test "2 nodes: every task runs the node-local copy (sys.prefix, VIRTUAL_ENV, the venv's scripts); packages import; set up on each node and logged" {
  printf '%s && whereami\n' "$PROBE" >"$PROJECT/experiment_configurations.txt"
  submit --cluster "$PROFILE" --venv-to-local -N 2 -d script -e twonodes
  [[ $stderr == *"venv: $PROJECT/.venv changed or was never packed (decided in "*" ms): packing it"* ]]
  wait_job "$JOB_ID"
  local log
  log=$(job_log "$JOB_ID" twonodes)
  [ "$(job_state "$JOB_ID")" = COMPLETED ] || { cat "$log"; return 1; }
  local copy
  copy=$(echo "$COPIES/$HPC_TEST_USER"/venv-*[0-9a-f])
  [[ $copy =~ /venv-[0-9a-f]{16}-[0-9a-f]{16}$ ]]
  # One line per node (whichever two Slurm chose: CI saw node[2-3] under load), each from
  # the copy, not from the project's venv.
  [ "$(awk -v c="$copy" '$1 == "PREFIX" && $3 == c && $4 == c && $5 == "v1" { print $2 }' "$log" | sort -u | wc -l)" -eq 2 ] ||
    { cat "$log"; return 1; }
  [ "$(grep -c "^SCRIPT $copy v1$" "$log")" -eq 2 ]
  run ! grep -q "^PREFIX.*$PROJECT/.venv" "$log"
  # Set up on each node (the test cluster's nodes share one disk: one unpacks, the other
  # finds it ready), with what it cost.
  grep -q "\] venv: unpacked venv-.* into $copy in [0-9]* ms" "$log"
  [ "$(grep -cE "node[0-9]+\] venv: (unpacked venv-.* into $copy|node-local copy $copy is ready)" "$log")" -eq 2 ]
  grep -q "venv: node-local copy ready on 2 node(s) in [0-9]* ms" "$log"
  [ -f "$COPIES/$HPC_TEST_USER/${copy##*/}.jobs/$JOB_ID" ]
  # The same venv again: the archive is reused, and the node finds its copy ready.
  submit --cluster "$PROFILE" --venv-to-local -e again
  [[ $stderr == *"venv: $PROJECT/.venv is unchanged: archive ${copy##*/}.tar"*" reused ("*"; decided in "*" ms)"* ]]
  wait_job "$JOB_ID"
  # (on whichever node Slurm chose: every node of this cluster sees the one copy)
  log=$(job_log "$JOB_ID" again)
  grep -q "node[0-9]*\] venv: node-local copy $copy is ready (found in [0-9]* ms)" "$log" || { cat "$log"; return 1; }
}

@test "a changed venv is packed again; a job queued before the change runs the venv it was submitted with" {
  echo "$PROBE" >"$PROJECT/experiment_configurations.txt"
  submit --cluster "$PROFILE" --venv-to-local -e before --sbatch-option=--hold
  local held=$JOB_ID
  HELD+=("$held")
  [ "$(squeue -h -j "$held" -o %T)" = PENDING ]
  make_small_venv "$PROJECT/.venv" v2
  submit --cluster "$PROFILE" --venv-to-local -e after
  [[ $stderr == *"changed or was never packed"* ]]
  wait_job "$JOB_ID"
  scontrol release "$held"
  wait_job "$held"
  grep -q "^PREFIX node[0-9] $COPIES/$HPC_TEST_USER/venv-.* v2$" "$(job_log "$JOB_ID" after)"
  grep -q "^PREFIX node[0-9] $COPIES/$HPC_TEST_USER/venv-.* v1$" "$(job_log "$held" before)"
  # Two archives, two copies: one per version.
  [ "$(find "$SCRATCH/proj/.hpc_staging" -name 'venv-*.tar*' | wc -l)" -eq 2 ]
  [ "$(find "$COPIES/$HPC_TEST_USER" -mindepth 1 -maxdepth 1 -type d -name 'venv-*[0-9a-f]' | wc -l)" -eq 2 ]
}

@test "the cleanup job removes stale venv copies and never a running job's" {
  echo "$PROBE" >"$PROJECT/experiment_configurations.txt"
  submit --cluster "$PROFILE" --venv-to-local -e old
  wait_job "$JOB_ID"
  local stale
  stale=$(echo "$COPIES/$HPC_TEST_USER"/venv-*[0-9a-f])
  [ -d "$stale" ]
  make_small_venv "$PROJECT/.venv" v2
  echo "$PROBE && sleep 300" >"$PROJECT/experiment_configurations.txt"
  submit --cluster "$PROFILE" --venv-to-local -e running
  HELD+=("$JOB_ID")
  local running_log
  running_log=$(job_log "$JOB_ID" running)
  local i
  for ((i = 0; i < 120; i++)); do
    grep -q '^PREFIX' "$running_log" 2>/dev/null && break
    sleep 0.5
  done
  local live
  live=$(sed -n 's/^PREFIX node[0-9] \([^ ]*\) .*/\1/p' "$running_log")
  [[ -d $live && $live != "$stale" ]]
  run --separate-stderr researcher bash "$PROJECT/plai_cleanups/submit_cleanup.sh" --cluster "$PROFILE" --partition tmpdir
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [[ $output == *"local venvs:   $COPIES/%u"* ]]
  mapfile -t NODE_JOBS < <(sed -n 's/^  node[0-9]* *job \([0-9]*\)$/\1/p' <<<"$output")
  ((${#NODE_JOBS[@]} == 4))
  for i in "${NODE_JOBS[@]}"; do
    wait_job "$i"
    [ "$(job_state "$i")" = COMPLETED ]
  done
  [ ! -e "$stale" ]
  [ ! -e "$stale.jobs" ]
  [ -f "$live/bin/python" ]
  [ -f "$live/.hpc_venv_ready" ]
  local log=$SCRATCH/hpc_outputs/cleanup/tmpdir.log
  grep -q "removed $stale (" "$log"
  grep -q "kept $live: job $JOB_ID, which uses it, is still in the queue" "$log"
  # The running job still runs from it.
  [ "$(squeue -h -j "$JOB_ID" -o %T)" = RUNNING ]
}

@test "a normal user: a venv of /usr/bin/python3 in the user's folder runs from the node-local copy" {
  ensure_test_users
  ALICE_DIR=$(mktemp -d /var/tmp/hpc_test_venvlocal.XXXXXX)
  chmod 755 "$ALICE_DIR"
  local proj=$ALICE_DIR/proj
  mkdir -p "$proj" "$ALICE_DIR/scratch"
  bash "$REPO_ROOT/hpc_files/install_into_project.sh" "$proj" >/dev/null
  make_small_venv "$proj/.venv" alice /usr/bin/python3
  echo "$PROBE && whereami" >"$proj/experiment_configurations.txt"
  chown -R "$HPC_TEST_USER" "$ALICE_DIR"
  # shellcheck disable=SC2016 # $1 is the inner shell's
  run --separate-stderr as_user env SCRATCH="$ALICE_DIR/scratch" SLURM_CONF="$SLURM_CONF" \
    HPC_LOCAL_CLUSTER_DIR="$HPC_LOCAL_CLUSTER_DIR" PATH="$PATH" \
    bash -c 'cd "$1" && bash hpc_files/job_submitter.sh -C local --venv-to-local -e alice' _ "$proj"
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  JOB_ID=$(submitted_ids | tail -1)
  JOB_TASKS=1
  wait_job "$JOB_ID"
  local log=$ALICE_DIR/scratch/proj/hpc_outputs/alice-$JOB_ID.out
  [ "$(job_state "$JOB_ID")" = COMPLETED ] || { cat "$log"; return 1; }
  local root=$HPC_LOCAL_CLUSTER_DIR/localvenvs/$HPC_TEST_USER
  grep -q "^PREFIX node[0-9] $root/venv-[0-9a-f]*-[0-9a-f]* $root/venv-[0-9a-f]*-[0-9a-f]* alice$" "$log" || { cat "$log"; return 1; }
  grep -q "^SCRIPT $root/venv-.* alice$" "$log"
  # The user's own folder, private.
  [ "$(stat -c '%U %a' "$root")" = "$HPC_TEST_USER 700" ]
  rm -rf -- "$root"
}

@test "an editable install is refused at submission with what to do; nothing is submitted" {
  local site
  site=$(echo "$PROJECT"/.venv/lib/python3*/site-packages)
  echo "$PROJECT/src" >"$site/__editable__.proj-0.1.pth"
  echo "$PROBE" >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --cluster "$PROFILE" --venv-to-local -e editable
  [ "$status" -eq 2 ]
  [[ $stderr == *"--venv-to-local cannot carry $PROJECT/.venv"* ]]
  [[ $stderr == *"__editable__.proj-0.1.pth (an editable install: pip install -e)"* ]]
  [[ $stderr == *"pip install . for your project, not -e"* ]]
  [ -z "$(submitted_ids)" ]
  [ ! -e "$SCRATCH/proj/.hpc_staging" ]
}

@test "--pack: every line of a packed job runs the node-local copy; --local too" {
  printf '%s\n' "$PROBE" "$PROBE" >"$PROJECT/experiment_configurations.txt"
  submit --cluster "$PROFILE" --venv-to-local --pack 2 --cpus 2 -e packed
  wait_job "$JOB_ID"
  local copy
  copy=$(echo "$COPIES/$HPC_TEST_USER"/venv-*[0-9a-f])
  [ "$(cat "$SCRATCH"/proj/hpc_outputs/packed-"$JOB_ID"* | grep -c "^PREFIX node[0-9] $copy $copy v1$")" -eq 2 ] || {
    cat "$SCRATCH"/proj/hpc_outputs/packed-"$JOB_ID"*
    return 1
  }
  run --separate-stderr submitter --cluster "$PROFILE" --venv-to-local --local -e loc
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [ "$(grep -c "^PREFIX .* $copy $copy v1$" <<<"$output")" -eq 2 ] || { echo "$output"; return 1; }
}
