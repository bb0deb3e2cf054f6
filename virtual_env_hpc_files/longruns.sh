# shellcheck shell=bash
# Job side of long runs (docs/requeue.md, "Stalls, preflight and lost nodes"), as the plan
# says (hpc_files/lib/longruns.sh decides; this file only runs it):
#  - stalls: a watch per node (stall_watch.sh) while the program runs; on a stall the
#    program is stopped and the progress rule decides: requeued when the attempt wrote a
#    checkpoint, else FAILED with HPC_EXIT_STALLED;
#  - the preflight: every node checked before the program (preflight.sh); a node that fails
#    is excluded and the job requeued, at most HPC_PREFLIGHT_RETRIES times, not counted as
#    one of --max-restarts; past that FAILED with HPC_EXIT_PREFLIGHT;
#  - a node lost under the job: the attempt is recorded as a node failure, the node
#    excluded, and the job runs again from its checkpoint (Slurm's own requeue, or ours),
#    not counted as one of --max-restarts either.
# Sourced by job_runtime.sh after requeue.sh; sets no shell options.

# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"

# Exit code of a job stopped for a stall that wrote no checkpoint in that attempt.
HPC_EXIT_STALLED=79
# Exit code of a job whose preflight failed once more than HPC_PREFLIGHT_RETRIES allows.
HPC_EXIT_PREFLIGHT=78
HPC_STALL_WATCH_PID="" HPC_STALL_WATCH_STEP=no
# Requeues of this job that are not the program's (preflight, lost nodes): --max-restarts
# does not count them (hpc_longruns_begin).
HPC_EXCUSED_RESTARTS=0
# The node and reason an attempt's record carries (runs.sh), for preflight and node
# failures, whose exit code is no program's ("-").
HPC_ATTEMPT_NODE="" HPC_ATTEMPT_WHY="" HPC_ATTEMPT_EXIT=""

# hpc_longruns_begin: once the attempt has begun (hpc_attempt_begin): the requeues that do
# not count (earlier attempts of this job recorded as preflight-failed or node-failure), and
# the folders of the heartbeats and the program's pids in the attempt's folder.
hpc_longruns_begin() {
  local n
  _hpc_attempt_before_unended
  _hpc_attempts_with_outcome_to n 'preflight-failed|node-failure'
  HPC_EXCUSED_RESTARTS=$n
  ((n == 0)) || hpc_log "restarts: $n of this job's requeues were for a node (preflight, node failure), not the program's: --max-restarts does not count them"
  hpc_heartbeat_setup
}

# hpc_heartbeat_setup: HPC_HEARTBEAT, the file a program may touch to show it is alive
# (rank 0's here; task_wrapper.sh gives every rank its own).
hpc_heartbeat_setup() {
  local node
  hpc_node_name_to node
  # (made with the attempt's folder: requeue.sh, hpc_attempt_begin)
  if [[ -n ${HPC_ATTEMPT_DIR:-} ]] && { [[ -d $HPC_ATTEMPT_DIR/heartbeat && -d $HPC_ATTEMPT_DIR/pids ]] ||
    mkdir -p -- "$HPC_ATTEMPT_DIR/heartbeat" "$HPC_ATTEMPT_DIR/pids" 2>/dev/null; }; then
    export HPC_HEARTBEAT=$HPC_ATTEMPT_DIR/heartbeat/$node.rank0
  else
    export HPC_HEARTBEAT=${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/.hpc_heartbeat.$$
  fi
}

# hpc_note_program_pid PID [RANK]: the stall watch shows where PID and its children are.
hpc_note_program_pid() {
  [[ -n ${HPC_ATTEMPT_DIR:-} && -d $HPC_ATTEMPT_DIR/pids ]] || return 0
  local node
  hpc_node_name_to node
  printf 'rank %s\n' "${2:-0}" >"$HPC_ATTEMPT_DIR/pids/$node.$1" 2>/dev/null
  return 0
}

# hpc_start_stall_watch: the watch on every node the program runs on (launchers with srun
# steps: one overlapping step of one task per node; else a process of this shell).
hpc_start_stall_watch() {
  ((${HPC_STALL_TIMEOUT_S:-0} > 0)) || return 0
  # (No attempt folder: an --interactive session, whose terminal is no log to watch, or a
  # job whose folder could not be written, which hpc_attempt_begin has said.)
  [[ -n ${HPC_ATTEMPT_DIR:-} ]] || return 0
  local node log target=local
  hpc_node_name_to node
  # The log: this shell's stdout, as a path the watch can test (-nt follows the link); the
  # file's own path only for a watch step on other nodes (one readlink, a process).
  log=/proc/$$/fd/1
  # (hpc_attempt_begin made the attempt's folder afresh: a stop file there is rare)
  [[ ! -e $HPC_ATTEMPT_DIR/stall.stop ]] || rm -f -- "$HPC_ATTEMPT_DIR/stall.stop"
  # (hpc_job_target's id, without its subshell; "local" where it has none)
  [[ -z ${SLURM_JOB_ID:-} && (-z ${SLURM_ARRAY_TASK_ID:-} || -z ${SLURM_ARRAY_JOB_ID:-}) ]] ||
    hpc_job_target_to target
  local watch=(bash "$HPC_RUNTIME_DIR/stall_watch.sh" "$node" "$$" "$target")
  if [[ $HPC_STEP_LAUNCHERS == *" $HPC_LAUNCHER "* && -n ${SLURM_JOB_ID:-} ]] && command -v srun >/dev/null; then
    log=$(readlink -f -- "$log" 2>/dev/null) || log=""
    [[ -f $log ]] || log=""
    HPC_STALL_LOG=$log srun --overlap --quiet --nodes="$HPC_NUM_NODES" --ntasks-per-node=1 \
      --cpus-per-task=1 --gres=none --job-name=hpc_stall_watch env -u BASH_ENV "${watch[@]}" </dev/null &
    HPC_STALL_WATCH_STEP=yes
  else
    # This node only: a subshell of this one (a fork: no bash to start and no job_lib.sh
    # to read again for each task of an array).
    [[ -f $log ]] || log=""
    # shellcheck source=/dev/null # (its variables stay in the subshell)
    (export HPC_STALL_LOG=$log && source "${watch[@]:1}") </dev/null &
  fi
  HPC_STALL_WATCH_PID=$!
  HPC_EXIT_HOOKS=(hpc_stop_stall_watch "${HPC_EXIT_HOOKS[@]}")
  hpc_log "stall watch: the program is stopped after ${HPC_STALL_TIMEOUT} with no progress (log, \$HPC_CHECKPOINT_DIR, \$HPC_RESULTS_DIR, \$HPC_HEARTBEAT)"
}

# hpc_stop_stall_watch: as soon as the program has ended (a results copy is no stall).
# A watch of this shell's is stopped at once; the watch step's tasks end by themselves
# (within half a second) once the stop file is there, and the step is cancelled only if they
# have not within 3 s (srun's own messages in the log otherwise).
hpc_stop_stall_watch() {
  [[ -n $HPC_STALL_WATCH_PID ]] || return 0
  local pid=$HPC_STALL_WATCH_PID i=0
  HPC_STALL_WATCH_PID=""
  { : >"$HPC_ATTEMPT_DIR/stall.stop"; } 2>/dev/null
  [[ $HPC_STALL_WATCH_STEP == yes ]] || i=30
  for ((; i < 30; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}

# hpc_on_usr2: SIGUSR2 to the batch shell: a stall (the stall watch claimed one), else the
# preemption watch's notice (requeue.sh).
hpc_on_usr2() {
  if [[ -n ${HPC_ATTEMPT_DIR:-} && -d $HPC_ATTEMPT_DIR/stalled ]]; then
    hpc_on_stall
  else
    hpc_on_preempt_notice
  fi
}

# hpc_on_stall: stop the stalled program once every node's watch has shown its processes
# (at most 60 s): SIGTERM, then SIGKILL after HPC_KILL_AFTER seconds.
hpc_on_stall() {
  [[ -z $HPC_SIGNALLED ]] || return 0 # already warned, or cancelled: that goes on
  HPC_SIGNALLED=stall
  local watches=1
  [[ $HPC_STEP_LAUNCHERS != *" $HPC_LAUNCHER "* ]] || watches=$HPC_NUM_NODES
  (
    trap - USR1 USR2 TERM INT EXIT
    local end=$((SECONDS + 60)) marks
    shopt -s nullglob
    while marks=("$HPC_ATTEMPT_DIR"/stalled.dumped.*) && ((${#marks[@]} < watches && SECONDS < end)); do
      sleep 0.2
    done
    { : >"$HPC_ATTEMPT_DIR/stopped"; } 2>/dev/null
    hpc_log "stalled: stopping the program (SIGTERM)"
    hpc_signal_program TERM
    sleep "$HPC_KILL_AFTER"
    hpc_log "stalled: the program ignored SIGTERM for $HPC_KILL_AFTER s: killing it (SIGKILL)"
    hpc_signal_program KILL
  ) </dev/null &
  HPC_WATCHDOG_PID=$!
}

# hpc_after_stall RC: the progress rule after a stall (requeue.sh's verdict): requeued
# when the attempt wrote a checkpoint; else the job ends with HPC_EXIT_STALLED (or 75 at
# the restart limit). Does not return when the job is requeued.
hpc_after_stall() {
  local rc=$1 wrote=0 over=0 file="" verdict restarts=$((${SLURM_RESTART_COUNT:-0} - HPC_EXCUSED_RESTARTS))
  [[ -z $HPC_WATCHDOG_PID ]] || kill "$HPC_WATCHDOG_PID" 2>/dev/null
  ! hpc_checkpoint_written || wrote=1
  if ((wrote)) && [[ -n $HPC_ATTEMPT_DIR ]]; then
    hpc_ckpt_started_over_to file "$HPC_CHECKPOINT_DIR" "$HPC_ATTEMPT_DIR/before" "$HPC_ATTEMPT_DIR/start"
    [[ -z $file ]] || over=1
  fi
  hpc_requeue_verdict_to verdict "${HPC_REQUEUE:-yes}" "$rc" 1 "$wrote" "$restarts" "$HPC_MAX_RESTARTS" 1 "$over"
  HPC_ATTEMPT_OUTCOME=stalled
  case $verdict in
    requeue)
      hpc_log "stalled: this attempt wrote a checkpoint: requeued, the next attempt resumes from it"
      hpc_requeue_now "$rc" "$restarts"
      return 1
      ;;
    off) hpc_log "stalled: not requeued (--no-requeue)" ;;
    started-over) hpc_log "stalled: not requeued: this attempt started over instead of resuming ($HPC_CHECKPOINT_DIR/$file written again)" ;;
    limit)
      hpc_log "stalled: not requeued: restart limit reached ($restarts of --max-restarts $HPC_MAX_RESTARTS)"
      return "$HPC_EXIT_RESTART_LIMIT"
      ;;
    *) hpc_log "stalled: not requeued: nothing in $HPC_CHECKPOINT_DIR was written during this attempt (a requeue would start it over, and stall again)" ;;
  esac
  hpc_log "a program that is busy but prints nothing for long can touch \$HPC_HEARTBEAT now and then, or be submitted with a longer --stall-timeout (docs/requeue.md#stalls)"
  return "$HPC_EXIT_STALLED"
}

# --- excluding a node and requeueing ------------------------------------------------------

# hpc_exclude_nodes NODES: add NODES (a comma list) to the job's excluded nodes. Slurm
# refuses this for a running job; it takes it once the job is requeued (COMPLETING), so it
# is called right after `scontrol requeue`, with SIGTERM (Slurm's, ending this attempt)
# ignored by scontrol (measured on 22.05: killed by it otherwise).
hpc_exclude_nodes() {
  local add=$1 target have="" i
  target=$(hpc_job_target)
  have=$(squeue -h -j "$target" -o '%x' 2>/dev/null) || have="" # (its excluded nodes)
  have=${have//[[:space:]]/}
  [[ $have != "(null)" ]] || have=""
  for ((i = 0; i < 5; i++)); do
    if (trap '' TERM && exec scontrol update "JobId=$target" "ExcNodeList=${have:+$have,}$add") 2>/dev/null; then
      hpc_log "excluded node(s) $add from job $target${have:+ (already excluded: $have)}"
      return 0
    fi
    sleep 0.5
  done
  hpc_log "could not exclude node(s) $add from job $target (scontrol update failed): the next attempt may land there again"
  return 1
}

# hpc_nodes_left_to VAR ADD: how many nodes of the job's partition(s) could still run it
# once ADD (a comma list) is excluded too: not excluded already (squeue's %x), and not down,
# drained, draining, failing or unresponsive. -1 when Slurm does not say (sinfo failed).
hpc_nodes_left_to() {
  local -n _left=$1
  local add=$2 target have name state lines
  local -A out=() seen=()
  _left=-1
  hpc_job_target_to target
  have=$(squeue -h -j "$target" -o %x 2>/dev/null) || have=""
  have=${have//[[:space:]]/}
  [[ $have != "(null)" ]] || have=""
  lines=$(scontrol show hostnames "${have:+$have,}$add" 2>/dev/null) || lines=${add//,/$'\n'}
  for name in $lines; do out[$name]=1; done
  lines=$(sinfo -h -N ${SLURM_JOB_PARTITION:+-p "$SLURM_JOB_PARTITION"} -o '%N %t' 2>/dev/null) || return 0
  _left=0
  while read -r name state; do
    [[ -n $name && -z ${out[$name]:-} && -z ${seen[$name]:-} ]] || continue
    seen[$name]=1
    case $state in
      *'*'* | down* | drain* | drng* | fail* | inval*) ;;
      *) _left=$((_left + 1)) ;;
    esac
  done <<<"$lines"
}

# hpc_requeue_for_node NODES OUTCOME WHY: requeue this job away from NODES (preflight,
# node failure): not one of --max-restarts. Does not return (Slurm ends this attempt).
# When too few nodes would be left to run it, a failed preflight ends the job (exit 78:
# excluded, it would wait for ever) and a node failure is requeued without the exclusion
# (the job waits for its nodes to come back).
hpc_requeue_for_node() {
  local nodes=$1 target rq=0 left exclude=yes need=${HPC_NUM_NODES:-1}
  HPC_ATTEMPT_OUTCOME=$2 HPC_ATTEMPT_NODE=$1 HPC_ATTEMPT_WHY=$3 HPC_ATTEMPT_EXIT=-
  hpc_nodes_left_to left "$nodes"
  if ((left >= 0 && left < need)); then
    if [[ $2 == preflight-failed ]]; then
      hpc_error "preflight failed on $nodes, and only $left other node(s) of partition ${SLURM_JOB_PARTITION:-?} could run this $need-node job: not requeued (excluded, it would wait for ever). See the reasons above; fix the check (--preflight) or tell your admins about the nodes"
      exit "$HPC_EXIT_PREFLIGHT"
    fi
    exclude=""
    hpc_log "only $left other node(s) of partition ${SLURM_JOB_PARTITION:-?} could run this $need-node job: $nodes not excluded; the job waits for nodes to come back"
  fi
  hpc_run_exit_hooks_now 0
  ! hpc_results_lost_stop || exit "${HPC_EXIT_RESULTS_LOST:-74}" # (requeue.sh)
  target=$(hpc_job_target)
  hpc_log "requeueing job $target away from $nodes (not counted as one of --max-restarts)"
  HPC_REQUEUED=1
  (trap '' TERM && exec scontrol requeue "$target") || rq=$?
  if ((rq)) && ! _hpc_requeue_took "$rq"; then
    HPC_REQUEUED=0
    hpc_error "scontrol requeue $target failed (exit code $rq): the job ends here; submit again to resume"
    exit 1
  fi
  [[ -z $exclude ]] || hpc_exclude_nodes "$nodes"
  sleep 300 &
  wait $! 2>/dev/null
  exit 0
}

# --- the preflight ----------------------------------------------------------------------

# hpc_preflight: every node of the job runs preflight.sh (one task per node) before the
# program: GPUs, local disk, the rendezvous port, the user's --preflight. A node that fails
# is excluded and the job requeued (HPC_PREFLIGHT_RETRIES times in a row at most).
hpc_preflight() {
  [[ -z ${HPC_SIGNALLED:-} ]] || return 0
  local dir=${HPC_ATTEMPT_DIR:-} listener="" rc=0 nodes=${HPC_NUM_NODES:-1} own=""
  [[ -n $dir ]] || { dir=$(mktemp -d) && own=$dir; } || return 0
  # (the attempt's folder is new, made with an empty preflight/, which runs once an
  # attempt: no rm and no mkdir, a process each, for every task; else made afresh)
  if [[ $dir != "${HPC_ATTEMPT_DIR:-}" || -L $dir/preflight || ! -d $dir/preflight ]]; then
    [[ ! -e $dir/preflight && ! -L $dir/preflight ]] || rm -rf -- "$dir/preflight"
    mkdir -p -- "$dir/preflight" || return 0
  fi
  export HPC_PREFLIGHT_DIR=$dir/preflight
  # The rendezvous port: what the launchers will use (launchers.sh), listened on here.
  unset HPC_PREFLIGHT_ADDR HPC_PREFLIGHT_PORT
  if ((nodes > 1)) && [[ -n ${SLURM_JOB_NODELIST:-} ]]; then
    if command -v python3 >/dev/null; then
      local addr="" port
      addr=$(hpc_first_node_addr 2>/dev/null) || addr=""
      port=$(MASTER_ADDR=$addr hpc_job_port)
      _hpc_preflight_listen "$addr" "$port" &
      listener=$!
      # Listening before the nodes knock (at most 5 s): a listener that could not start
      # (another job took the port meanwhile) must not fail the nodes; the check is left out.
      local i=0
      [[ -n $addr ]] || i=50
      for ((; i < 50; i++)); do
        ! (exec 3<>"/dev/tcp/$addr/$port") 2>/dev/null || break
        kill -0 "$listener" 2>/dev/null || i=50
        sleep 0.1
      done
      if [[ -n $addr ]] && ((i < 50)); then
        export HPC_PREFLIGHT_ADDR=$addr HPC_PREFLIGHT_PORT=$port
      else
        hpc_log "preflight: could not listen on the rendezvous port ${addr:-?}:$port here: that check is left out"
        kill "$listener" 2>/dev/null
        wait "$listener" 2>/dev/null
        listener=""
      fi
    else
      hpc_log "preflight: no python3 on this node to listen on the rendezvous port: that check is left out"
    fi
  fi
  local check=(bash "$HPC_RUNTIME_DIR/preflight.sh")
  if [[ -n ${SLURM_JOB_ID:-} && -z ${HPC_LOCAL_RUN:-} ]] && command -v srun >/dev/null && { ((nodes > 1)) || ((${HPC_GPUS_PER_NODE:-0} > 0)); }; then
    # Run as the program's steps run (their GPUs), without --kill-on-bad-exit: every node's
    # own line reaches the log.
    srun --quiet --nodes="$nodes" --ntasks-per-node=1 --cpus-per-task="${HPC_CPUS_PER_TASK:-1}" \
      --job-name=hpc_preflight env -u BASH_ENV "${check[@]}" </dev/null || rc=$?
  else
    # This node only: in a subshell of this one (a fork: no bash to start, no job_lib.sh
    # to read again; each task of an array ran one).
    # shellcheck source=/dev/null # (its variables stay in the subshell)
    (source "$HPC_RUNTIME_DIR/preflight.sh") </dev/null || rc=$?
  fi
  [[ -z $listener ]] || { kill "$listener" 2>/dev/null; wait "$listener" 2>/dev/null; }
  local f failed=() why="" first_why="" node line unreached=0
  for f in "$HPC_PREFLIGHT_DIR"/*.fail; do
    [[ -f $f ]] || continue
    node=${f##*/} node=${node%.fail}
    IFS= read -r line <"$f" || line="?"
    [[ $line != "rendezvous "* ]] || unreached=$((unreached + 1))
    failed+=("$node")
    why+="${why:+; }$node: ${line#* }"
    [[ -n $first_why ]] || first_why=${line%% *}
  done
  local ok=("$HPC_PREFLIGHT_DIR"/*.ok)
  [[ -f ${ok[0]} ]] || ok=()
  # When no other node reaches the first node's port, the first node is as likely at fault
  # (its firewall, its network): it is excluded too.
  local first_node
  hpc_node_name_to first_node
  if ((nodes > 1 && unreached == nodes - 1 && ${#failed[@]} == unreached)); then
    failed+=("$first_node")
    why+="; $first_node: no other node reaches its rendezvous port"
  fi
  [[ -z $own ]] || rm -rf -- "$own"
  if ((${#failed[@]} == 0)); then
    if ((rc != 0 || ${#ok[@]} < nodes)); then
      hpc_log "preflight: only ${#ok[@]} of $nodes node(s) answered (exit code $rc); going on"
    elif ((nodes > 1)); then
      hpc_log "preflight: $nodes nodes ready"
    fi
    return 0
  fi
  local list
  list=$(IFS=, && printf '%s' "${failed[*]}")
  hpc_log "preflight failed on $why"
  local done_before
  _hpc_attempts_with_outcome_to done_before preflight-failed
  if [[ -z ${SLURM_JOB_ID:-} || -n ${HPC_LOCAL_RUN:-} || ${HPC_REQUEUE:-yes} != yes ]]; then
    HPC_ATTEMPT_OUTCOME=preflight-failed HPC_ATTEMPT_NODE=$list HPC_ATTEMPT_WHY=$first_why
    hpc_error "preflight failed on $list: the job cannot be requeued elsewhere (no Slurm, or --no-requeue): FAILED"
    exit "$HPC_EXIT_PREFLIGHT"
  fi
  if ((done_before >= ${HPC_PREFLIGHT_RETRIES:-3})); then
    HPC_ATTEMPT_OUTCOME=preflight-failed HPC_ATTEMPT_NODE=$list HPC_ATTEMPT_WHY=$first_why
    hpc_error "preflight failed on $list, after $done_before requeue(s) away from failing nodes (HPC_PREFLIGHT_RETRIES=${HPC_PREFLIGHT_RETRIES:-3}): not requeued again. See the reasons above; fix the check (--preflight) or tell your admins about the nodes"
    exit "$HPC_EXIT_PREFLIGHT"
  fi
  hpc_log "preflight: requeue $((done_before + 1)) of at most ${HPC_PREFLIGHT_RETRIES:-3} away from failing nodes"
  hpc_requeue_for_node "$list" preflight-failed "$first_why"
}

# _hpc_preflight_listen ADDR PORT: accept connections on ADDR:PORT until killed; each is
# closed once the other side has closed it (so no TIME_WAIT is left on this side to keep
# the program from listening there next).
_hpc_preflight_listen() {
  exec python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(128)
while True:
    c, _ = s.accept()
    c.settimeout(5)
    try:
        c.recv(1)
    except OSError:
        pass
    c.close()
' "$1" "$2" 2>/dev/null
}

# _hpc_attempts_with_outcome_to VAR OUTCOMES: how many earlier attempts of this job (each
# counted once) the task's attempts file (runs.sh) records with an outcome of OUTCOMES (a
# regex alternation: 'preflight-failed|node-failure').
_hpc_attempts_with_outcome_to() {
  local -n _ao=$1
  local file job line re="^attempt=([0-9]+) job=([^ ]+) .*outcome=($2) "
  local -A seen=()
  _ao=0
  hpc_attempt_file_to file
  _hpc_run_job_to job
  [[ -n $file && -r $file ]] || return 0
  while IFS= read -r line; do
    [[ $line =~ $re ]] || continue
    [[ ${BASH_REMATCH[2]} == "$job" && -z ${seen[${BASH_REMATCH[1]}]:-} ]] || continue
    seen[${BASH_REMATCH[1]}]=1
    _ao=$((_ao + 1))
  done <"$file"
}

# --- a node lost under the job ------------------------------------------------------------

# _hpc_attempt_before_unended: the attempt before this one has a "running" record and no
# end: its batch shell never ended it. Its node died under it (nothing runs then, no trap:
# Slurm requeued the job for NODE_FAIL), or the shell was killed with SIGKILL. Recorded
# now, in the task's attempts file: a node failure of its node (runs.sh writes the node
# into the "running" record) when Slurm says so (sacct: NODE_FAIL; else sinfo: the node is
# down now), never the program's failure and not one of --max-restarts; else "lost".
_hpc_attempt_before_unended() {
  local prev=${HPC_RESTART_COUNT:-0} file job line unended=0 start="" node="" target state
  ((prev > 0)) || return 0
  hpc_attempt_file_to file
  [[ -n $file && -r $file ]] || return 0
  _hpc_run_job_to job
  while IFS= read -r line; do
    [[ $line == "attempt=$prev job=$job "* ]] || continue
    unended=0
    [[ $line == *" outcome=running "* ]] || continue
    unended=1
    [[ $line =~ \ start=([0-9]+) ]] && start=${BASH_REMATCH[1]}
    node=""
    [[ ! $line =~ \ node=([A-Za-z0-9][A-Za-z0-9._,-]*) ]] || node=${BASH_REMATCH[1]}
  done <"$file" 2>/dev/null
  ((unended)) || return 0
  local gone=0
  hpc_job_target_to target
  # sacct lists each attempt of a requeued job (-D); the last line is this one.
  state=$(sacct -j "$target" -D -X -n -P -o State 2>/dev/null | tail -2 | head -1)
  if [[ $state == NODE_FAIL* ]]; then
    gone=1
  elif [[ -n $node ]]; then
    state=$(sinfo -h -n "$node" -o %t 2>/dev/null | head -1)
    case $state in down* | fail* | *'*' | unk* | drain*) gone=1 ;; esac
  fi
  local HPC_RESTART_COUNT=$((prev - 1)) HPC_ATTEMPT_STARTED=${start:-} HPC_ATTEMPT_NODE=$node HPC_ATTEMPT_WHY=""
  if ((gone)); then
    hpc_log "attempt $prev ended with no word from its batch shell: node failure (${node:-its node}): not the program's failure, and not counted as one of --max-restarts"
    hpc_attempt_record node-failure -
  else
    hpc_log "attempt $prev ended with no word from its batch shell (killed with SIGKILL, or its node was lost${node:+: $node}); recorded as lost"
    hpc_attempt_record lost -
  fi
}

# hpc_lost_nodes_to VAR: the job's nodes that Slurm shows DOWN, FAIL or not responding now
# (a comma list; "" when none, or outside Slurm).
hpc_lost_nodes_to() {
  local -n _lost=$1
  local name state
  _lost=""
  [[ -n ${SLURM_JOB_NODELIST:-} ]] || return 0
  while read -r name state; do
    case $state in
      down* | fail* | *'*' | unk*) _lost+=${_lost:+,}$name ;;
    esac
  done < <(sinfo -h -N -n "$SLURM_JOB_NODELIST" -o '%N %t' 2>/dev/null | sort -u)
}

# hpc_node_failure_check WHEN: a node of the job is lost (WHEN: what just happened, for the
# log): record the attempt as a node failure of that node, never as the program's failure,
# and see that the job runs again away from it. Returns 1 when no node is lost.
hpc_node_failure_check() {
  [[ -n ${SLURM_JOB_NODELIST:-} ]] || return 1
  local lost
  hpc_lost_nodes_to lost
  [[ -n $lost ]] || return 1
  hpc_log "node failure ($lost) $1: not the program's failure"
  HPC_ATTEMPT_OUTCOME=node-failure HPC_ATTEMPT_NODE=$lost HPC_ATTEMPT_WHY="" HPC_ATTEMPT_EXIT=-
  return 0
}

# hpc_after_lost_node RC: the program failed (RC); when a node of the job is lost, that is
# why: the attempt is the node's failure, and the job runs again away from it (Slurm's own
# requeue when it has made one already, else ours). Returns 1 when no node is lost (the
# failure is the program's); RC when the job cannot run again (--no-requeue).
hpc_after_lost_node() {
  hpc_node_failure_check "under the running program (exit code $1)" || return 1
  local state when restarts
  if [[ ${HPC_REQUEUE:-yes} != yes ]]; then
    hpc_log "not requeued (--no-requeue): submit again to resume"
    return "$1"
  fi
  hpc_job_state_to state when restarts
  if [[ -n $restarts ]] && ((restarts > HPC_RESTART_COUNT)); then
    # Slurm requeued the job for the node already: this attempt is ending.
    HPC_REQUEUED=1
    hpc_exclude_nodes "$HPC_ATTEMPT_NODE"
    hpc_run_exit_hooks_now "$1"
    sleep 300 &
    wait $! 2>/dev/null
    exit 0
  fi
  hpc_requeue_for_node "$HPC_ATTEMPT_NODE" node-failure ""
}
