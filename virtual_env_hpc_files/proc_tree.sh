# shellcheck shell=bash
# Job side: pass the wall-time (or preemption) warning to the processes of the user's
# program that can take it, read from /proc (Linux): SIGUSR1 to every process that
# handles SIGUSR1; if none does, SIGTERM to every process that handles SIGTERM; if none
# does, nothing (the program runs on until the end of the grace period). A process that
# handles neither would be killed by either signal, so it never gets one here. Container
# runtimes (Singularity/Apptainer and the tests' bubblewrap stand-in) and the toolkit's own
# shells between the program and us pass signals on themselves: they are looked through,
# never signalled. Sourced by requeue.sh and task_wrapper.sh; a library (no shell options).
#
#   bash proc_tree.sh warn PID      deliver the warning below PID (PID included); prints
#                                   what was sent, exit 1 when nobody could take it
#   bash proc_tree.sh tree PID      PID and its descendants, one "pid handles comm" a line

# Signal masks in /proc/PID/status (bit N-1 is signal N).
HPC_PROC_USR1_BIT=$((1 << 9))
HPC_PROC_TERM_BIT=$((1 << 14))

# hpc_proc_children_table_to ASSOC: ASSOC[ppid]="child child ..." for every process now.
hpc_proc_children_table_to() {
  local -n _kids=$1
  local stat line rest pid ppid
  _kids=()
  for stat in /proc/[0-9]*/stat; do
    { IFS= read -r line <"$stat"; } 2>/dev/null || continue
    rest=${line##*) } # comm may hold spaces and parentheses: the fields after the last ')'
    [[ $rest != Z* ]] || continue # "STATE PPID ...": a zombie cannot take a signal
    ppid=${rest#* }
    ppid=${ppid%% *}
    pid=${stat#/proc/}
    # shellcheck disable=SC2004 # an associative array (by name)
    _kids[$ppid]+="${pid%/stat} "
  done
}

# hpc_proc_handles_to VAR PID: VAR="usr1", "term" or "none": what PID catches (SigCgt).
# No subshell: the warning races the program's own end (a DDP rank stops as soon as
# another rank took its warning), and a fork per process is slow on a loaded node.
# The file is read to its end, never left early: bash's read keeps what it read ahead in
# one buffer shared by every file and gives it back with lseek, which fails on the status
# of a process that ended meanwhile; what stayed in the buffer then came out of the next
# read of another file (a program's name read as "CapInh: 0000000000000000").
hpc_proc_handles_to() {
  local -n _handles=$1
  local line cgt=""
  while IFS= read -r line; do
    [[ $line != SigCgt:* ]] || cgt=${line##*[[:space:]]}
  done 2>/dev/null <"/proc/$2/status"
  if [[ -z $cgt ]] || hpc_proc_handlers_not_its_own "$2"; then
    _handles=none
  elif (((16#$cgt) & HPC_PROC_USR1_BIT)); then
    _handles=usr1
  elif (((16#$cgt) & HPC_PROC_TERM_BIT)); then
    _handles=term
  else
    _handles=none
  fi
}

# hpc_proc_handlers_not_its_own PID: PID is Node.js, which catches SIGUSR1 and SIGTERM
# itself whatever the program does: SIGUSR1 opens its inspector (a debugger on
# 127.0.0.1:9229, where any user of the node could run code as you), SIGTERM ends it. Its
# handlers cannot be told from the program's, so it is taken as handling nothing: no
# warning; SIGTERM at the end of the grace period (a handler of the program's may save
# then; SIGKILL HPC_KILL_AFTER s later). Known by its name, or by its program's when the
# name is its main thread's (Node 24 calls it "MainThread"). The command line is read to
# its end (hpc_proc_handles_to says why).
hpc_proc_handlers_not_its_own() {
  local comm="" arg="" arg0=""
  { IFS= read -r comm <"/proc/$1/comm"; } 2>/dev/null
  [[ $comm != node && $comm != nodejs ]] || return 0
  {
    IFS= read -r -d '' arg0
    while IFS= read -r -d '' arg; do :; done
  } 2>/dev/null <"/proc/$1/cmdline"
  arg0=${arg0##*/}
  [[ $arg0 == node || $arg0 == nodejs ]]
}

# hpc_proc_passes_on PID: true for processes that pass signals on themselves (container
# runtimes, the toolkit's launch shells), and for torchrun, whose SIGTERM handler stops
# its workers: the warning is for the workers, and a worker that handles nothing must be
# able to finish its work in the grace period (it is stopped at its end if it has not).
# Looked through, not signalled.
hpc_proc_passes_on() {
  local comm="" arg0="" arg1="" arg2="" rest
  { IFS= read -r comm <"/proc/$1/comm"; } 2>/dev/null
  case $comm in
    bwrap | starter | starter-suid | squashfuse | squashfuse_ll | fuse-overlayfs | conmon | torchrun) return 0 ;;
  esac
  { IFS= read -r -d '' arg0 && IFS= read -r -d '' arg1 && IFS= read -r -d '' arg2; } 2>/dev/null <"/proc/$1/cmdline"
  for rest in "${arg0##*/}" "${arg1##*/}"; do
    case $rest in
      singularity | apptainer | run-singularity | container.sh | run_line.sh | task_wrapper.sh | torchrun) return 0 ;;
    esac
  done
  [[ $arg1 == -m && ($arg2 == torch.distributed.run || $arg2 == torch.distributed.launch) ]]
}

# hpc_proc_tree_to ARRAY ROOT: ROOT and its descendants, parents first.
hpc_proc_tree_to() {
  local -n _tree=$1
  local -A kids
  local i=0
  hpc_proc_children_table_to kids
  _tree=("$2")
  while ((i < ${#_tree[@]})); do
    # shellcheck disable=SC2206 # a space-separated list of pids
    _tree+=(${kids[${_tree[i]}]:-})
    ((++i))
  done
}

# hpc_proc_warn_to VAR ROOT [SEEN_VAR]: deliver the warning below ROOT; VAR says what
# was sent ("SIGUSR1 to 123 (python3) 130 (python3)", "" when nobody handles it). Returns 1
# then. SEEN_VAR: the program's processes looked at ("123 (python3) 130 (python3)"; the
# toolkit's shells and container runtimes left out), for saying what handled nothing.
hpc_proc_warn_to() {
  local -n _sent=$1
  local _seen_none=""
  local -n _seen=${3:-_seen_none}
  local pid comm handles
  local -a tree usr1=() term=() targets
  _sent="" _seen=""
  hpc_proc_tree_to tree "$2"
  for pid in "${tree[@]}"; do
    ! hpc_proc_passes_on "$pid" || continue
    hpc_proc_handles_to handles "$pid"
    case $handles in
      usr1) usr1+=("$pid") ;;
      term) term+=("$pid") ;;
      *)
        comm='?'
        { IFS= read -r comm <"/proc/$pid/comm"; } 2>/dev/null
        _seen+="${_seen:+ }$pid ($comm)"
        ;;
    esac
  done
  if ((${#usr1[@]})); then
    targets=("${usr1[@]}") _sent=SIGUSR1
  elif ((${#term[@]})); then
    targets=("${term[@]}") _sent=SIGTERM
  else
    return 1
  fi
  for pid in "${targets[@]}"; do
    # The name first: a program that saves quickly is gone right after the signal.
    comm='?'
    { IFS= read -r comm <"/proc/$pid/comm"; } 2>/dev/null
    kill -s "${_sent#SIG}" "$pid" 2>/dev/null || continue
    _sent+=" $pid ($comm)"
  done
  [[ $_sent == *' '* ]] || { _sent="" && return 1; }
  _sent=${_sent/ / to }
  return 0
}

# hpc_proc_warn_loop ROOT SECONDS LOG_FN [MARK]: try every 0.5 s until a process of the
# program takes the warning (it may install its handler a little after starting) or
# SECONDS pass; LOG_FN MESSAGE says what happened. MARK: a file made once a process has
# taken it (the attempt's verdict reads it: requeue.sh). Run it in the background.
hpc_proc_warn_loop() {
  local root=$1 until=$((SECONDS + $2)) log=$3 mark=${4:-} sent seen told=0
  while ((SECONDS < until)) && kill -0 "$root" 2>/dev/null; do
    if hpc_proc_warn_to sent "$root" seen; then
      [[ -z $mark ]] || { : >"$mark"; } 2>/dev/null || "$log" "could not write $mark"
      "$log" "warning passed on as $sent"
      return 0
    fi
    # Which processes, so that a program's handler installed late, or put back to the
    # default before the program ends, can be told from a process that was not looked at.
    ((told)) || "$log" "no process of the program handles SIGUSR1 or SIGTERM (yet; seen: ${seen:-none of its own}): it gets no signal until the grace period ends"
    told=1
    sleep 0.5
  done
  ((told == 0)) || kill -0 "$root" 2>/dev/null ||
    "$log" "the program ended before any of its processes handled the warning"
  return 0
}

# --- processes that escape the program (issue 32) ------------------------------------------
# A program can start processes outside its process group and session (setsid, a daemon's
# double fork): the signals for the program's group miss them, and on a cluster without a
# job cgroup Slurm does not know them either, so they outlived every attempt (and kept
# writing into $HPC_CHECKPOINT_DIR). The program starts with HPC_PROGRAM_TOKEN, a random
# word of this attempt, in its environment, which every process it starts inherits: at the
# program's end, this user's processes that still hold it are ended (hpc_escapees_end).
# A packed line's program holds the attempt's token and ".LINE" (pack.sh): the line's own
# are ended when the line ends, and the attempt's match every line's.

# hpc_escapees_token: HPC_PROGRAM_TOKEN, made once per attempt (not exported here: only the
# program gets it, hpc_spawn_command).
hpc_escapees_token() {
  [[ -z ${HPC_PROGRAM_TOKEN:-} ]] || return 0
  local r
  # 64 random bits: bash's own (5.1+: getrandom), else od's (no process in every task)
  if [[ -n ${SRANDOM:-} ]]; then
    printf -v r '%08x%08x' "$SRANDOM" "$SRANDOM"
  else
    r=$(od -An -tx8 -N8 /dev/urandom 2>/dev/null) || r=$RANDOM$RANDOM$RANDOM$$
  fi
  HPC_PROGRAM_TOKEN=${r//[[:space:]]/}.${SLURM_JOB_ID:-0}
}

# hpc_escapees_begin: before the program (or the packed lines) starts: the attempt's token,
# and hpc_escapees_end among the exit hooks (once).
hpc_escapees_begin() {
  hpc_escapees_token
  [[ " ${HPC_EXIT_HOOKS[*]} " == *" hpc_escapees_end "* ]] || HPC_EXIT_HOOKS=(hpc_escapees_end "${HPC_EXIT_HOOKS[@]}")
}

# hpc_escapees_to ARRAY: this user's processes whose environment holds this attempt's
# HPC_PROGRAM_TOKEN (or it and ".LINE") and this job's SLURM_JOB_ID (none outside Slurm),
# but this shell. Another job the program submitted (sbatch passes the token on: its batch
# shell's first environment holds it, whatever that shell unsets) is not the program's: it
# was ended with it when it ran on the same node. No fork per process: /proc read by bash.
hpc_escapees_to() {
  local -n _esc=$1
  local env_file pid want=$'\n'"HPC_PROGRAM_TOKEN=${HPC_PROGRAM_TOKEN:-}" IFS=$'\n' all
  local job=$'\n'"SLURM_JOB_ID=${SLURM_JOB_ID:-}"$'\n'
  local -a envs
  _esc=()
  [[ -n ${HPC_PROGRAM_TOKEN:-} ]] || return 0
  for env_file in /proc/[0-9]*/environ; do
    [[ -O $env_file ]] || continue
    pid=${env_file#/proc/}
    pid=${pid%/environ}
    [[ $pid != "$$" && $pid != "$BASHPID" ]] || continue
    { mapfile -d '' envs <"$env_file"; } 2>/dev/null || continue
    # One match over the whole environment, not a test per variable: a machine where the
    # user runs hundreds of processes made this scan most of a short task's end.
    all=$'\n'"${envs[*]}"$'\n'
    [[ $all == *"$want"$'\n'* || $all == *"$want".* ]] || continue
    if [[ -n ${SLURM_JOB_ID:-} ]]; then
      [[ $all == *"$job"* ]] || continue
    else
      [[ $all != *$'\n'SLURM_JOB_ID=* ]] || continue
    fi
    _esc+=("$pid")
  done
}

# hpc_escapees_end [PREFIX]: end the processes the program started that still run now
# that it has ended (TERM, then KILL 2 s later), saying which (PREFIX before the log line:
# "line I: "). Run once the program has ended (hpc_program_ended), and as the first exit
# hook: its own process group has been ended by then, so what is left escaped it.
hpc_escapees_end() {
  local -a pids
  local pid comm list="" waited
  hpc_escapees_to pids
  ((${#pids[@]})) || return 0
  for pid in "${pids[@]}"; do
    comm='?'
    { IFS= read -r -d '' comm <"/proc/$pid/cmdline"; } 2>/dev/null # (its argv[0])
    list+="${list:+, }$pid (${comm:0:60})"
    kill -TERM "$pid" 2>/dev/null
  done
  hpc_log "${1:-}processes the program started outside its process group still ran when it ended: $list: ended now (they end with the attempt; docs/requeue.md)"
  for ((waited = 0; waited < 20; waited++)); do
    hpc_escapees_to pids
    ((${#pids[@]})) || return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null
  return 0
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  case ${1:-}/${2:-} in
    warn/[0-9]*)
      hpc_proc_warn_to what "$2" || exit 1
      printf '%s\n' "$what"
      ;;
    tree/[0-9]*)
      hpc_proc_tree_to pids "$2"
      for pid in "${pids[@]}"; do
        comm='?'
        { IFS= read -r comm <"/proc/$pid/comm"; } 2>/dev/null
        hpc_proc_handles_to handles "$pid"
        printf '%s %s %s\n' "$pid" "$handles" "$comm"
      done
      ;;
    *)
      printf 'usage: proc_tree.sh warn|tree PID\n' >&2
      exit 2
      ;;
  esac
fi
