#!/usr/bin/env bats
# Unchanged third-party programs on the launchers that fit, on the real local cluster
# (issue 24): each is written as its framework's docs write it (tests/helpers/third_party/),
# and README.md's "Recipes" section is backed by these tests.
# - A Lightning script with no command line forms one world on 1 and 2 nodes (one
#   lightning_logs version); one with other counts written in stops at once, as does a
#   torch.distributed world size that is not the job's.
# - Plain torch.distributed under -d script and -d torchrun; an Accelerate loop under
#   -d torchrun and -d script, and under `accelerate launch` on one node (-d none).
# - A relative output folder: warned at submission (in the line) or in the job log (the
#   program's default), silent once the line passes the task's folder.
# - JAX's initialize() with no arguments: the variables it reads, and the real thing with
#   the JAX venv install_deps.sh builds (HPC_TEST_JAX_VENV, default /opt/hpc_files/jax-venv;
#   not the test venv: jaxlib is 85 MB and wants numpy 2).
# shellcheck disable=SC2016 # command lines in single quotes are expanded in the job

load ../helpers/cluster

setup() {
  # (read before integration_setup, which unsets every HPC_* variable; TEST_VENV is
  # common.bash's: $HPC_TEST_VENV or the fixed path install_deps builds)
  JAX_VENV=${HPC_TEST_JAX_VENV:-/opt/hpc_files/jax-venv}
  integration_setup proj
  rm -rf "$PROJECT/.venv"
  ln -s "$TEST_VENV" "$PROJECT/.venv"
  cp "$REPO_ROOT"/tests/helpers/third_party/*.py "$PROJECT/"
}

# run_job EXP SECONDS LINE ARGS...: LINE as the only command, submitted with ARGS, waited for.
run_job() {
  local exp=$1 timeout=$2
  printf '%s\n' "$3" >"$PROJECT/experiment_configurations.txt"
  shift 3
  submit --exp-name "$exp" --time 10 "$@"
  SUBMIT_STDERR=$stderr
  wait_job "$JOB_ID" "$timeout"
  LOG=$(job_log "$JOB_ID" "$exp")
  cat "$LOG"
}

@test "Lightning, no command line, 2 nodes: one world (the job's counts), one lightning_logs version" {
  run_job lt2 240 'python lightning_no_cli.py' -d lightning --num-nodes 2
  completed_or_torch_exit_abort "$LOG" # (seen in a local CI run: rank 0's abort after "done")
  grep -q "Trainer(num_nodes=2, devices=1) from the job" "$LOG"
  grep -q "done: global_rank=0 world_size=2 global_step=8" "$LOG"
  grep -q "done: global_rank=1 world_size=2 global_step=8" "$LOG"
  [ "$(ls "$PROJECT/lightning_logs")" = version_0 ]
  # lightning_logs/ landed in the project: the log says so, with what to pass instead.
  grep -q "warning: the program wrote into the project folder $PROJECT: .*lightning_logs/version_0/" "$LOG"
}

@test "Lightning, no command line, 1 node x 2 processes: one world" {
  run_job lt1 240 'python lightning_no_cli.py' -d lightning --procs-per-node 2
  completed_or_torch_exit_abort "$LOG"
  grep -q "done: global_rank=1 world_size=2" "$LOG"
  [ "$(ls "$PROJECT/lightning_logs")" = version_0 ]
}

@test "Lightning with num_nodes=1 written in, on 2 nodes: stops at start, naming both and the fix" {
  run_job ltw 180 'python lightning_fixed_world.py' -d lightning --num-nodes 2
  [ "$(job_state "$JOB_ID")" = FAILED ]
  [ "$(job_exit "$JOB_ID")" = 2:0 ]
  grep -q "Trainer(num_nodes=1) does not fit this job: 2 node(s) x 1 process(es) per node" "$LOG"
  grep -q "Leave num_nodes and devices out of the Trainer" "$LOG"
  ! grep -q "^trained" "$LOG" || false
}

@test "torch.distributed with world_size=1 written in, under -d script on 2 nodes: stops at start" {
  run_job tfw 180 'python torch_fixed_world.py' -d script --num-nodes 2
  [ "$(job_state "$JOB_ID")" = FAILED ]
  [ "$(job_exit "$JOB_ID")" = 2:0 ]
  grep -q "init_process_group: world_size=1, but this job runs 2 process(es) (2 node(s) x 1 per node)" "$LOG"
  ! grep -q "initialised a world" "$LOG" || false
}

@test "plain torch.distributed: one world under -d script and under -d torchrun" {
  run_job tds 180 'python torch_ddp.py' -d script --num-nodes 2
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ "$(grep -c "/2 on .*: sum=3.0" "$LOG")" -eq 2 ]
  run_job tdt 180 'python torch_ddp.py' -d torchrun --num-nodes 2 --procs-per-node 2
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  # (each rank once; -o: four processes share one log, and a line of one may end up glued
  # to another's, as seen once on CI)
  [ "$(grep -o "rank [0-3]/4 on [^:]*: sum=10.0" "$LOG" | cut -d/ -f1 | sort -u | wc -l)" -eq 4 ]
}

@test "a torchrun line of its own under -d torchrun is refused at submission, not nested" {
  printf 'python -m torch.distributed.run --nproc-per-node=2 torch_ddp.py\n' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter -d torchrun --num-nodes 2 --time 10
  [ "$status" -eq 2 ]
  [[ $stderr == *"starts 'python -m torch.distributed.run'"*"python SCRIPT ARGS"* ]]
  [ -z "$(submitted_ids)" ]
}

@test "nanoGPT-style relative out_dir: the job log warns; --out_dir=out warns at submission; the task's folder is silent" {
  run_job ng1 120 'python nanogpt_like.py --max_iters=2'
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ -f "$PROJECT/out/ckpt.pt" ]
  grep -q "warning: the program wrote into the project folder $PROJECT: out/ckpt.pt\. " "$LOG"
  grep -qF -- '--out_dir=$HPC_CHECKPOINT_DIR' "$LOG"
  run_job ng2 120 'python nanogpt_like.py --out_dir=out --max_iters=2'
  [[ $SUBMIT_STDERR == *"line(s) 1 of the commands write output to a relative folder in the project (--out_dir out)"* ]]
  rm -rf "$PROJECT/out"
  run_job ng3 120 'python nanogpt_like.py --out_dir=$HPC_CHECKPOINT_DIR --max_iters=2'
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [[ $SUBMIT_STDERR != *"relative folder"* ]]
  ! grep -q "wrote into the project folder" "$LOG" || false
  [ -f "$SCRATCH/proj/ng3/checkpoints/ckpt.pt" ]
  [ ! -e "$PROJECT/out" ]
}

@test "Accelerate loop, unchanged: -d torchrun (2x2) and -d script (2 nodes) form one world" {
  "$PROJECT/.venv/bin/python" -c 'import accelerate' ||
    { echo "accelerate is not in the test venv: run bash tests/setup/install_deps.sh" >&2; return 1; }
  run_job acc 240 'python accelerate_loop.py' -d torchrun --num-nodes 2 --procs-per-node 2
  completed_or_torch_exit_abort "$LOG"
  grep -q "accelerate: num_processes=4 rank_sum=6 type=DistributedType.MULTI_CPU" "$LOG"
  run_job acs 240 'python accelerate_loop.py' -d script --num-nodes 2
  completed_or_torch_exit_abort "$LOG"
  grep -q "accelerate: num_processes=2 rank_sum=1" "$LOG"
}

@test "accelerate launch on one node (-d none) runs as it is: one world of its processes" {
  "$PROJECT/.venv/bin/python" -c 'import accelerate' ||
    { echo "accelerate is not in the test venv: run bash tests/setup/install_deps.sh" >&2; return 1; }
  run_job acl 240 'accelerate launch --multi_gpu --num_processes 2 accelerate_loop.py' --cpus 2
  grep -q "accelerate: num_processes=2 rank_sum=1" "$LOG"
  completed_or_torch_exit_abort "$LOG"
}

@test "JAX's initialize() with no arguments: every rank has a coordinator that works and srun's counts" {
  # What jax.distributed.initialize() reads (jax 0.10, jax/_src/distributed.py and
  # clusters/slurm_cluster.py): JAX_COORDINATOR_ADDRESS, else the first node's NAME; the
  # process count and id from SLURM_NTASKS, SLURM_PROCID (SLURM_LOCALID, SLURM_JOB_ID,
  # SLURM_STEP_NODELIST must be there for it to detect Slurm).
  run_job jxe 180 'python -c "import os, json; print(\"ENV\", json.dumps({k: os.environ.get(k) for k in [\"JAX_COORDINATOR_ADDRESS\", \"MASTER_ADDR\", \"MASTER_PORT\", \"SLURM_NTASKS\", \"SLURM_PROCID\", \"SLURM_LOCALID\", \"SLURM_JOB_ID\", \"SLURM_STEP_NODELIST\"]}))"' -d script --num-nodes 2
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ "$(grep -c '^ENV ' "$LOG")" -eq 2 ]
  grep '^ENV ' "$LOG" | cut -c5- | python3 -c '
import json, sys
rows = [json.loads(line) for line in sys.stdin]
assert sorted(r["SLURM_PROCID"] for r in rows) == ["0", "1"], rows
for r in rows:
    assert r["JAX_COORDINATOR_ADDRESS"] == r["MASTER_ADDR"] + ":" + r["MASTER_PORT"], r
    assert r["SLURM_NTASKS"] == "2" and r["SLURM_LOCALID"] == "0", r
    assert r["SLURM_JOB_ID"] and r["SLURM_STEP_NODELIST"], r'
}

@test "JAX's initialize() with no arguments, the real thing: one world of 2 under -d script" {
  "$JAX_VENV/bin/python" -c 'import jax' ||
    { echo "no jax in $JAX_VENV: run bash tests/setup/install_deps.sh (or set HPC_TEST_JAX_VENV)" >&2; return 1; }
  rm -f "$PROJECT/.venv" && ln -s "$JAX_VENV" "$PROJECT/.venv"
  run_job jax 240 'python jax_initialize.py' -d script --num-nodes 2
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ "$(grep -c "jax: process [01] of 2, rank_sum=1" "$LOG")" -eq 2 ]
}

@test "Transformers Trainer under -d torchrun on 2 nodes: one world, output_dir in the task's folder, continued with --resume" {
  "$PROJECT/.venv/bin/python" -c 'import transformers' ||
    { echo "transformers is not in the test venv: run bash tests/setup/install_deps.sh" >&2; return 1; }
  local line='python hf_trainer.py --output_dir $HPC_CHECKPOINT_DIR --save_steps 2 --report_to none --use_cpu --per_device_train_batch_size 4'
  run_job hf 400 "$line --max_steps 4" -d torchrun --num-nodes 2
  completed_or_torch_exit_abort "$LOG"
  grep -q "hf: world_size=2 global_step=4 resumed_from=None" "$LOG"
  [ -d "$SCRATCH/proj/hf/checkpoints/checkpoint-4" ]
  ! grep -q "wrote into the project folder" "$LOG" || false
  # The same experiment again, longer, continued on purpose (--resume): the resume idiom
  # picks up checkpoint-4.
  run_job hf 400 "$line --max_steps 6" -d torchrun --num-nodes 2 --resume
  grep -q "HPC_RESUMING=1" "$LOG"
  completed_or_torch_exit_abort "$LOG"
  grep -q "hf: world_size=2 global_step=6 resumed_from=checkpoint-4" "$LOG"
}

@test "Transformers Trainer with SaveOnWarning (the recipe's one line), -d torchrun on 2 nodes: warned, saves checkpoint-N on both ranks, requeued, resumes from it" {
  "$PROJECT/.venv/bin/python" -c 'import transformers' ||
    { echo "transformers is not in the test venv: run bash tests/setup/install_deps.sh" >&2; return 1; }
  printf '%s\n' 'python hf_trainer_warned.py --output_dir $HPC_CHECKPOINT_DIR --save_steps 1000 --report_to none --use_cpu --per_device_train_batch_size 4 --max_steps 120' \
    >"$PROJECT/experiment_configurations.txt"
  submit --exp-name hfw --time 10 --signal-grace 40 -d torchrun --num-nodes 2
  wait_file "$SCRATCH/proj/hfw/marks/ready_1" 300
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_job "$JOB_ID" 400
  LOG=$(job_log "$JOB_ID" hfw)
  cat "$LOG"
  local got
  got=$(attempts "$JOB_ID")
  if [[ $got == *FAILED* ]] && grep -q "terminate called without an active exception" "$LOG"; then
    echo "torch's exit abort (gloo) at the end of attempt 2, passed on: $got" >&2
    [[ $got == $'REQUEUED|0:0\nFAILED|'* ]]
  else
    [ "$got" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  fi
  local step
  step=$(sed -n 's/^\[hpc\] warned: saving checkpoint-\([0-9]*\) in .*/\1/p' "$LOG")
  [ -n "$step" ]
  ((step >= 5 && step < 120))
  [ "$(grep -c 'warning passed on as SIGUSR1 to [0-9]* (python' "$LOG")" -eq 2 ]
  grep -q "HPC_RESUMING=1" "$LOG"
  grep -q "hf: world_size=2 global_step=120 resumed_from=checkpoint-$step$" "$LOG"
  [ -d "$SCRATCH/proj/hfw/checkpoints/checkpoint-$step" ]
}

@test "pipefail: python x.py | tee ... && echo done, whose program exits 3, is FAILED 3 and --rerun runs it again; a ; list keeps bash's rule" {
  printf '%s\n' 'import os, sys' 'print("step 1", flush=True)' \
    'sys.exit(0 if os.path.exists(os.environ["SCRATCH"] + "/fixed") else 3)' >"$PROJECT/pipe_fail.py"
  printf '%s\n' 'python pipe_fail.py | tee $HPC_RESULTS_DIR/out.txt && echo "line done"' \
    'echo start; false; echo after' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name pipe --time 5
  local first=$JOB_ID
  wait_job "$first" 180
  job_states "$first"
  [ "$(job_states "$first" | grep "^${first}_0|")" = "${first}_0|FAILED|3:0" ]
  [ "$(job_states "$first" | grep "^${first}_1|")" = "${first}_1|COMPLETED|0:0" ]
  LOG=$(job_log "$first" pipe 0)
  cat "$LOG"
  grep -q "^step 1" "$LOG"
  ! grep -q "^line done" "$LOG" || false
  touch "$SCRATCH/fixed"
  submit --rerun "$first"
  [[ $output == *"task 0 (line 1): FAILED"* ]]
  wait_job "$JOB_ID" 180 1
  [ "$(job_states "$JOB_ID")" = "${JOB_ID}_0|COMPLETED|0:0" ]
  grep -q "^step 1" "$SCRATCH/proj/pipe/results/task_0/out.txt"
}

@test "Hydra app, unchanged, as an array started together: each task writes its own folder (results/task_i), none in the project's outputs/; -m sweeps too" {
  "$PROJECT/.venv/bin/python" -c 'import hydra' ||
    { echo "hydra-core is not in the test venv: run bash tests/setup/install_deps.sh" >&2; return 1; }
  printf '%s\n' 'python hydra_app.py optimizer.lr=0.1 model.depth=1' 'python hydra_app.py optimizer.lr=0.2 model.depth=2' \
    'python hydra_app.py optimizer.lr=0.3 model.depth=3' 'python hydra_app.py -m optimizer.lr=0.4,0.5 seconds=0' \
    >"$PROJECT/experiment_configurations.txt"
  submit --exp-name hy --time 5
  [[ $stderr == *"note: line(s) 1, 2, 3, 4 run a Hydra app (hydra_app.py) that chooses no run folder"* ]]
  wait_job "$JOB_ID" 240
  job_states "$JOB_ID"
  [ "$(job_states "$JOB_ID" | grep -c '|COMPLETED|0:0$')" -eq 4 ]
  local r=$SCRATCH/proj/hy/results k
  for k in 1 2 3; do
    [ "$(cat "$r/task_$((k - 1))/result.txt")" = "lr=0.$k depth=$k" ]
    grep -q "optimizer.lr=0.$k" "$r/task_$((k - 1))/.hydra/overrides.yaml"
  done
  [ "$(cat "$r/task_3/0/result.txt")" = "lr=0.4 depth=1" ]
  [ "$(cat "$r/task_3/1/result.txt")" = "lr=0.5 depth=1" ]
  [ ! -e "$PROJECT/outputs" ] && [ ! -e "$PROJECT/multirun" ]
}

@test "two tasks that write the same files in the project (a Hydra app given one run folder): the log and hpc status say so" {
  printf '%s\n' 'python hydra_app.py hydra.run.dir=outputs/shared optimizer.lr=0.1 seconds=3' \
    'python hydra_app.py hydra.run.dir=outputs/shared optimizer.lr=0.2 seconds=3' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name hs --time 5
  [[ $stderr != *"run a Hydra app"* ]] # its own hydra.run.dir: left as it is
  wait_job "$JOB_ID" 240
  [ "$(job_states "$JOB_ID" | grep -c '|COMPLETED|0:0$')" -eq 2 ]
  local logs
  logs=$(cat "$(job_log "$JOB_ID" hs 0)" "$(job_log "$JOB_ID" hs 1)")
  echo "$logs"
  [[ $logs == *"wrote into the project folder $PROJECT: outputs/shared/.hydra/config.yaml, outputs/shared/.hydra/hydra.yaml, outputs/shared/.hydra/overrides.yaml, outputs/shared/hydra_app.log, outputs/shared/result.txt. "* ]]
  [[ $logs == *"of this submission wrote the same path(s) in the project as this task: outputs/shared/.hydra/config.yaml, "*"outputs/shared/result.txt. One overwrote the other's"* ]]
  run hpc status "$JOB_ID"
  echo "$output"
  [[ $output == *"warning: tasks 0, 1 wrote the same path(s) in the project: outputs/shared/.hydra/config.yaml, "* ]]
}

# hydra_sweep ARGS...: `python hydra_app.py -m ARGS...` in the project, as the researcher, with
# the project's copy of the Python package (hydra_plugins/hpc_files_launcher) on the path.
hydra_sweep() {
  (cd "$PROJECT" && researcher env PYTHONPATH="$PROJECT/python" "$PROJECT/.venv/bin/python" hydra_app.py -m "$@")
}

@test "Hydra launcher plugin: -m hydra/launcher=hpc_files submits the sweep as one array; hydra-submitit-launcher runs the same sweep to the same results" {
  "$PROJECT/.venv/bin/python" -c 'import hydra_plugins.hydra_submitit_launcher' ||
    { echo "hydra-submitit-launcher is not in the test venv: run bash tests/setup/install_deps.sh" >&2; return 1; }
  local t0=$SECONDS
  run --separate-stderr hydra_sweep hydra/launcher=hpc_files hydra.launcher.time=5 'optimizer.lr=0.1,0.01' seconds=0
  echo "$output"
  echo "$stderr"
  [ "$status" -eq 0 ]
  local id
  id=$(submitted_ids | tail -1)
  [[ -n $id ]]
  [[ $output == *"hpc_files: submitted as job(s) $id: hpc status $id"* ]] # (Hydra logs to stdout)
  wait_job "$id" 240 2
  local ours=$((SECONDS - t0))
  [ "$(job_states "$id" | grep -c '|COMPLETED|0:0$')" -eq 2 ]
  local r=$SCRATCH/proj/hydra_app/results
  [ "$(cat "$r/task_0/result.txt")" = "lr=0.1 depth=1" ]
  [ "$(cat "$r/task_1/result.txt")" = "lr=0.01 depth=1" ]
  run hpc status "$id"
  [[ $output == *"== hydra_app  jobs $id  2 task(s)"*"COMPLETED 2"* ]]
  # The peer: submitit's launcher, the same sweep; it waits for the jobs itself.
  t0=$SECONDS
  run --separate-stderr hydra_sweep hydra/launcher=submitit_slurm hydra.launcher.timeout_min=5 \
    "hydra.sweep.dir=$SCRATCH/submitit_sweep" 'optimizer.lr=0.1,0.01' seconds=0
  echo "$output $stderr"
  [ "$status" -eq 0 ]
  [ "$(cat "$SCRATCH/submitit_sweep/0/result.txt")" = "lr=0.1 depth=1" ]
  [ "$(cat "$SCRATCH/submitit_sweep/1/result.txt")" = "lr=0.01 depth=1" ]
  echo "# the same 2-point sweep, submitted and finished: hpc_files launcher $ours s, submitit $((SECONDS - t0)) s" >&3
}

@test "PyTorch Geometric, PyG's examples/gcn.py shape, unchanged, as an array: trains; its dataset folder next to the script is named as a write into the project" {
  "$PROJECT/.venv/bin/python" -c 'import torch_geometric' ||
    { echo "torch_geometric is not in the test venv: run bash tests/setup/install_deps.sh" >&2; return 1; }
  printf '%s\n' 'python pyg_gcn.py --epochs 30 --lr 0.01' 'python pyg_gcn.py --epochs 30 --lr 0.02' \
    >"$PROJECT/experiment_configurations.txt"
  # One task at a time: both process the dataset into the same folder next to the script
  # (the write the warning names), and two at once race on it by themselves (26.05 CI: one
  # loaded the other's half-written data.pt and failed), as they would on any cluster.
  submit --exp-name pyg --time 5 --max-parallel 1
  wait_job "$JOB_ID" 240
  local logs
  logs=$(cat "$(job_log "$JOB_ID" pyg 0)" "$(job_log "$JOB_ID" pyg 1)")
  echo "$logs"
  [ "$(job_states "$JOB_ID" | grep -c '|COMPLETED|0:0$')" -eq 2 ]
  [ "$(grep -c '^Epoch: 030, ' <<<"$logs")" -eq 2 ]
  # The task that processed the dataset names what it wrote; one that loaded it, nothing
  # (a folder os.makedirs found there is no write).
  [[ $logs == *"wrote into the project folder $PROJECT: data/Synthetic/processed/data.pt, data/Synthetic/processed/pre_filter.pt, data/Synthetic/processed/pre_transform.pt"* ]]
  [[ $logs != *"wrote into the project folder $PROJECT: data/Synthetic/raw/. "* ]]
}

@test "A Transformers script that resumes only from --resume_from_checkpoint PATH (run_clm.py's way), unchanged: warned, stopped, requeued; the line's \${HPC_RESUME_FROM:+...} resumes it from its newest checkpoint" {
  printf '%s\n' 'python hf_resume_arg.py --output_dir $HPC_CHECKPOINT_DIR --max_steps 200 --save_steps 10 --report_to none --use_cpu --per_device_train_batch_size 4 --step_seconds 0.05 ${HPC_RESUME_FROM:+--resume_from_checkpoint "$HPC_RESUME_FROM"}' \
    >"$PROJECT/experiment_configurations.txt"
  submit --exp-name hfr --time 10 --signal-grace 20
  wait_file "$SCRATCH/proj/hfr/checkpoints/checkpoint-10" 300
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_job "$JOB_ID" 400
  LOG=$(job_log "$JOB_ID" hfr)
  cat "$LOG"
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  grep -q "HPC_RESUME_FROM=$SCRATCH/proj/hfr/checkpoints/checkpoint-" "$LOG"
  grep -qE "^hf: global_step=200 resumed_from=$SCRATCH/proj/hfr/checkpoints/checkpoint-[1-9][0-9]*$" "$LOG"
  ! grep -q "started over" "$LOG" || false
}
