# shellcheck shell=bash
# Step 3 of job_submitter.sh: judge every option and the environment, then settle the
# job's J_* variables (profile defaults filled in). Nothing is written before this passes.

HPC_LAUNCHERS=(none lightning torchrun script dask)

_in_list() {
  local want=$1 item
  shift
  for item in "$@"; do
    [[ $item == "$want" ]] && return 0
  done
  return 1
}

# hpc_validate_counts: whole numbers where whole numbers are asked for (check_count:
# also no absurd digit counts, which bash arithmetic would wrap).
hpc_validate_counts() {
  local pair name value min
  for pair in "--gpus|0|$OPT_GPUS" "--cpus|1|$OPT_CPUS" "--num-nodes|1|$OPT_NODES" \
    "--max-parallel|1|$OPT_MAX_PARALLEL" "--num-agents|1|$OPT_NUM_AGENTS" \
    "--procs-per-node|1|$OPT_PROCS_PER_NODE" "--signal-grace|0|$OPT_SIGNAL_GRACE" \
    "--max-restarts|0|$OPT_MAX_RESTARTS" "--runs-per-agent|1|$OPT_RUNS_PER_AGENT" \
    "--agent-stagger|0|$OPT_AGENT_STAGGER"; do
    name=${pair%%|*} value=${pair#*|}
    min=${value%%|*} value=${value#*|}
    [[ -z $value ]] || check_count "$name" "$value" "$min"
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
    _validate_sbatch_option "$flag"
  done
  [[ -z $OPT_EXP_NAME ]] || is_exp_name "$OPT_EXP_NAME" ||
    die "--exp-name '$OPT_EXP_NAME' must be 1-100 letters, digits, '.', '_', '+' or '-', not starting with '.', '+' or '-' (it names folders)"
  # hpc status/logs/why/cancel take a job number (123, 123_4) where they take a name.
  [[ ! $OPT_EXP_NAME =~ ^[0-9]+(_[0-9]+)?$ ]] ||
    die "--exp-name '$OPT_EXP_NAME' reads as a job number (hpc status, logs and cancel take both): add a letter, for example --exp-name run$OPT_EXP_NAME"
}

# sbatch options the toolkit writes itself, each with the toolkit option that sets it.
HPC_MANAGED_SBATCH_OPTIONS=(
  "array|a|one job array per configs file: one line per task, --max-parallel N for %N"
  "output|o|the log is always \$SCRATCH/<project>/hpc_outputs/EXP-%j.out: name it with --exp-name"
  "error|e|stderr goes to the same log as stdout: name it with --exp-name"
  "job-name|J|use --exp-name NAME"
  "requeue||jobs requeue by default; --max-restarts N limits it"
  "no-requeue||use --no-requeue"
  "signal||use --signal-grace SECONDS (the warning before the wall time)"
  "open-mode||the log is always appended to, so a requeued job keeps its earlier output"
  "wrap||the job runs the toolkit's batch script: put the command in the configs file"
  # The resources: a second #SBATCH line would win over the plan's own, and the job would
  # run with resources its HPC_* exports do not say.
  "nodes|N|use --num-nodes N"
  "ntasks||the tasks per node follow from --which-distributed, --gpus and --procs-per-node"
  "ntasks-per-node||the tasks per node follow from --which-distributed, --gpus and --procs-per-node"
  "cpus-per-task|c|use --cpus N (per node; shared evenly by the node's tasks)"
  "gres||use --gpus N (and --gpu-type TYPE)"
  "gpus|G|use --gpus N (per node)"
  "gpus-per-node||use --gpus N (per node)"
  "gpus-per-task||use --gpus N (per node)"
  "mem||use --mem SIZE (per node) or --mem-per-gpu SIZE"
  "mem-per-gpu||use --mem-per-gpu SIZE"
  "time|t|use --time TIME"
  "partition|p|use --partition NAME (a '#hpc:' line for one block of lines)"
  "account|A|use --account NAME"
  "export||the job needs the submitting environment (SCRATCH, PATH); set a variable in the command line instead (NAME=value python train.py)"
)

# _validate_sbatch_option OPT: one sbatch option, --name or --name=value, on one line,
# and none the toolkit manages (it would silently contradict the batch script's own).
_validate_sbatch_option() {
  local flag=$1 entry long short why name
  if [[ $flag =~ ^-([a-zA-Z])(=?)(.*)$ ]]; then
    name=${BASH_REMATCH[1]}
  elif [[ $flag =~ ^--([a-z][a-z-]*)(=.*)?$ ]] && ! has_newline "$flag"; then
    name=${BASH_REMATCH[1]}
  else
    die "--sbatch-option '$flag' must be one sbatch option written --name or --name=value (for example --qos=high), on one line"
  fi
  for entry in "${HPC_MANAGED_SBATCH_OPTIONS[@]}"; do
    # (expansions, not read <<<: this runs for every block of a configs file, blocks.sh)
    long=${entry%%|*} why=${entry#*|}
    short=${why%%|*} why=${why#*|}
    # sbatch accepts any unambiguous prefix of a long option (--arr for --array).
    if [[ $name == "$short" || (${#name} -ge 3 && $long == "$name"*) ]]; then
      die "--sbatch-option '$flag' sets sbatch's --$long, which hpc_files manages itself: $why"
    fi
  done
  [[ $flag == --* ]] ||
    die "--sbatch-option '$flag': write the long form of the option (--name=value, see 'man sbatch')"
}

# hpc_settle_job SOURCE_DIR: fill J_* from the options and the profile, judging each.
hpc_settle_job() {
  hpc_validate_counts
  hpc_validate_names

  J_LAUNCHER=${OPT_LAUNCHER:-none}
  _in_list "$J_LAUNCHER" "${HPC_LAUNCHERS[@]}" ||
    die "--which-distributed '$J_LAUNCHER' is not a launcher: use one of ${HPC_LAUNCHERS[*]}"

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

  # Your SBATCH_ACCOUNT and SBATCH_PARTITION come before the profile's defaults (as they
  # would for sbatch): the plan checks the partition it will really use, and writes both.
  J_ACCOUNT=${OPT_ACCOUNT:-${SBATCH_ACCOUNT:-$HPC_DEFAULT_ACCOUNT}}
  J_PARTITION=${OPT_PARTITION:-${SBATCH_PARTITION:-$HPC_DEFAULT_PARTITION}}
  [[ -n $OPT_ACCOUNT || -z ${SBATCH_ACCOUNT:-} ]] || is_safe_name "$SBATCH_ACCOUNT" ||
    die "SBATCH_ACCOUNT='$SBATCH_ACCOUNT' (your environment) is not a Slurm account name (letters, digits, . _ + -): fix or unset it, or give --account NAME"
  [[ -n $OPT_PARTITION || -z ${SBATCH_PARTITION:-} ]] || is_partition_list "$SBATCH_PARTITION" ||
    die "SBATCH_PARTITION='$SBATCH_PARTITION' (your environment) is not a partition name or comma-separated list of them: fix or unset it, or give --partition NAME"
  J_EXP_NAME=${OPT_EXP_NAME:-default}
  J_MAX_PARALLEL=${OPT_MAX_PARALLEL:-$HPC_MAX_ARRAY_PARALLEL}
  [[ -z $J_MAX_PARALLEL ]] || is_posint "$J_MAX_PARALLEL" ||
    die "cluster profile $HPC_PROFILE_FILE: HPC_MAX_ARRAY_PARALLEL must be a positive whole number"
  J_MODULES=$HPC_MODULES
  J_PROVIDES_TMPDIR=$HPC_PROVIDES_TMPDIR
  J_LOCAL_SCRATCH=$HPC_LOCAL_SCRATCH

  hpc_settle_requeue
}

# hpc_settle_requeue: the wall-time warning and the restart policy (J_SIGNAL_GRACE,
# J_MAX_RESTARTS, J_REQUEUE). The warning must leave the job some time to run.
hpc_settle_requeue() {
  local limit
  slurm_time_seconds_to limit "$J_TIME"
  # Slurm keeps a time limit as minutes in 32 bits, the top two values meaning "not set"
  # and "infinite": a longer --time wraps (2982617-00 became 19:44:00). Issue 32.
  (((limit + 59) / 60 <= 4294967293)) ||
    die "--time $J_TIME is past Slurm's maximum (4294967293 minutes): Slurm would wrap it into a much shorter limit. Give a real wall time, at most the partition's limit (sinfo -o '%P %l')"
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
  # slurmctld looks at time limits every 30 s and may send --signal up to a minute early
  # (issue 32: --time 1 --signal-grace 30 was warned 2 s after its start).
  ((limit - J_SIGNAL_GRACE >= 60)) || [[ $J_REQUEUE == no ]] ||
    warn "--time $J_TIME with a $J_SIGNAL_GRACE s warning leaves $((limit - J_SIGNAL_GRACE)) s before it, and Slurm may send it up to 60 s early: the job may be warned (and stop, or requeue) right after it starts. Give at least a minute more --time than --signal-grace (docs/requeue.md)"
}

# hpc_settle_paths SOURCE_DIR: the project, scratch and venv paths (J_SOURCE_DIR ...).
# J_PROJECT_DIR is the project's folder; J_SOURCE_DIR the one the job runs from: the same,
# or its --snapshot copy (coderecord.sh).
hpc_settle_paths() {
  J_PROJECT_DIR=$1 J_SOURCE_DIR=$1
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
  # The logs' folder goes to sbatch --output, where '%' is escaped (plan.sh) but a
  # backslash turns off Slurm's replacements (%j): the log would be named literally.
  local escaped
  if ! sbatch_filename_to escaped "$J_SCRATCH_DIR"; then
    if [[ $SCRATCH == *\\* ]]; then
      die "SCRATCH=$SCRATCH holds a backslash, which Slurm's --output cannot take (it turns off %j in the log's name): use a scratch folder without one"
    fi
    die "the project name '$J_PROJECT_NAME' holds a backslash, which Slurm's --output cannot take (it turns off %j in the log's name): rename the project folder or set HPC_PROJECT_NAME to a plain name"
  fi

  local venv=${OPT_VENV:-${HPC_VENV:-$HPC_VENV_PATH}}
  [[ -n $venv ]] || venv=$J_SOURCE_DIR/.venv
  if [[ $venv != none && $venv != /* ]]; then
    venv=$PWD/$venv
  fi
  has_newline "$venv" && die "the venv path holds a newline"
  J_VENV=$venv
}

# hpc_validate_commands [INDEX...]: what a launcher needs of each command line (after
# hpc_read_configs): no launcher of its own under one that starts the processes, torchrun's form, read by the one parser that rewrites the lines later
# (count_args.sh); of the commands INDEX... only (a resource block's: blocks.sh), else all.
hpc_validate_commands() {
  hpc_refuse_launcher_lines "$@"
  hpc_torchrun_commands --check "$@"
}

# hpc_check_scripts_exist: a "python script.py ..." line whose script is not in the project
# would fail only on the node, after its wait in the queue: warn now (a warning, not a
# refusal: the script may be made by the job, or live in a container image). The scripts
# were listed while the configs file was read (J_CONFIG_SCRIPTS, configs.sh).
hpc_check_scripts_exist() {
  local hit script path
  for hit in "${J_CONFIG_SCRIPTS[@]}"; do
    script=${hit#*:} path=${hit#*:}
    [[ $path == /* ]] || path=$J_SOURCE_DIR/$path
    [[ -f $path ]] ||
      warn "configs file line ${hit%%:*} runs $script, which is not in the project ($path not found): the job would fail on the node; fix the path (commands run in $J_SOURCE_DIR)"
  done
}

# hpc_check_relative_outputs: an argument that names an output folder with a relative path
# (nanoGPT's --out_dir=out, Transformers' --output_dir out, --save_dir ckpt ...) writes into
# the project folder, shared by every task, array element and rerun: warn now, with what to
# pass instead (a warning: the program may want it so). Only the lines' words are read; the
# job log names what a program wrote there by its own defaults (project_writes.sh).
hpc_check_relative_outputs() {
  local hits k lines="" example=""
  local -a at
  # No word that could be such a flag (--out..., --save..., --log..., --ckpt..., --res...,
  # --default_root...): nothing to read. Most lines, and no awk for them.
  [[ "${J_COMMANDS[*]}" == *-[oslcrd][uaohke]* ]] || return 0
  # One awk over all the commands (a bash loop over every word of 20,000 lines took
  # seconds). Words split on blanks as 'read -a' does; a word NAME=VALUE or NAME VALUE.
  # It prints the index of each command at fault, the first one's NAME VALUE first.
  hits=$(printf '%s\n' "${J_COMMANDS[@]}" | LC_ALL=C awk '
    BEGIN { flag = "^--?((out|output)([_-]?(dir|directory|path|folder|root))?|(save|log|logging|checkpoint|ckpt|results?|default[_-]root)[_-]?(dir|directory|path|folder|root)|outdir|logdir|savedir)$" }
    {
      for (i = 1; i <= NF; i++) {
        w = $i
        if (w ~ /^-.*=/) { e = index(w, "="); name = substr(w, 1, e - 1); value = substr(w, e + 1) }
        else { name = w; value = (i < NF ? $(i + 1) : "") }
        if (name !~ flag || value == "" || value ~ /^[\/$~{-]/) continue
        sub(/^["\047]/, "", value); sub(/["\047]$/, "", value)
        if (value == "" || value ~ /^[\/$~]/) continue
        if (!found++) print name " " value
        print NR - 1
        break
      }
    }')
  [[ -n $hits ]] || return 0
  example=${hits%%$'\n'*}
  mapfile -t at <<<"${hits#*$'\n'}"
  for k in "${at[@]}"; do
    lines+="${lines:+, }${J_COMMAND_LINES[k]:-$((k + 1))}"
  done
  # shellcheck disable=SC2016 # the variables' names, for the user's line
  warn "line(s) $lines of the commands write output to a relative folder in the project ($example): every task, array element and rerun writes to that same place and overwrites the others. Pass the task's own folder: ${example%% *}=\$HPC_CHECKPOINT_DIR (checkpoints; a requeued attempt resumes from there) or ${example%% *}=\$HPC_RESULTS_DIR (results, copied back to EXP/results) (README: Recipes)"
}
