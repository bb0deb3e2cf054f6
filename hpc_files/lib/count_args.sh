# shellcheck shell=bash
# --nodes-arg NAME / --devices-arg NAME: the node and process counts written into each
# command, where the program's own arguments end (before a '# comment', a ';', '&&', '|'
# ...), not after the line's raw text, which a comment or a second command would swallow.
# Done at submission: the commands file, --dry-run and the job all hold the final command.
# Then, for the torchrun launcher, each 'python script.py args' line becomes the torchrun
# line the job runs (hpc_torchrun_commands); what only the job knows (the rendezvous
# address, the job id) stays a shell variable that the task's bash expands.

# Command words that only prepare the program's run; the arguments go to the program after
# them (cd data && python train.py: to python).
HPC_SETUP_WORDS=" cd pushd popd export source . set unset ulimit umask module ml echo printf mkdir true : "

# hpc_add_count_args [INDEX...]: rewrite J_COMMANDS with " --NODES_ARG N --DEVICES_ARG P"
# inserted; into the commands INDEX... only (a resource block's: blocks.sh), else all.
hpc_add_count_args() {
  [[ -n $J_NODES_ARG || -n $J_DEVICES_ARG ]] || return 0
  local extra="" k out
  local -a which=("$@")
  (($#)) || which=("${!J_COMMANDS[@]}")
  [[ -z $J_NODES_ARG ]] || extra+=" --$J_NODES_ARG $J_NODES"
  [[ -z $J_DEVICES_ARG ]] || extra+=" --$J_DEVICES_ARG $J_PROCS_PER_NODE"
  for k in "${which[@]}"; do
    _count_args_insert_to out "${J_COMMANDS[k]}" "$extra" ||
      die "line ${J_COMMAND_LINES[k]:-$((k + 1))} of the commands: cannot tell where the program's arguments end, to add '${extra# }' (--nodes-arg/--devices-arg): write them into the line yourself, or make it one plain command such as 'python train.py ...'"
    J_COMMANDS[k]=$out
  done
}

# _count_args_insert_to VAR LINE EXTRA: LINE with EXTRA at the end of the program's simple
# command. A small lexer of bash's quoting (' " \ $( ) ` and comments) finds the segments
# between control operators (; & | && || and a comment) at the top level. Returns 1 when
# the program's command is a compound one ( ( ), { }, if, for ...), which takes no arguments.
_count_args_insert_to() {
  local -n _res=$1
  local line=$2 extra=$3 i c prev=" " state="" depth=0 n=${#2}
  local -a starts=(0) ends=()
  for ((i = 0; i < n; i++)); do
    c=${line:i:1}
    case $state in
      sq)
        [[ $c != "'" ]] || state=""
        ;;
      dq)
        if [[ $c == \\ ]]; then
          ((++i))
        elif [[ $c == '"' ]]; then
          state=""
        fi
        ;;
      bq)
        if [[ $c == \\ ]]; then ((++i)); elif [[ $c == '`' ]]; then state=""; fi
        ;;
      *)
        case $c in
          \\) ((++i)) ;;
          "'") state=sq ;;
          '"') state=dq ;;
          '`') state=bq ;;
          '(') ((++depth)) ;;
          ')') ((depth == 0)) || ((--depth)) ;;
          '#')
            if ((depth == 0)) && [[ $prev == [[:space:]\;\&\|] ]]; then
              ends+=("$i")
              break
            fi
            ;;
          ';' | '&' | '|')
            if ((depth == 0)); then
              # '>&' and '&>' are redirections, not control operators.
              if [[ $c == '&' && ($prev == '>' || $prev == '<' || ${line:i+1:1} == '>') ]]; then
                :
              else
                ends+=("$i")
                # the operator may be two characters (&&, ||, ;;, |&)
                [[ ${line:i+1:1} != [\;\&\|] ]] || ((++i))
                starts+=($((i + 1)))
              fi
            fi
            ;;
        esac
        ;;
    esac
    prev=$c
  done
  ((${#ends[@]} == ${#starts[@]})) || ends+=("$n")
  # The program's segment: the first that runs python (or a .py, torchrun ...), else the
  # first that is not a setup word, else the last.
  local k pick=-1 seg word
  for k in "${!starts[@]}"; do
    seg=${line:starts[k]:ends[k]-starts[k]}
    _count_args_command_word_to word "$seg"
    if [[ $word =~ (^|/)(python[0-9.]*|torchrun|accelerate|deepspeed)$ || $word == *.py ]]; then
      pick=$k
      break
    fi
    if ((pick < 0)) && [[ -n $word && $HPC_SETUP_WORDS != *" $word "* ]]; then pick=$k; fi
  done
  ((pick >= 0)) || pick=$((${#starts[@]} - 1))
  seg=${line:starts[pick]:ends[pick]-starts[pick]}
  _count_args_command_word_to word "$seg"
  case $word in
    '' | '('* | '{' | if | for | while | until | case | select | function | '[[') return 1 ;;
  esac
  local end=${ends[pick]}
  # Before the blanks that end the segment.
  while ((end > starts[pick])) && [[ ${line:end-1:1} == [[:space:]] ]]; do ((--end)); done
  _res=${line:0:end}$extra${line:end}
}

# _count_args_command_word_to VAR SEGMENT: the segment's first word after VAR=value words.
_count_args_command_word_to() {
  local -n _w=$1
  local seg=$2
  _w=""
  while [[ $seg =~ ^[[:space:]]*([A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*)[[:space:]]+(.*)$ ]]; do
    seg=${BASH_REMATCH[2]}
  done
  [[ $seg =~ ^[[:space:]]*([^[:space:]]+) ]] && _w=${BASH_REMATCH[1]}
  return 0
}

# hpc_line_launcher_to VAR LINE: VAR = the launcher LINE's program is itself (torchrun,
# 'python -m torch.distributed.run', 'accelerate launch', deepspeed ...), "" when none: such
# a line starts its own processes, so a launcher that starts one task per process (or its
# own torchrun) must not run it again on top (nested worlds).
hpc_line_launcher_to() {
  local -n _ll=$1
  local py='([^[:space:]]*/)?python[0-9.]*[[:space:]]+(-u[[:space:]]+)?-m[[:space:]]+'
  local re="(^|[;&|(])[[:space:]]*([A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*[[:space:]]+)*"
  re+="(([^[:space:]]*/)?(torchrun|deepspeed|accelerate[[:space:]]+launch)|${py}(torch\.distributed\.(run|launch)|accelerate\.commands\.launch|deepspeed\.launcher\.runner))([[:space:]]|$)"
  _ll=""
  [[ $2 =~ $re ]] || return 0
  _ll=${BASH_REMATCH[3]}
  _ll=${_ll//[[:space:]]/ }
  while [[ $_ll == *"  "* ]]; do _ll=${_ll//  / }; done
}

# hpc_refuse_launcher_lines [INDEX...]: under a launcher that starts the processes itself
# (lightning, script: one task per process; torchrun: its own torchrun per node), refuse
# a line that is a launcher, naming the launcher to use instead; -d none and dask run the
# line once, as it is.
hpc_refuse_launcher_lines() {
  [[ $J_LAUNCHER =~ ^(lightning|script|torchrun)$ ]] || return 0
  local k which found
  local -a idx=("$@")
  (($#)) || idx=("${!J_COMMANDS[@]}")
  for k in "${idx[@]}"; do
    hpc_line_launcher_to found "${J_COMMANDS[k]}"
    [[ -n $found ]] || continue
    which="command $((k + 1)) starts '$found', a launcher that starts the program's processes itself"
    case "$J_LAUNCHER:$found" in
      torchrun:*accelerate*)
        die "$which, and -d torchrun starts torchrun on every node: write the line as 'python SCRIPT ARGS' (Accelerator() takes its ranks from torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; 'accelerate launch' options as ACCELERATE_* variables on the line, e.g. ACCELERATE_MIXED_PRECISION=bf16), or keep 'accelerate launch' on one node with -d none: ${J_COMMANDS[k]}"
        ;;
      torchrun:*)
        die "$which, and -d torchrun writes that torchrun line itself from the job's nodes and processes: write the line as 'python SCRIPT ARGS' (without the launcher and its options), or keep it on one node with -d none: ${J_COMMANDS[k]}"
        ;;
      *)
        die "$which, and -d $J_LAUNCHER runs the line in each of the job's tasks (one per process): every task would start its own processes, separate worlds. Use -d torchrun with the line written as 'python SCRIPT ARGS' (the toolkit writes the torchrun line: nodes, processes, rendezvous), or keep the line on one node with -d none: ${J_COMMANDS[k]}"
        ;;
    esac
  done
}

# hpc_torchrun_line_to VAR LINE: LINE, a laptop line "[VAR=x ...] python [-u] script.py
# args" or "... python [-u] -m module args", as the torchrun line of this plan's shape
# (J_NODES x J_PROCS_PER_NODE). Returns 1 when LINE has not that form. The one parser of
# the form: validate.sh checks the lines with it, hpc_torchrun_commands rewrites them.
hpc_torchrun_line_to() {
  local -n _tr=$1
  local re='^[[:space:]]*(([A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*[[:space:]]+)*)([^[:space:]]*/)?python[0-9.]*[[:space:]]+(-u[[:space:]]+)?((-m[[:space:]]|[^-[:space:]]).*)$'
  local env_prefix rest opts
  [[ $2 =~ $re ]] || return 1
  env_prefix=${BASH_REMATCH[1]} rest=${BASH_REMATCH[5]}
  [[ -z ${BASH_REMATCH[4]} ]] || env_prefix+="PYTHONUNBUFFERED=1 "
  if ((J_NODES > 1)); then
    # shellcheck disable=SC2016 # expanded by the job's tasks: the first node's address
    opts="--nnodes=$J_NODES --nproc-per-node=$J_PROCS_PER_NODE --rdzv-backend=c10d"
    # shellcheck disable=SC2016
    opts+=' --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT --rdzv-id=hpc-$SLURM_JOB_ID'
  else
    opts="--standalone --nproc-per-node=$J_PROCS_PER_NODE"
  fi
  _tr="${env_prefix}torchrun $opts $rest"
}

# hpc_torchrun_commands [--check] [INDEX...]: with the torchrun launcher, every J_COMMANDS
# line (the lines INDEX... only: a resource block's, blocks.sh) as its torchrun line (after
# the count arguments, which go to the script); with --check, only refuse a line that has
# not the form (hpc_validate_commands), rewriting nothing.
hpc_torchrun_commands() {
  [[ $J_LAUNCHER == torchrun ]] || return 0
  local k out check=0
  [[ ${1:-} != --check ]] || { check=1; shift; }
  local -a which=("$@")
  (($#)) || which=("${!J_COMMANDS[@]}")
  for k in "${which[@]}"; do
    hpc_torchrun_line_to out "${J_COMMANDS[k]}" ||
      die "command $((k + 1)) is not 'python script.py ...' or 'python -m module ...', which the torchrun launcher turns into 'torchrun ... script.py ...': ${J_COMMANDS[k]}"
    ((check)) || J_COMMANDS[k]=$out
  done
}
