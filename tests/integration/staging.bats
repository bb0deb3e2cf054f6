#!/usr/bin/env bats
# --data, $SLURM_TMPDIR and results on the real local cluster, on both partitions: profile
# "local" (Slurm makes SLURM_TMPDIR) and "local-lab" (no SLURM_TMPDIR: the job makes its
# own hpc_job_<id> folder on every node's local scratch and must remove it on every node).
# shellcheck disable=SC2016 # the commands in single quotes are the job's

load ../helpers/cluster

setup() {
  integration_setup proj
  DATA=$SCRATCH/proj
  LAB=$HPC_LOCAL_CLUSTER_DIR/localscratch_lab
  [[ -n $HPC_LOCAL_CLUSTER_DIR ]] || LAB=/tmp/hpc_local_cluster/localscratch_lab
  # Hostile names inside the staged folder, and a staged file whose name starts with '-'.
  local d="$DATA/datasets/imgs é 数据"
  mkdir -p "$d/-sub dir"
  printf 1 >"$d/with space.txt"
  printf 2 >"$d/-leading dash"
  printf 3 >"$d/"$'new\nline'
  printf 4 >"$d/-sub dir/quote'\"\$(x)"
  printf 'a,b\n' >"$DATA/-odd labels.csv"
  # What each rank reports: its node, $SLURM_TMPDIR, that folder's mode and owner, and a
  # fingerprint of the staged tree (types, sizes, names, contents; NUL-safe).
  cat >"$PROJECT/report.sh" <<'EOF'
fingerprint() {
  (cd "$1" && find datasets ./-odd\ labels.csv -printf '%y %s %p\0' | LC_ALL=C sort -z | sha256sum &&
    find datasets ./-odd\ labels.csv -type f -print0 | LC_ALL=C sort -z | xargs -0 cat | sha256sum) | tr '\n' ' '
}
[ "${1:-}" = --fingerprint ] && { fingerprint "$2"; exit; }
{
  echo "node=$SLURMD_NODENAME"
  echo "tmp=$SLURM_TMPDIR"
  echo "stat=$(stat -c '%a %u' "$SLURM_TMPDIR")"
  echo "tree=$(fingerprint "$SLURM_TMPDIR")"
} >"$HPC_CHECKPOINT_DIR/rank_${SLURM_PROCID:-0}.txt"
EOF
  EXPECTED=$(bash "$PROJECT/report.sh" --fingerprint "$DATA")
}

# commands LINE...: the experiment lines.
commands() {
  printf '%s\n' "$@" >"$PROJECT/experiment_configurations.txt"
}

# field EXP RANK NAME: a value from a rank's report.
field() {
  sed -n "s/^$3=//p" "$DATA/$1/checkpoints/rank_$2.txt"
}

# wait_for FILE_GLOB [TIMEOUT_S]: until a file matching the glob exists.
wait_for() {
  local start=$SECONDS f
  while ((SECONDS - start < ${2:-60})); do
    for f in $1; do
      [[ -e $f ]] && return 0
    done
    sleep 0.2
  done
  echo "no $1 after ${2:-60}s" >&2
  return 1
}

# two_node_job CLUSTER EXP [MORE OPTIONS]: a 2-node script job staging the data.
two_node_job() {
  local cluster=$1 exp=$2
  shift 2
  submit --cluster "$cluster" --exp-name "$exp" --which-distributed script --num-nodes 2 \
    --time 5 --data datasets "./-odd labels.csv" "$@"
}

# staged_everywhere EXP: both ranks, on two different nodes, saw the whole tree.
staged_everywhere() {
  local r
  for r in 0 1; do
    [ "$(field "$1" "$r" tree)" = "$EXPECTED" ] || { echo "rank $r: $(cat "$DATA/$1/checkpoints/rank_$r.txt")"; return 1; }
  done
  [ "$(field "$1" 0 node)" != "$(field "$1" 1 node)" ]
}

@test "local: a 2-node job finds the staged data, hostile names intact, at the same relative paths on every node" {
  commands 'bash report.sh'
  two_node_job local st
  wait_job "$JOB_ID" 120
  cat "$(job_log "$JOB_ID" st)"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  staged_everywhere st
  local r
  for r in 0 1; do
    [ "$(field st "$r" tmp)" = "$(node_tmpdir "$(field st "$r" node)" "$JOB_ID")" ]
  done
  grep -q 'extracted into \$SLURM_TMPDIR on 2 node(s)' "$(job_log "$JOB_ID" st)"
  # Extracted once per node, in one step (sacct names it hpc-stage).
  [ "$(sacct -n -P -j "$JOB_ID" -o JobName | grep -c '^hpc-stage$')" -eq 1 ]
}

@test "local-lab: every node gets its own hpc_job_<id>_<node> folder (700, the user's) with the data; all are gone after the job" {
  commands 'bash report.sh'
  two_node_job local-lab lab
  wait_job "$JOB_ID" 120
  cat "$(job_log "$JOB_ID" lab)"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  staged_everywhere lab
  local r node
  for r in 0 1; do
    node=$(field lab "$r" node)
    [ "$(field lab "$r" tmp)" = "$LAB/$node/hpc_job_${JOB_ID}_$node" ]
    [ "$(field lab "$r" stat)" = "700 $(id -u "$HPC_TEST_USER")" ]
    [ ! -e "$LAB/$node/hpc_job_${JOB_ID}_$node" ]
  done
  grep -q "removed the job's folder on 2 node(s)" "$(job_log "$JOB_ID" lab)"
}

@test "local-lab: a failing program keeps its exit code; results come back; every node's folder is removed" {
  # Rank 1 fails a moment after rank 0 wrote its result (a failing rank stops the others).
  commands 'bash report.sh; if [ "$SLURM_PROCID" = 0 ]; then echo partial >"$HPC_RESULTS_DIR/p.txt"; else sleep 2; fi; exit 3'
  two_node_job local-lab fail
  wait_job "$JOB_ID" 120
  cat "$(job_log "$JOB_ID" fail)"
  [ "$(job_state "$JOB_ID")" = FAILED ]
  [ "$(job_exit "$JOB_ID")" = "3:0" ]
  [ "$(cat "$DATA/fail/results/p.txt")" = partial ]
  local r
  for r in 0 1; do
    [ ! -e "$(field fail "$r" tmp)" ]
  done
}

@test "local-lab: scancel of a 2-node job whose program ignores SIGTERM: results come back, every node's folder goes" {
  commands 'bash report.sh; if [ "$SLURM_PROCID" = 0 ]; then echo r >"$HPC_RESULTS_DIR/r.txt"; fi; trap "" TERM; sleep 300'
  two_node_job local-lab canc
  wait_for "$DATA/canc/checkpoints/rank_1.txt"
  wait_for "$LAB/*/hpc_job_${JOB_ID}_*/results/r.txt"
  local r dirs=()
  for r in 0 1; do
    dirs+=("$(field canc "$r" tmp)")
    [ -d "${dirs[r]}" ]
  done
  scancel "$JOB_ID"
  wait_job "$JOB_ID" 120
  cat "$(job_log "$JOB_ID" canc)"
  [[ $(job_state "$JOB_ID") == CANCELLED* ]]
  [ "$(cat "$DATA/canc/results/r.txt")" = r ]
  [ ! -e "${dirs[0]}" ]
  [ ! -e "${dirs[1]}" ]
}

@test "local: scancel copies the results out of Slurm's SLURM_TMPDIR before it goes" {
  commands 'echo r >"$HPC_RESULTS_DIR/r.txt"; sleep 300'
  submit --cluster local --exp-name lc --time 5
  wait_for "$HPC_LOCAL_CLUSTER_DIR/localscratch/*/job_$JOB_ID/results/r.txt"
  scancel "$JOB_ID"
  wait_job "$JOB_ID" 120
  cat "$(job_log "$JOB_ID" lc)"
  [[ $(job_state "$JOB_ID") == CANCELLED* ]]
  [ "$(cat "$DATA/lc/results/r.txt")" = r ]
}

@test "--sync-every: results reach shared scratch while the job runs" {
  commands 'echo early >"$HPC_RESULTS_DIR/early.txt"; sleep 300'
  submit --cluster local-lab --exp-name sync --time 5 --sync-every 0.05
  wait_for "$DATA/sync/results/early.txt" 60
  [ "$(squeue -h -j "$JOB_ID" -o %T)" = RUNNING ]
  scancel "$JOB_ID"
  wait_job "$JOB_ID" 120
  grep -q 'every 3 s' "$(job_log "$JOB_ID" sync)"
  [ -z "$(find "$LAB" -maxdepth 2 -name "hpc_job_${JOB_ID}_*")" ]
}

@test "too little local disk: the job fails before the program starts, says so, and cleans every node" {
  # A sparse 4 TiB file: a tiny archive whose data needs more than any node's disk.
  truncate -s 4T "$DATA/datasets/huge.bin"
  commands 'echo the program started'
  two_node_job local-lab full
  wait_job "$JOB_ID" 300
  local log
  log=$(job_log "$JOB_ID" full)
  cat "$log"
  [ "$(job_state "$JOB_ID")" = FAILED ]
  # The preflight finds it on every node before the program (issue 33): each node's own
  # shortage reaches the log, the job tries the other nodes, and ends FAILED when none has
  # room (a step killed at the first failure could lose the other node's message).
  local n
  for n in node1 node2; do
    grep -q "preflight failed on .*$n: local scratch $LAB/$n has .* free, --data needs 4.0 TiB" "$log"
  done
  # Once the nodes left could not run it, the job ends rather than waiting for ever with
  # every node excluded (seen: PENDING, BadConstraints, until the test gave up).
  grep -q "only 0 other node(s) of partition .* could run this 2-node job: not requeued" "$log"
  ! grep -qx 'the program started' "$log" || false
  for n in node1 node2 node3 node4; do
    [ ! -e "$LAB/$n/hpc_job_${JOB_ID}_$n" ]
  done
}

@test "a changed file rebuilds the archive and the next job sees it; an unchanged one is reused" {
  mkdir -p "$DATA/v"
  echo one >"$DATA/v/v.txt"
  commands 'cp "$SLURM_TMPDIR/v/v.txt" "$HPC_RESULTS_DIR/"'
  submit --cluster local --exp-name v1 --data v
  [[ $stderr == *"data: building"* ]]
  wait_job "$JOB_ID" 120
  echo two >"$DATA/v/v.txt"
  submit --cluster local --exp-name v2 --data v
  [[ $stderr == *"data: building"* ]]
  local second=$JOB_ID
  submit --cluster local --exp-name v3 --data v
  [[ $stderr == *"reused"* ]]
  wait_job "$second" 120
  wait_job "$JOB_ID" 120
  [ "$(cat "$DATA/v1/results/v.txt")" = one ]
  [ "$(cat "$DATA/v2/results/v.txt")" = two ]
  [ "$(cat "$DATA/v3/results/v.txt")" = two ]
}

@test "two submissions of the same data at once: one archive build, both jobs get the data" {
  commands 'bash report.sh'
  # A zstd that takes a second makes the two submissions overlap for sure.
  mkdir -p "$BATS_TEST_TMPDIR/slow"
  printf '#!/bin/sh\nsleep 1\nexec /usr/bin/zstd "$@"\n' >"$BATS_TEST_TMPDIR/slow/zstd"
  chmod +x "$BATS_TEST_TMPDIR/slow/zstd"
  export PATH=$BATS_TEST_TMPDIR/slow:$PATH
  local out=$BATS_TEST_TMPDIR
  (cd "$PROJECT" && researcher bash hpc_files/job_submitter.sh --cluster local-lab -e ca --data datasets "./-odd labels.csv" >"$out/a" 2>&1) &
  local pa=$!
  (cd "$PROJECT" && researcher bash hpc_files/job_submitter.sh --cluster local -e cb --data datasets "./-odd labels.csv" >"$out/b" 2>&1) &
  local pb=$!
  wait "$pa"
  wait "$pb"
  cat "$out/a" "$out/b"
  [ "$(cat "$out/a" "$out/b" | grep -c 'data: building')" -eq 1 ]
  [ "$(cat "$out/a" "$out/b" | grep -c 'another submission is building this archive; waiting')" -eq 1 ]
  local a b
  a=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' "$out/a")
  b=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' "$out/b")
  wait_job "$a" 120
  wait_job "$b" 120
  [ "$(job_state "$a")" = COMPLETED ]
  [ "$(job_state "$b")" = COMPLETED ]
  [ "$(field ca 0 tree)" = "$EXPECTED" ]
  [ "$(field cb 0 tree)" = "$EXPECTED" ]
}

@test "local-lab array: each task has its own folder and its own results subfolder" {
  commands 'echo "$SLURM_TMPDIR" >"$HPC_RESULTS_DIR/tmp.txt"' 'echo "$SLURM_TMPDIR" >"$HPC_RESULTS_DIR/tmp.txt"'
  submit --cluster local-lab --exp-name arr --time 5
  wait_job "$JOB_ID" 120
  local t0 t1
  t0=$(cat "$DATA/arr/results/task_0/tmp.txt")
  t1=$(cat "$DATA/arr/results/task_1/tmp.txt")
  [ "$t0" != "$t1" ]
  [[ ${t0##*/} =~ ^hpc_job_[0-9]+_node[0-9]$ && ${t1##*/} =~ ^hpc_job_[0-9]+_node[0-9]$ ]]
  [ ! -e "$t0" ] && [ ! -e "$t1" ]
}

@test "a copy-back failure fails a job whose program succeeded (exit 74), and the log says why" {
  mkdir -p "$DATA/lost"
  echo 'in the way' >"$DATA/lost/results"
  commands 'echo r >"$HPC_RESULTS_DIR/r.txt"'
  submit --cluster local --exp-name lost --time 5
  wait_job "$JOB_ID" 120
  [ "$(job_state "$JOB_ID")" = FAILED ]
  [ "$(job_exit "$JOB_ID")" = "74:0" ]
  grep -q "the program succeeded, but its results did not all come back" "$(job_log "$JOB_ID" lost)"
}

@test "a node whose local scratch cannot be made stops a 2-node job at once, saying why" {
  local conf=$BATS_TEST_TMPDIR/blocked.conf n
  cp "$REPO_ROOT/hpc_files/clusters/local-lab.conf" "$conf"
  printf 'HPC_LOCAL_SCRATCH=%q\n' "$BATS_TEST_TMPDIR/blocked/%n" >>"$conf"
  mkdir -p "$BATS_TEST_TMPDIR/blocked"
  for n in node1 node2 node3 node4; do
    echo 'a file where a folder should be' >"$BATS_TEST_TMPDIR/blocked/$n"
  done
  commands 'echo the program started'
  submit --cluster "$conf" --exp-name blk --which-distributed script --num-nodes 2 --time 5
  local start=$SECONDS log
  wait_job "$JOB_ID" 120
  ((SECONDS - start < 60))
  log=$(job_log "$JOB_ID" blk)
  cat "$log"
  [ "$(job_state "$JOB_ID")" = FAILED ]
  grep -q "the local scratch folder $BATS_TEST_TMPDIR/blocked/node[0-9] does not exist (or is not a folder) on this node (HPC_LOCAL_SCRATCH=" "$log"
  grep -q "could not make the job's local scratch folder on every node" "$log"
  ! grep -qx 'the program started' "$log" || false
}

@test "local-lab: the wall-time warning (SIGUSR1) on a 2-node job: results come back, every node's folder goes" {
  # The program ignores the warning; the toolkit stops it after --signal-grace less its
  # margin (here 5 s), then copies the results and removes the folders (--no-requeue).
  commands 'bash report.sh; if [ "$SLURM_PROCID" = 0 ]; then echo w >"$HPC_RESULTS_DIR/w.txt"; fi; sleep 300'
  two_node_job local-lab wall --signal-grace 20 --no-requeue
  wait_for "$DATA/wall/checkpoints/rank_1.txt"
  wait_for "$LAB/*/hpc_job_${JOB_ID}_*/results/w.txt"
  local dirs=("$(field wall 0 tmp)" "$(field wall 1 tmp)")
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_job "$JOB_ID" 120
  cat "$(job_log "$JOB_ID" wall)"
  grep -q 'walltime warning' "$(job_log "$JOB_ID" wall)"
  [ "$(cat "$DATA/wall/results/w.txt")" = w ]
  [ ! -e "${dirs[0]}" ]
  [ ! -e "${dirs[1]}" ]
}
