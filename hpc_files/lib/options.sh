# shellcheck shell=bash
# Step 1 of job_submitter.sh: turn the command line into OPT_* variables.
# Parsing only: checks that an option exists and has its value; validate.sh judges values.

# Options whose feature has not landed yet: parsed and validated, then refused.
# Each entry is "OPTION|VARIABLE|FEATURE". A feature's commit removes its line.
HPC_UNAVAILABLE_OPTIONS=(
)

hpc_options_reset() {
  OPT_ACCOUNT="" OPT_PARTITION="" OPT_GPUS="" OPT_CPUS="" OPT_MEM="" OPT_MEM_PER_GPU=""
  OPT_TIME="" OPT_GPU_TYPE="" OPT_EXP_NAME="" OPT_NODES="" OPT_LAUNCHER=""
  OPT_CONFIGS="" OPT_CONTAINER="" OPT_SWEEPID="" OPT_SWEEP_FILE="" OPT_NUM_AGENTS=""
  OPT_CLUSTER="" OPT_MAX_PARALLEL="" OPT_VENV="" OPT_SETUP_VENV=0
  OPT_PROCS_PER_NODE="" OPT_NODES_ARG="" OPT_DEVICES_ARG=""
  OPT_SIGNAL_GRACE="" OPT_MAX_RESTARTS="" OPT_NO_REQUEUE=0
  OPT_DRY_RUN=0 OPT_YES=0 OPT_HELP=0
  OPT_CONTAINER_TO_LOCAL=0
  OPT_RESULTS_DIR="" OPT_SYNC_EVERY=""
  OPT_DATA=() OPT_SBATCH_OPTIONS=()
  OPT_RUNS_PER_AGENT="" OPT_AGENT_STAGGER="" OPT_RESUME_SWEEP="" OPT_AGENTS_PER_GPU=0
  OPT_SNAPSHOT=0 OPT_MAIL=0 # coderecord.sh, mail.sh
  OPT_LOCAL=0 OPT_INTERACTIVE=0 OPT_TASK="" OPT_PORT="" # local.sh
}

_opt_needs_value() {
  die_usage "option $1 needs a value"
}

_opt_empty_value() {
  die_usage "option $1 was given an empty value: give a value, or leave the option out for its default"
}

# _edit_distance_to VAR A B: Levenshtein distance (small strings; error path only).
_edit_distance_to() {
  local -n _d=$1
  local a=$2 b=$3 i j cost del ins sub
  local -a prev cur
  for ((j = 0; j <= ${#b}; j++)); do prev[j]=$j; done
  for ((i = 1; i <= ${#a}; i++)); do
    cur=("$i")
    for ((j = 1; j <= ${#b}; j++)); do
      cost=1
      [[ ${a:i-1:1} != "${b:j-1:1}" ]] || cost=0
      del=$((prev[j] + 1)) ins=$((cur[j - 1] + 1)) sub=$((prev[j - 1] + cost))
      ((ins >= del)) || del=$ins
      ((sub >= del)) || del=$sub
      cur[j]=$del
    done
    prev=("${cur[@]}")
  done
  _d=${prev[${#b}]}
}

# _opt_suggest_to VAR UNKNOWN: " (did you mean --x?)" for the closest long option of the
# usage header (the one list of options), or "".
_opt_suggest_to() {
  local -n _s=$1
  local unknown=${2//_/-} best="" best_d=3 d line known
  _s=""
  [[ $unknown == --?* ]] || return 0
  while IFS= read -r line; do
    while [[ $line =~ (--[a-z][a-z0-9-]*)(.*) ]]; do
      known=${BASH_REMATCH[1]} line=${BASH_REMATCH[2]}
      _edit_distance_to d "$unknown" "$known"
      # One a prefix of the other (--gpu, --dry): close, unless a nearer spelling exists.
      if ((d > 2)) && [[ $known == "$unknown"* || $unknown == "$known"* ]]; then d=2; fi
      if ((d < best_d)); then best=$known best_d=$d; fi
    done
  done < <(print_usage_header "${HPC_USAGE_FILE:-${BASH_SOURCE[-1]}}")
  [[ -z $best ]] || _s=" (did you mean $best?)"
}

hpc_parse_options() {
  hpc_options_reset
  local opt value inline
  while (($#)); do
    opt=$1 value="" inline=0
    shift
    if [[ $opt == --*=* ]]; then
      value=${opt#*=} opt=${opt%%=*} inline=1
    fi
    case $opt in
      -h | --help | -n | --dry-run | -y | --yes | --setup-venv | --no-requeue | --container-to-local | \
        --agents-per-gpu | --snapshot | --mail | --local | --interactive)
        ((inline == 0)) || die_usage "option $opt takes no value"
        case $opt in
          -h | --help) OPT_HELP=1 ;;
          -n | --dry-run) OPT_DRY_RUN=1 ;;
          -y | --yes) OPT_YES=1 ;;
          --setup-venv) OPT_SETUP_VENV=1 ;;
          --no-requeue) OPT_NO_REQUEUE=1 ;;
          --container-to-local) OPT_CONTAINER_TO_LOCAL=1 ;;
          --agents-per-gpu) OPT_AGENTS_PER_GPU=1 ;;
          --snapshot) OPT_SNAPSHOT=1 ;;
          --mail) OPT_MAIL=1 ;;
          --local) OPT_LOCAL=1 ;;
          --interactive) OPT_INTERACTIVE=1 ;;
        esac
        continue
        ;;
      --data)
        # One or more paths: every following word up to the next option.
        if ((inline)); then
          [[ -n $value ]] || _opt_empty_value "$opt"
          OPT_DATA+=("$value")
        fi
        while (($#)) && [[ $1 != -* ]]; do
          OPT_DATA+=("$1")
          shift
        done
        ((${#OPT_DATA[@]})) || die_usage "option --data needs at least one path (relative to \$SCRATCH/<project>)"
        continue
        ;;
      -A | --account | -p | --partition | -g | --gpus | -c | --cpus | -m | --mem | --mem-per-gpu | \
        -t | --time | --gpu-type | -e | --exp-name | -N | --num-nodes | --nodes | \
        -d | --which-distributed | -f | --configs | -s | --singularity-container | \
        --wandb-sweepid | --sweep | --num-agents | -C | --cluster | --max-parallel | --venv | \
        --procs-per-node | --nodes-arg | --devices-arg | --signal-grace | --max-restarts | \
        --results-dir | --sync-every | --runs-per-agent | --agent-stagger | --resume-sweep | \
        --task | --port) ;;
      --sbatch-option)
        # Its value starts with "--": take the next word whatever it looks like.
        if ((inline == 0)); then
          (($#)) || _opt_needs_value "$opt"
          value=$1
          shift
        fi
        [[ -n $value ]] || _opt_empty_value "$opt"
        OPT_SBATCH_OPTIONS+=("$value")
        continue
        ;;
      *)
        if [[ $opt == -* ]]; then
          local hint
          _opt_suggest_to hint "$opt"
          die_usage "unknown option: $opt$hint"
        fi
        die_usage "unexpected argument: $opt (the command to run goes in experiment_configurations.txt or --configs FILE)"
        ;;
    esac
    # The value comes from --name=value or the next word. A next word that looks like an
    # option is not a value (a negative number is, so that validation can name the fault).
    if ((inline == 0)); then
      (($#)) || _opt_needs_value "$opt"
      [[ $1 != -* || $1 =~ ^-[0-9] ]] || _opt_needs_value "$opt"
      value=$1
      shift
    fi
    # An empty value would silently mean the default (--gpus= is not 0 GPUs).
    [[ -n $value ]] || _opt_empty_value "$opt"
    case $opt in
      -A | --account) OPT_ACCOUNT=$value ;;
      -p | --partition) OPT_PARTITION=$value ;;
      -g | --gpus) OPT_GPUS=$value ;;
      -c | --cpus) OPT_CPUS=$value ;;
      -m | --mem) OPT_MEM=$value ;;
      --mem-per-gpu) OPT_MEM_PER_GPU=$value ;;
      -t | --time) OPT_TIME=$value ;;
      --gpu-type) OPT_GPU_TYPE=$value ;;
      -e | --exp-name) OPT_EXP_NAME=$value ;;
      -N | --num-nodes | --nodes) OPT_NODES=$value ;;
      -d | --which-distributed) OPT_LAUNCHER=$value ;;
      -f | --configs) OPT_CONFIGS=$value ;;
      -s | --singularity-container) OPT_CONTAINER=$value ;;
      --wandb-sweepid) OPT_SWEEPID=$value ;;
      --sweep) OPT_SWEEP_FILE=$value ;;
      --num-agents) OPT_NUM_AGENTS=$value ;;
      --runs-per-agent) OPT_RUNS_PER_AGENT=$value ;;
      --agent-stagger) OPT_AGENT_STAGGER=$value ;;
      --resume-sweep) OPT_RESUME_SWEEP=$value ;;
      -C | --cluster) OPT_CLUSTER=$value ;;
      --max-parallel) OPT_MAX_PARALLEL=$value ;;
      --venv) OPT_VENV=$value ;;
      --procs-per-node) OPT_PROCS_PER_NODE=$value ;;
      --nodes-arg) OPT_NODES_ARG=$value ;;
      --devices-arg) OPT_DEVICES_ARG=$value ;;
      --results-dir) OPT_RESULTS_DIR=$value ;;
      --sync-every) OPT_SYNC_EVERY=$value ;;
      --signal-grace) OPT_SIGNAL_GRACE=$value ;;
      --max-restarts) OPT_MAX_RESTARTS=$value ;;
      --task) OPT_TASK=$value ;;
      --port) OPT_PORT=$value ;;
    esac
  done
}
