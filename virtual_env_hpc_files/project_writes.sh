# shellcheck shell=bash
# Job side: what this task wrote into the project folder. A relative output path (nanoGPT's
# out_dir='out', a Trainer's output_dir, Lightning's lightning_logs/, Hydra's outputs/)
# lands in the project, shared by every task, array element and rerun, which then
# overwrite each other, and where the toolkit's requeue sees no progress.
#   - The task's Python processes record each path of the project they write, at any
#     depth (python_hooks/hpc_project_writes.py: an audit hook, nothing of the project
#     read), in <commands file less .commands>.writes/<task>/<node>.<pid>.
#   - After the command, the log names them, and the paths that other tasks of the same
#     submission wrote too (one read of their small lists, never of the project).
#   - What no Python process wrote (a shell redirection, a compiled program) is seen only
#     as a top-level entry of the project that is new since the command started: one
#     read of the top-level folder before and after (never a walk of the tree).
# Sourced by job_runtime.sh.

# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"

HPC_PROJECT_WRITES_HOOKS=${BASH_SOURCE[0]%/*}/python_hooks
# Entries that Python and common tools make beside the code on their own: not outputs.
HPC_PROJECT_WRITES_IGNORE=" __pycache__ .git .ipynb_checkpoints .pytest_cache .mypy_cache .ruff_cache "
# How many paths the log names (then "and N more").
HPC_PROJECT_WRITES_SHOWN=8

# hpc_project_writes_begin: (in the project folder, before the command) the hook on
# PYTHONPATH with this task's folder for its lists (HPC_PROJECT_WRITES_DIR; the task's
# list of an earlier attempt removed), and the project's top-level entries now.
# HPC_LIGHTNING_HOOK=no leaves Python alone: only the top-level check is made then.
hpc_project_writes_begin() {
  hpc_dir_entries_to HPC_PROJECT_TOP_BEFORE .
  [[ -n ${HPC_COMMANDS_FILE:-} && ${HPC_LIGHTNING_HOOK:-yes} != no ]] || return 0
  hpc_job_path_to HPC_PROJECT_WRITES_DIR writes
  export HPC_PROJECT_WRITES_DIR
  # (an earlier attempt's list is there only when the program wrote into the project: no
  # rm, a process, for every task otherwise)
  local list=$HPC_PROJECT_WRITES_DIR/${HPC_TASK_INDEX:-0}
  [[ -n ${HPC_PACK:-} ]] || { [[ ! -e $list && ! -L $list ]] || rm -rf -- "$list" 2>/dev/null; }
  case ":${PYTHONPATH:-}:" in
    *":$HPC_PROJECT_WRITES_HOOKS:"*) ;;
    *) export PYTHONPATH=$HPC_PROJECT_WRITES_HOOKS${PYTHONPATH:+:$PYTHONPATH} ;;
  esac
}

# hpc_project_writes_of_to ARRAY TASK: the paths task TASK's Python processes wrote
# (sorted, each once).
hpc_project_writes_of_to() {
  local -n _pw=$1
  _pw=()
  [[ -n ${HPC_PROJECT_WRITES_DIR:-} && -d $HPC_PROJECT_WRITES_DIR/$2 ]] || return 0
  mapfile -t _pw < <(cat -- "$HPC_PROJECT_WRITES_DIR/$2"/* 2>/dev/null | LC_ALL=C sort -u)
}

# _hpc_project_writes_list_to VAR PATH...: "a, b, c and N more" (the first few), sorted
# PATHs given (relative to the project, the current folder); a folder made (PATH/) is left
# out when a path in it is named, and a path that is no longer there (renamed, removed).
_hpc_project_writes_list_to() {
  local -n _l=$1
  shift
  local -a keep=()
  local i j
  for ((i = 1; i <= $#; i++)); do
    [[ ${!i} == */ && $i -lt $# ]] && { j=$((i + 1)) && [[ ${!j} == "${!i}"* ]]; } && continue
    [[ -e ${!i} || -L ${!i} ]] || continue # (written, then renamed or removed)
    keep+=("${!i}")
  done
  local n=${#keep[@]}
  printf -v _l '%s, ' "${keep[@]:0:HPC_PROJECT_WRITES_SHOWN}"
  _l=${_l%, }
  ((n <= HPC_PROJECT_WRITES_SHOWN)) || _l+=" and $((n - HPC_PROJECT_WRITES_SHOWN)) more"
}

# hpc_project_writes_since START: (in the project folder, after the command) the log
# names what this task wrote into the project (its Python processes' lists), what other
# tasks of this submission wrote too, and top-level entries new since the command began
# that no Python process of it wrote. START: the command's start ($EPOCHREALTIME).
hpc_project_writes_since() {
  local entry name list="" new="" text k task
  local -a mine=() theirs=() both=() shared=() tasks=() now=()
  local -A before=() tops=()
  hpc_project_writes_of_to mine "${HPC_TASK_INDEX:-0}"
  [[ -z ${HPC_PACK:-} ]] || mine=() # (a packed job's lines have their own lists: hpc status)
  for entry in "${mine[@]}"; do tops[${entry%%/*}]=1; done
  for entry in "${HPC_PROJECT_TOP_BEFORE[@]}"; do before[$entry]=1; done
  hpc_dir_entries_to now .
  for name in "${now[@]}"; do
    [[ -z ${before[$name]:-} && -z ${tops[$name]:-} ]] || continue
    [[ $HPC_PROJECT_WRITES_IGNORE != *" $name "* && $name != *.egg-info ]] || continue
    [[ -d $name ]] && name+=/
    new+="${new:+, }$name"
  done
  if ((${#mine[@]})); then
    _hpc_project_writes_list_to list "${mine[@]}"
    # shellcheck disable=SC2016 # the variables' names, for the user's line
    [[ -z $list ]] || hpc_log "warning: the program wrote into the project folder $PWD: $list. Every task, array element and rerun of this experiment writes to that same place and overwrites the others (and the toolkit's requeue sees no progress there). Pass this task's own folder instead: \$HPC_CHECKPOINT_DIR (checkpoints; a requeued attempt resumes from there) or \$HPC_RESULTS_DIR (results, copied back to $HPC_EXP_DIR/results), e.g. --out_dir=\$HPC_CHECKPOINT_DIR on the line, or os.environ[\"HPC_CHECKPOINT_DIR\"] in the script (README: Recipes)"
    # The same paths in other tasks' lists: they overwrite one another.
    for k in "$HPC_PROJECT_WRITES_DIR"/*/; do
      task=${k%/}
      task=${task##*/}
      [[ $task =~ ^[0-9]+$ && $task != "${HPC_TASK_INDEX:-0}" ]] || continue
      hpc_project_writes_of_to theirs "$task"
      ((${#theirs[@]})) || continue
      # (Files only: two tasks that made the same folder need not have clashed.)
      mapfile -t both < <(LC_ALL=C comm -12 <(printf '%s\n' "${mine[@]}") <(printf '%s\n' "${theirs[@]}") | grep -v '/$')
      ((${#both[@]})) || continue
      tasks+=("$task")
      shared+=("${both[@]}")
    done
    if ((${#tasks[@]})); then
      mapfile -t shared < <(printf '%s\n' "${shared[@]}" | LC_ALL=C sort -u)
      _hpc_project_writes_list_to list "${shared[@]}"
      text=${tasks[*]}
      hpc_log "warning: task(s) ${text// /, } of this submission wrote the same path(s) in the project as this task: $list. One overwrote the other's: give each task its own folder (\$HPC_RESULTS_DIR, \$HPC_CHECKPOINT_DIR). hpc status lists them all"
    fi
  fi
  [[ -z $new ]] ||
    hpc_log "warning: new in the project folder $PWD since the command began, written by no Python process of this task (a shell redirection or another program of the line, or someone else): $new. If the line made them, pass its task's own folder instead (\$HPC_RESULTS_DIR, \$HPC_CHECKPOINT_DIR)"
  return 0
}
