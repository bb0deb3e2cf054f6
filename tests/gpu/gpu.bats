#!/usr/bin/env bats
# The GPU stage: the toolkit's jobs on this machine's real NVIDIA GPUs, through a real
# Slurm whose gres are the GPUs (local_cluster.sh with HPC_LOCAL_GPUS=real). Run by
# `bash tests/run_tests.sh gpu`, which starts that cluster; every check asserts what a user
# would look at: the GPU the program used, the world size, the results. Figures (the launch
# time) go to HPC_GPU_REPORT_DIR. Needs CUDA torch (and lightning) in HPC_GPU_VENV (a venv
# folder) or, with HPC_GPU_VENV=none, in the python3 on PATH; fails loudly without them.

load ../helpers/cluster
load ../helpers/container

# Read before hermetic_env clears the HPC_* variables.
GPU_VENV_GIVEN=${HPC_GPU_VENV:-${HPC_TEST_VENV:-none}}
GPU_REPORT_DIR=${HPC_GPU_REPORT_DIR:-}

setup() {
  hermetic_env
  cluster_env
  make_project gpu
  GPU_VENV=$GPU_VENV_GIVEN
  if [[ $GPU_VENV == none ]]; then PY=python3; else PY=$GPU_VENV/bin/python3; fi
  # The programs live in the project: a container sees the project folder, not the repo.
  cp -R "$REPO_ROOT/tests/gpu/programs" "$PROJECT/gpu_programs"
  # hpc_toolkit (SlurmRequeue) from the project's copy when the environment lacks it.
  "$PY" -c 'import hpc_toolkit' 2>/dev/null || export PYTHONPATH=$PROJECT/python${PYTHONPATH:+:$PYTHONPATH}
  # What the cluster was built from: nvidia-smi's GPUs, in its index order.
  mapfile -t GPUS < <(nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader)
  NGPU=${#GPUS[@]}
  ((NGPU > 0)) || { echo "nvidia-smi lists no GPU" >&2; return 1; }
}

# configs LINE...: the project's experiment_configurations.txt.
configs() {
  printf '%s\n' "$@" >"$PROJECT/experiment_configurations.txt"
}

# gsubmit ARGS...: submit with the GPU stage's Python environment.
gsubmit() {
  submit --venv "$GPU_VENV" "$@"
}

# gwait ID [TIMEOUT_S]: until the job has ended for good (not requeued); its state to stdout.
# The cluster keeps no accounting database (no MariaDB here): scontrol shows a finished
# job for MinJobAge (300 s).
gwait() {
  local id=$1 timeout=${2:-300} start=$SECONDS state
  while ((SECONDS - start < timeout)); do
    state=$(scontrol show job -o "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case $state in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
        echo "$state"
        return 0
        ;;
    esac
    sleep 0.5
  done
  echo "job $id not finished after ${timeout}s:" >&2
  scontrol show job "$id" >&2 || true
  return 1
}

# job_field ID NAME: NAME=VALUE of `scontrol show job` (Restarts, ExitCode...), the value.
job_field() {
  scontrol show job -o "$1" | grep -o "\b$2=[^ ]*" | head -1 | cut -d= -f2-
}

# expect_completed ID [TIMEOUT_S]: the job ends COMPLETED with exit 0:0; else its log.
expect_completed() {
  local state log
  state=$(gwait "$1" "${2:-300}")
  if [[ $state != COMPLETED || $(job_field "$1" ExitCode) != 0:0 ]]; then
    log=$(scontrol show job -o "$1" | grep -o 'StdOut=[^ ]*' | cut -d= -f2-)
    echo "job $1: $state $(job_field "$1" ExitCode); log $log:" >&2
    cat "$log" >&2 || true
    return 1
  fi
}

# field FILE KEY: one value of a JSON record.
field() {
  "$PY" -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(v if v is not None else "")' "$1" "$2"
}

# gpu_uuid INDEX / gpu_name INDEX: nvidia-smi's view of GPU INDEX (UUID without "GPU-").
gpu_uuid() { local f; IFS=, read -r -a f <<<"${GPUS[$1]}"; printf '%s' "${f[2]# GPU-}"; }
gpu_name() { local f; IFS=, read -r -a f <<<"${GPUS[$1]}"; printf '%s' "${f[1]# }"; }

# ckpt EXP: the experiment's checkpoint folder ($HPC_CHECKPOINT_DIR), where the programs write.
ckpt() { printf '%s/gpu/%s/checkpoints' "$SCRATCH" "$1"; }

# report LINE: one line for the stage's report (HPC_GPU_REPORT_DIR/gpu_figures.txt).
report() {
  echo "# $*" >&3
  [[ -z $GPU_REPORT_DIR ]] || printf '%s\n' "$*" >>"$GPU_REPORT_DIR/gpu_figures.txt"
}

# wait_for_line JOB FILE PATTERN [TIMEOUT_S]: until the log FILE of JOB has a line matching
# PATTERN; fails at once if the job has ended without it.
wait_for_line() {
  local job=$1 file=$2 pattern=$3 timeout=${4:-180} start=$SECONDS state
  until [[ -f $file ]] && grep -qE -- "$pattern" "$file"; do
    state=$(scontrol show job -o "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    if ((SECONDS - start >= timeout)) || [[ $state == @(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) ]]; then
      echo "no '$pattern' in $file (job $job ${state:-unknown}, after $((SECONDS - start)) s)" >&2
      cat "$file" >&2 || true
      return 1
    fi
    sleep 0.5
  done
}

@test "gpu: a plain CUDA job (--gpus 1) runs on the GPU Slurm gave it" {
  configs 'python3 gpu_programs/cuda_probe.py --tag plain'
  gsubmit --gpus 1 -e plain --time 10
  expect_completed "$JOB_ID"
  local rec cvd
  rec=$(ckpt plain)/probe_plain.json
  cat "$rec"
  [ "$(field "$rec" device)" = cuda:0 ]
  [ "$(field "$rec" device_count)" = 1 ]
  [ "$(field "$rec" symmetric)" = True ]
  cvd=$(field "$rec" cuda_visible_devices)
  [[ $cvd =~ ^[0-9]+$ ]]
  ((cvd < NGPU))
  # The very GPU that CUDA_VISIBLE_DEVICES named, as nvidia-smi knows it.
  [ "$(field "$rec" uuid)" = "$(gpu_uuid "$cvd")" ]
  [ "$(field "$rec" name)" = "$(gpu_name "$cvd")" ]
  report "plain: $(field "$rec" name) as cuda:0, CUDA_VISIBLE_DEVICES=$cvd, torch $(field "$rec" torch) (CUDA $(field "$rec" cuda))"
}

@test "gpu: the preflight sees the GPU asked for (nvidia-smi answers) and runs a --preflight CUDA check on the node" {
  configs 'python3 gpu_programs/cuda_probe.py --tag preflight'
  gsubmit --gpus 1 -e preflight --time 10 \
    --preflight 'python3 -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"'
  expect_completed "$JOB_ID"
  local log
  log=$(job_log "$JOB_ID" preflight)
  cat "$log"
  grep -Eq 'preflight ok on [^:]+: 1 GPU\(s\), local scratch writable, --preflight' "$log"
  ! grep -q 'preflight failed' "$log" || false
  [ "$(field "$(ckpt preflight)/probe_preflight.json" device)" = cuda:0 ]
}

@test "gpu: --gpus one more than the node has is refused; nothing is queued" {
  configs 'python3 gpu_programs/cuda_probe.py'
  local start
  start=$(date +%Y-%m-%dT%H:%M:%S)
  run --separate-stderr submitter --venv "$GPU_VENV" --gpus $((NGPU + 1)) -e toomany --time 10
  echo "$stderr"
  [ "$status" -ne 0 ]
  [[ $stderr == *"sbatch did not accept the job"* ]]
  [[ $stderr == *"Requested node configuration is not available"* ]]
  [ -z "$(jobs_named toomany "$start")" ]
  report "refused: --gpus $((NGPU + 1)) on a node of $NGPU GPU(s), by sbatch"
}

@test "gpu: --gpu-type with the node's GPU model is granted and runs on it" {
  local type
  type=$(scontrol show node node1 | grep -o 'Gres=gpu:[^:,]*' | head -1 | cut -d: -f2)
  [[ -n $type ]]
  configs 'python3 gpu_programs/cuda_probe.py --tag typed'
  gsubmit --gpus 1 --gpu-type "$type" -e typed --time 10
  expect_completed "$JOB_ID"
  local rec=$SCRATCH/gpu/typed/checkpoints/probe_typed.json
  [ "$(field "$rec" device)" = cuda:0 ]
  [ "$(field "$rec" uuid)" = "$(gpu_uuid "$(field "$rec" cuda_visible_devices)")" ]
  report "typed: --gpu-type $type granted, ran on $(field "$rec" name)"
}

@test "gpu: Lightning on every GPU of the node (-d lightning --gpus N; DDP over NCCL when N > 1)" {
  configs 'python3 gpu_programs/lightning_gpu.py --max-steps 40'
  gsubmit -d lightning --gpus "$NGPU" -e light --time 10
  expect_completed "$JOB_ID" 600
  local dir r rec uuids=()
  dir=$(ckpt light)
  [ "$(find "$dir" -name 'lightning_rank_*.json' | wc -l)" -eq "$NGPU" ]
  for ((r = 0; r < NGPU; r++)); do
    rec=$dir/lightning_rank_$r.json
    cat "$rec"
    [ "$(field "$rec" world_size)" = "$NGPU" ]
    [ "$(field "$rec" global_step)" = 40 ]
    [[ $(field "$rec" root_device) == cuda:* ]]
    [[ $(field "$rec" devices_seen) == "['cuda:"*"']" ]]
    uuids+=("$(field "$rec" uuid)")
    if ((NGPU > 1)); then
      [ "$(field "$rec" strategy)" = DDPStrategy ]
      [ "$(field "$rec" backend)" = nccl ]
    fi
  done
  # Every rank on a GPU of its own.
  [ "$(printf '%s\n' "${uuids[@]}" | sort -u | wc -l)" -eq "$NGPU" ]
  grep -q 'GPU available: True (cuda), used: True' "$(job_log "$JOB_ID" light)"
  report "lightning: $NGPU process(es), world size $NGPU, $(field "$dir/lightning_rank_0.json" strategy) on $(field "$dir/lightning_rank_0.json" root_device)"
}

# nccl_job LAUNCHER EXP: an NCCL all_reduce over every GPU of the node, checked per rank.
nccl_job() {
  configs 'python3 gpu_programs/nccl_allreduce.py'
  gsubmit -d "$1" --gpus "$NGPU" -e "$2" --time 10
  expect_completed "$JOB_ID" 600
  local dir r rec uuids=()
  dir=$(ckpt "$2")
  [ "$(find "$dir" -name 'rank_*.json' | wc -l)" -eq "$NGPU" ]
  for ((r = 0; r < NGPU; r++)); do
    rec=$dir/rank_$r.json
    cat "$rec"
    [ "$(field "$rec" backend)" = nccl ]
    [ "$(field "$rec" world_size)" = "$NGPU" ]
    [ "$(field "$rec" sum)" = "$(field "$rec" expected)" ]
    [[ $(field "$rec" device) == cuda* ]]
    uuids+=("$(field "$rec" uuid)")
  done
  [ "$(printf '%s\n' "${uuids[@]}" | sort -u | wc -l)" -eq "$NGPU" ]
  report "$1: NCCL all_reduce over $NGPU rank(s), sum $(field "$dir/rank_0.json" sum) as expected"
}

@test "gpu: torchrun runs an NCCL all_reduce over every GPU of the node" {
  nccl_job torchrun trun
}

@test "gpu: the script launcher runs an NCCL all_reduce over every GPU of the node" {
  nccl_job script scr
}

@test "gpu: --agents-per-gpu pins each agent to one GPU of its own" {
  # No W&B server: a stand-in wandb runs the probe as the sweep's run would. The job runs
  # with --venv none and the stage's python3 next on PATH, so that a wandb installed in
  # that environment does not come before the stand-in.
  mkdir -p "$BATS_TEST_TMPDIR/bin"
  cat >"$BATS_TEST_TMPDIR/bin/wandb" <<'EOF2'
#!/bin/bash
exec python3 "$GPU_PROGRAMS/cuda_probe.py" --out "$GPU_AGENT_OUT"
EOF2
  chmod +x "$BATS_TEST_TMPDIR/bin/wandb"
  local pybin
  pybin=$(dirname -- "$(command -v "$PY")")
  export PATH=$BATS_TEST_TMPDIR/bin:$pybin:$PATH GPU_AGENT_OUT=$BATS_TEST_TMPDIR/agents \
    GPU_PROGRAMS=$PROJECT/gpu_programs
  configs 'python3 gpu_programs/cuda_probe.py'
  WANDB_API_KEY=gpu-stage-not-a-real-key-0123456789abcdef0123 submit --venv none \
    --wandb-sweepid team/proj/gpu1 --agents-per-gpu \
    --gpus "$NGPU" --agent-stagger 0 -e agents --time 10
  expect_completed "$JOB_ID"
  local recs=() rec cvd uuids=()
  mapfile -t recs < <(find "$GPU_AGENT_OUT" -name 'probe_*.json')
  [ "${#recs[@]}" -eq "$NGPU" ]
  for rec in "${recs[@]}"; do
    cat "$rec"
    # Each agent sees exactly one device: the one its CUDA_VISIBLE_DEVICES names.
    [ "$(field "$rec" device_count)" = 1 ]
    cvd=$(field "$rec" cuda_visible_devices)
    [[ $cvd =~ ^[0-9]+$ ]]
    [ "$(field "$rec" uuid)" = "$(gpu_uuid "$cvd")" ]
    uuids+=("$(field "$rec" uuid)")
  done
  # ...and no two the same (with one GPU: the one agent has the only one).
  [ "$(printf '%s\n' "${uuids[@]}" | sort -u | wc -l)" -eq "$NGPU" ]
  report "agents-per-gpu: $NGPU agent(s), each seeing exactly 1 device, $(printf '%s\n' "${uuids[@]}" | sort -u | wc -l) distinct GPU(s)"
}

@test "gpu: --pack gives each line GPUs of its own (CUDA_VISIBLE_DEVICES is that line's only)" {
  # N lines at once, one GPU each; with one GPU, two lines one after another on it.
  local pack=(--pack "$NGPU") n=$NGPU i rec cvd uuids=() lines=()
  ((NGPU > 1)) || pack=(--pack 1 --lines-per-job 2) n=2
  for ((i = 0; i < n; i++)); do lines+=("python3 gpu_programs/cuda_probe.py --tag line$i"); done
  configs "${lines[@]}"
  gsubmit "${pack[@]}" --gpus "$NGPU" -e packed --time 10
  expect_completed "$JOB_ID"
  for ((i = 0; i < n; i++)); do
    rec=$(ckpt packed)/task_$i/probe_line$i.json
    cat "$rec"
    # Line i saw exactly one device, the one its CUDA_VISIBLE_DEVICES names.
    [ "$(field "$rec" device_count)" = 1 ]
    cvd=$(field "$rec" cuda_visible_devices)
    [[ $cvd =~ ^[0-9]+$ ]]
    [ "$(field "$rec" uuid)" = "$(gpu_uuid "$cvd")" ]
    uuids+=("$(field "$rec" uuid)")
  done
  # No two lines at once on the same GPU (with one GPU: both on the only one).
  [ "$(printf '%s\n' "${uuids[@]}" | sort -u | wc -l)" -eq "$NGPU" ]
  report "pack: $n line(s) in one job, each seeing exactly 1 device, $(printf '%s\n' "${uuids[@]}" | sort -u | wc -l) distinct GPU(s)"
}

@test "gpu: a container job (Singularity stand-in) still sees the GPU: --nv passed" {
  [[ $GPU_VENV != none && -f $GPU_VENV/pyvenv.cfg ]] ||
    { echo "the image stand-in needs the Python environment as a venv folder (HPC_GPU_VENV), got '$GPU_VENV'" >&2; return 1; }
  command -v bwrap >/dev/null || { echo "bwrap not found (the stand-in needs bubblewrap; tests/gpu/prepare_offline.sh carries it)" >&2; return 1; }
  export HPC_TEST_VENV=$GPU_VENV # the image's Python (tests/helpers/container.bash)
  use_fake_singularity
  export FAKE_SINGULARITY_LOG=$BATS_TEST_TMPDIR/singularity.log
  make_sif_image "$PROJECT/images/gpu.sif"
  configs 'python3 gpu_programs/cuda_probe.py --tag box'
  submit -s images/gpu.sif --gpus 1 -e box --time 10
  expect_completed "$JOB_ID"
  local rec
  rec=$(ckpt box)/probe_box.json
  cat "$rec"
  grep -q -- ' --nv ' "$FAKE_SINGULARITY_LOG"
  [[ $(field "$rec" container) == *images/gpu.sif ]]
  [ "$(field "$rec" device)" = cuda:0 ]
  [ "$(field "$rec" uuid)" = "$(gpu_uuid "$(field "$rec" cuda_visible_devices)")" ]
  report "container: --nv, $(field "$rec" name) seen inside as cuda:0"
}

@test "gpu: a warned Lightning GPU job checkpoints (SlurmRequeue), requeues and resumes on the GPU" {
  configs 'python3 gpu_programs/lightning_gpu.py --max-steps 150 --step-sleep 0.1'
  gsubmit -d lightning --gpus "$NGPU" -e lrq --time 10
  local log dir r rec
  log=$(job_log "$JOB_ID" lrq)
  dir=$(ckpt lrq)
  wait_for_line "$JOB_ID" "$log" '\[train\] step 20 ' 300
  # The wall-time warning, sent now rather than waiting for a real time limit.
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_for_line "$JOB_ID" "$log" 'resuming from' 300
  expect_completed "$JOB_ID" 600
  cat "$log"
  [ "$(job_field "$JOB_ID" Restarts)" = 1 ]
  ls "$dir"/hpc_ckpt_1.ckpt
  for ((r = 0; r < NGPU; r++)); do
    rec=$dir/lightning_rank_$r.json
    cat "$rec"
    [ "$(field "$rec" global_step)" = 150 ]
    [ "$(field "$rec" restart_count)" = 1 ]
    [[ $(field "$rec" resumed_from) == */hpc_ckpt_1.ckpt ]]
    [[ $(field "$rec" root_device) == cuda:* ]]
  done
  grep -q 'checkpoint at step' "$log"
  report "requeue: warned, saved hpc_ckpt_1.ckpt, requeued once, resumed on $(field "$dir/lightning_rank_0.json" root_device) to step 150"
}

@test "gpu: time from submission to the first CUDA step, vs the same program started by hand" {
  local round t0 hand=() slurm=() rec
  # Not "i": bats' own run() sets a global i.
  for round in 1 2 3; do
    t0=$EPOCHREALTIME
    "$PY" "$PROJECT/gpu_programs/cuda_probe.py" --out "$BATS_TEST_TMPDIR/hand" --tag "hand$round" >/dev/null
    rec=$BATS_TEST_TMPDIR/hand/probe_hand$round.json
    hand+=("$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["t_first_cuda_step"] - float(sys.argv[2]))' "$rec" "$t0")")
    configs "python3 gpu_programs/cuda_probe.py --tag slurm$round"
    t0=$EPOCHREALTIME
    gsubmit --gpus 1 -e "launch$round" --time 10
    expect_completed "$JOB_ID"
    rec=$(ckpt "launch$round")/probe_slurm$round.json
    slurm+=("$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["t_first_cuda_step"] - float(sys.argv[2]))' "$rec" "$t0")")
  done
  local line
  line=$("$PY" - "${hand[@]}" "${slurm[@]}" <<'PY'
import statistics, sys
v = [float(x) for x in sys.argv[1:]]
hand, slurm = v[:3], v[3:]
h, s = statistics.median(hand), statistics.median(slurm)
print(f"launch: submission to first CUDA step {s:.2f} s (job_submitter.sh --gpus 1, median of 3: "
      f"{', '.join(f'{x:.2f}' for x in slurm)}) vs {h:.2f} s started by hand "
      f"({', '.join(f'{x:.2f}' for x in hand)}); {s - h:.2f} s more, {s / h:.2f}x")
PY
)
  report "$line"
  # No timed assertion (machines are noisy): only that both ran and were measured.
  [ "${#hand[@]}" -eq 3 ] && [ "${#slurm[@]}" -eq 3 ]
}
