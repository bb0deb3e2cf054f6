#!/usr/bin/env bats
# Bad and lost nodes (issue 33) on a cluster of this file's own beside the run's (folder +
# _longrun, ports 800 higher): these tests set nodes DOWN and fill the cluster's nodes as
# they need, which must not touch other files' jobs.
# - a node whose preflight fails (the user's check, keyed on the node's name; a node-local
#   disk that cannot be written) is named, excluded, and the job requeued elsewhere, not
#   counted as one of --max-restarts;
# - a node set DOWN under a 2-node job: the attempt is a node failure of that node, the next
#   attempt avoids it and resumes from the checkpoint; nothing is the program's failure.
# shellcheck disable=SC2016 # command lines in single quotes are expanded in the job

load ../helpers/cluster

# ReturnToService=1, as on many clusters: a node set DOWN stays DOWN until teardown resumes
# it. With this suite's usual 2, slurmctld's next ping brought it back within seconds,
# sometimes before the job's SIGTERM handler asked sinfo about it (the job then logged a
# requeue from outside, not a node failure).
LONGRUN=(_longrun 800 HPC_LOCAL_RETURN_TO_SERVICE=1)

setup_file() {
  cluster_beside_start "${LONGRUN[@]}"
}

teardown_file() {
  cluster_beside "${LONGRUN[@]}" -- stop
}

setup() {
  integration_setup proj
  DOWNED="" FROZEN_SLURMD=""
}

teardown() {
  # A slurmd this test froze goes on (kill_node), and a node it set DOWN goes back,
  # whatever happened (resume only what is still down).
  [[ -z ${FROZEN_SLURMD:-} ]] || kill -CONT "$FROZEN_SLURMD" 2>/dev/null || true
  [[ -n ${DOWNED:-} ]] || return 0
  [[ $(as_admin sinfo -h -n "$DOWNED" -o %t | head -1) != *down* ]] ||
    as_admin scontrol update nodename="$DOWNED" state=resume
}

# kill_node NODE JOB: NODE dies under JOB as a machine does, with no signal to anything:
# its slurmd is frozen (it reports nothing more), every process of JOB there is frozen and
# then killed with SIGKILL (its batch shell too: no trap runs), and NODE is set DOWN, as
# slurmctld does to a node that stopped answering (without waiting its SlurmdTimeout).
kill_node() {
  local node=$1 job=$2 pids=() kids=() p
  FROZEN_SLURMD=$(cat "$HPC_LOCAL_CLUSTER_DIR/run/slurmd-$node.pid")
  kill -STOP "$FROZEN_SLURMD"
  # The job's step daemons on this host (only NODE runs the job) and all below them.
  mapfile -t pids < <(pgrep -f "^slurmstepd: \[$job\.")
  ((${#pids[@]})) || { echo "no slurmstepd of job $job" >&2; return 1; }
  while :; do
    kill -STOP "${pids[@]}" 2>/dev/null || true
    mapfile -t kids < <(for p in "${pids[@]}"; do pgrep -P "$p"; done | sort -u |
      comm -13 <(printf '%s\n' "${pids[@]}" | sort -u) -)
    ((${#kids[@]})) || break
    pids+=("${kids[@]}")
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
  as_admin scontrol update nodename="$node" state=down reason=longruns_test_dead
}

# nodes_of_attempts LOG: the node list of each attempt, in order, from the log's headers.
nodes_of_attempts() {
  sed -n 's/^\[hpc [^]]*\] job [0-9]*, attempt [0-9]*, nodes \([^,]*\),.*/\1/p' "$1"
}

@test "a node that fails the user's --preflight (keyed on its name) is excluded; the job runs elsewhere; hpc status says so" {
  printf 'echo "ran on $SLURMD_NODENAME"\n' >"$PROJECT/experiment_configurations.txt"
  # The node of the first attempt becomes the bad one.
  submit --exp-name pf --time 10 --max-restarts 0 \
    --preflight 'f=$HOME/bad_node; [ -s "$f" ] || echo "$SLURMD_NODENAME" >"$f"; echo "checked $SLURMD_NODENAME"; [ "$(cat "$f")" != "$SLURMD_NODENAME" ]'
  wait_job "$JOB_ID" 180
  local log bad
  log=$(job_log "$JOB_ID" pf)
  cat "$log"
  bad=$(cat "$HOME/bad_node")
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  grep -q "preflight failed on $bad: --preflight exited 1: checked $bad" "$log"
  grep -q "excluded node(s) $bad from job $JOB_ID" "$log"
  grep -q 'not counted as one of --max-restarts' "$log"
  [ "$(nodes_of_attempts "$log" | head -1)" = "$bad" ]
  [ "$(nodes_of_attempts "$log" | tail -1)" != "$bad" ]
  grep -q 'ran on' "$log"
  ! grep -q "ran on $bad" "$log" || false
  run --separate-stderr hpc status pf
  echo "$output"
  [[ $output == *"2: preflight failed on $bad: --preflight failed, finished"* ]]
}

@test "nodes whose local disk cannot be written fail the preflight of a 2-node job; it requeues onto good nodes" {
  local n
  for n in 1 2 3 4; do mkdir -p "$SCRATCH/local/node$n"; done
  chown -R "$HPC_TEST_USER:" "$SCRATCH/local"
  chmod 555 "$SCRATCH/local/node1" "$SCRATCH/local/node2"
  printf 'HPC_PROVIDES_TMPDIR=no\nHPC_LOCAL_SCRATCH=%s/local/%%n\n' "$SCRATCH" >"$PROJECT/site.conf"
  printf 'echo "rank $SLURM_PROCID on $SLURMD_NODENAME"\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name disk --time 10 --cluster "$PROJECT/site.conf" --which-distributed script --num-nodes 2
  wait_job "$JOB_ID" 240
  local log
  log=$(job_log "$JOB_ID" disk)
  cat "$log"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -Eq "preflight failed on node[12]: local scratch $SCRATCH/local/node[12] cannot be written" "$log"
  grep -q 'rendezvous' "$log"
  [ "$(nodes_of_attempts "$log" | tail -1)" = "node[3-4]" ]
  grep -q 'rank 0 on node3' "$log" && grep -q 'rank 1 on node4' "$log"
  run --separate-stderr hpc status disk
  echo "$output"
  [[ $output == *"preflight failed on node"*": node-local scratch cannot be written"* ]]
}

@test "a node set DOWN under a 2-node job: a node failure, not the program's; the next attempt avoids it and resumes" {
  cat >"$PROJECT/two.sh" <<'EOF'
if [ "$HPC_RESUMING" = 1 ]; then
  echo "rank $SLURM_PROCID resumed from $(cat "$HPC_CHECKPOINT_DIR/ckpt") on $SLURMD_NODENAME"
  exit 0
fi
[ "$SLURM_PROCID" != 0 ] || echo step-7 >"$HPC_CHECKPOINT_DIR/ckpt"
echo "$SLURMD_NODENAME" >"$HOME/up.$SLURM_PROCID"
sleep 300
EOF
  printf 'bash two.sh\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name down --time 10 --which-distributed script --num-nodes 2
  wait_file "$HOME/up.0" 120
  wait_file "$HOME/up.1" 60
  DOWNED=$(cat "$HOME/up.1")
  as_admin scontrol update nodename="$DOWNED" state=down reason=longruns_test
  wait_job "$JOB_ID" 240
  local log
  log=$(job_log "$JOB_ID" down)
  cat "$log"
  attempts "$JOB_ID"
  [ "$(attempts "$JOB_ID" | tail -1)" = "COMPLETED|0:0" ]
  grep -q "node failure ($DOWNED)" "$log"
  grep -q "rank 0 resumed from step-7" "$log"
  grep -q "excluded node(s) $DOWNED from job $JOB_ID" "$log"
  [[ $(nodes_of_attempts "$log" | tail -1) != *"${DOWNED#node}"* ]]
  ! grep -q "ran on $DOWNED\|resumed from step-7 on $DOWNED" "$log" || false
  ! grep -q 'failed first' "$log" || false
  run --separate-stderr hpc status down
  echo "$output"
  [[ $output == *"2: node failure ($DOWNED), finished"* ]]
}

@test "the batch node dies under a running job (no signal reaches it): the next attempt records a node failure of it, resumes, and it is no restart of the program's" {
  cat >"$PROJECT/one.sh" <<'EOF'
if [ "$HPC_RESUMING" = 1 ]; then
  echo "resumed from $(cat "$HPC_CHECKPOINT_DIR/ckpt") on $SLURMD_NODENAME"
  exit 0
fi
echo step-7 >"$HPC_CHECKPOINT_DIR/ckpt"
echo "$SLURMD_NODENAME" >"$HOME/up.0"
sleep 300
EOF
  printf 'bash one.sh\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name dead --time 10
  wait_file "$HOME/up.0" 120
  DOWNED=$(cat "$HOME/up.0")
  kill_node "$DOWNED" "$JOB_ID"
  wait_job "$JOB_ID" 240
  local log
  log=$(job_log "$JOB_ID" dead)
  cat "$log"
  attempts "$JOB_ID"
  [ "$(attempts "$JOB_ID" | tail -1)" = "COMPLETED|0:0" ]
  grep -q "attempt 1 ended with no word from its batch shell: node failure ($DOWNED)" "$log"
  grep -q "restarts: 1 of this job's requeues were for a node" "$log"
  grep -q "resumed from step-7 on" "$log"
  ! grep -q "resumed from step-7 on $DOWNED" "$log" || false
  run --separate-stderr hpc status dead
  echo "$output"
  [[ $output == *"2: node failure ($DOWNED), finished"* ]]
}
