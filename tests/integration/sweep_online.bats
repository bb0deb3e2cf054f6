#!/usr/bin/env bats
# Online W&B sweep agents on the real local cluster. No W&B server is reachable in the test
# suite, so a stand-in `wandb` first on PATH records how each agent was started: its
# arguments, node, GPU, and a hash of the API key it was given.

load ../helpers/cluster

SECRET=hpc-test-secret-key-5f2b9c0e7a41d8

setup() {
  integration_setup proj # a bare venv: the stand-in below is the only wandb
  STUB_DIR=$BATS_TEST_TMPDIR/calls
  mkdir -p "$BATS_TEST_TMPDIR/bin" "$STUB_DIR"
  cat >"$BATS_TEST_TMPDIR/bin/wandb" <<'EOF'
#!/bin/bash
# Stand-in wandb: one file per call, never the key itself.
{
  printf 'argv=%s\n' "$*"
  printf 'node=%s\n' "${SLURMD_NODENAME:-}"
  printf 'cuda=%s\n' "${CUDA_VISIBLE_DEVICES-unset}"
  printf 'ntasks=%s\n' "${SLURM_NTASKS-unset}"
  printf 'key=%s\n' "$(printf '%s' "${WANDB_API_KEY-}" | sha256sum | cut -c1-32)"
  printf 'task=%s\n' "${HPC_TASK_INDEX:-}"
} >"$WANDB_STUB_DIR/call.$$"
EOF
  chmod +x "$BATS_TEST_TMPDIR/bin/wandb"
  export WANDB_STUB_DIR=$STUB_DIR PATH=$BATS_TEST_TMPDIR/bin:$PATH
  KEY_HASH=$(printf '%s' "$SECRET" | sha256sum | cut -c1-32)
}

# field NAME: the values of NAME over every recorded call, sorted.
field() {
  cat "$STUB_DIR"/call.* | sed -n "s/^$1=//p" | sort
}

@test "an array of agents: each task runs wandb agent with the sweep id and run count" {
  WANDB_API_KEY=$SECRET submit --wandb-sweepid team/proj/abc123 --num-agents 3 \
    --runs-per-agent 2 --agent-stagger 1 -e agents
  [[ $output == *"(array of 3 tasks, 0-2)"* ]]
  wait_job "$JOB_ID" 120
  [ "$(job_states "$JOB_ID" | grep -c '|COMPLETED|0:0$')" -eq 3 ]
  [ "$(field argv | uniq -c | awk '{$1=$1; print}')" = "3 agent --count 2 team/proj/abc123" ]
  [ "$(field task | tr '\n' ' ')" = "0 1 2 " ]
  [ "$(field key | uniq)" = "$KEY_HASH" ] # the key reached every agent...
  local log i
  for i in 1 2; do
    log=$(job_log "$JOB_ID" agents "$i")
    grep -q "agent waits $i s before starting" "$log"
  done
  # ...and nothing else: not the script, the commands, the logs, or Slurm's view of the job.
  run ! grep -rqF -- "$SECRET" "$SCRATCH"
  local shown
  shown=$(scontrol show job -dd "$JOB_ID")
  [[ $shown == *"JobId="* && $shown != *"$SECRET"* ]]
  shown=$(sacct -j "$JOB_ID" -o JobName,SubmitLine%500 -P)
  [[ $shown == *"sbatch --parsable"* && $shown != *"$SECRET"* ]]
  [ "$(stat -c %a "$HOME/.config/hpc_files/wandb_api_key")" = 600 ]
}

@test "the same command again adds agents to the same sweep" {
  WANDB_API_KEY=$SECRET submit --wandb-sweepid team/proj/abc123 -e more
  local first=$JOB_ID
  WANDB_API_KEY=$SECRET submit --wandb-sweepid team/proj/abc123 -e more
  [ "$JOB_ID" != "$first" ]
  wait_job "$first" 120
  wait_job "$JOB_ID" 120
  [ "$(field argv | uniq -c | awk '{$1=$1; print}')" = "2 agent --count 1 team/proj/abc123" ]
}

@test "agents per GPU: one job on 2 nodes, one agent per GPU, each pinned to its own" {
  WANDB_API_KEY=$SECRET submit --wandb-sweepid team/proj/abc123 --agents-per-gpu --gpus 2 \
    -N 2 --agent-stagger 0 -e pergpu
  wait_job "$JOB_ID" 120
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ "$(find "$STUB_DIR" -name 'call.*' | wc -l)" -eq 4 ]
  # Two nodes, two agents on each, each with one GPU of its node, none the same.
  [ "$(field node | uniq -c | awk '{print $1}' | tr '\n' ' ')" = "2 2 " ]
  local f pairs
  pairs=$(for f in "$STUB_DIR"/call.*; do
    printf '%s %s\n' "$(sed -n 's/^node=//p' "$f")" "$(sed -n 's/^cuda=//p' "$f")"
  done | sort)
  echo "$pairs"
  [ "$(sort -u <<<"$pairs" | wc -l)" -eq 4 ]
  run ! grep -qv '^[0-9]$' <<<"$(cut -d' ' -f2 <<<"$pairs")" # one GPU index each
  # Independent programs, not ranks of one: no task count for Lightning to find.
  [ "$(field ntasks | uniq)" = unset ]
  [ "$(field key | uniq)" = "$KEY_HASH" ]
  grep -q "starting 4 agent(s): one per GPU on each of 2 node(s)" "$(job_log "$JOB_ID" pergpu)"
}
