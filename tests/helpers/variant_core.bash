# shellcheck shell=bash
# The toolkit's core paths, as tests any cluster variant runs (tests/integration/
# cluster_*.bats: per-node disks, cgroup enforcement, a private /tmp): one job and an
# array, 2-node script/torchrun/lightning, --data staged on every node, results back from
# every node, a requeue. Each runs as the normal user (cluster.bash) and checks who ran it.
# shellcheck disable=SC2016 # the experiment lines are expanded by the job

# core_json FILE EXPR: a value from a JSON file (python expression on d).
core_json() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# core_ran_as_user ID: every row of the job in sacct names the test user.
core_ran_as_user() {
  [ "$(as_admin sacct -X -n -P -j "$1" -o User | sort -u)" = "$HPC_TEST_USER" ]
}

core_single_and_array() {
  printf '%s\n' 'python argv_dump.py one' 'python argv_dump.py two' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name core --time 5
  wait_job "$JOB_ID"
  [ "$(job_states "$JOB_ID" | grep -c '|COMPLETED|0:0$')" -eq 2 ]
  core_ran_as_user "$JOB_ID"
  local ck=$SCRATCH/proj/core/checkpoints
  [ "$(stat -c %U "$ck/task_0/one.json")" = "$HPC_TEST_USER" ]
  [ "$(stat -c %U "$ck/task_1/two.json")" = "$HPC_TEST_USER" ]
  [ "$(core_json "$ck/task_1/two.json" 'd["env"]["SLURM_ARRAY_TASK_ID"]')" = 1 ]
}

# core_two_node_script: (submit_args: more options, e.g. a cluster profile) --data staged on both nodes; each rank writes to $HPC_RESULTS_DIR,
# which exists on its own node; node 0's come back in results/, node 1's in results/node_1/.
core_two_node_script() {
  [[ -v submit_args ]] || submit_args=()
  mkdir -p "$SCRATCH/proj/ds"
  printf 'staged\n' >"$SCRATCH/proj/ds/d.txt"
  printf '%s\n' 'r=$SLURM_PROCID; cat "$SLURM_TMPDIR/ds/d.txt" >"$HPC_CHECKPOINT_DIR/data_$r" && echo "$SLURMD_NODENAME" >"$HPC_RESULTS_DIR/from_rank_$r" && echo "$SLURM_TMPDIR $HPC_RESULTS_DIR" >"$HPC_CHECKPOINT_DIR/paths_$r"' \
    >"$PROJECT/experiment_configurations.txt"
  submit --exp-name two --which-distributed script --num-nodes 2 --data ds --time 5 "${submit_args[@]}"
  wait_job "$JOB_ID" 180
  cat "$(job_log "$JOB_ID" two)"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  core_ran_as_user "$JOB_ID"
  local res=$SCRATCH/proj/two/results ck=$SCRATCH/proj/two/checkpoints n0 n1
  [ "$(cat "$ck/data_0")" = staged ]
  [ "$(cat "$ck/data_1")" = staged ]
  n0=$(cat "$res/from_rank_0")
  n1=$(cat "$res/node_1/from_rank_1")
  [ "$n0" != "$n1" ]
  [ ! -e "$res/from_rank_1" ]
  grep -q "results of node $n1 (rank 1): copied to $res/node_1" "$(job_log "$JOB_ID" two)"
}

core_two_node_torchrun() {
  project_venv
  printf 'python examples/ddp_allreduce.py --tag tr\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name tr --which-distributed torchrun --num-nodes 2 --procs-per-node 1 --time 10
  wait_job "$JOB_ID" 240
  completed_or_torch_exit_abort "$(job_log "$JOB_ID" tr)" || { cat "$(job_log "$JOB_ID" tr)"; return 1; }
  core_ran_as_user "$JOB_ID"
  local dir=$SCRATCH/proj/tr/checkpoints/tr
  [ "$(core_json "$dir/rank_0.json" 'd["sum"]')" = 3.0 ]
  [ "$(core_json "$dir/rank_1.json" 'd["sum"]')" = 3.0 ]
  [ "$(core_json "$dir/rank_0.json" 'd["node"]')" != "$(core_json "$dir/rank_1.json" 'd["node"]')" ]
}

core_two_node_lightning() {
  project_venv
  printf 'python examples/lightning_ddp.py --max-steps 10\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name ddp --which-distributed lightning --num-nodes 2 --cpus 1 --time 10
  wait_job "$JOB_ID" 240
  completed_or_torch_exit_abort "$(job_log "$JOB_ID" ddp)" || { cat "$(job_log "$JOB_ID" ddp)"; return 1; }
  core_ran_as_user "$JOB_ID"
  local ck=$SCRATCH/proj/ddp/checkpoints
  [ "$(core_json "$ck/lightning_rank_1.json" 'd["global_step"]')" = 10 ]
  [ "$(core_json "$ck/lightning_rank_1.json" 'd["world_size"]')" = 2 ]
}

# core_requeue: warned (SIGUSR1 to the batch shell, as the user), checkpoints, requeues
# itself and resumes to the right total; what it wrote to $HPC_RESULTS_DIR came back.
core_requeue() {
  project_venv
  printf 'python examples/requeue_train.py --steps 24 --step-sleep 0.25\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name rq --time 10
  local ck=$SCRATCH/proj/rq/checkpoints log start=$SECONDS
  log=$(job_log "$JOB_ID" rq)
  until [[ -f $ck/progress.log ]] && grep -q '^1 6$' "$ck/progress.log"; do
    ((SECONDS - start < 120)) || { echo "no progress" >&2; cat "$log" >&2; return 1; }
    sleep 0.5
  done
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_job "$JOB_ID" 240
  cat "$log"
  [ "$(sacct --duplicates -X -n -P -j "$JOB_ID" -o State | tr '\n' ' ')" = "REQUEUED COMPLETED " ]
  core_ran_as_user "$JOB_ID"
  [ "$(core_json "$ck/done.json" 'd["step"], d["attempts"]')" = "(24, 2)" ]
  grep -q 'started at step' "$SCRATCH/proj/rq/results/attempt_2.txt"
}
