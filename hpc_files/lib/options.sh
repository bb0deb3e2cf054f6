# shellcheck shell=bash
# Step 1 of job_submitter.sh: turn the command line into OPT_* variables, from ONE table.
# Parsing only: checks that an option exists and has its value; validate.sh judges values.
#
# The option spec (git's OPTIONS_SPEC, as bash): hpc_submit_options below is the one list of
# job_submitter.sh's options. Everything else is derived from it: the parser and the reset
# (hpc_options_parse, hpc_options_reset), the "did you mean" list, the options part of
# `--help` (hpc_options_usage puts the table where the file header says "# @options"), and
# the docs check (tests/unit/options.bats: the Options table of docs/reference.md and `--help` agree).
# The rbenv-style help stays in the file header of job_submitter.sh (summary, usage, notes);
# its options part is not a copy but this table, printed in its place: nothing to keep in step.
#
# Adding an option is ONE row here (and its line in docs/reference.md's Options table, which the test
# above demands):
#   hpc_option SHORT|- --LONG[,--ALIAS...] KIND ARG VARIABLE DEFAULT HELP
# KIND: flag (VARIABLE=1 when given, else 0), value (the next word or --name=value; "" when
# not given), list (ARG...: every following word up to the next option; an array), append
# (repeatable; its value is the next word whatever it looks like; an array). DEFAULT is what
# the user gets when the option is left out (shown in --help and docs/reference.md; the code that
# applies it is elsewhere, the variable is "" then). `hpc_option_section TITLE` starts a
# group of --help. The cleanup front end (plai_cleanups/submit_cleanup.sh) has its own table
# and the same parser.
#
# Other parsers reuse it: `hpc_options_use SPEC_FUNCTION`, then `hpc_options_reset`, then
# `hpc_options_parse WORD...` as often as needed (it never resets, so the words of a file line
# and then the command line can be parsed in turn into the same OPT_* variables).

# shellcheck disable=SC2016 # the help texts name variables ($SCRATCH), not expand them
hpc_submit_options() {
  hpc_option_section 'Resources:'
  hpc_option -g --gpus value N OPT_GPUS 0 'GPUs per node; 0 is a CPU job'
  hpc_option - --gpu-type value TYPE OPT_GPU_TYPE any 'GPU model, e.g. v100l, a100 (--gres=gpu:TYPE:N); needs --gpus'
  hpc_option -c --cpus value N OPT_CPUS "profile's CPUs per task x processes per node" "CPUs per node, shared evenly by the node's tasks"
  hpc_option -m --mem value SIZE OPT_MEM "Slurm's" 'memory per node: a number with K, M, G or T (no unit: MB), e.g. 16G'
  hpc_option - --mem-per-gpu value SIZE OPT_MEM_PER_GPU '' 'memory per GPU instead of --mem'
  hpc_option -t --time value TIME OPT_TIME 'profile (01:00:00)' 'wall time: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS'
  hpc_option -N --num-nodes,--nodes value N OPT_NODES 1 'nodes; more than 1 needs --which-distributed'
  hpc_option -d --which-distributed value L OPT_LAUNCHER none 'launcher: none, lightning, torchrun, script, dask'
  hpc_option - --procs-per-node value N OPT_PROCS_PER_NODE 1 'CPU jobs of a distributed launcher: processes per node (with GPUs: one per GPU)'
  hpc_option -A --account value NAME OPT_ACCOUNT profile 'Slurm account (e.g. def-supervisor)'
  hpc_option -p --partition value NAME OPT_PARTITION profile 'Slurm partition (or a comma list)'
  hpc_option - --max-parallel value N OPT_MAX_PARALLEL profile 'at most N array tasks at once (--array=...%N)'
  hpc_option - --sbatch-option append OPT OPT_SBATCH_OPTIONS '' 'any other sbatch option as one word, e.g. --sbatch-option=--qos=high (repeatable; becomes an #SBATCH line)'

  hpc_option_section 'What to run:'
  hpc_option -e --exp-name value NAME OPT_EXP_NAME default 'experiment name: names the job, its logs and $SCRATCH/<project>/NAME/'
  hpc_option -f --configs value FILE OPT_CONFIGS '<project>/experiment_configurations.txt' 'the commands file: one command per line, one line per array task; a line #hpc: OPTIONS sets options for the lines below'
  hpc_option - --nodes-arg value NAME OPT_NODES_ARG 'not passed' 'also pass the node count to your program as --NAME N (e.g. num_nodes)'
  hpc_option - --devices-arg value NAME OPT_DEVICES_ARG 'not passed' 'also pass the processes per node as --NAME N (e.g. devices)'
  hpc_option - --venv value 'PATH|none' OPT_VENV '<project>/.venv' "the project's virtual environment; none = the node's python"
  hpc_option - --venv-to-local flag '' OPT_VENV_TO_LOCAL "profile (HPC_VENV_TO_LOCAL, no)" "run the venv from each node's local disk: packed once at submission (reused while unchanged), unpacked once per node"
  hpc_option - --no-venv-to-local flag '' OPT_NO_VENV_TO_LOCAL '' 'run the venv where it is, even when the profile says HPC_VENV_TO_LOCAL=yes'
  hpc_option - --setup-venv flag '' OPT_SETUP_VENV '' 'first build the venv from requirements.txt in a job of its own; the experiments wait for it (--dependency=afterok)'
  hpc_option - --data list 'PATH...' OPT_DATA '' "stage these files/folders (relative to \$SCRATCH/<project>) to every node's local disk: the same paths under \$SLURM_TMPDIR"
  hpc_option - --results-dir value 'DIR|none' OPT_RESULTS_DIR results 'results folder under $SLURM_TMPDIR ($HPC_RESULTS_DIR), copied back to $SCRATCH/<project>/EXP/results'
  hpc_option - --sync-every value MINUTES OPT_SYNC_EVERY 'only at the end' 'also copy the results back every MINUTES (e.g. 10, or 0.5)'
  hpc_option -s --singularity-container value IMAGE OPT_CONTAINER '' 'run the commands in this Singularity/Apptainer image (.sif file or sandbox folder)'
  hpc_option - --container-to-local flag '' OPT_CONTAINER_TO_LOCAL '' "copy the image to each node's local disk first"

  hpc_option_section 'W&B sweeps (instead of the commands file; docs/sweeps.md):'
  hpc_option - --wandb-sweepid value ENTITY/PROJECT/ID OPT_SWEEPID '' 'run wandb agent for this sweep, one per array task; submit again to add agents to the same sweep'
  hpc_option - --num-agents value N OPT_NUM_AGENTS 1 'agents (online), or runs (offline random/bayes)'
  hpc_option - --runs-per-agent value N OPT_RUNS_PER_AGENT 1 'runs per agent (wandb agent --count N)'
  hpc_option - --agent-stagger value SECONDS OPT_AGENT_STAGGER 2 'agents starting together wait i x SECONDS'
  hpc_option - --agents-per-gpu flag '' OPT_AGENTS_PER_GPU '' 'one job, one agent per GPU of every node (--gpus, -N)'
  hpc_option - --sweep value FILE OPT_SWEEP_FILE '' 'run a W&B sweep file offline (no W&B server): task i runs point i; upload later with hpc sweep sync ID'
  hpc_option - --resume-sweep value ID OPT_RESUME_SWEEP '' 'run again the points of offline sweep ID that did not finish'

  hpc_option_section 'Behaviour:'
  hpc_option -C --cluster value PROFILE OPT_CLUSTER '$HPC_CLUSTER, else generic' 'cluster profile: a name in hpc_files/clusters/ or a path'
  hpc_option - --signal-grace value SECONDS OPT_SIGNAL_GRACE 'profile (120; at most half the wall time unless given)' 'warn the job (SIGUSR1) this long before its wall time, so it can checkpoint before it is requeued'
  hpc_option - --max-restarts value N OPT_MAX_RESTARTS 'profile (10)' 'requeue at most N times'
  hpc_option - --no-requeue flag '' OPT_NO_REQUEUE '' 'never requeue: the job just ends at its wall time'
  hpc_option - --stall-timeout value DURATION OPT_STALL_TIMEOUT 'profile (HPC_STALL_TIMEOUT, 1h)' 'stop a program that shows no progress (log, checkpoints, results, $HPC_HEARTBEAT) for DURATION (30s, 20m, 2h; off): requeued when it wrote a checkpoint, else FAILED'
  hpc_option - --preflight value COMMAND OPT_PREFLIGHT 'profile (HPC_PREFLIGHT, none)' "a check run on every node before the program (after the toolkit's own: GPUs, local disk, rendezvous port); a node where it fails is excluded and the job requeued"
  hpc_option - --no-pipefail flag '' OPT_NO_PIPEFAIL '' "run each line with bash's default: a pipeline's status is its last command's (without it, python x.py | tee out fails when python fails)"
  hpc_option - --resume flag '' OPT_RESUME '' "continue the checkpoints another run left in the experiment's folder (without it, such a submission is refused)"
  hpc_option - --fresh flag '' OPT_FRESH '' "start over: another run's checkpoints in the experiment's folder are kept aside in <exp>/old_checkpoints/ first"
  hpc_option -n --dry-run flag '' OPT_DRY_RUN '' 'print the batch script(s), the commands and the exact sbatch command line; write and submit nothing'
  hpc_option - --snapshot flag '' OPT_SNAPSHOT '' "run the job from a copy of the project's git-tracked files made at submission (edits made while it waits change nothing it runs)"
  hpc_option - --mail flag '' OPT_MAIL '' "Slurm mails at the job's end and failure (--mail-type=END,FAIL) to \$HPC_MAIL_USER, else the profile's HPC_DEFAULT_MAIL_USER"
  hpc_option - --local flag '' OPT_LOCAL '' 'run the job on this machine without Slurm, to debug it before the queue: the same batch script, venv and --data staging, each line in the foreground with its exit code (with --pack N: N lines at once); one node'
  hpc_option - --interactive flag '' OPT_INTERACTIVE '' "a shell on a compute node with the job's resources and environment (salloc + srun --pty)"
  hpc_option - --task value I OPT_TASK 'every line (--local)' 'with --local or --interactive: only array task I (line I+1 of the configs file)'
  hpc_option - --port value N OPT_PORT '' 'with --interactive: print the ssh -L N:NODE:N LOGIN line to reach port N of the node (TensorBoard, Jupyter)'
  hpc_option - --remote value HOST OPT_REMOTE 'profile (HPC_REMOTE), else here' "submit from this machine on HOST's login node over one reused ssh connection: the code copied with rsync to HPC_REMOTE_DIR (~/<project>), job_submitter.sh run there with the same options; none = here"
  hpc_option - --rerun value JOB_ID OPT_RERUN '' "submit again the tasks of JOB_ID's submission that did not end COMPLETED, from its kept batch scripts: same resources, settings and line indices; refused while any of its tasks is queued or running; only --dry-run and --yes go with it"
  hpc_option - --pack value N OPT_PACK 1 'run N lines at once in each job, each on 1/N of its GPUs (or CPUs); with --local: every line on this machine, N at once'
  hpc_option - --lines-per-job value K OPT_LINES_PER_JOB N 'each job runs K lines, --pack N at a time'
  hpc_option -y --yes flag '' OPT_YES '' 'do not ask before submitting an array of more than 100 tasks (only ever asked on a terminal)'
  hpc_option -h --help flag '' OPT_HELP '' 'this help'
}

# hpc_parse_options ARGS...: job_submitter.sh's command line into its OPT_* variables.
hpc_parse_options() {
  local HPC_OPT_STRAY_HINT="the command to run goes in experiment_configurations.txt or --configs FILE"
  hpc_options_use hpc_submit_options
  hpc_options_reset
  hpc_options_parse "$@"
}

# --- the spec, loaded -------------------------------------------------------------------
# One entry per row (index i): _HPC_OPT_SHORT[i], _HPC_OPT_LONGS[i] (space-separated),
# _HPC_OPT_KIND[i] (section for a section title), _HPC_OPT_ARG, _HPC_OPT_VAR, _HPC_OPT_DEFAULT,
# _HPC_OPT_HELP; _HPC_OPT_INDEX maps every spelling (-g, --gpus, --nodes) to its row.

# hpc_options_use SPEC_FUNCTION: load a spec (once; a second call with the same one is free).
hpc_options_use() {
  [[ ${_HPC_OPT_SPEC:-} != "$1" ]] || return 0
  _HPC_OPT_SHORT=() _HPC_OPT_LONGS=() _HPC_OPT_KIND=() _HPC_OPT_ARG=() _HPC_OPT_VAR=()
  _HPC_OPT_DEFAULT=() _HPC_OPT_HELP=()
  unset _HPC_OPT_INDEX
  declare -gA _HPC_OPT_INDEX=()
  "$1"
  _HPC_OPT_SPEC=$1
}

# hpc_option SHORT|- LONG[,ALIAS...] KIND ARG VARIABLE DEFAULT HELP: one row (see the header).
# It runs for every row on every start, so it only records the row; the rows themselves are
# checked by hpc_options_check (tests/unit/options.bats checks every table of the toolkit).
hpc_option() {
  ((HPC_OPTIONS_CHECKING == 0)) || _hpc_option_check "$@"
  local i=${#_HPC_OPT_KIND[@]} rest=$2,
  _HPC_OPT_SHORT[i]=${1#-} _HPC_OPT_LONGS[i]=${2//,/ } _HPC_OPT_KIND[i]=$3 _HPC_OPT_ARG[i]=$4
  _HPC_OPT_VAR[i]=$5 _HPC_OPT_DEFAULT[i]=$6 _HPC_OPT_HELP[i]=$7
  [[ $1 == - ]] || _HPC_OPT_INDEX[$1]=$i
  while [[ -n $rest ]]; do # (no here-string: this runs for every row, on every start)
    _HPC_OPT_INDEX[${rest%%,*}]=$i rest=${rest#*,}
  done
}

# hpc_options_check SPEC_FUNCTION: load the table, checking every row: 7 fields, a known
# kind with an ARG where it takes one, -X short forms and --name long ones, none in two rows.
HPC_OPTIONS_CHECKING=0
hpc_options_check() {
  local HPC_OPTIONS_CHECKING=1 _HPC_OPT_SPEC=""
  hpc_options_use "$1"
}

_hpc_option_check() {
  (($# == 7)) || die "option spec: '$2' has $# fields, not 7 (SHORT LONGS KIND ARG VARIABLE DEFAULT HELP)"
  local name rest=$2,
  case $3 in
    flag) [[ -z $4 ]] || die "option spec: flag $2 takes no ARG" ;;
    value | list | append) [[ -n $4 ]] || die "option spec: $2 ($3) needs an ARG" ;;
    *) die "option spec: $2 has kind '$3': use flag, value, list or append" ;;
  esac
  [[ $1 == - ]] || [[ $1 =~ ^-[A-Za-z]$ && -z ${_HPC_OPT_INDEX[$1]:-} ]] ||
    die "option spec: short form '$1' of $2 is not -X, or is in two rows"
  while [[ -n $rest ]]; do
    name=${rest%%,*} rest=${rest#*,}
    [[ $name == --?* ]] || die "option spec: '$name' is not a long option (--name)"
    [[ -z ${_HPC_OPT_INDEX[$name]:-} ]] || die "option spec: $name is in two rows"
  done
}

# hpc_option_section TITLE: the rows after it form one group of --help.
hpc_option_section() {
  local i=${#_HPC_OPT_KIND[@]}
  _HPC_OPT_KIND[i]=section _HPC_OPT_HELP[i]=$1
  _HPC_OPT_SHORT[i]="" _HPC_OPT_LONGS[i]="" _HPC_OPT_ARG[i]="" _HPC_OPT_VAR[i]="" _HPC_OPT_DEFAULT[i]=""
}

# hpc_options_reset: every variable of the loaded spec to "not given" (0, "" or no items).
hpc_options_reset() {
  local i
  for i in "${!_HPC_OPT_KIND[@]}"; do
    case ${_HPC_OPT_KIND[i]} in
      flag) printf -v "${_HPC_OPT_VAR[i]}" 0 ;;
      value) printf -v "${_HPC_OPT_VAR[i]}" '' ;;
      list | append) _hpc_opt_empty_array "${_HPC_OPT_VAR[i]}" ;;
    esac
  done
}

_hpc_opt_empty_array() {
  local -n _hpc_opt_a=$1
  _hpc_opt_a=()
}

_hpc_opt_append() {
  local -n _hpc_opt_to=$1
  _hpc_opt_to+=("$2")
}

# _hpc_opt_form_to VAR ROW: "-g, --gpus N" (as --help and docs/reference.md show the option).
_hpc_opt_form_to() {
  local -n _f=$1
  local i=$2 spellings=${_HPC_OPT_LONGS[$2]}
  _f=${spellings// /, }
  if [[ -n ${_HPC_OPT_SHORT[i]} ]]; then _f="-${_HPC_OPT_SHORT[i]}, $_f"; else _f="    $_f"; fi
  [[ -z ${_HPC_OPT_ARG[i]} ]] || _f+=" ${_HPC_OPT_ARG[i]}"
}

# --- parse ------------------------------------------------------------------------------

_opt_needs_value() {
  die_usage "option $1 needs a value"
}

_opt_empty_value() {
  die_usage "option $1 was given an empty value: give a value, or leave the option out for its default"
}

# hpc_options_parse WORD...: the words (a command line, or the words of a file line) into the
# loaded spec's variables; dies (exit 2) on an unknown option, a stray word or a missing value.
# Resets nothing: call hpc_options_reset first.
hpc_options_parse() {
  local opt value inline i var
  while (($#)); do
    opt=$1 value="" inline=0
    shift
    if [[ $opt == --*=* ]]; then
      value=${opt#*=} opt=${opt%%=*} inline=1
    fi
    i=""
    [[ $opt != -* ]] || i=${_HPC_OPT_INDEX[$opt]:-} # (an empty word is no subscript)
    if [[ -z $i ]]; then
      if [[ $opt == -* ]]; then
        local hint
        _opt_suggest_to hint "$opt"
        die_usage "unknown option: $opt$hint"
      fi
      die_usage "unexpected argument: $opt${HPC_OPT_STRAY_HINT:+ ($HPC_OPT_STRAY_HINT)}"
    fi
    var=${_HPC_OPT_VAR[i]}
    case ${_HPC_OPT_KIND[i]} in
      flag)
        ((inline == 0)) || die_usage "option $opt takes no value"
        printf -v "$var" 1
        ;;
      list)
        # One or more words: every following word up to the next option.
        local -n _hpc_opt_list=$var
        if ((inline)); then
          [[ -n $value ]] || _opt_empty_value "$opt"
          _hpc_opt_list+=("$value")
        fi
        while (($#)) && [[ $1 != -* ]]; do
          _hpc_opt_list+=("$1")
          shift
        done
        ((${#_hpc_opt_list[@]})) ||
          die_usage "option $opt needs at least one ${_HPC_OPT_ARG[i],,}: $opt ${_HPC_OPT_ARG[i]} (${_HPC_OPT_HELP[i]})"
        unset -n _hpc_opt_list
        ;;
      append)
        # Its value may start with "--" (--sbatch-option --qos=high): the next word, whatever it is.
        if ((inline == 0)); then
          (($#)) || _opt_needs_value "$opt"
          value=$1
          shift
        fi
        [[ -n $value ]] || _opt_empty_value "$opt"
        _hpc_opt_append "$var" "$value"
        ;;
      value)
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
        printf -v "$var" '%s' "$value"
        ;;
    esac
  done
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

# _opt_suggest_to VAR UNKNOWN: " (did you mean --x?)" for the closest long option (or alias)
# of the loaded spec, or "".
_opt_suggest_to() {
  local -n _s=$1
  local unknown=${2//_/-} best="" best_d=3 d known
  local -a longs
  _s=""
  [[ $unknown == --?* ]] || return 0
  read -ra longs <<<"${_HPC_OPT_LONGS[*]}"
  for known in "${longs[@]}"; do
    _edit_distance_to d "$unknown" "$known"
    # One a prefix of the other (--gpu, --dry): close, unless a nearer spelling exists.
    if ((d > 2)) && [[ $known == "$unknown"* || $unknown == "$known"* ]]; then d=2; fi
    if ((d < best_d)); then best=$known best_d=$d; fi
  done
  [[ -z $best ]] || _s=" (did you mean $best?)"
}

# --- help -------------------------------------------------------------------------------

# hpc_options_help: the options of the loaded spec as --help shows them: groups, then
# "  -g, --gpus N   help (default: D)", wrapped at 92 columns.
hpc_options_help() {
  local i form text word line width=28 first=1 pad
  printf -v pad '%*s' $((width + 3)) ''
  for i in "${!_HPC_OPT_KIND[@]}"; do
    if [[ ${_HPC_OPT_KIND[i]} == section ]]; then
      ((first)) || printf '\n'
      printf '%s\n' "${_HPC_OPT_HELP[i]}"
      first=0
      continue
    fi
    first=0
    _hpc_opt_form_to form "$i"
    text=${_HPC_OPT_HELP[i]}
    [[ -z ${_HPC_OPT_DEFAULT[i]} ]] || text+=" (default: ${_HPC_OPT_DEFAULT[i]})"
    if ((${#form} > width)); then
      printf '  %s\n' "$form"
      line=$pad
    else
      printf -v line '  %-*s ' "$width" "$form"
    fi
    text+=" "
    while [[ -n $text ]]; do
      word=${text%% *} text=${text#* }
      [[ -n $word ]] || continue
      if ((${#line} > ${#pad} && ${#line} + ${#word} + 1 > 92)); then
        printf '%s\n' "${line% }"
        line=$pad
      fi
      line+="$word "
    done
    printf '%s\n' "${line% }"
  done
}

# hpc_options_usage FILE: FILE's header (print_usage_header) with the line "@options" replaced
# by hpc_options_help: the rbenv-style help of a front end whose options are a spec.
hpc_options_usage() {
  local line
  while IFS= read -r line; do
    if [[ $line == '@options'* ]]; then
      hpc_options_help
    else
      printf '%s\n' "$line"
    fi
  done < <(print_usage_header "$1")
}

# hpc_remote_host_to VAR: the host to submit on: --remote, else the profile's HPC_REMOTE;
# "" for here (--remote none, the login node's own side of a remote submission). Here, not
# in remote.sh, which a submission loads only when it goes remote (hpc_autoload).
hpc_remote_host_to() {
  local -n _rh=$1
  _rh=${OPT_REMOTE:-${HPC_REMOTE:-}}
  [[ $_rh != none ]] || _rh=""
}

hpc_remote_requested() {
  local host
  hpc_remote_host_to host
  [[ -n $host ]]
}
