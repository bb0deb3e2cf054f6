#!/usr/bin/env bats
# Multi-node launchers on the real local cluster (CPU, gloo): lightning, torchrun, script
# and dask each run the unchanged laptop command on every node they should.

load ../helpers/cluster

setup() {
  integration_setup proj
  # The launcher tests need torch, lightning and dask: the test venv has them.
  project_venv
}

# json FILE EXPR: a value from a JSON file (python expression on d).
json() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

@test "lightning: 2-node DDP on CPU trains to the end on both ranks" {
  printf 'python examples/lightning_ddp.py --max-steps 20\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name ddp --which-distributed lightning --num-nodes 2 --cpus 1 --time 10
  wait_job "$JOB_ID" 240
  cat "$(job_log "$JOB_ID" ddp)"
  completed_or_torch_exit_abort "$(job_log "$JOB_ID" ddp)"
  local ck=$SCRATCH/proj/ddp/checkpoints r
  for r in 0 1; do
    [ "$(json "$ck/lightning_rank_$r.json" 'd["global_step"]')" = 20 ]
    [ "$(json "$ck/lightning_rank_$r.json" 'd["world_size"]')" = 2 ]
  done
  [ "$(json "$ck/lightning_rank_0.json" 'd["node"]')" != "$(json "$ck/lightning_rank_1.json" 'd["node"]')" ]
  # The command line was not rewritten: Lightning got the counts from the environment.
  grep -q "command: python examples/lightning_ddp.py --max-steps 20$" "$(job_log "$JOB_ID" ddp)"
}

@test "torchrun: 2 nodes x 2 processes, all_reduce gives the right sum on every rank" {
  printf 'python examples/ddp_allreduce.py --tag tr\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name tr --which-distributed torchrun --num-nodes 2 --procs-per-node 2 --time 10
  wait_job "$JOB_ID" 240
  cat "$(job_log "$JOB_ID" tr)"
  completed_or_torch_exit_abort "$(job_log "$JOB_ID" tr)"
  local dir=$SCRATCH/proj/tr/checkpoints/tr r nodes=()
  for r in 0 1 2 3; do
    [ "$(json "$dir/rank_$r.json" 'd["sum"]')" = 10.0 ]
    [ "$(json "$dir/rank_$r.json" 'd["world_size"]')" = 4 ]
    nodes+=("$(json "$dir/rank_$r.json" 'd["node"]')")
  done
  [ "$(printf '%s\n' "${nodes[@]}" | sort -u | wc -l)" -eq 2 ]
  # The command as planned at submission (the commands file's line), its rendezvous on the
  # first node's address, which the job found: 127.0.0.1 here.
  # shellcheck disable=SC2016 # the variables' names, as the commands file holds them
  local log pattern='--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT'
  log=$(job_log "$JOB_ID" tr)
  grep -qF -- "command: torchrun --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d $pattern" "$log"
  grep -q -- "MASTER_ADDR=127.0.0.1 MASTER_PORT=" "$log"
  grep -qF -- "$pattern" "$SCRATCH"/proj/hpc_outputs/jobs/tr-*/commands
}

@test "torchrun on one node runs --standalone" {
  printf 'python examples/ddp_allreduce.py --tag one\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name one --which-distributed torchrun --procs-per-node 2 --time 10
  wait_job "$JOB_ID" 180
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -q -- "torchrun --standalone --nproc-per-node=2" "$(job_log "$JOB_ID" one)"
  [ "$(json "$SCRATCH/proj/one/checkpoints/one/rank_1.json" 'd["sum"]')" = 3.0 ]
}

@test "script: every rank gets RANK, WORLD_SIZE, LOCAL_RANK, NODE_RANK, MASTER_ADDR, MASTER_PORT" {
  printf 'python examples/ddp_allreduce.py --tag sc\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name sc --which-distributed script --num-nodes 2 --procs-per-node 2 --time 10
  wait_job "$JOB_ID" 180
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  local dir=$SCRATCH/proj/sc/checkpoints/sc r node0 port
  node0=$(json "$dir/rank_0.json" 'd["node"]')
  port=$(json "$dir/rank_0.json" 'd["env"]["MASTER_PORT"]')
  for r in 0 1 2 3; do
    [ "$(json "$dir/rank_$r.json" 'd["env"]["RANK"]')" = "$r" ]
    [ "$(json "$dir/rank_$r.json" 'd["env"]["WORLD_SIZE"]')" = 4 ]
    [ "$(json "$dir/rank_$r.json" 'd["env"]["LOCAL_RANK"]')" = $((r % 2)) ]
    [ "$(json "$dir/rank_$r.json" 'd["env"]["NODE_RANK"]')" = $((r / 2)) ]
    [ "$(json "$dir/rank_$r.json" 'd["env"]["MASTER_ADDR"]')" = 127.0.0.1 ]
    [ "$(json "$dir/rank_$r.json" 'd["env"]["MASTER_PORT"]')" = "$port" ]
    [ "$(json "$dir/rank_$r.json" 'd["sum"]')" = 10.0 ]
  done
  [ "$(json "$dir/rank_2.json" 'd["node"]')" != "$node0" ]
}

@test "dask: a computation uses the workers of both nodes, then the cluster stops; laptop code's Client() too" {
  # Laptop code: Client() with no address (DASK_SCHEDULER_ADDRESS); without it, a
  # LocalCluster on the first node alone, and the job's workers idle.
  printf '%s\n' 'import json, os, socket' 'from distributed import Client' \
    'def where(x): return os.environ.get("SLURMD_NODENAME", socket.gethostname())' \
    'client = Client()' \
    'nodes = sorted(set(client.gather(client.map(where, range(200), pure=False))))' \
    'record = {"nodes": nodes, "workers": len(client.scheduler_info()["workers"])}' \
    'open(os.path.join(os.environ["HPC_CHECKPOINT_DIR"], "laptop.json"), "w").write(json.dumps(record))' \
    >"$PROJECT/dask_laptop.py"
  printf 'python examples/dask_compute.py && python dask_laptop.py\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name dk --which-distributed dask --num-nodes 2 --cpus 2 --time 10
  wait_job "$JOB_ID" 240
  cat "$(job_log "$JOB_ID" dk)"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  local f=$SCRATCH/proj/dk/checkpoints/dask_result.json
  [ "$(json "$f" 'd["total"] == d["expected"]')" = True ]
  [ "$(json "$f" 'len(d["nodes"])')" = 2 ]
  [ "$(json "$f" 'd["workers"]')" = 2 ]
  f=$SCRATCH/proj/dk/checkpoints/laptop.json
  cat "$f"
  [ "$(json "$f" 'len(d["nodes"])')" = 2 ]
  [ "$(json "$f" 'd["workers"]')" = 2 ]
  # The scheduler and the workers ran, and stopped with the command.
  grep -q "Scheduler at" "$SCRATCH/proj/dk/dask/scheduler-$JOB_ID.log"
  ! pgrep -f "scheduler-$JOB_ID.json" || false
}

@test "a rank that exits non-zero fails the whole job within seconds, naming node and task" {
  # shellcheck disable=SC2016 # expanded in the job
  printf '%s\n' 'if [ "$RANK" = 1 ]; then sleep 2; exit 3; fi; sleep 300' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name bad --which-distributed script --num-nodes 2 --time 10
  local start=$SECONDS
  wait_job "$JOB_ID" 120
  ((SECONDS - start < 60))
  [ "$(job_state "$JOB_ID")" = FAILED ]
  [ "$(job_exit "$JOB_ID")" = "3:0" ]
  grep -qE "node[0-9]: task 1: Exited with exit code 3" "$(job_log "$JOB_ID" bad)"
  grep -qE "rank 1 on node[0-9] failed first, with exit code 3" "$(job_log "$JOB_ID" bad)"
}

@test "a normal cancel of a 2-node job: its log has no failure words, no shell noise, and no empty .hpc_ranks folder stays" {
  # shellcheck disable=SC2016 # expanded in the job
  printf '%s\n' 'echo "rank $RANK up"; sleep 300' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name stop --which-distributed script --num-nodes 2 --time 10
  local log i
  log=$(job_log "$JOB_ID" stop)
  for ((i = 0; i < 120; i++)); do
    [ "$(grep -c 'up$' "$log" 2>/dev/null)" = 2 ] && break
    sleep 0.5
  done
  scancel "$JOB_ID" # what hpc cancel runs
  wait_job "$JOB_ID" 120
  cat "$log"
  grep -q "received SIGTERM" "$log"
  [ "$(grep -cE "could not|failed|Killed|line [0-9]+:" "$log")" -eq 0 ]
  [ ! -e "$SCRATCH/proj/stop/.hpc_ranks" ]
}

@test "two 2-node jobs at once on the same nodes both succeed (no port clash)" {
  # Each job waits (up to 240 s) until the other has started too, so they overlap even when
  # the other tests' jobs hold the nodes for a while (seen on CI: one after the other).
  # shellcheck disable=SC2016 # expanded in the job
  printf '%s\n' 'touch "$SCRATCH/two_started_$SLURM_JOB_ID"; for _ in $(seq 1200); do [ "$(ls "$SCRATCH" | grep -c "^two_started_")" -ge 2 ] && break; sleep 0.2; done; python examples/ddp_allreduce.py --tag two' \
    >"$PROJECT/experiment_configurations.txt"
  submit --exp-name twoa --which-distributed script --num-nodes 2 --time 10 --sbatch-option='--nodelist=node[3-4]'
  local a=$JOB_ID
  submit --exp-name twob --which-distributed script --num-nodes 2 --time 10 --sbatch-option='--nodelist=node[3-4]'
  local b=$JOB_ID
  wait_job "$a" 400
  wait_job "$b" 400
  completed_or_torch_exit_abort "$(job_log "$a" twoa)" "$a"
  completed_or_torch_exit_abort "$(job_log "$b" twob)" "$b"
  local pa pb
  pa=$(json "$SCRATCH/proj/twoa/checkpoints/two/rank_0.json" 'd["env"]["MASTER_PORT"]')
  pb=$(json "$SCRATCH/proj/twob/checkpoints/two/rank_0.json" 'd["env"]["MASTER_PORT"]')
  [ "$pa" != "$pb" ]
  # They really overlapped in time on the same nodes.
  local sa ea sb eb
  IFS='|' read -r sa ea < <(sacct -X -n -P -j "$a" -o Start,End)
  IFS='|' read -r sb eb < <(sacct -X -n -P -j "$b" -o Start,End)
  [[ $sb < $ea && $sa < $eb ]]
}

@test "--gpus 2 on 2 nodes: every task sees two (fake) GPUs" {
  # shellcheck disable=SC2016 # expanded in the job
  printf '%s\n' 'python argv_dump.py gpu_$SLURM_PROCID' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name g --which-distributed script --num-nodes 2 --gpus 2 --cpus 2 --time 10 --cluster local
  wait_job "$JOB_ID" 120
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  local r
  for r in 0 1 2 3; do
    [ "$(json "$SCRATCH/proj/g/checkpoints/gpu_$r.json" 'len(d["env"]["CUDA_VISIBLE_DEVICES"].split(","))')" = 2 ]
  done
}
