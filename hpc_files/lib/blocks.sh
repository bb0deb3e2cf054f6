# shellcheck shell=bash
# Resource blocks: a '#hpc: OPTIONS' line of the configs file (read by configs.sh) sets
# options for the commands below it, until the next such line; a bare '#hpc:' goes back
# to the command line's options. A directive's words are split as a shell would split
# them but never evaluated, parsed by the command line's parser (options.sh) and judged
# by the same code (validate.sh, staging.sh, container.sh), with the file and line named
# in every refusal. Commands whose settled job is the same form one group, whichever
# blocks they come from; each group is one chunk of the plan (plan.sh; several past
# MaxArraySize: arrays.sh) that runs its commands' own indices, with the group's settings
# as the chunk's NAME=VALUE fields; all chunks go in as one submission (submit.sh).

# The options a directive may set (those that shape one job), as the parser spells them.
HPC_BLOCK_OPTION_NAMES=" -g --gpus --gpu-type -c --cpus -m --mem --mem-per-gpu -t --time -N --num-nodes --nodes -d --which-distributed -A --account -p --partition --procs-per-node --sbatch-option --data -s --singularity-container --container-to-local "
# Their OPT_* variables: plain ones, then the lists (--sbatch-option and --data, which a
# directive replaces as a whole).
HPC_BLOCK_OPTION_VARS=(OPT_GPUS OPT_GPU_TYPE OPT_CPUS OPT_MEM OPT_MEM_PER_GPU OPT_TIME OPT_NODES
  OPT_LAUNCHER OPT_ACCOUNT OPT_PARTITION OPT_PROCS_PER_NODE OPT_CONTAINER OPT_CONTAINER_TO_LOCAL)
HPC_BLOCK_OPTION_LISTS=(OPT_SBATCH_OPTIONS OPT_DATA)
# What makes two blocks the same job: the request as settled (so -g 2 and --gpus 2, or
# --mem 16gb and --mem 16G, are one group).
HPC_BLOCK_KEY_VARS=(J_LAUNCHER J_NODES J_GPUS J_GPU_TYPE J_PROCS_PER_NODE J_TASKS_PER_NODE
  J_CPUS J_CPUS_PER_TASK J_MEM J_MEM_PER_GPU J_TIME J_ACCOUNT J_PARTITION J_SIGNAL_GRACE
  J_CONTAINER J_CONTAINER_TO_LOCAL J_VENV)
# What a group's chunk carries (plan.sh: a chunk's settings), when it differs from the plan's
# (the first group's): every J_* a directive can change, and the two lists.
HPC_BLOCK_PLAN_VARS=("${HPC_BLOCK_KEY_VARS[@]}" J_SRUN_MODE J_MAX_RESTARTS J_REQUEUE
  J_DATA_ARCHIVE J_DATA_BYTES J_DATA_ENTRIES J_DATA_SHA J_DATA_KEY J_DATA_STATE J_DATA_JOBS
  J_DATA_SIZE)
HPC_BLOCK_SEP=$'\x1f' # configs.sh refuses control characters: never inside a value; also
# the item end of a chunk's list setting (plan.sh)

# hpc_blocks_present: the configs file holds at least one directive.
hpc_blocks_present() { [[ -v J_DIRECTIVES[1] ]]; }

# hpc_blocks_several: the commands form more than one group (several arrays).
hpc_blocks_several() { ((${J_GROUP_COUNT:-0} > 1)); }

# _blocks_where_to VAR B: "configs file 'F', line N (#hpc: ...): " for directive B.
_blocks_where_to() {
  local -n _w=$1
  local text=${J_DIRECTIVES[$2]}
  text=${text#"${text%%[![:space:]]*}"}
  _w="configs file '$J_CONFIGS_FILE', line ${J_DIRECTIVE_LINES[$2]} (#hpc: $text): "
}

# _blocks_split_to ARRAY TEXT: TEXT's words as a shell splits them (blanks, '...', "...",
# backslash), with nothing expanded or run. What a shell would expand or run ($, `, ;, &,
# |, <, >, parentheses) is refused rather than taken literally; an unquoted '#' at a
# word's start begins a comment.
_blocks_split_to() {
  local -n _words=$1
  local text=$2 i c n=${#2} word="" have=0 quote=""
  _words=()
  for ((i = 0; i < n; i++)); do
    c=${text:i:1}
    if [[ $quote == "'" ]]; then
      if [[ $c == "'" ]]; then quote=""; else word+=$c; fi
      continue
    fi
    if [[ $quote == '"' ]]; then
      case $c in
        '"') quote="" ;;
        \\)
          if [[ ${text:i+1:1} == [\"\\\$\`] ]]; then
            word+=${text:i+1:1}
            ((++i))
          else
            word+=$c
          fi
          ;;
        \$ | \`) die "'$c' inside double quotes: a directive is not run by a shell, nothing in it is expanded; write the value itself, or put it in single quotes" ;;
        *) word+=$c ;;
      esac
      continue
    fi
    case $c in
      [[:space:]])
        ((have == 0)) || _words+=("$word")
        word="" have=0
        ;;
      "'" | '"') quote=$c have=1 ;;
      \\)
        ((i + 1 < n)) || die "a directive ends with a backslash: a directive is one line; remove the '\\'"
        word+=${text:i+1:1} have=1
        ((++i))
        ;;
      '#')
        ((have)) || break
        word+=$c
        ;;
      \$ | \` | \; | \& | \| | \< | \> | \( | \))
        die "'$c' in a directive: a directive is not run by a shell, nothing in it is expanded or run; write the values themselves (quote a value that holds '$c' with '...')"
        ;;
      *) word+=$c have=1 ;;
    esac
  done
  [[ -z $quote ]] || die "a quote ($quote) is not closed: close it on the same line (a directive is one line)"
  ((have == 0)) || _words+=("$word")
}

# _blocks_parse B: directive B's options, parsed and checked; its values are kept in
# HPC_BLOCK_VALUES["B|VAR"], the variables it sets in HPC_BLOCK_SET_VARS[B].
_blocks_parse() {
  local b=$1 word skip=0 name var value
  local -a words
  _blocks_split_to words "${J_DIRECTIVES[b]}"
  HPC_BLOCK_SET_VARS[b]=""
  ((${#words[@]})) || return 0 # a bare '#hpc:': the command line's options again
  [[ ${words[0]} == -* ]] ||
    die "'${words[0]}' is not an option: a directive holds job_submitter.sh options, e.g. '#hpc: --gpus 2 --time 04:00:00'"
  hpc_parse_options "${words[@]}"
  for word in "${words[@]}"; do
    if ((skip)); then
      skip=0
      continue
    fi
    [[ $word == -* && ! $word =~ ^-[0-9] ]] || continue
    name=${word%%=*}
    [[ $HPC_BLOCK_OPTION_NAMES == *" $name "* ]] ||
      die "$name cannot be set by a directive, which takes only the options that shape one job (--gpus, --gpu-type, --cpus, --mem, --mem-per-gpu, --time, --num-nodes, --which-distributed, --procs-per-node, --account, --partition, --sbatch-option, --data, --singularity-container, --container-to-local): give $name on the command line"
    [[ $name != --sbatch-option || $word == *=* ]] || skip=1
  done
  for var in "${HPC_BLOCK_OPTION_VARS[@]}"; do
    value=${!var}
    [[ -n $value ]] || continue
    [[ $var != OPT_CONTAINER_TO_LOCAL || $value != 0 ]] || continue
    HPC_BLOCK_SET_VARS[b]+=" $var"
    HPC_BLOCK_VALUES["$b|$var"]=$value
  done
  for var in "${HPC_BLOCK_OPTION_LISTS[@]}"; do
    local -n _list=$var
    if ((${#_list[@]})); then
      HPC_BLOCK_SET_VARS[b]+=" $var"
      printf -v value "%s$HPC_BLOCK_SEP" "${_list[@]}"
      HPC_BLOCK_VALUES["$b|$var"]=$value
    fi
    unset -n _list
  done
}

# _blocks_set_list VAR JOINED: the list VAR from its HPC_BLOCK_SEP-terminated items.
_blocks_set_list() {
  local -n _to=$1
  local rest=$2
  _to=()
  while [[ -n $rest ]]; do
    _to+=("${rest%%"$HPC_BLOCK_SEP"*}")
    rest=${rest#*"$HPC_BLOCK_SEP"}
  done
}

# hpc_blocks_use_block B: OPT_* = the command line's options with directive B's in their
# place (B 0: none), then the job settled from them (J_*), as for the command line.
hpc_blocks_use_block() {
  local b=$1 var
  hpc_parse_options "${HPC_CMDLINE[@]}"
  for var in ${HPC_BLOCK_SET_VARS[b]}; do
    if [[ " ${HPC_BLOCK_OPTION_LISTS[*]} " == *" $var "* ]]; then
      _blocks_set_list "$var" "${HPC_BLOCK_VALUES["$b|$var"]}"
    else
      printf -v "$var" '%s' "${HPC_BLOCK_VALUES["$b|$var"]}"
    fi
  done
  HPC_DIE_CONTEXT=""
  ((b == 0)) || _blocks_where_to HPC_DIE_CONTEXT "$b"
  hpc_settle_job
  J_VENV=$HPC_BLOCKS_VENV # a container block sets it to none (hpc_settle_container)
  hpc_staging_settle
  hpc_settle_container
  HPC_DIE_CONTEXT=""
  J_GROUP=""
}

# hpc_blocks_use_group G: the job of group G (its first block's options).
hpc_blocks_use_group() {
  [[ ${J_GROUP:-} != "$1" ]] || return 0
  hpc_blocks_use_block "${J_GROUP_BLOCK[$1]}"
  J_GROUP=$1
}

# _blocks_key_to VAR: the settled job as one string (equal strings: the same job).
_blocks_key_to() {
  local -n _key=$1
  local var joined
  _key=""
  for var in "${HPC_BLOCK_KEY_VARS[@]}"; do
    _key+=${!var:-}$HPC_BLOCK_SEP
  done
  printf -v joined "%s$HPC_BLOCK_SEP" "${J_SBATCH_OPTIONS[@]}"
  _key+=$'\n'$joined
  printf -v joined "%s$HPC_BLOCK_SEP" "${J_DATA[@]}"
  _key+=$'\n'$joined
}

# hpc_ranges_to VAR NUMBER...: ascending numbers as "0-3 5 7-8".
hpc_ranges_to() {
  local -n _r=$1
  shift
  local lo="" hi="" x
  _r=""
  for x in "$@" ""; do
    if [[ -n $lo && -n $x ]] && ((x == hi + 1)); then
      hi=$x
      continue
    fi
    if [[ -n $lo ]]; then
      _r+=${_r:+ }$lo
      ((hi == lo)) || _r+=-$hi
    fi
    lo=$x hi=$x
  done
}

# hpc_blocks_settle: judge every directive (each one's options as the command line's are
# judged, the file and line named), then group the blocks by their settled job: sets
# J_GROUP_COUNT, J_GROUP_BLOCK (each group's first block), J_GROUP_BLOCKS (its blocks),
# J_GROUP_RANGES (its commands' indices, "0-399 900-999"), J_GROUP_SETTINGS (its settled
# job as chunk fields, for hpc_blocks_chunks) and J_BLOCK_GROUP; the launcher's checks,
# --nodes-arg/--devices-arg and the torchrun rewrite apply per block. Leaves the first
# group's job settled: the plan's. Writes nothing.
hpc_blocks_settle() {
  local b g k key lo hi settings n=${#J_DIRECTIVES[@]}
  local -A group_of=()
  local -a tasks
  HPC_BLOCKS_VENV=$J_VENV
  HPC_BLOCK_SET_VARS=("")
  declare -gA HPC_BLOCK_VALUES=()
  for ((b = 1; b < n; b++)); do
    _blocks_where_to HPC_DIE_CONTEXT "$b"
    _blocks_parse "$b"
  done
  HPC_DIE_CONTEXT=""
  J_GROUP_BLOCK=() J_GROUP_BLOCKS=() J_GROUP_RANGES=() J_BLOCK_GROUP=() J_GROUP_SETTINGS=()
  for ((b = 0; b < n; b++)); do
    hpc_blocks_use_block "$b" # every directive is judged, even one above no command
    lo=${J_BLOCK_FIRST[b]} hi=$((${J_BLOCK_FIRST[b + 1]:-${#J_COMMANDS[@]}} - 1))
    ((lo <= hi)) || continue
    _blocks_key_to key
    if [[ -z ${group_of[$key]:-} ]]; then
      group_of[$key]=${#J_GROUP_BLOCK[@]}
      J_GROUP_BLOCK+=("$b") J_GROUP_BLOCKS+=("") J_GROUP_RANGES+=("")
      _blocks_settings_to settings
      J_GROUP_SETTINGS+=("$settings")
    fi
    g=${group_of[$key]}
    J_GROUP=$g # the job settled now is group g's (the same key)
    J_BLOCK_GROUP[b]=$g
    J_GROUP_BLOCKS[g]+="${J_GROUP_BLOCKS[g]:+ }$b"
    J_GROUP_RANGES[g]+="${J_GROUP_RANGES[g]:+ }$lo"
    ((hi == lo)) || J_GROUP_RANGES[g]+=-$hi
    # The launcher's checks and the count arguments, for this block's commands.
    [[ $J_LAUNCHER == torchrun || -n $J_NODES_ARG$J_DEVICES_ARG ]] || continue
    tasks=()
    for ((k = lo; k <= hi; k++)); do tasks+=("$k"); done
    ((b == 0)) || _blocks_where_to HPC_DIE_CONTEXT "$b"
    hpc_validate_commands "${tasks[@]}"
    hpc_add_count_args "${tasks[@]}"
    hpc_torchrun_commands "${tasks[@]}"
    HPC_DIE_CONTEXT=""
  done
  J_GROUP_COUNT=${#J_GROUP_BLOCK[@]}
  hpc_blocks_use_group 0 # the first group's job, as the rest of the submission expects
}

# _blocks_join_to VAR ARRAY: the items of ARRAY, each ended by HPC_BLOCK_SEP ("" for none).
_blocks_join_to() {
  local -n _joined=$1 _items=$2
  _joined=""
  ((${#_items[@]} == 0)) || printf -v _joined "%s$HPC_BLOCK_SEP" "${_items[@]}"
}

# _blocks_settings_to VAR: the settled job as chunk fields (plan.sh), tab-separated:
# NAME=VALUE for HPC_BLOCK_PLAN_VARS, NAME[]=ITEMS for the lists.
_blocks_settings_to() {
  local -n _settings=$1
  local var joined
  _settings=""
  for var in "${HPC_BLOCK_PLAN_VARS[@]}"; do
    _settings+=${_settings:+$'\t'}$var=${!var-}
  done
  for var in J_SBATCH_OPTIONS J_DATA; do
    _blocks_join_to joined "$var"
    _settings+=$'\t'${var}[]=$joined
  done
}

# hpc_blocks_chunks: J_CHUNKS for every group in order: each group's commands as a subset of
# the lines (arrays.sh's windows of MaxArraySize), with the group's settings that differ
# from the plan's as the chunk's fields; J_CHUNK_GROUP: each chunk's group.
hpc_blocks_chunks() {
  local g k field name extra joined
  local -a all=() groups=() fields
  for ((g = 0; g < J_GROUP_COUNT; g++)); do
    extra=""
    IFS=$'\t' read -r -a fields <<<"${J_GROUP_SETTINGS[g]}"
    for field in "${fields[@]}"; do
      name=${field%%=*}
      if [[ $name == *'[]' ]]; then
        _blocks_join_to joined "${name%'[]'}"
      else
        joined=${!name-}
      fi
      [[ $joined == "${field#*=}" ]] || extra+=$'\t'$field
    done
    J_ARRAY_RANGES=${J_GROUP_RANGES[g]}
    hpc_plan_chunks
    for k in "${!J_CHUNKS[@]}"; do
      all+=("${J_CHUNKS[k]}$extra") groups+=("$g")
    done
  done
  J_ARRAY_RANGES="" J_CHUNKS=("${all[@]}") J_CHUNK_GROUP=("${groups[@]}")
}

# _blocks_origin_to VAR G: where group G's options come from, for a person.
_blocks_origin_to() {
  local -n _o=$1
  local b text
  _o=""
  for b in ${J_GROUP_BLOCKS[$2]}; do
    if ((b == 0)); then
      _o+="${_o:+; }the command line's options"
    else
      text=${J_DIRECTIVES[b]}
      text=${text#"${text%%[![:space:]]*}"}
      [[ -n $text ]] || text="(the command line's options again)"
      _o+="${_o:+; }line ${J_DIRECTIVE_LINES[b]}: #hpc: $text"
    fi
  done
}

# hpc_blocks_dry_run_note: what --dry-run shows of the groups: for each chunk (array),
# which commands (task indices and the configs file's lines) and whose options, its sbatch
# command line and #SBATCH lines. Reads the plan, changes nothing.
hpc_blocks_dry_run_note() {
  local k t i line lineset origin venv_job="" prev
  local -a f lines task_list args argv
  ((OPT_SETUP_VENV == 0)) || venv_job="<venv job id>"
  printf '# Submitted as %d array(s), one per set of options (#hpc: lines of %s), in one\n' \
    "${#J_CHUNKS[@]}" "$J_CONFIGS_FILE"
  printf '# submission; every command keeps its index (HPC_TASK_INDEX). The script shown in\n# full is the first.\n'
  for k in "${!J_CHUNKS[@]}"; do
    hpc_plan_chunk_to f "$k"
    _blocks_origin_to origin "${J_CHUNK_GROUP[k]}"
    lines=()
    IFS=, read -r -a task_list <<<"${f[0]}"
    for t in "${task_list[@]}"; do
      for ((i = ${t%-*}; i <= ${t#*-}; i++)); do lines+=("${J_COMMAND_LINES[i]}"); done
    done
    hpc_ranges_to lineset "${lines[@]}"
    printf '\n# ---- array %d: %d task(s) %s (configs file line(s) %s); %s\n' \
      $((k + 1)) "${#lines[@]}" "${f[0]}" "${lineset// /,}" "$origin"
    prev=""
    ((k == 0)) || prev="<array $k>"
    hpc_plan_sbatch_args_to args "$k" "$venv_job" "$prev"
    hpc_sbatch_argv_to argv "${args[@]}"
    printf -v line '%q ' "${argv[@]}"
    printf '%s\n' "${line% }"
    hpc_plan_script "$k" | grep '^#SBATCH '
  done
  printf '\n'
}

# hpc_blocks_cluster_check: the checks against the cluster (cluster.sh: the Slurm version,
# --time within the partition's MaxTime, --gpu-type) for the request of the chunk in force
# (hpc_plan_each_distinct), a refusal naming its group's first directive.
hpc_blocks_cluster_check() {
  local HPC_DIE_CONTEXT="" b
  if hpc_blocks_several; then
    b=${J_GROUP_BLOCK[J_CHUNK_GROUP[HPC_PLAN_CHUNK]]}
    ((b == 0)) || _blocks_where_to HPC_DIE_CONTEXT "$b"
  fi
  hpc_cluster_check
}
