#!/usr/bin/env bats
# The foundation on the real local Slurm cluster: jobs submitted through job_submitter.sh
# run the configured commands, in the venv, with the documented environment, folders,
# logs and exit states.

load ../helpers/cluster

setup() {
  integration_setup proj
}

# field FILE EXPR: a value from a JSON file written by argv_dump.py (python expression on d).
field() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

@test "an array runs line i in task i with its quoting intact, in the venv, from the project folder" {
  cat >"$PROJECT/experiment_configurations.txt" <<'CONF'
# three experiments
python argv_dump.py t0 --lr 0.1 --layers 1,2,3 --name "run a"

python argv_dump.py t1 --name 'it'"'"'s; $HOME' \
    --empty ""
python argv_dump.py t2 --unicode é --star '*'
CONF
  submit --exp-name arr --cpus 1 --time 5
  wait_job "$JOB_ID"
  [ "$(job_states "$JOB_ID" | cut -d'|' -f2 | sort | uniq -c | awk '{print $1, $2}')" = "3 COMPLETED" ]
  local ck=$SCRATCH/proj/arr/checkpoints
  [ "$(field "$ck/task_0/t0.json" 'd["argv"]')" = "['--lr', '0.1', '--layers', '1,2,3', '--name', 'run a']" ]
  [ "$(field "$ck/task_1/t1.json" 'd["argv"]')" = "['--name', \"it's; \$HOME\", '--empty', '']" ]
  [ "$(field "$ck/task_2/t2.json" 'd["argv"]')" = "['--unicode', 'é', '--star', '*']" ]
  [ "$(field "$ck/task_0/t0.json" 'd["prefix"]')" = "$PROJECT/.venv" ]
  [ "$(field "$ck/task_0/t0.json" 'd["cwd"]')" = "$PROJECT" ]
  [ "$(field "$ck/task_2/t2.json" 'd["env"]["HPC_TASK_INDEX"]')" = 2 ]
  [ -f "$(job_log "$JOB_ID" arr 1)" ]
  grep -q "dumped" "$(job_log "$JOB_ID" arr 1)"
}

@test "inside the job: source_dir, project_name, scratch_dir, exp_name and the HPC_* variables" {
  printf 'python argv_dump.py env\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name envcheck --cpus 2 --time 5
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  local f=$SCRATCH/proj/envcheck/checkpoints/env.json
  [ "$(field "$f" 'd["env"]["source_dir"]')" = "$PROJECT" ]
  [ "$(field "$f" 'd["env"]["project_name"]')" = proj ]
  [ "$(field "$f" 'd["env"]["scratch_dir"]')" = "$SCRATCH/proj" ]
  [ "$(field "$f" 'd["env"]["exp_name"]')" = envcheck ]
  [ "$(field "$f" 'd["env"]["HPC_CHECKPOINT_DIR"]')" = "$SCRATCH/proj/envcheck/checkpoints" ]
  [ "$(field "$f" 'd["env"]["HPC_RESTART_COUNT"]')" = 0 ]
  [ "$(field "$f" 'd["env"]["SLURM_CPUS_PER_TASK"]')" = 2 ]
  [ "$(field "$f" 'd["env"]["OMP_NUM_THREADS"]')" = 2 ]
  [ "$(field "$f" 'd["env"]["VIRTUAL_ENV"]')" = "$PROJECT/.venv" ]
  [ -d "$SCRATCH/proj/hpc_outputs" ]
}

@test "a failing command gives a FAILED job with the program's exit code" {
  printf 'python examples/train.py --epochs 1 --fail\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name failing --time 5
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = FAILED ]
  [ "$(job_exit "$JOB_ID")" = "3:0" ]
  grep -q "command ended with exit code 3" "$(job_log "$JOB_ID" failing)"
}

@test "in an array, the failing task is FAILED and the others COMPLETED" {
  printf '%s\n' 'true' 'exit 7' 'true' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name mixed --time 5
  wait_job "$JOB_ID"
  [ "$(job_states "$JOB_ID" | grep "^${JOB_ID}_1|")" = "${JOB_ID}_1|FAILED|7:0" ]
  [ "$(job_states "$JOB_ID" | grep -c '|COMPLETED|0:0$')" -eq 2 ]
}

@test "the example training job completes and writes its result" {
  submit --exp-name example --time 5
  wait_job "$JOB_ID"
  [ "$(job_states "$JOB_ID" | grep -c '|COMPLETED|')" -eq 2 ]
  [ -f "$SCRATCH/proj/example/checkpoints/task_0/result_run a.json" ]
  [ -f "$SCRATCH/proj/example/checkpoints/task_1/result_run b.json" ]
}

@test "a missing venv fails the job at once with a clear message" {
  rm -rf "$PROJECT/.venv"
  printf 'python argv_dump.py never\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name novenv --time 5
  wait_job "$JOB_ID" 60
  [ "$(job_state "$JOB_ID")" = FAILED ]
  grep -q "virtual environment not found at $PROJECT/.venv" "$(job_log "$JOB_ID" novenv)"
  [ ! -e "$SCRATCH/proj/novenv/checkpoints/never.json" ]
}

@test "--gpus 2 gives the job two (fake) GPUs" {
  printf 'python argv_dump.py gpu\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name gpu --gpus 2 --cpus 2 --time 5 --cluster local
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  local f=$SCRATCH/proj/gpu/checkpoints/gpu.json
  [ "$(field "$f" 'len(d["env"]["CUDA_VISIBLE_DEVICES"].split(","))')" = 2 ]
}

@test "the kept batch script runs again with plain sbatch" {
  printf 'python argv_dump.py again\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name again --time 5
  local script
  script=$(sed -n 's/^  script: //p' <<<"$output")
  wait_job "$JOB_ID"
  rm "$SCRATCH/proj/again/checkpoints/again.json"
  local second
  second=$(sbatch --parsable "$script")
  wait_job "$second"
  [ "$(job_state "$second")" = COMPLETED ]
  [ -f "$SCRATCH/proj/again/checkpoints/again.json" ]
}

@test "a project whose path has spaces and quotes runs end to end" {
  integration_setup "my proj 'q' ; x"
  printf 'python argv_dump.py hostile "a b"\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name hostile --time 5
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ "$(field "$SCRATCH/my proj 'q' ; x/hostile/checkpoints/hostile.json" 'd["cwd"]')" = "$PROJECT" ]
}

@test "both partitions of the local cluster run jobs (profiles local and local-lab)" {
  printf 'python argv_dump.py part\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name lab --time 5 --cluster local-lab
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ "$(field "$SCRATCH/proj/lab/checkpoints/part.json" 'd["env"]["SLURM_JOB_PARTITION"]')" = notmpdir ]
}

@test "--setup-venv builds the venv in a job and the experiments run in it after" {
  rm -rf "$PROJECT/.venv"
  printf '# nothing to install for this test\n' >"$PROJECT/requirements.txt"
  printf 'python argv_dump.py built\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name built --time 5 --setup-venv
  local venv_job
  venv_job=$(sed -n 's/^Submitted venv job \([0-9]*\).*/\1/p' <<<"$output")
  wait_job "$JOB_ID" 180
  [ "$(job_state "$venv_job")" = COMPLETED ]
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ "$(field "$SCRATCH/proj/built/checkpoints/built.json" 'd["prefix"]')" = "$PROJECT/.venv" ]
}

@test "hpc status shows each submission's tasks and states from sacct" {
  printf '%s\n' 'true' 'exit 4' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name stat --time 5
  wait_job "$JOB_ID"
  # shellcheck disable=SC2016 # expanded by the inner bash
  run --separate-stderr bash -c 'cd "$1" && "$2" status' _ "$PROJECT" hpc
  [ "$status" -eq 0 ]
  echo "$output"
  [[ $output == *"== stat  jobs $JOB_ID  2 task(s)"*"COMPLETED 1, FAILED 1"* ]]
}

@test "WANDB_API_KEY set at submission reaches the program, never Slurm, the script or the log" {
  local secret=hpc-itest-wandb-key-7c1e90ab33 hash
  hash=$(printf '%s' "$secret" | sha256sum | cut -c1-64)
  cat >"$PROJECT/experiment_configurations.txt" <<'CONF'
bash -c 'printf %s "$WANDB_API_KEY" | sha256sum | cut -c1-64 >"$HPC_CHECKPOINT_DIR/key_hash"; sleep 3'
CONF
  WANDB_API_KEY=$secret submit --exp-name keyed --cpus 1 --time 5
  [[ $stderr == *"saved WANDB_API_KEY to $HOME/.config/hpc_files/wandb_api_key (mode 600)"* ]]
  local shown
  shown=$(scontrol show job -dd "$JOB_ID")
  [[ $shown == *"JobId=$JOB_ID"* && $shown != *"$secret"* ]]
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ "$(cat "$SCRATCH/proj/keyed/checkpoints/key_hash")" = "$hash" ]
  run ! grep -rqF -- "$secret" "$SCRATCH" "$PROJECT"
  [[ $(scontrol show job -dd "$JOB_ID" 2>&1) != *"$secret"* ]]
}
