#!/bin/bash
# Job side: the stall watch, one per node of a job (docs/requeue.md, "Stalls"). Every few
# seconds it asks whether the program has made progress: the job's log grew, a file was
# written under $HPC_CHECKPOINT_DIR, this node's $HPC_RESULTS_DIR or a rank's
# $HPC_HEARTBEAT. A few stats and a `find -newer ... -quit` each time: nothing is read.
# When nothing moved for HPC_STALL_TIMEOUT_S seconds, the first node to see it claims the
# stall ($HPC_ATTEMPT_DIR/stalled), says so in the log with the rank and node, and tells
# the batch shell (SIGUSR2), which stops the program (longruns.sh). Every node's watch then
# shows where the program's processes on its node are (py-spy when the venv has it, else
# each process's state and kernel wait channel) before the program is stopped.
#
#   stall_watch.sh BATCH_NODE BATCH_PID JOB
# (run as a program on each node by a watch step, or sourced in a subshell of the batch
# shell with these arguments on a one-node job: hpc_start_stall_watch)
# BATCH_NODE and BATCH_PID: the batch shell, signalled directly from its own node and
# through `scancel --batch --signal=USR2 JOB` from any other. Ends quietly once
# $HPC_ATTEMPT_DIR/stall.stop exists, or on SIGTERM. Settings from the environment:
# HPC_STALL_TIMEOUT_S (seconds), HPC_STALL_TIMEOUT (as the user wrote it), HPC_STALL_LOG
# (the job's log file, "" when it is not a file), HPC_ATTEMPT_DIR, HPC_CHECKPOINT_DIR,
# HPC_RESULTS_DIR, HPC_KILL_AFTER.
# HPC_STALL_LINE=I: the watch of packed line I (pack.sh), on the batch node: BATCH_PID is
# then the line's process (its process group); its files carry ".I" (stalled.I,
# stall.stop.I, heartbeat.I/, pids.I/), and on a stall it stops the line itself (SIGTERM,
# then SIGKILL HPC_KILL_AFTER seconds later); the batch shell judges the line when it ends.
set -u
batch_node=${1:?usage: stall_watch.sh BATCH_NODE BATCH_PID JOB}
batch_pid=${2:?usage: stall_watch.sh BATCH_NODE BATCH_PID JOB}
job=${3:?usage: stall_watch.sh BATCH_NODE BATCH_PID JOB}
# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"
# shellcheck source=virtual_env_hpc_files/proc_tree.sh
source "${BASH_SOURCE[0]%/*}/proc_tree.sh"

timeout_s=${HPC_STALL_TIMEOUT_S:?}
attempt=${HPC_ATTEMPT_DIR:?}
line=${HPC_STALL_LINE:-}
[[ $line =~ ^[0-9]*$ ]] || exit 2
sfx=${line:+.$line}
stop=$attempt/stall.stop$sfx claim=$attempt/stalled$sfx
beats=$attempt/heartbeat$sfx pids_dir=$attempt/pids$sfx
hpc_node_name_to node

# How often to look: a tenth of the timeout, between 1 and 10 s.
period=$((timeout_s / 10))
((period >= 1)) || period=1
((period <= 10)) || period=10

# This node's results folder: the first node's is the batch shell's; another node's is
# under its own $SLURM_TMPDIR (node_results.sh).
results=${HPC_RESULTS_DIR:-}
if [[ -n $results && ${SLURM_NODEID:-0} =~ ^[1-9][0-9]*$ && -n ${HPC_RESULTS_DEST:-} ]]; then
  results=""
  hpc_node_tmpdir_to tmp && [[ -n $tmp ]] && results=$tmp/${HPC_RESULTS_FOLDER:-results}
fi

# Two marker files on this node's local disk: what was there at the last look is older.
# Made at the first look, a period in (a program that ends sooner, as most array tasks of
# a sweep do, costs the watch no mktemp and no rm: each is a process).
mark_dir="" ref="" next=""
marks_make() {
  mark_dir=$(mktemp -d "${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/.hpc_stall.XXXXXX" 2>/dev/null) ||
    mark_dir=$(mktemp -d) || exit 0
  ref=$mark_dir/ref next=$mark_dir/next
}
trap '[[ -z $mark_dir ]] || rm -rf -- "$mark_dir"' EXIT
trap 'exit 0' TERM INT
trap '' USR1 USR2 URG HUP
# A pause without a sleep process: read with a timeout on a pipe nothing writes to.
exec {nap_fd}<> <(:)

# progress: something moved since the last look ($ref).
progress() {
  [[ -n ${HPC_STALL_LOG:-} && $HPC_STALL_LOG -nt $ref ]] && return 0
  local dir
  for dir in "$beats" "${HPC_CHECKPOINT_DIR:-}" "$results"; do
    [[ -n $dir && -d $dir ]] || continue
    [[ -z $(find "$dir" -newer "$ref" ! -name '.hpc_*' -print -quit 2>/dev/null) ]] || return 0
  done
  return 1
}

# ranks_here_to VAR: "rank 0", "ranks 2 3": the ranks whose program runs on this node.
ranks_here_to() {
  local -n _r=$1
  local f rank list=()
  for f in "$pids_dir/$node".*; do
    [[ -f $f ]] || continue
    IFS= read -r rank <"$f" 2>/dev/null || continue
    list+=("${rank#rank }")
  done
  _r="rank ?"
  ((${#list[@]})) || return 0
  _r="rank ${list[*]}"
  ((${#list[@]} == 1)) || _r="ranks ${list[*]}"
}

# who_to VAR: the rank and node the stall is put on: the rank whose $HPC_HEARTBEAT is the
# oldest, when ranks touch theirs; else the ranks on this node.
who_to() {
  local -n _who=$1
  local oldest
  [[ -z $line ]] || { _who="line $line on $node" && return 0; }
  oldest=$(find "$beats" -type f -printf '%T@ %f\n' 2>/dev/null | sort -n | head -n 1)
  if [[ $oldest =~ ^([0-9]+)[0-9.]*\ (.+)\.rank([0-9]+)$ ]]; then
    local now
    printf -v now '%(%s)T' -1
    _who="rank ${BASH_REMATCH[3]} on ${BASH_REMATCH[2]} (its \$HPC_HEARTBEAT is the oldest: touched $((now - BASH_REMATCH[1])) s ago)"
    return 0
  fi
  local ranks
  ranks_here_to ranks
  _who="$ranks on $node"
}

# dump: where each process of the program on this node is.
dump() {
  local f root rank pid line rest state ppid wchan comm args spy=""
  local -a tree
  command -v py-spy >/dev/null && spy=$(command -v py-spy)
  local python_seen=0
  for f in "$pids_dir/$node".*; do
    [[ -f $f ]] || continue
    root=${f##*.}
    IFS= read -r rank <"$f" 2>/dev/null || rank="rank ?"
    [[ $root =~ ^[0-9]+$ && -d /proc/$root ]] || continue
    hpc_log "stalled: $rank on $node: its processes (pid ppid state wchan: command)"
    hpc_proc_tree_to tree "$root"
    for pid in "${tree[@]}"; do
      { IFS= read -r line <"/proc/$pid/stat"; } 2>/dev/null || continue
      rest=${line##*) }
      state=${rest%% *} ppid=${rest#* } ppid=${ppid%% *}
      wchan=""
      { IFS= read -r wchan <"/proc/$pid/wchan"; } 2>/dev/null
      comm='?'
      { IFS= read -r comm <"/proc/$pid/comm"; } 2>/dev/null
      args=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)
      printf '    %s %s %s %s: %s\n' "$pid" "$ppid" "$state" "${wchan:--}" "${args:0:300}"
      [[ $comm == python* ]] || continue
      python_seen=1
      if [[ -n $spy ]]; then
        timeout 20 "$spy" dump --pid "$pid" 2>&1 | head -n 80 | sed 's/^/        /'
      elif [[ -r /proc/$pid/stack ]]; then
        head -n 12 "/proc/$pid/stack" 2>/dev/null | sed 's/^/        /'
      fi
    done
  done
  ((python_seen == 0)) || [[ -n $spy ]] ||
    hpc_log "stalled: for the Python stack of each process, install py-spy in the venv (pip install py-spy)"
  { : >"$attempt/stalled.dumped.$node"; } 2>/dev/null
}

# stop_line: a packed line's watch stops the line: SIGTERM to its process group, SIGKILL
# HPC_KILL_AFTER seconds later if it is still there (the batch shell ends this watch once
# the line has ended).
stop_line() {
  hpc_log "line $line: stalled: stopping it (SIGTERM)"
  kill -s TERM -- "-$batch_pid" 2>/dev/null || return 0
  local end=$((SECONDS + ${HPC_KILL_AFTER:-5}))
  while ((SECONDS < end)); do
    kill -0 -- "-$batch_pid" 2>/dev/null || return 0
    sleep 0.2
  done
  hpc_log "line $line: stalled: it ignored SIGTERM for ${HPC_KILL_AFTER:-5} s: killing it (SIGKILL)"
  kill -s KILL -- "-$batch_pid" 2>/dev/null
  return 0
}

# notify: the batch shell stops the program (longruns.sh: hpc_on_usr2); a packed line's
# watch stops its line itself.
notify() {
  if [[ -n $line ]]; then
    stop_line
    return 0
  fi
  if [[ $node == "$batch_node" ]] && kill -0 "$batch_pid" 2>/dev/null; then
    kill -s USR2 "$batch_pid"
  else
    scancel --batch --signal=USR2 "$job" 2>/dev/null ||
      hpc_error "stall watch: could not tell the batch shell (scancel --batch failed)"
  fi
}

last=$SECONDS next_look=$((SECONDS + period))
while :; do
  read -rt 0.5 -u "$nap_fd" _ # (the stop file is looked at twice a second: the job's end waits for it)
  [[ ! -e $stop ]] || exit 0
  if [[ -d $claim ]]; then
    dump
    exit 0
  fi
  ((SECONDS >= next_look)) || continue
  next_look=$((SECONDS + period))
  now=$SECONDS
  if [[ -z $mark_dir ]]; then # the first look: from here on
    marks_make
    : >"$ref"
    last=$now
    continue
  fi
  : >"$next"
  if progress; then
    last=$now
  fi
  mv -f -- "$next" "$ref"
  ((now - last >= timeout_s)) || continue
  # Several nodes may see it at once: one claims it (mkdir is atomic).
  mkdir -- "$claim" 2>/dev/null || continue
  who_to who
  printf '%s %s\n' "$node" "$who" >"$claim/who" 2>/dev/null
  hpc_log "stalled: no progress for ${HPC_STALL_TIMEOUT:-${timeout_s}s} on $who: nothing new in the log, \$HPC_CHECKPOINT_DIR, \$HPC_RESULTS_DIR or \$HPC_HEARTBEAT; stopping the program"
  dump
  notify
  exit 0
done
