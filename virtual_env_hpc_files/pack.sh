# shellcheck shell=bash
# Job side of packing (--pack N, --lines-per-job K; submit side: hpc_files/lib/pack.sh).
# Job number T (array task, plus HPC_TASK_OFFSET) runs lines T*K .. T*K+K-1 of
# $HPC_COMMANDS_FILE, at most N at once on this node. "Line I" is HPC_TASK_INDEX=I, the
# (I+1)-th command, as in an unpacked array. Each line runs in a slot of its own:
#   CUDA_VISIBLE_DEVICES  1/N of the job's GPUs (split from Slurm's list)
#   CPUs                  1/N of the job's CPU set, pinned with taskset (the batch shell's
#                         affinity: the job's cpuset where Slurm confines jobs; under
#                         --local, this machine's or allocation's CPUs); when the set
#                         has fewer CPUs than N, lines share them (logged)
#   OMP_NUM_THREADS       the line's share of the job's CPUs (unless set by the user)
#   HPC_CHECKPOINT_DIR    <exp>/checkpoints/task_I; $HPC_RESULTS_DIR: <results>/task_I,
#                         copied back to <exp>/results/task_I
#   log                   $SCRATCH/<project>/hpc_outputs/<exp>-<job>-line<I>.out (appended
#                         to by every attempt); the job's log says when each line starts
#                         and ends, with its exit code, and lists the lines that failed.
# Wall time and preemption apply per line (requeue.sh): each running line is warned and
# judged by the progress rule on its own checkpoint folder; a requeued job reruns only
# the lines that have not ended (not started, or warned and resumable). The job fails
# when any of its lines failed (exit code: the first failed line's).
#
# Per-line outcomes, for --rerun and for people: one file per line,
#   <home>/lines/I (job_lib.sh: lines)
# holding one line of fields "state=S exit=E job=J attempt=A seconds=T":
#   S  running (started, not ended: the job died under it), done (exit 0), failed (ended
#      with E != 0, or stopped without progress: 124, or out of restarts: 75), requeue
#      (warned; resumes when the job reruns), stopped (cancelled while running)
#   E  the exit code, or - while running;  J  the Slurm job (JOBID or ARRAYID_TASK) that
#   wrote it;  A  its attempt (1 + restarts);  T  seconds the line ran.
# A line has completed when, and only when, its file says state=done. Ending states are
# written atomically (a new file replaces the old); "running" in place.
# Sourced by job_runtime.sh; everything here is a no-op unless HPC_PACK is set.

# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"

# hpc_pack_begin: instead of hpc_read_task_command in a packed job: this job's lines
# (HPC_PACK_LINE_CMDS, by index), the outcomes folder, and what the log's header shows.
hpc_pack_begin() {
  local k=${HPC_PACK_LINES:?} total=${HPC_PACK_TOTAL:?} first last i=0 line
  first=$((HPC_TASK_INDEX * k))
  last=$((first + k - 1))
  ((last < total)) || last=$((total - 1))
  [[ -r $HPC_COMMANDS_FILE ]] ||
    hpc_fail "commands file $HPC_COMMANDS_FILE is missing or unreadable (was hpc_outputs/jobs cleaned up? submit again)"
  HPC_PACK_LINE_CMDS=() HPC_PACK_ORDER=()
  while IFS= read -r line; do
    if ((i >= first && i <= last)); then
      HPC_PACK_LINE_CMDS[i]=$line
      HPC_PACK_ORDER+=("$i")
    fi
    ((++i <= last)) || break
  done <"$HPC_COMMANDS_FILE"
  ((${#HPC_PACK_ORDER[@]} == last - first + 1)) ||
    hpc_fail "job $HPC_TASK_INDEX should run lines $first-$last of $HPC_COMMANDS_FILE, which holds $i commands"
  hpc_job_path_to HPC_PACK_STATE_DIR lines # made by _hpc_pack_dirs
  if ((first == last)); then
    HPC_COMMAND="(packed: line $first; its command is logged when it starts)"
  else
    local at=$HPC_PACK
    ((at <= last - first + 1)) || at=$((last - first + 1))
    HPC_COMMAND="(packed: lines $first-$last, $at at once; each line's command is logged when it starts)"
  fi
}

# _hpc_pack_list_to VAR LIST: the CPUs of a list such as "0-3,8,10-11", one per element.
_hpc_pack_list_to() {
  local -n _cpus=$1
  local part lo hi c
  _cpus=()
  local IFS=,
  for part in $2; do
    [[ $part =~ ^([0-9]+)(-([0-9]+))?$ ]] || continue
    lo=${BASH_REMATCH[1]} hi=${BASH_REMATCH[3]:-${BASH_REMATCH[1]}}
    for ((c = lo; c <= hi; c++)); do _cpus+=("$c"); done
  done
}

# hpc_pack_shares: HPC_PACK_SLOT_CPUS[s] and HPC_PACK_SLOT_GPUS[s] for s in 0..N-1, and
# HPC_PACK_THREADS, from the batch shell's CPU affinity and CUDA_VISIBLE_DEVICES.
hpc_pack_shares() {
  local n=$HPC_PACK s m allowed="" line gpus=() cpus=() per lo hi
  HPC_PACK_SLOT_CPUS=() HPC_PACK_SLOT_GPUS=() HPC_PACK_PIN=yes
  while IFS= read -r line; do
    [[ $line != Cpus_allowed_list:* ]] || allowed=${line#*:}
  done </proc/$$/status 2>/dev/null
  allowed=${allowed//[[:space:]]/}
  _hpc_pack_list_to cpus "$allowed"
  m=${#cpus[@]}
  if ((m == 0)) || ! command -v taskset >/dev/null; then
    HPC_PACK_PIN=no
    hpc_log "pack: cannot pin lines to CPUs here (no taskset, or no CPU list in /proc): lines share the job's CPUs"
  elif ((m < n)); then
    hpc_log "pack: the job's CPU set ($allowed) has $m CPU(s) for $n lines at once: lines share CPUs (give the job at least $n CPUs, e.g. --cpus $n)"
  elif [[ -z ${HPC_LOCAL_RUN:-} && -n ${SLURM_CPUS_ON_NODE:-} ]] && ((m > SLURM_CPUS_ON_NODE)); then
    hpc_log "pack: the job's CPU set ($allowed) is wider than its $SLURM_CPUS_ON_NODE CPU(s): this cluster does not confine jobs to their CPUs; each line gets 1/$n of the set"
  fi
  for ((s = 0; s < n && HPC_PACK_PIN == yes; s++)); do
    if ((m >= n)); then
      lo=$((s * m / n)) hi=$(((s + 1) * m / n - 1))
      printf -v line '%s,' "${cpus[@]:lo:hi-lo+1}"
      HPC_PACK_SLOT_CPUS[s]=${line%,}
    else
      HPC_PACK_SLOT_CPUS[s]=${cpus[s % m]}
    fi
  done
  if ((${HPC_GPUS_PER_NODE:-0} > 0)); then
    local IFS=,
    # shellcheck disable=SC2206 # a comma-separated list
    gpus=(${CUDA_VISIBLE_DEVICES:-})
    unset IFS
    if ((${#gpus[@]} < n)); then
      hpc_log "pack: Slurm gave this job ${#gpus[@]} GPU(s) (CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES:-}') for $n lines: lines are not given GPUs of their own"
    else
      per=$((${#gpus[@]} / n))
      for ((s = 0; s < n; s++)); do
        printf -v line '%s,' "${gpus[@]:s*per:per}"
        HPC_PACK_SLOT_GPUS[s]=${line%,}
      done
    fi
  fi
  local cpus_job=${SLURM_CPUS_PER_TASK:-${HPC_CPUS_PER_TASK:-1}}
  # (--local --pack: the machine's CPUs, its affinity, are the job's.)
  [[ -z ${HPC_LOCAL_RUN:-} ]] || ((m == 0)) || cpus_job=$m
  HPC_PACK_THREADS=$((cpus_job / n))
  ((HPC_PACK_THREADS >= 1)) || HPC_PACK_THREADS=1
}

# _hpc_pack_state I STATE EXIT [SECONDS]: write line I's outcome file: atomically for an
# ending state; "running" in place (one write, no mv per line started): a job that dies
# while writing it leaves a file that does not say done, which is what running means.
_hpc_pack_state() {
  local file=$HPC_PACK_STATE_DIR/$1 text
  printf -v text 'state=%s exit=%s job=%s attempt=%s seconds=%s\n' "$2" "$3" "$HPC_PACK_TARGET" \
    "$((HPC_RESTART_COUNT + 1))" "${4:-0}"
  if [[ $2 == running ]]; then
    { printf '%s' "$text" >"$file"; } 2>/dev/null || hpc_log "pack: could not write $file (line $1: state=$2)"
    return 0
  fi
  if ! { printf '%s' "$text" >"$file.tmp.$$" && mv -f -- "$file.tmp.$$" "$file"; }; then
    rm -f -- "$file.tmp.$$"
    hpc_log "pack: could not write $file (line $1: state=$2 exit=$3)"
  fi
}

# _hpc_pack_ended_here I: true when line I ended (done or failed) in an earlier attempt
# of this same job: a requeued job does not run it again. In a --rerun's job
# (HPC_RERUN_OF set), a line done by any job is not run again either. Sets
# HPC_PACK_STATE[I] and HPC_PACK_RC[I] from its file.
_hpc_pack_ended_here() {
  local file=$HPC_PACK_STATE_DIR/$1 text="" re='^state=(done|failed) exit=([0-9]+) job=([^ ]+) '
  [[ -f $file ]] || return 1
  { IFS= read -r text <"$file"; } 2>/dev/null
  [[ $text =~ $re ]] || return 1
  [[ ${BASH_REMATCH[3]} == "$HPC_PACK_TARGET" ]] ||
    [[ -n ${HPC_RERUN_OF:-} && ${BASH_REMATCH[1]} == "done" ]] || return 1
  HPC_PACK_STATE[$1]=${BASH_REMATCH[1]} HPC_PACK_RC[$1]=${BASH_REMATCH[2]}
}

# _hpc_pack_dirs I...: the outcomes folder, and the checkpoint and results folders of
# lines I..., in one mkdir.
_hpc_pack_dirs() {
  local i dirs=("$HPC_PACK_STATE_DIR")
  for i; do
    dirs+=("$HPC_EXP_DIR/checkpoints/task_$i")
    [[ -z ${HPC_RESULTS_DIR:-} ]] || dirs+=("$HPC_RESULTS_DIR/task_$i")
  done
  mkdir -p -- "${dirs[@]}" && return 0
  [[ -d $HPC_PACK_STATE_DIR ]] || hpc_fail "cannot create $HPC_PACK_STATE_DIR (is \$SCRATCH writable from this node?)"
  hpc_log "pack: cannot create every line's folders: ${dirs[*]:1}"
}

# _hpc_pack_start I SLOT: start line I in SLOT, in the background, its output in its log
# (its folders are made beforehand: _hpc_pack_dirs).
_hpc_pack_start() {
  local i=$1 s=$2 cmd=${HPC_PACK_LINE_CMDS[$1]} log what
  log=$HPC_OUTPUT_DIR/$exp_name-${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-local}}-line$i.out
  what="CPUs ${HPC_PACK_SLOT_CPUS[s]:-shared}"
  [[ -z ${HPC_PACK_SLOT_GPUS[s]:-} ]] || what+=", GPUs ${HPC_PACK_SLOT_GPUS[s]}"
  _hpc_pack_state "$i" running -
  hpc_log "line $i starts (slot $s: $what): $cmd"
  hpc_log "line $i log: $log"
  local ck=$HPC_EXP_DIR/checkpoints/task_$i refused=0
  if [[ -n $HPC_ATTEMPT_DIR ]]; then
    hpc_ckpt_snapshot "$ck" "$HPC_ATTEMPT_DIR/before.$i"
    hpc_ckpt_sums "$ck" "$HPC_ATTEMPT_DIR/sums.$i" # (a log appended to is no progress)
  fi
  local HPC_RESUMING HPC_INIT_FROM HPC_RESUME_FROM # (runs.sh exports them: this line's own)
  hpc_run_settle "$ck" "$i" "$cmd" "line $i: " || refused=1
  # A function, not an inline ( ... ): bash reports a background job that a signal killed
  # (a line's `kill -9 0`, the OOM killer) with the job's source text, in the job log.
  _hpc_pack_line "$i" "$s" "$what" "$log" "$refused" </dev/null &
  HPC_PACK_PID_LINE[$!]=$i HPC_PACK_PID_SLOT[$!]=$s HPC_PACK_PID_START[$!]=$SECONDS
  ((refused)) || _hpc_pack_stall_watch "$i" "$!" "$log"
}

# _hpc_pack_stall_watch I PID LOG: --stall-timeout for line I, running as PID (its process
# group) and writing LOG: a watch of its own (stall_watch.sh's line mode), which stops the
# line on a stall; _hpc_pack_ended judges it.
_hpc_pack_stall_watch() {
  local i=$1 pid=$2 log=$3 node
  HPC_PACK_STALL_WATCH[i]=""
  ((${HPC_STALL_TIMEOUT_S:-0} > 0)) && [[ -n ${HPC_ATTEMPT_DIR:-} ]] || return 0
  hpc_node_name_to node
  # (the line's own folder of pids: the watch shows where its processes are)
  { mkdir -p -- "$HPC_ATTEMPT_DIR/pids.$i" && printf 'line %s\n' "$i" >"$HPC_ATTEMPT_DIR/pids.$i/$node.$pid"; } 2>/dev/null
  HPC_STALL_LINE=$i HPC_STALL_LOG=$log HPC_CHECKPOINT_DIR=$HPC_EXP_DIR/checkpoints/task_$i \
    HPC_RESULTS_DIR=${HPC_RESULTS_DIR:+$HPC_RESULTS_DIR/task_$i} \
    bash "$HPC_RUNTIME_DIR/stall_watch.sh" "$node" "$pid" "$HPC_PACK_TARGET" </dev/null &
  HPC_PACK_STALL_WATCH[i]=$!
}

# _hpc_pack_stall_watches_end: exit hook: no line's watch outlives the batch shell.
_hpc_pack_stall_watches_end() {
  local i
  for i in "${!HPC_PACK_STALL_WATCH[@]}"; do _hpc_pack_stall_watch_end "$i"; done
  return 0
}

# _hpc_pack_stall_watch_end I: line I has ended: its watch ends too (at once: no results
# copy waits on it).
_hpc_pack_stall_watch_end() {
  local pid=${HPC_PACK_STALL_WATCH[$1]:-}
  [[ -n $pid ]] || return 0
  HPC_PACK_STALL_WATCH[$1]=""
  { : >"$HPC_ATTEMPT_DIR/stall.stop.$1"; } 2>/dev/null
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}

# _hpc_pack_line I SLOT WHAT LOG [REFUSED]: (a background subshell of the batch shell)
# become line I: its log, its variables, then exec its command in a session of its own.
# REFUSED=1: its folder holds another run's checkpoints (runs.sh): it ends at once, 2.
_hpc_pack_line() {
  local i=$1 s=$2 what=$3 log=$4 cmd=${HPC_PACK_LINE_CMDS[$1]} pin=() argv
  trap ':' USR1 USR2 TERM INT QUIT HUP
  exec >>"$log" 2>&1
  hpc_log "job $HPC_PACK_TARGET, attempt $((HPC_RESTART_COUNT + 1)), line $i (slot $s: $what): $cmd"
  if ((${5:-0})); then
    hpc_log "not run: $HPC_EXP_DIR/checkpoints/task_$i holds another run's checkpoints (the job's log says whose): submit again with --resume, --fresh or another --exp-name"
    exit 2
  fi
  [[ $HPC_PACK_PIN != yes ]] || pin=(taskset -c "${HPC_PACK_SLOT_CPUS[s]}")
  # The line's own variables, exported here (no env process per line; as NAME=VALUE
  # words: they change only this subshell's copies).
  local vars=("HPC_TASK_INDEX=$i" "HPC_CHECKPOINT_DIR=$HPC_EXP_DIR/checkpoints/task_$i" "HPC_PACK_SLOT=$s" "HPC_PACK_LOG=$log")
  [[ -z ${HPC_PROGRAM_TOKEN:-} ]] || vars+=("HPC_PROGRAM_TOKEN=$HPC_PROGRAM_TOKEN.$i") # (proc_tree.sh)
  # The line's own $HPC_HEARTBEAT, which its stall watch looks at (stall_watch.sh).
  if [[ -n ${HPC_ATTEMPT_DIR:-} ]] && mkdir -p -- "$HPC_ATTEMPT_DIR/heartbeat.$i" 2>/dev/null; then
    local node
    hpc_node_name_to node
    vars+=("HPC_HEARTBEAT=$HPC_ATTEMPT_DIR/heartbeat.$i/$node.rank0")
  fi
  [[ -z ${HPC_RESULTS_DIR:-} ]] || vars+=("HPC_RESULTS_DIR=$HPC_RESULTS_DIR/task_$i")
  if [[ -n ${HPC_PACK_SLOT_GPUS[s]:-} ]]; then
    vars+=("CUDA_VISIBLE_DEVICES=${HPC_PACK_SLOT_GPUS[s]}")
    [[ -z ${GPU_DEVICE_ORDINAL:-} ]] || vars+=("GPU_DEVICE_ORDINAL=${HPC_PACK_SLOT_GPUS[s]}")
  fi
  # Threads: the line's share, unless the user chose a number (job_runtime.sh's default
  # is the job's whole CPU count).
  [[ ${OMP_NUM_THREADS:-} != "${SLURM_CPUS_PER_TASK:-1}" ]] || vars+=("OMP_NUM_THREADS=$HPC_PACK_THREADS")
  export "${vars[@]}"
  local ran
  hpc_line_expanded_to ran "$cmd" # with the line's own variables
  [[ -z $ran ]] || hpc_log "line $i runs as: $ran"
  hpc_run_line_argv_to argv "$cmd" # (run_line.sh, without its bash)
  exec setsid "${pin[@]}" "${argv[@]}"
}

# _hpc_pack_warn_line PID: the wall-time/preemption warning for one running line, and its
# watchdog (a background subshell), as hpc_on_warning does for a single program.
_hpc_pack_warn_line() {
  local pid=$1 i=${HPC_PACK_PID_LINE[$1]} wait_s=${HPC_WARN_WAIT_S:-30}
  HPC_PACK_WARNED[i]=1
  (
    trap - USR1 USR2 TERM INT EXIT
    # shellcheck disable=SC2317 # called by hpc_proc_warn_loop
    _pack_line_log() { hpc_log "line $i: $*"; }
    local end=$((SECONDS + wait_s)) stop=0
    trap 'stop=1' TERM # (the warning and its log line go together: requeue.sh)
    hpc_proc_warn_loop "$pid" "$wait_s" _pack_line_log "${HPC_ATTEMPT_DIR:+$HPC_ATTEMPT_DIR/warned.$i}"
    trap - TERM
    ((stop == 0)) || exit 0
    ((SECONDS >= end)) || sleep $((end - SECONDS))
    [[ -z $HPC_ATTEMPT_DIR ]] || : >"$HPC_ATTEMPT_DIR/stopped.$i"
    hpc_log "line $i: still running ${wait_s} s after the warning: stopping it (SIGTERM)"
    kill -s TERM -- "-$pid" 2>/dev/null
    sleep "$HPC_KILL_AFTER"
    hpc_log "line $i: it ignored SIGTERM for $HPC_KILL_AFTER s: killing it (SIGKILL)"
    kill -s KILL -- "-$pid" 2>/dev/null
  ) </dev/null &
  HPC_PACK_WATCHDOG[i]=$!
}

# _hpc_pack_ended PID RC: record the outcome of the line that ran as PID.
_hpc_pack_ended() {
  local pid=$1 rc=$2 i=${HPC_PACK_PID_LINE[$1]} took state verdict stopped=0 wrote=0 warned=1 over=0 file=""
  took=$((SECONDS - HPC_PACK_PID_START[$1]))
  [[ $rc =~ ^[0-9]+$ ]] && ((rc <= 255)) || rc=255 # (a status bash lost: "unknown")
  unset "HPC_PACK_PID_LINE[$pid]" "HPC_PACK_PID_SLOT[$pid]" "HPC_PACK_PID_START[$pid]"
  hpc_program_ended "$i"                       # (requeue.sh)
  _hpc_pack_stall_watch_end "$i"
  hpc_watchdog_end "${HPC_PACK_WATCHDOG[i]:-}" # (requeue.sh)
  state=failed
  ((rc != 0)) || state="done"
  if [[ $HPC_SIGNALLED == cancel ]]; then
    state=stopped
  elif ((${HPC_PACK_WARNED[i]:-0})); then
    [[ -z $HPC_ATTEMPT_DIR || ! -e $HPC_ATTEMPT_DIR/stopped.$i ]] || stopped=1
    local HPC_CHECKPOINT_DIR=$HPC_EXP_DIR/checkpoints/task_$i
    _hpc_pack_progress_to wrote over file "$i"
    hpc_took_warning "$i" || warned=0
    hpc_requeue_verdict_to verdict "${HPC_REQUEUE:-yes}" "$rc" "$stopped" "$wrote" \
      "$HPC_RESTART_COUNT" "$HPC_MAX_RESTARTS" "$warned" "$over"
    case $verdict in
      finished) hpc_log "line $i: exited 0 without taking the warning: it had finished" ;;
      failed) hpc_log "line $i: failed by itself (exit $rc) without taking the warning: not resumed" ;;
      started-over)
        hpc_log "line $i: started over instead of resuming (it wrote $HPC_CHECKPOINT_DIR/$file again, which an earlier attempt had written before its newest checkpoint): not resumed (exit $HPC_EXIT_NO_PROGRESS)"
        state=failed rc=$HPC_EXIT_NO_PROGRESS
        ;;
      no-progress)
        hpc_log "line $i: ended with $rc after the warning and wrote nothing to $HPC_CHECKPOINT_DIR during this attempt: not resumed (exit $HPC_EXIT_NO_PROGRESS)"
        state=failed rc=$HPC_EXIT_NO_PROGRESS
        ;;
      limit)
        hpc_log "line $i: restart limit reached ($HPC_RESTART_COUNT of --max-restarts $HPC_MAX_RESTARTS): not resumed; its checkpoint is in $HPC_CHECKPOINT_DIR (to go on: --rerun, or submit again with --resume)"
        state=failed rc=$HPC_EXIT_RESTART_LIMIT
        ;;
      requeue) state=requeue HPC_PACK_PROGRESS=1 ;;
    esac
  elif [[ -n $HPC_ATTEMPT_DIR && -d $HPC_ATTEMPT_DIR/stalled.$i ]]; then
    _hpc_pack_stalled_to state rc "$i" "$rc"
  fi
  [[ $state != "done" && $state != failed ]] || HPC_PACK_PROGRESS=1
  HPC_PACK_STATE[i]=$state HPC_PACK_RC[i]=$rc
  _hpc_pack_state "$i" "$state" "$rc" "$took"
  hpc_log "line $i ended with exit code $rc after $took s ($state)"
}

# _hpc_pack_progress_to WROTE_VAR OVER_VAR FILE_VAR I: what line I wrote to its checkpoint
# folder ($HPC_CHECKPOINT_DIR, the caller's) while it ran this attempt (1 or 0), and whether
# it started over (1, FILE the checkpoint it wrote again) instead of resuming.
_hpc_pack_progress_to() {
  local -n _pp_wrote=$1 _pp_over=$2 _pp_file=$3
  local i=$4 a=${HPC_ATTEMPT_DIR:-} again=""
  _pp_wrote=0 _pp_over=0 _pp_file=""
  ! hpc_checkpoint_written "" "${a:+$a/sums.$i}" "${a:+$a/ended.$i}" || _pp_wrote=1
  ((_pp_wrote)) && [[ -n $a ]] || return 0
  hpc_ckpt_started_over_to again "$HPC_CHECKPOINT_DIR" "$a/before.$i" "$a/start"
  [[ -z $again ]] || _pp_over=1 _pp_file=$again
}

# _hpc_pack_stalled_to STATE_VAR RC_VAR I RC: line I was stopped by its stall watch (it
# exited RC): the progress rule, as for one program (longruns.sh's hpc_after_stall):
# "requeue" (it resumes when the job is requeued, once every line has ended) when it wrote
# a checkpoint during this attempt, else failed with HPC_EXIT_STALLED (75 at the limit).
_hpc_pack_stalled_to() {
  local -n _state=$1 _rc=$2
  local i=$3 code=$4 wrote=0 over=0 file="" verdict
  local HPC_CHECKPOINT_DIR=$HPC_EXP_DIR/checkpoints/task_$i
  _hpc_pack_progress_to wrote over file "$i"
  hpc_requeue_verdict_to verdict "${HPC_REQUEUE:-yes}" "$code" 1 "$wrote" "$HPC_RESTART_COUNT" "$HPC_MAX_RESTARTS" 1 "$over"
  _state=failed _rc=$HPC_EXIT_STALLED
  case $verdict in
    requeue)
      hpc_log "line $i: stalled, and it wrote a checkpoint during this attempt: it resumes when the job is requeued"
      _state=requeue _rc=$code HPC_PACK_PROGRESS=1 HPC_PACK_STALLED=1
      ;;
    limit)
      hpc_log "line $i: stalled: restart limit reached ($HPC_RESTART_COUNT of --max-restarts $HPC_MAX_RESTARTS): not resumed; its checkpoint is in $HPC_CHECKPOINT_DIR"
      _rc=$HPC_EXIT_RESTART_LIMIT
      ;;
    off) hpc_log "line $i: stalled: not resumed (--no-requeue) (exit $HPC_EXIT_STALLED)" ;;
    started-over) hpc_log "line $i: stalled, and it started over instead of resuming ($HPC_CHECKPOINT_DIR/$file written again): not resumed (exit $HPC_EXIT_STALLED)" ;;
    *) hpc_log "line $i: stalled, and nothing in $HPC_CHECKPOINT_DIR was written during this attempt: not resumed (exit $HPC_EXIT_STALLED)" ;;
  esac
}

# _hpc_pack_reaped_to PID_VAR RC_VAR: a line whose process bash has already reaped (it
# ended while a trap or another command ran): `wait -n` no longer knows it, `wait PID`
# still has its exit code. False when every line is still running.
_hpc_pack_reaped_to() {
  local -n _pid=$1 _rc=$2
  local p
  for p in "${!HPC_PACK_PID_LINE[@]}"; do
    kill -0 "$p" 2>/dev/null && continue
    _rc=0
    wait "$p" 2>/dev/null || _rc=$?
    _pid=$p
    return 0
  done
  sleep 0.1 # (never a busy loop, whatever wait -n answered)
  return 1
}

# hpc_pack_run: run this job's lines, N at once; returns the job's exit code, or requeues
# the job (does not return) when lines are left to resume.
hpc_pack_run() {
  local i s pid rc todo=() free=() warned=0 restarts=$HPC_RESTART_COUNT
  declare -gA HPC_PACK_PID_LINE=() HPC_PACK_PID_SLOT=() HPC_PACK_PID_START=()
  HPC_PACK_WATCHDOG=() HPC_PACK_WARNED=() HPC_PACK_STATE=() HPC_PACK_RC=() HPC_PACK_PROGRESS=0
  HPC_PACK_STALL_WATCH=() HPC_PACK_STALLED=0
  HPC_PACK_TARGET=local-$$
  [[ -z ${SLURM_JOB_ID:-} ]] || HPC_PACK_TARGET=$(hpc_job_target)
  hpc_pack_shares
  # What a line starts outside its process group ends with the line (hpc_program_ended),
  # or with the attempt (proc_tree.sh).
  hpc_escapees_begin
  HPC_EXIT_HOOKS=(_hpc_pack_stall_watches_end "${HPC_EXIT_HOOKS[@]}")
  for i in "${HPC_PACK_ORDER[@]}"; do
    _hpc_pack_ended_here "$i" || todo+=("$i")
  done
  ((${#todo[@]} == ${#HPC_PACK_ORDER[@]})) ||
    hpc_log "pack: $((${#HPC_PACK_ORDER[@]} - ${#todo[@]})) line(s) ended in an earlier attempt of this job; running the ${#todo[@]} left: ${todo[*]}"
  for ((s = 0; s < HPC_PACK; s++)); do free+=("$s"); done
  _hpc_pack_dirs "${todo[@]}"
  # bash reports a background job killed by a signal it does not trap ("line 129: 2224
  # Killed  _hpc_pack_line ...") in the job log; SIGKILL (a line's `kill -9 0`, the OOM
  # killer) can never be caught, but a trap on it marks it trapped and keeps the log clean.
  # The line's own exit code (137) is logged below as for any line.
  # shellcheck disable=SC2173 # (on purpose: only bash's report is wanted off, see above)
  trap ':' KILL
  if [[ -z $HPC_SIGNALLED ]]; then
    hpc_start_preempt_watch
  else
    hpc_log "not starting any line: the job was signalled ($HPC_SIGNALLED) before it could"
  fi
  while :; do
    if [[ -n $HPC_SIGNALLED ]] && ((warned == 0)); then
      warned=1
      for pid in "${!HPC_PACK_PID_LINE[@]}"; do
        if [[ $HPC_SIGNALLED == cancel ]]; then
          kill -s TERM -- "-$pid" 2>/dev/null
        else
          _hpc_pack_warn_line "$pid"
        fi
      done
    fi
    while [[ -z $HPC_SIGNALLED ]] && ((${#todo[@]} && ${#free[@]})); do
      _hpc_pack_start "${todo[0]}" "${free[0]}"
      todo=("${todo[@]:1}") free=("${free[@]:1}")
    done
    ((${#HPC_PACK_PID_LINE[@]})) || break
    pid="" rc=0
    wait -n -p pid "${!HPC_PACK_PID_LINE[@]}" 2>/dev/null || rc=$?
    [[ -n $pid ]] || _hpc_pack_reaped_to pid rc || continue # a trapped signal
    [[ -n ${HPC_PACK_PID_LINE[$pid]:-} ]] || continue
    # (A wait that a trap interrupted is no ending: the line must really be gone.)
    ! kill -0 "$pid" 2>/dev/null || continue
    free+=("${HPC_PACK_PID_SLOT[$pid]}")
    _hpc_pack_ended "$pid" "$rc"
  done
  hpc_stop_preempt_watch
  trap - KILL
  _hpc_pack_finish "$restarts" "${todo[@]}"
}

# _hpc_pack_finish RESTARTS UNSTARTED...: requeue for the lines left, or the summary and
# the job's exit code.
_hpc_pack_finish() {
  local restarts=$1 i left=() failed=() rc=0 code
  shift
  for i in "${HPC_PACK_ORDER[@]}"; do
    [[ ${HPC_PACK_STATE[i]:-} != requeue ]] || left+=("$i")
  done
  left+=("$@")
  # (A line stopped for a stall that wrote a checkpoint is left too, warned or not.)
  if ((${#left[@]})) && [[ $HPC_SIGNALLED == walltime || $HPC_SIGNALLED == preempt || $HPC_PACK_STALLED == 1 ]]; then
    if [[ ${HPC_REQUEUE:-yes} == yes ]] && ((restarts < HPC_MAX_RESTARTS && HPC_PACK_PROGRESS)); then
      hpc_log "pack: line(s) ${left[*]} not finished: the job is requeued and reruns only them"
      [[ -z $HPC_WATCHDOG_PID ]] || kill "$HPC_WATCHDOG_PID" 2>/dev/null
      [[ -n $HPC_SIGNALLED ]] || local HPC_SIGNALLED=stall # (the attempt's outcome: stalled-requeued)
      hpc_requeue_now "$rc" "$restarts"
      return
    fi
    if [[ ${HPC_REQUEUE:-yes} != yes ]]; then
      code=$HPC_EXIT_NO_PROGRESS
      hpc_log "pack: line(s) ${left[*]} not finished and the job may not requeue (--no-requeue)"
    elif ((restarts >= HPC_MAX_RESTARTS)); then
      code=$HPC_EXIT_RESTART_LIMIT
      hpc_log "pack: line(s) ${left[*]} not finished: restart limit reached ($restarts of --max-restarts $HPC_MAX_RESTARTS); to go on: job_submitter.sh --rerun ${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-JOB}}, or submit again with --resume"
    else
      code=$HPC_EXIT_NO_PROGRESS
      hpc_log "pack: no line ended or wrote a checkpoint during this attempt: not requeued; line(s) ${left[*]} not finished"
    fi
    for i in "${left[@]}"; do
      HPC_PACK_STATE[i]=failed HPC_PACK_RC[i]=$code
      _hpc_pack_state "$i" failed "$code"
    done
  fi
  local done_n=0 desc=""
  for i in "${HPC_PACK_ORDER[@]}"; do
    case ${HPC_PACK_STATE[i]:-} in
      done) ((++done_n)) ;;
      *)
        code=${HPC_PACK_RC[i]:-}
        [[ -n $code ]] || code=none
        failed+=("$i") desc+=" line $i (${HPC_PACK_STATE[i]:-not run}, exit $code),"
        if ((rc == 0)); then
          rc=1
          [[ $code == none ]] || ((code == 0)) || rc=$code
        fi
        ;;
    esac
  done
  if ((${#failed[@]})); then
    hpc_log "pack: ${#failed[@]} of ${#HPC_PACK_ORDER[@]} line(s) did not complete:${desc%,}; the job fails (exit $rc)"
    hpc_log "pack: failed lines: ${failed[*]} (outcomes in $HPC_PACK_STATE_DIR)"
  else
    hpc_log "pack: all ${#HPC_PACK_ORDER[@]} line(s) completed ($done_n done)"
  fi
  return "$rc"
}
