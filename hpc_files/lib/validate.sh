# shellcheck shell=bash
# Step 3 of job_submitter.sh: judge every option and the environment, then settle the
# job's J_* variables (profile defaults filled in). Nothing is written before this passes.

HPC_LAUNCHERS=(none lightning torchrun script dask)
# Launchers whose feature has landed; the others are refused as "not available yet".
HPC_AVAILABLE_LAUNCHERS=(none lightning torchrun script dask)

_in_list() {
  local want=$1 item
  shift
  for item in "$@"; do
    [[ $item == "$want" ]] && return 0
  done
  return 1
}

# hpc_validate_counts: whole numbers where whole numbers are asked for.
hpc_validate_counts() {
  local pair name value
  for pair in "--gpus|$OPT_GPUS" "--cpus|$OPT_CPUS" "--num-nodes|$OPT_NODES" \
    "--max-parallel|$OPT_MAX_PARALLEL" "--num-agents|$OPT_NUM_AGENTS" \
    "--procs-per-node|$OPT_PROCS_PER_NODE"; do
    name=${pair%%|*} value=${pair#*|}
    [[ -z $value ]] && continue
    is_uint "$value" || die "$name must be a whole number, not '$value'"
  done
  for pair in "--cpus|$OPT_CPUS" "--num-nodes|$OPT_NODES" "--max-parallel|$OPT_MAX_PARALLEL" \
    "--num-agents|$OPT_NUM_AGENTS" "--procs-per-node|$OPT_PROCS_PER_NODE"; do
    name=${pair%%|*} value=${pair#*|}
    [[ -z $value ]] && continue
    is_posint "$value" || die "$name must be at least 1, not '$value'"
  done
}

# hpc_validate_names: values that end up in paths and #SBATCH lines.
hpc_validate_names() {
  [[ -z $OPT_ACCOUNT ]] || is_safe_name "$OPT_ACCOUNT" ||
    die "--account '$OPT_ACCOUNT' is not a Slurm account name (letters, digits, . _ + -)"
  [[ -z $OPT_PARTITION ]] || is_partition_list "$OPT_PARTITION" ||
    die "--partition '$OPT_PARTITION' is not a partition name or comma-separated list of them"
  [[ -z $OPT_GPU_TYPE ]] || is_safe_name "$OPT_GPU_TYPE" ||
    die "--gpu-type '$OPT_GPU_TYPE' is not a GPU type (for example v100l, a100)"
  local flag
  for flag in "$OPT_NODES_ARG" "$OPT_DEVICES_ARG"; do
    [[ -z $flag ]] || [[ $flag =~ ^[A-Za-z][A-Za-z0-9_-]*$ ]] ||
      die "--nodes-arg/--devices-arg '$flag' must be your program's option name without dashes (for example num_nodes, which adds '--num_nodes N')"
  done
  for flag in "${OPT_SBATCH_OPTIONS[@]}"; do
    if ! [[ $flag =~ ^--[a-z][a-z-]*(=.*)?$ ]] || has_newline "$flag"; then
      die "--sbatch-option '$flag' must be one sbatch option written --name or --name=value (for example --qos=high), on one line"
    fi
  done
  [[ -z $OPT_EXP_NAME ]] || is_exp_name "$OPT_EXP_NAME" ||
    die "--exp-name '$OPT_EXP_NAME' must be 1-100 letters, digits, '.', '_', '+' or '-', not starting with '.', '+' or '-' (it names folders)"
}

# hpc_validate_unavailable: options of features that have not landed yet.
hpc_validate_unavailable() {
  local entry opt var feature
  for entry in "${HPC_UNAVAILABLE_OPTIONS[@]}"; do
    IFS='|' read -r opt var feature <<<"$entry"
    local -n ref=$var
    # "${ref[*]}" is the value of a plain variable and the joined items of an array.
    [[ -z ${ref[*]} ]] && continue
    die "$opt ($feature) is not available yet in this version of hpc_files; see README.md, 'Status of features'"
  done
}

# hpc_settle_job SOURCE_DIR: fill J_* from the options and the profile, judging each.
hpc_settle_job() {
  hpc_validate_counts
  hpc_validate_names

  J_LAUNCHER=${OPT_LAUNCHER:-none}
  _in_list "$J_LAUNCHER" "${HPC_LAUNCHERS[@]}" ||
    die "--which-distributed '$J_LAUNCHER' is not a launcher: use one of ${HPC_LAUNCHERS[*]}"
  _in_list "$J_LAUNCHER" "${HPC_AVAILABLE_LAUNCHERS[@]}" ||
    die "--which-distributed $J_LAUNCHER is not available yet in this version of hpc_files (available: ${HPC_AVAILABLE_LAUNCHERS[*]})"

  J_NODES=$((10#${OPT_NODES:-1}))
  J_GPUS=$((10#${OPT_GPUS:-0}))
  # (Sweeps judge their own node count: lib/sweep.sh.)
  if ((J_NODES > 1)) && [[ $J_LAUNCHER == none ]] && ! hpc_sweep_requested; then
    die "--num-nodes $J_NODES needs a distributed launcher to use the other nodes: add --which-distributed lightning|torchrun|script|dask (or use --num-nodes 1)"
  fi
  if ((J_GPUS > HPC_MAX_GPUS_PER_NODE)); then
    die "--gpus $J_GPUS is more than the $HPC_MAX_GPUS_PER_NODE GPUs per node of cluster profile '$HPC_PROFILE_NAME' (--gpus counts GPUs per node): lower it, or spread the job with --num-nodes and --which-distributed"
  fi
  J_GPU_TYPE=$OPT_GPU_TYPE
  if [[ -n $J_GPU_TYPE ]] && ((J_GPUS == 0)); then
    die "--gpu-type $J_GPU_TYPE needs GPUs: add --gpus N"
  fi

  hpc_map_resources
  if [[ -n $OPT_PROCS_PER_NODE ]] && ((J_GPUS > 0)); then
    die "--procs-per-node is for CPU jobs; with GPUs there is one process per GPU (--gpus $J_GPUS)"
  fi
  if [[ -n $OPT_PROCS_PER_NODE && $J_LAUNCHER == none ]]; then
    die "--procs-per-node needs a distributed launcher (--which-distributed lightning|torchrun|script)"
  fi
  if [[ $J_LAUNCHER == none && ( -n $OPT_NODES_ARG || -n $OPT_DEVICES_ARG ) ]]; then
    die "--nodes-arg and --devices-arg need a distributed launcher (--which-distributed ...)"
  fi
  J_NODES_ARG=$OPT_NODES_ARG J_DEVICES_ARG=$OPT_DEVICES_ARG
  J_SBATCH_OPTIONS=("${OPT_SBATCH_OPTIONS[@]}")

  J_MEM="" J_MEM_PER_GPU=""
  if [[ -n $OPT_MEM && -n $OPT_MEM_PER_GPU ]]; then
    die "--mem and --mem-per-gpu cannot be used together: choose memory per node (--mem) or per GPU (--mem-per-gpu)"
  fi
  if [[ -n $OPT_MEM ]]; then
    normalize_mem_to J_MEM "$OPT_MEM" ||
      die "--mem '$OPT_MEM' is not a memory size: use a number with an optional unit K, M, G or T (for example 16G; no unit means megabytes)"
  elif [[ -n $OPT_MEM_PER_GPU ]]; then
    normalize_mem_to J_MEM_PER_GPU "$OPT_MEM_PER_GPU" ||
      die "--mem-per-gpu '$OPT_MEM_PER_GPU' is not a memory size: use a number with an optional unit K, M, G or T (for example 16G)"
    ((J_GPUS > 0)) || die "--mem-per-gpu needs GPUs: add --gpus N, or use --mem for a CPU job"
  elif [[ -n $HPC_DEFAULT_MEM ]]; then
    normalize_mem_to J_MEM "$HPC_DEFAULT_MEM" ||
      die "cluster profile $HPC_PROFILE_FILE: HPC_DEFAULT_MEM '$HPC_DEFAULT_MEM' is not a memory size"
  fi

  J_TIME=${OPT_TIME:-$HPC_DEFAULT_TIME}
  is_slurm_time "$J_TIME" ||
    die "--time '$J_TIME' is not a Slurm time: use MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (for example 01:30:00 or 2-00:00:00), at least one minute"

  J_ACCOUNT=${OPT_ACCOUNT:-$HPC_DEFAULT_ACCOUNT}
  J_PARTITION=${OPT_PARTITION:-$HPC_DEFAULT_PARTITION}
  J_EXP_NAME=${OPT_EXP_NAME:-default}
  J_MAX_PARALLEL=${OPT_MAX_PARALLEL:-$HPC_MAX_ARRAY_PARALLEL}
  [[ -z $J_MAX_PARALLEL ]] || is_posint "$J_MAX_PARALLEL" ||
    die "cluster profile $HPC_PROFILE_FILE: HPC_MAX_ARRAY_PARALLEL must be a positive whole number"
  J_MODULES=$HPC_MODULES
  J_PROVIDES_TMPDIR=$HPC_PROVIDES_TMPDIR
  J_LOCAL_SCRATCH=$HPC_LOCAL_SCRATCH

  hpc_settle_requeue
  hpc_validate_unavailable
}

# hpc_settle_requeue: the wall-time warning and the restart policy (J_SIGNAL_GRACE,
# J_MAX_RESTARTS, J_REQUEUE). The warning must leave the job some time to run.
hpc_settle_requeue() {
  local name value
  for name in --signal-grace --max-restarts; do
    if [[ $name == --signal-grace ]]; then value=$OPT_SIGNAL_GRACE; else value=$OPT_MAX_RESTARTS; fi
    [[ -z $value ]] || is_uint "$value" || die "$name must be a whole number, not '$value'"
  done
  local limit
  limit=$(slurm_time_seconds "$J_TIME")
  J_SIGNAL_GRACE=$((10#${OPT_SIGNAL_GRACE:-$HPC_SIGNAL_GRACE}))
  # The profile's default warning is shortened to half the wall time of short jobs.
  [[ -n $OPT_SIGNAL_GRACE ]] || ((J_SIGNAL_GRACE <= limit / 2)) || J_SIGNAL_GRACE=$((limit / 2))
  J_MAX_RESTARTS=$((10#${OPT_MAX_RESTARTS:-$HPC_MAX_RESTARTS}))
  J_REQUEUE=yes
  ((OPT_NO_REQUEUE == 0)) || J_REQUEUE=no
  ((J_SIGNAL_GRACE >= 10)) || die "--signal-grace $J_SIGNAL_GRACE is too short to save a checkpoint: give at least 10 seconds"
  if ((J_SIGNAL_GRACE >= limit)); then
    die "--signal-grace $J_SIGNAL_GRACE s is not shorter than --time $J_TIME ($limit s): the warning would come before the job starts; lower --signal-grace or raise --time"
  fi
}

# hpc_settle_paths SOURCE_DIR: the project, scratch and venv paths (J_SOURCE_DIR ...).
hpc_settle_paths() {
  J_SOURCE_DIR=$1
  J_PROJECT_NAME=${HPC_PROJECT_NAME:-${J_SOURCE_DIR##*/}}
  [[ -n ${SCRATCH:-} ]] ||
    die "SCRATCH is not set: it must name your scratch folder on the shared filesystem (export SCRATCH=/path/to/scratch, for example in ~/.bashrc; Compute Canada sets it for you)"
  [[ $SCRATCH == /* ]] || die "SCRATCH='$SCRATCH' is not an absolute path: export SCRATCH=/absolute/path/to/scratch"
  has_newline "$SCRATCH" && die "SCRATCH holds a newline: Slurm cannot write logs there; use a folder name without one"
  has_newline "$J_SOURCE_DIR" && die "the project folder's path holds a newline: Slurm cannot run from there; rename it"
  has_newline "$J_PROJECT_NAME" && die "HPC_PROJECT_NAME holds a newline"
  [[ $J_PROJECT_NAME != */* && -n $J_PROJECT_NAME && $J_PROJECT_NAME != . && $J_PROJECT_NAME != .. ]] ||
    die "project name '$J_PROJECT_NAME' cannot name a folder: set HPC_PROJECT_NAME to a plain name"
  [[ -d $SCRATCH ]] || die "SCRATCH=$SCRATCH is not a folder: create it or export SCRATCH=/path/to/an/existing/scratch/folder"
  J_SCRATCH_DIR=${SCRATCH%/}/$J_PROJECT_NAME

  local venv=${OPT_VENV:-${HPC_VENV:-$HPC_VENV_PATH}}
  [[ -n $venv ]] || venv=$J_SOURCE_DIR/.venv
  if [[ $venv != none && $venv != /* ]]; then
    venv=$PWD/$venv
  fi
  has_newline "$venv" && die "the venv path holds a newline"
  J_VENV=$venv
}

# hpc_validate_commands: what a launcher needs of each command line (after hpc_read_configs).
hpc_validate_commands() {
  [[ $J_LAUNCHER == torchrun ]] || return 0
  local line i=0
  local re='^[[:space:]]*([A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*[[:space:]]+)*([^[:space:]]*/)?python[0-9.]*[[:space:]]+(-u[[:space:]]+)?[^-[:space:]]'
  local re_m='^[[:space:]]*([A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*[[:space:]]+)*([^[:space:]]*/)?python[0-9.]*[[:space:]]+(-u[[:space:]]+)?-m[[:space:]]'
  for line in "${J_COMMANDS[@]}"; do
    ((++i))
    [[ $line =~ $re || $line =~ $re_m ]] ||
      die "command $i is not 'python script.py ...' or 'python -m module ...', which the torchrun launcher turns into 'torchrun ... script.py ...': $line"
  done
}
