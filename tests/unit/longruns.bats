#!/usr/bin/env bats
# Long runs (issue 33) without Slurm: --stall-timeout and --preflight into the plan (or
# refused), the stall watch of one node against a real process tree, and one node's
# preflight with each of its checks failing. On the cluster: tests/integration/stalls.bats
# and longruns_nodes.bats.
# shellcheck disable=SC2016 # command lines in single quotes are expanded by the job

load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'python examples/train.py --lr 0.1'
}

@test "durations: 30s, 20m, 2h, off and 0; anything else is not one" {
  source "$REPO_ROOT/hpc_files/lib/longruns.sh"
  local s
  hpc_duration_seconds_to s 30s && [ "$s" = 30 ]
  hpc_duration_seconds_to s 20m && [ "$s" = 1200 ]
  hpc_duration_seconds_to s 2h && [ "$s" = 7200 ]
  hpc_duration_seconds_to s off && [ "$s" = 0 ]
  hpc_duration_seconds_to s 0 && [ "$s" = 0 ]
  local bad
  for bad in 30 1.5h 2d -5m '' 'h' '$(id)' 99999999s; do
    ! hpc_duration_seconds_to s "$bad" || { echo "took '$bad'" && return 1; }
  done
}

@test "--stall-timeout and --preflight go into the batch script; the default is 1h; bad values are refused" {
  run --separate-stderr submitter --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *"export HPC_STALL_TIMEOUT='1h'"* && $output == *"export HPC_STALL_TIMEOUT_S='3600'"* ]]
  [[ $output != *"export HPC_PREFLIGHT="* ]]
  [[ $output == *"hpc_preflight "* ]]
  run --separate-stderr submitter --dry-run --stall-timeout 20m --preflight 'test -e "/dev/$X" && nvidia-smi'
  [ "$status" -eq 0 ]
  [[ $output == *"export HPC_STALL_TIMEOUT_S='1200'"* ]]
  [[ $output == *"export HPC_PREFLIGHT='test -e \"/dev/\$X\" && nvidia-smi'"* ]]
  run --separate-stderr submitter --dry-run --stall-timeout off
  [[ $output == *"export HPC_STALL_TIMEOUT='off'"* && $output == *"export HPC_STALL_TIMEOUT_S='0'"* ]]
  refused "--stall-timeout '20' is not a duration: a number with s, m or h (30s, 20m, 2h), or off" --stall-timeout 20
  refused "--stall-timeout '5s' is too short: at least 10s" --stall-timeout 5s
  refused "--stall-timeout '99999999h' is too long: at most 6 digits before its unit (e.g. 72h)" --stall-timeout 99999999h
  refused "--preflight (or HPC_PREFLIGHT) holds a newline" --preflight $'true\nfalse'
}

@test "the profile's HPC_STALL_TIMEOUT and HPC_PREFLIGHT are the defaults; a bad one is refused" {
  printf 'HPC_STALL_TIMEOUT=2h\nHPC_PREFLIGHT="true"\nHPC_PREFLIGHT_RETRIES=1\n' >"$PROJECT/site.conf"
  run --separate-stderr submitter --dry-run --cluster "$PROJECT/site.conf"
  [ "$status" -eq 0 ]
  [[ $output == *"export HPC_STALL_TIMEOUT='2h'"* && $output == *"export HPC_PREFLIGHT='true'"* ]]
  [[ $output == *"export HPC_PREFLIGHT_RETRIES='1'"* ]]
  run --separate-stderr submitter --dry-run --cluster "$PROJECT/site.conf" --stall-timeout 30s
  [[ $output == *"export HPC_STALL_TIMEOUT='30s'"* ]]
  printf 'HPC_STALL_TIMEOUT=forever\n' >"$PROJECT/bad.conf"
  refused "the cluster profile's HPC_STALL_TIMEOUT 'forever' is not a duration" --cluster "$PROJECT/bad.conf"
}

# watch_env DIR: the variables the stall watch reads, for an attempt folder under DIR.
watch_env() {
  export HPC_ATTEMPT_DIR=$1/attempt HPC_CHECKPOINT_DIR=$1/ckpt HPC_RESULTS_DIR=$1/results
  export HPC_STALL_TIMEOUT_S=10 HPC_STALL_TIMEOUT=10s HPC_STALL_LOG=$1/log SLURMD_NODENAME=nodeA
  mkdir -p "$HPC_ATTEMPT_DIR/heartbeat" "$HPC_ATTEMPT_DIR/pids" "$HPC_CHECKPOINT_DIR" "$HPC_RESULTS_DIR"
  : >"$HPC_STALL_LOG"
}

@test "the stall watch: progress keeps it quiet; silence claims the stall, shows the processes and tells the batch shell" {
  local dir=$BATS_TEST_TMPDIR
  watch_env "$dir"
  # The batch shell: a process that says when it gets SIGUSR2.
  bash -c 'trap "echo usr2 >$0; exit 0" USR2; while :; do sleep 0.2; done' "$dir/told" >/dev/null 2>&1 &
  local batch=$!
  # The program: a shell and a sleep under it; the heartbeat is touched for 14 s, then not.
  HPC_HEARTBEAT=$HPC_ATTEMPT_DIR/heartbeat/nodeA.rank0 bash -c 'for i in 1 2 3 4 5 6 7; do touch "$HPC_HEARTBEAT"; sleep 2; done; : >"$0"; sleep 300' \
    "$dir/heartbeat_stopped" >/dev/null 2>&1 &
  local program=$!
  printf 'rank 0\n' >"$HPC_ATTEMPT_DIR/pids/nodeA.$program"
  bash "$REPO_ROOT/virtual_env_hpc_files/stall_watch.sh" nodeA "$batch" 1 >"$dir/out" 2>&1
  # Not while the heartbeat was still touched.
  [ -e "$dir/heartbeat_stopped" ]
  wait "$batch" || true
  cat "$dir/out"
  kill "$program" 2>/dev/null || true
  [ "$(cat "$dir/told")" = usr2 ]
  grep -q 'stalled: no progress for 10s on rank 0 on nodeA (its $HPC_HEARTBEAT is the oldest' "$dir/out"
  grep -q 'stalled: rank 0 on nodeA: its processes' "$dir/out"
  # (bash execs its last command: the program's pid is the sleep's now)
  grep -Eq "^    $program [0-9]+ S [^ ]+: sleep 300" "$dir/out"
  [ -d "$HPC_ATTEMPT_DIR/stalled" ] && [ -e "$HPC_ATTEMPT_DIR/stalled.dumped.nodeA" ]
}

@test "the stall watch ends quietly on its stop file, and another node's watch shows its processes once the stall is claimed" {
  local dir=$BATS_TEST_TMPDIR
  watch_env "$dir"
  sleep 300 >/dev/null 2>&1 &
  local program=$!
  printf 'rank 1\n' >"$HPC_ATTEMPT_DIR/pids/nodeA.$program"
  bash "$REPO_ROOT/virtual_env_hpc_files/stall_watch.sh" nodeB 1 1 >"$dir/out" 2>&1 &
  local watch=$!
  sleep 2
  mkdir "$HPC_ATTEMPT_DIR/stalled"
  wait "$watch"
  grep -q 'stalled: rank 1 on nodeA: its processes' "$dir/out"
  ! grep -q 'no progress for' "$dir/out" || false
  rm -rf "$HPC_ATTEMPT_DIR/stalled" "$HPC_ATTEMPT_DIR"/stalled.*
  bash "$REPO_ROOT/virtual_env_hpc_files/stall_watch.sh" nodeB 1 1 >"$dir/out2" 2>&1 &
  watch=$!
  sleep 1
  : >"$HPC_ATTEMPT_DIR/stall.stop"
  wait "$watch"
  kill "$program"
  [ ! -s "$dir/out2" ]
}

# preflight [VAR=VALUE...]: one node's preflight.sh with these settings; sets status, output.
preflight() {
  rm -rf "$BATS_TEST_TMPDIR/pf" && mkdir -p "$BATS_TEST_TMPDIR/pf"
  run env HPC_PREFLIGHT_DIR="$BATS_TEST_TMPDIR/pf" SLURMD_NODENAME=nodeA HPC_LOCAL_SCRATCH="$BATS_TEST_TMPDIR" \
    HPC_PROVIDES_TMPDIR=no "$@" bash "$REPO_ROOT/virtual_env_hpc_files/preflight.sh"
}

@test "one node's preflight: each check fails with its reason; a ready node passes" {
  preflight HPC_PREFLIGHT='test "$SLURMD_NODENAME" != nodeB'
  [ "$status" -eq 0 ]
  [ -e "$BATS_TEST_TMPDIR/pf/nodeA.ok" ]
  [[ $output == *"preflight ok on nodeA: local scratch writable, --preflight"* ]]
  preflight HPC_PREFLIGHT='echo checking; test "$SLURMD_NODENAME" != nodeA'
  [ "$status" -eq 1 ]
  [ "$(cat "$BATS_TEST_TMPDIR/pf/nodeA.fail")" = "user-check --preflight exited 1: checking" ]
  [[ $output == *"preflight failed on nodeA: --preflight exited 1: checking"* ]]
  # A HPC_LOCAL_SCRATCH missing (the profile's to fix, said by the job's set-up): no
  # node's fault; one that exists and cannot be written is (/proc: not even for root).
  preflight HPC_LOCAL_SCRATCH=/nonexistent/%n
  [ "$status" -eq 0 ]
  [ -e "$BATS_TEST_TMPDIR/pf/nodeA.ok" ]
  preflight HPC_LOCAL_SCRATCH=/proc
  [ "$status" -eq 1 ]
  [ "$(cat "$BATS_TEST_TMPDIR/pf/nodeA.fail")" = "scratch local scratch /proc cannot be written" ]
  preflight HPC_DATA_BYTES=999999999999999999
  [ "$status" -eq 1 ]
  [[ $(cat "$BATS_TEST_TMPDIR/pf/nodeA.fail") == "scratch-room local scratch $BATS_TEST_TMPDIR has "*" free, --data needs "* ]]
  preflight HPC_GPUS_PER_NODE=2 CUDA_VISIBLE_DEVICES=0
  [ "$status" -eq 1 ]
  [[ $(cat "$BATS_TEST_TMPDIR/pf/nodeA.fail") == "gpus asked for 2 GPU(s), 1 visible (CUDA_VISIBLE_DEVICES=0)" ]]
  # nvidia-smi that fails (a GPU lost) fails the node even when the count is right.
  mkdir -p "$BATS_TEST_TMPDIR/bin"
  printf '#!/bin/bash\necho "Unable to determine the device handle for GPU 0000:41:00.0: GPU is lost"\nexit 15\n' >"$BATS_TEST_TMPDIR/bin/nvidia-smi"
  chmod +x "$BATS_TEST_TMPDIR/bin/nvidia-smi"
  preflight PATH="$BATS_TEST_TMPDIR/bin:$PATH" HPC_GPUS_PER_NODE=1 CUDA_VISIBLE_DEVICES=0
  [ "$status" -eq 1 ]
  [[ $(cat "$BATS_TEST_TMPDIR/pf/nodeA.fail") == "gpu-health nvidia-smi failed (exit 15): Unable to determine"*"GPU is lost" ]]
  # The rendezvous port: nobody listens there.
  preflight HPC_PREFLIGHT_ADDR=127.0.0.1 HPC_PREFLIGHT_PORT=1
  [ "$status" -eq 1 ]
  [[ $(cat "$BATS_TEST_TMPDIR/pf/nodeA.fail") == "rendezvous cannot reach the first node's rendezvous port 127.0.0.1:1"* ]]
}

# nodes_left ADD [SQUEUE_EXCLUDED]: hpc_nodes_left_to against a stub cluster of node1..node4
# in partition p (node4 drained), the job already excluding SQUEUE_EXCLUDED (as squeue's
# %x gives it: a host list or "(null)").
nodes_left() {
  local bin=$BATS_TEST_TMPDIR/nl
  mkdir -p "$bin"
  printf '#!/bin/bash\n[[ " $* " == *" -p p "* ]] || exit 1\nprintf "node1 idle\\nnode2 alloc\\nnode3 mix\\nnode4 drain\\nnode5 down*\\n"\n' >"$bin/sinfo"
  printf '#!/bin/bash\necho "%s"\n' "${2:-(null)}" >"$bin/squeue"
  cat >"$bin/scontrol" <<'STUB'
#!/bin/bash
[[ $1 == show && $2 == hostnames ]] || exit 1
IFS=, read -ra parts <<<"$3"
for p in "${parts[@]}"; do
  if [[ $p =~ ^(.*)\[([0-9]+)-([0-9]+)\]$ ]]; then
    for ((i = BASH_REMATCH[2]; i <= BASH_REMATCH[3]; i++)); do echo "${BASH_REMATCH[1]}$i"; done
  else
    echo "$p"
  fi
done
STUB
  chmod +x "$bin"/*
  run bash -c 'source "$1/virtual_env_hpc_files/job_runtime.sh" || exit 9
    hpc_nodes_left_to n "$2"; echo "$n"' _ "$REPO_ROOT" "$1"
}

@test "nodes left to a job after excluding some: up nodes of its partition, not excluded before or now; -1 when Slurm does not say (issue 33)" {
  export SLURM_JOB_ID=77 SLURM_JOB_PARTITION=p PATH=$BATS_TEST_TMPDIR/nl:$PATH
  nodes_left node1
  [ "$output" = 2 ]
  nodes_left node1,node3
  [ "$output" = 1 ]
  nodes_left node3 'node[1-2]'
  [ "$output" = 0 ]
  export SLURM_JOB_PARTITION=q # (sinfo fails for it)
  nodes_left node1
  [ "$output" = -1 ]
}
