# shellcheck shell=bash
# Job side of wall time and preemption: the batch shell gets SIGUSR1 --signal-grace
# seconds before the wall time (#SBATCH --signal=B:USR1@GRACE), passes the warning on to
# the program on every node (proc_tree.sh: SIGUSR1 to the processes that handle it, else
# SIGTERM to those that handle that), waits for it to checkpoint and exit, copies results
# back (the exit hooks), then requeues the job, which resumes from $HPC_CHECKPOINT_DIR:
# but only when the attempt made progress (hpc_requeue_verdict_to), never in a loop.
# A preemption is handled the same way: Slurm signals only the job's steps when the
# preemption's GraceTime starts, so a watch step (preempt_watch.sh) passes the notice on
# to this shell as SIGUSR2, with what is left of the grace time as the budget. A user's
# scancel is not requeued. Sourced by job_runtime.sh.

HPC_RUNTIME_DIR=${BASH_SOURCE[0]%/*}
HPC_RUN_LINE=$HPC_RUNTIME_DIR/run_line.sh
# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "$HPC_RUNTIME_DIR/job_lib.sh"
# shellcheck source=virtual_env_hpc_files/proc_tree.sh
source "$HPC_RUNTIME_DIR/proc_tree.sh"
# shellcheck source=virtual_env_hpc_files/runs.sh
source "$HPC_RUNTIME_DIR/runs.sh" # whose checkpoints; the attempts file
# shellcheck source=virtual_env_hpc_files/run_line.sh
source "$HPC_RUN_LINE" # hpc_run_line_argv_to: how a line starts

HPC_SIGNALLED=""      # walltime | preempt (a requeue is due) | cancel (stop, no requeue)
HPC_WATCHDOG_PID=""
HPC_PREEMPT_WATCH_PID="" HPC_PREEMPT_WATCH_STOP=""
HPC_REQUEUED=0 # this attempt asked Slurm for the requeue: its SIGTERM is expected
HPC_JOB_ENDING=""  # set when Slurm is ending the job: it signals every step itself
HPC_TERM_UNEXPLAINED="" # a SIGTERM came and squeue did not say why: asked again at the end
HPC_FINISHED_MARKER=""  # no: this attempt leaves no finished marker (hpc_term_explain_late)
# $HPC_EXP_DIR/.hpc_attempt/JOB: "start" (its time), "before" (the checkpoints then),
# "stopped" (the watchdog stopped the program), "warned*" (a process took the warning),
# "ended.rankN" (rank N's program has ended: task_wrapper.sh)
HPC_ATTEMPT_DIR=""
HPC_ATTEMPT_OUTCOME="" # how this attempt ended, when a decision here says (runs.sh)
# The watch step runs in requeueable jobs unless HPC_PREEMPT_WATCH=no.
HPC_PREEMPT_WATCH=${HPC_PREEMPT_WATCH:-yes}
# Seconds kept back from the grace period for copying results and requeueing.
HPC_REQUEUE_MARGIN=${HPC_REQUEUE_MARGIN:-15}
# Seconds between the SIGTERM at the end of the grace period and a SIGKILL.
HPC_KILL_AFTER=${HPC_KILL_AFTER:-5}
# TERM means preemption when Slurm says PREEMPTED (auto), always (yes) or never (no).
HPC_REQUEUE_ON_TERM=${HPC_REQUEUE_ON_TERM:-auto}
# Exit code of a job that was warned but may not be requeued again (EX_TEMPFAIL).
HPC_EXIT_RESTART_LIMIT=75
# Exit code of a job that was warned and made no progress: not requeued (as timeout(1)).
HPC_EXIT_NO_PROGRESS=124
# Launchers whose program runs in srun steps (on every node) rather than under this shell.
HPC_STEP_LAUNCHERS=" lightning script torchrun "

# hpc_spawn_command LINE: run LINE (run_line.sh: bash -c LINE, in the container if any)
# in the background, in a process group of its own (so a signal reaches the whole
# command). The program starts with the default disposition of every signal: the shell
# in between catches them until it execs (a caught signal is reset by exec; an ignored
# one would stay ignored, and bash could not trap it). Sets HPC_CHILD_PID.
hpc_spawn_command() {
  local argv ran
  hpc_line_expanded_to ran "$1" # the line as it runs, beside "command:" (job_lib.sh)
  [[ -z $ran ]] || hpc_log "runs as: $ran"
  hpc_run_line_argv_to argv "$1"
  # Processes it starts outside its group end with it (proc_tree.sh: hpc_escapees_end).
  hpc_escapees_begin
  (
    export HPC_PROGRAM_TOKEN
    trap ':' USR1 USR2 TERM INT QUIT HUP
    exec setsid "${argv[@]}"
  ) </dev/null &
  HPC_CHILD_PID=$!
  hpc_note_program_pid "$HPC_CHILD_PID" # for the stall watch (longruns.sh)
}

# hpc_job_target: this job's id for scancel/scontrol/squeue. An array task is named
# ARRAY_TASK: its own SLURM_JOB_ID can be the array's id, which names every task.
hpc_job_target() {
  local t
  hpc_job_target_to t
  printf '%s\n' "$t"
}

# hpc_job_target_to VAR: the same into VAR (no subshell: every task's start asks it).
hpc_job_target_to() {
  local -n _tgt=$1
  if [[ -n ${SLURM_ARRAY_TASK_ID:-} && -n ${SLURM_ARRAY_JOB_ID:-} ]]; then
    _tgt=${SLURM_ARRAY_JOB_ID}_$SLURM_ARRAY_TASK_ID
  else
    _tgt=${SLURM_JOB_ID:?}
  fi
}

# hpc_signal_program SIG: SIG to the program wherever it runs: its process group here,
# and every srun step of the job (distributed launchers) through Slurm.
hpc_signal_program() {
  local sig=$1
  if [[ -n ${HPC_CHILD_PID:-} ]]; then
    kill -s "$sig" -- "-$HPC_CHILD_PID" 2>/dev/null || kill -s "$sig" "$HPC_CHILD_PID" 2>/dev/null
  fi
  # A job Slurm is ending (cancelled, requeued from outside, out of time) has had every
  # step signalled by Slurm itself, and refuses scancel --signal: nothing to pass on.
  if [[ $HPC_LAUNCHER != none && -n ${SLURM_JOB_ID:-} && -z ${HPC_JOB_ENDING:-} ]]; then
    scancel --signal="$sig" "$(hpc_job_target)" 2>/dev/null ||
      hpc_log "could not pass SIG$sig to the job's steps (scancel --signal failed)"
  fi
}

# hpc_warn_program SECONDS: pass the warning on: to the program's processes here
# (proc_tree.sh), or, for launchers that run it in srun steps, to every task's
# task_wrapper.sh through Slurm as SIGURG (ignored by default, so it harms no process
# that gets it), which does the same on its node. Keeps trying for SECONDS while no
# process handles the warning yet (a program may install its handler late).
hpc_warn_program() {
  if [[ $HPC_STEP_LAUNCHERS == *" $HPC_LAUNCHER "* ]]; then
    [[ -z ${SLURM_JOB_ID:-} ]] || scancel --signal=URG "$(hpc_job_target)" 2>/dev/null ||
      hpc_log "could not pass the warning to the job's steps (scancel --signal=URG failed)"
  else
    hpc_proc_warn_loop "$HPC_CHILD_PID" "$1" hpc_log "${HPC_ATTEMPT_DIR:+$HPC_ATTEMPT_DIR/warned}"
  fi
}

# hpc_on_warning walltime|preempt [SECONDS]: ask the program to checkpoint; stop it if it
# has not exited when the grace period (or SECONDS, when fewer), less the margin, is over.
hpc_on_warning() {
  [[ $HPC_SIGNALLED != walltime && $HPC_SIGNALLED != preempt ]] || return 0
  HPC_SIGNALLED=$1
  local budget=$HPC_SIGNAL_GRACE margin=$HPC_REQUEUE_MARGIN
  [[ -z ${2:-} ]] || ((${2} >= budget)) || budget=$2
  ((margin <= budget / 3)) || margin=$((budget / 3))
  local wait_s=$((budget - margin))
  ((wait_s >= 5)) || wait_s=5
  HPC_WARN_WAIT_S=$wait_s # a packed job warns each of its lines (pack.sh)
  hpc_log "$1 warning: asking the program to checkpoint and exit; it has ${wait_s} s"
  [[ -n ${HPC_CHILD_PID:-} ]] || return 0 # not started yet: it will not be
  (
    trap - USR1 USR2 TERM INT EXIT
    local end=$((SECONDS + wait_s)) stop=0
    # Passing the warning on and saying so in the log go together: the batch shell ends
    # this watchdog (SIGTERM) as soon as the program exits, which a quick program does
    # before the line is written; the TERM waits for it.
    trap 'stop=1' TERM
    hpc_warn_program "$wait_s"
    trap - TERM
    ((stop == 0)) || exit 0
    ((SECONDS >= end)) || sleep $((end - SECONDS))
    [[ -z $HPC_ATTEMPT_DIR ]] || : >"$HPC_ATTEMPT_DIR/stopped"
    hpc_log "the program is still running ${wait_s} s after the warning: stopping it (SIGTERM)"
    hpc_signal_program TERM
    # A program that ignores SIGTERM too would hold the job until Slurm kills everything,
    # results and all: KILL it while there is time left to copy them.
    sleep "$HPC_KILL_AFTER"
    hpc_log "the program ignored SIGTERM for $HPC_KILL_AFTER s: killing it (SIGKILL)"
    hpc_signal_program KILL
  ) </dev/null &
  HPC_WATCHDOG_PID=$!
}

# hpc_job_state_to STATE_VAR PREEMPT_VAR [RESTARTS_VAR]: the job's state (RUNNING,
# COMPLETING, ...), its PreemptTime (e.g. 2026-11-22T17:40:12, "" if it was not
# preempted) and its restart count, as fields of one squeue (never read from the text of
# `scontrol show job`, where a job name or a Comment= can hold "PreemptTime=..."); all ""
# outside Slurm or when Slurm does not answer.
hpc_job_state_to() {
  local -n _state=$1 _pt=$2
  local info _rs_none=""
  local -n _rs=${3:-_rs_none}
  _state="" _pt="" _rs=""
  [[ -n ${SLURM_JOB_ID:-} ]] || return 0
  info=$(squeue -h -j "$(hpc_job_target)" -O 'State:40,PreemptTime:40,RestartCnt:12' 2>/dev/null) || return 0
  read -r _state _pt _rs <<<"$info"
  [[ $_state =~ ^[A-Z_]+$ ]] || _state=""
  [[ $_pt =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]+$ ]] || _pt=""
  [[ $_rs =~ ^[0-9]{1,9}$ ]] || _rs=""
  return 0
}

# _hpc_preempt_left_to VAR PREEMPT_TIME: seconds left of the preemption's GraceTime (the
# job's partition's), or "" when Slurm does not say (a QOS's GraceTime, say).
_hpc_preempt_left_to() {
  local -n _left=$1
  local grace="" since now
  _left=""
  [[ -n ${SLURM_JOB_PARTITION:-} ]] &&
    grace=$(scontrol show partition "$SLURM_JOB_PARTITION" 2>/dev/null | grep -o 'GraceTime=[0-9]*')
  grace=${grace#GraceTime=}
  [[ -n $grace ]] && ((grace > 0)) || return 0
  since=$(date -d "$2" +%s 2>/dev/null) || return 0
  printf -v now '%(%s)T' -1
  _left=$((grace - (now - since)))
  ((_left > 0)) || _left=1
}

# hpc_on_preempt_notice: SIGUSR2 from the watch step: the job is being preempted.
hpc_on_preempt_notice() {
  local state when left
  hpc_job_state_to state when
  [[ -n $when ]] || return 0 # not from a preemption
  _hpc_preempt_left_to left "$when"
  hpc_log "preempted at $when${left:+ ($left s of grace time left)}"
  # When the preemption began (the steps got Slurm's own SIGTERM then): hpc_after_command.
  [[ -z $HPC_ATTEMPT_DIR ]] || touch -d "$when" -- "$HPC_ATTEMPT_DIR/preempted" 2>/dev/null || true
  hpc_on_warning preempt "$left"
}

# hpc_start_preempt_watch: the watch step (preempt_watch.sh), in requeueable Slurm jobs.
# It overlaps the job's steps and takes none of their CPUs, memory or GPUs.
hpc_start_preempt_watch() {
  [[ $HPC_PREEMPT_WATCH == yes && ${HPC_REQUEUE:-yes} == yes && -n ${SLURM_JOB_ID:-} ]] || return 0
  command -v srun >/dev/null || return 0
  HPC_PREEMPT_WATCH_STOP=${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/.hpc_preempt_watch.${SLURM_JOB_ID}.$$
  rm -f -- "$HPC_PREEMPT_WATCH_STOP"
  srun --overlap --quiet --nodes=1 --ntasks=1 --cpus-per-task=1 --gres=none \
    --nodelist="${SLURMD_NODENAME:-$(hostname -s)}" --job-name=hpc_preempt_watch \
    env -u BASH_ENV bash "$HPC_RUNTIME_DIR/preempt_watch.sh" "$(hpc_job_target)" "$HPC_PREEMPT_WATCH_STOP" </dev/null &
  HPC_PREEMPT_WATCH_PID=$!
  HPC_EXIT_HOOKS=(hpc_stop_preempt_watch "${HPC_EXIT_HOOKS[@]}")
}

# hpc_stop_preempt_watch: the watch step ends by itself (exit 0) once its stop file is
# there; it is cancelled only if it has not within 3 s.
hpc_stop_preempt_watch() {
  [[ -n $HPC_PREEMPT_WATCH_PID ]] || return 0
  local pid=$HPC_PREEMPT_WATCH_PID i
  HPC_PREEMPT_WATCH_PID=""
  { : >"$HPC_PREEMPT_WATCH_STOP"; } 2>/dev/null
  for ((i = 0; i < 30; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rm -f -- "$HPC_PREEMPT_WATCH_STOP"
  return 0
}

# hpc_on_term: SIGTERM to the batch shell: a preemption (requeue), a requeue from outside
# (the job runs again) or a cancel (stop). Slurm sends it to a preempted job's batch shell
# only when the grace time is over (the watch step saw the preemption earlier), and then
# shows the job COMPLETING with a PreemptTime; a user's scancel leaves no PreemptTime.
# Someone's `scontrol requeue` (the user's, an admin's, the program's own) shows the job
# COMPLETING with its restart count already one up (measured on 22.05 and 24.11; a cancel
# leaves it as it was).
hpc_on_term() {
  local state="" when="" restarts=""
  HPC_TERM_AT_US=${EPOCHREALTIME/[.,]/} # Slurm's KillWait counts from here (staging.sh)
  if ((HPC_REQUEUED)); then
    hpc_log "requeued: Slurm ends this attempt (SIGTERM)"
    return 0
  fi
  # A node of the job lost (NODE_FAIL): the attempt is the node's failure, not the
  # program's (longruns.sh). Asked first: a node can come back within a second.
  local lost=""
  ! hpc_node_failure_check "(Slurm ends this attempt)" || lost=$HPC_ATTEMPT_NODE
  hpc_job_state_to state when restarts
  # squeue can miss the job for a moment while Slurm requeues it (seen on 26.05 under
  # load: taken for a cancel, the job left its finished marker and attempt 2 ended at
  # once): asked again, within a second.
  local tries
  for ((tries = 0; tries < 3; tries++)); do
    [[ -z $state && -n ${SLURM_JOB_ID:-} ]] || break
    sleep 0.3
    hpc_job_state_to state when restarts
  done
  if [[ -z $state && -n ${SLURM_JOB_ID:-} ]]; then
    # Asked again once the other exit steps took their time, before the attempt's record.
    HPC_TERM_UNEXPLAINED=1
    HPC_LAST_EXIT_HOOKS=(hpc_term_explain_late "${HPC_LAST_EXIT_HOOKS[@]}")
  fi
  if [[ $HPC_REQUEUE_ON_TERM == yes || ($HPC_REQUEUE_ON_TERM == auto && ($state == PREEMPTED || -n $when)) ]]; then
    hpc_on_warning preempt
    return 0
  fi
  [[ -n $HPC_SIGNALLED ]] || HPC_SIGNALLED=cancel
  # (Slurm shows a job it ends COMPLETING and signals its steps itself; a SIGTERM sent to
  # the batch shell alone leaves it RUNNING.)
  [[ -z $state || $state == RUNNING ]] || HPC_JOB_ENDING=1
  if [[ -n $restarts ]] && ((restarts > HPC_RESTART_COUNT)); then
    # Not this job's end: it must not be taken for finished (job_lib.sh's marker).
    HPC_REQUEUED=1
    if [[ -n $lost ]]; then
      hpc_log "received SIGTERM: Slurm requeued the job after the node failure ($lost; restart $restarts): stopping the program; Slurm runs the job again"
      hpc_exclude_nodes "$lost"
    else
      hpc_log "received SIGTERM: the job was requeued from outside (scontrol requeue; restart $restarts): stopping the program; Slurm runs the job again"
    fi
  elif [[ -n $HPC_TERM_UNEXPLAINED ]]; then
    hpc_log "received SIGTERM (Slurm does not say yet whether it cancels or requeues the job): stopping the program"
  else
    hpc_log "received SIGTERM (job ${state:-ending}): stopping the program, no requeue"
  fi
  hpc_signal_program TERM
  hpc_hooks_before_kill # results copy and cleanup while Slurm still lets us (staging.sh)
}

# hpc_term_explain_late: an exit hook (the first of the last ones) of an attempt whose
# SIGTERM squeue did not explain (hpc_on_term: it can miss a job Slurm is requeueing for
# over a second, CI on 26.05 under load): ask once more. A restart count one up is a
# requeue from outside: the attempt is recorded as requeued and leaves no finished marker.
# Still no answer leaves no marker either: a requeued job would otherwise end at its next
# attempt as "already finished", and a cancelled one does not run again.
hpc_term_explain_late() {
  [[ -n $HPC_TERM_UNEXPLAINED ]] || return 0
  local state="" when="" restarts=""
  hpc_job_state_to state when restarts
  if [[ -z $restarts ]]; then
    hpc_log "Slurm did not say whether it requeued the job: no finished marker left (were it requeued, its next attempt runs the command again)"
    HPC_FINISHED_MARKER=no
  elif ((restarts > HPC_RESTART_COUNT)); then
    HPC_REQUEUED=1
    hpc_log "the job was requeued from outside (scontrol requeue; restart $restarts), Slurm says now: Slurm runs the job again"
  fi
  HPC_TERM_UNEXPLAINED=""
}

# hpc_install_signal_traps: from the start of the job, so that a warning during data
# staging is not lost (bash runs a trap once the foreground command returns).
hpc_install_signal_traps() {
  trap 'hpc_on_warning walltime' USR1
  trap hpc_on_term TERM
  trap hpc_on_usr2 USR2 # the preemption watch's notice, or a stall (longruns.sh)
  trap 'hpc_log "received SIGINT: passing it on"; hpc_signal_program INT' INT
}

# hpc_attempt_begin: mark the start of this attempt ($HPC_ATTEMPT_DIR/start) and list
# the checkpoints already there (before), so that what it writes can be told from what
# earlier attempts wrote; record it in the task's attempts file (runs.sh). Removed at the
# end. HPC_ATTEMPT_DIR is exported: every task of a distributed launcher marks there
# that its program took the warning (task_wrapper.sh).
hpc_attempt_begin() {
  local dir=local-$$
  printf -v HPC_ATTEMPT_STARTED '%(%s)T' -1
  [[ -z ${SLURM_JOB_ID:-} ]] || hpc_job_target_to dir
  dir=$HPC_EXP_DIR/.hpc_attempt/$dir
  HPC_LAST_EXIT_HOOKS=(hpc_attempt_end_record "${HPC_LAST_EXIT_HOOKS[@]}")
  # (its node: the next attempt names it, should this one end with no word: longruns.sh)
  local HPC_ATTEMPT_NODE
  hpc_node_name_to HPC_ATTEMPT_NODE
  [[ $HPC_ATTEMPT_NODE =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ ]] || HPC_ATTEMPT_NODE=""
  hpc_attempt_record running -
  # (an earlier attempt's folder is there only if it could not remove it: no rm otherwise)
  # The folder and its parts in one mkdir (a process each was a cost of every task):
  # heartbeat/ and pids/ (longruns.sh: the stall watch), preflight/ (hpc_preflight).
  if ! { { [[ ! -e $dir && ! -L $dir ]] || rm -rf -- "$dir"; } &&
    mkdir -p -- "$dir/heartbeat" "$dir/pids" "$dir/preflight" && : >"$dir/start"; }; then
    hpc_log "cannot write $dir: a warned attempt will count as progress only if the program exits 0"
    return 0
  fi
  hpc_ckpt_snapshot "$HPC_CHECKPOINT_DIR" "$dir/before"
  hpc_ckpt_sums "$HPC_CHECKPOINT_DIR" "$dir/sums"
  export HPC_ATTEMPT_DIR=$dir
  HPC_LAST_EXIT_HOOKS=(hpc_attempt_end "${HPC_LAST_EXIT_HOOKS[@]}")
}

# hpc_took_warning [SUFFIX]: a process of the program (of line SUFFIX, packed) took the
# warning during this attempt; true when that cannot be known.
hpc_took_warning() {
  [[ -n $HPC_ATTEMPT_DIR ]] || return 0
  [[ -z ${1:-} ]] || { [[ -e $HPC_ATTEMPT_DIR/warned.$1 ]] && return 0 || return 1; }
  compgen -G "$HPC_ATTEMPT_DIR/warned*" >/dev/null
}

hpc_attempt_end() {
  [[ -z $HPC_ATTEMPT_DIR ]] || rm -rf -- "$HPC_ATTEMPT_DIR"
  # The folder of attempts goes when it is empty (no rmdir while an array's other tasks run).
  compgen -G "$HPC_EXP_DIR/.hpc_attempt/*" >/dev/null || rmdir -- "$HPC_EXP_DIR/.hpc_attempt" 2>/dev/null
  return 0
}

# hpc_ckpt_sums DIR FILE: at an attempt's start, "CRC SIZE PATH" (cksum) of every file of
# DIR up to 16 MiB, so that a file the attempt only appended to (a log the program keeps
# there) can be told from a checkpoint it wrote (hpc_ckpt_appended). A larger file is left
# out: whatever the attempt does to it counts as written.
hpc_ckpt_sums() {
  { : >"$2"; } 2>/dev/null || return 0
  ! hpc_dir_bare "$1" || return 0
  find "$1" "${HPC_CKPT_FILE_TESTS[@]}" -size -16385k \
    -print0 2>/dev/null | xargs -0 -r cksum -- >"$2" 2>/dev/null
  return 0
}

# hpc_ckpt_appended FILE SUMS: FILE's content at the attempt's start (its line in SUMS) is
# still there, unchanged, at its beginning: the attempt appended to it (or left it as it
# was). A log, not a checkpoint: it is no progress (a program that finished its work and
# hangs at exit still appends to its log on every attempt; docs/requeue.md).
hpc_ckpt_appended() {
  local crc size path now
  [[ -s $2 ]] || return 1
  while read -r crc size path; do
    [[ $path == "$1" && $size =~ ^[0-9]+$ ]] || continue
    now=$(stat -c %s -- "$1" 2>/dev/null) || return 1
    ((now >= size)) || return 1
    [[ $(head -c "$size" -- "$1" 2>/dev/null | cksum) == "$crc $size" ]]
    return
  done <"$2"
  return 1
}

# hpc_program_ended [LINE]: the program (packed line LINE) has just ended: mark when
# ($HPC_ATTEMPT_DIR/ended[.LINE]), then end the processes it started outside its process
# group (proc_tree.sh). What is written after the mark is not the attempt's progress: a
# daemon the program left behind wrote into $HPC_CHECKPOINT_DIR until the attempt was
# judged, and the job was requeued for it to the restart limit (issue 32).
hpc_program_ended() {
  [[ -z ${HPC_ATTEMPT_DIR:-} ]] || { : >"$HPC_ATTEMPT_DIR/ended${1:+.$1}"; } 2>/dev/null
  if [[ -n ${1:-} ]]; then
    local HPC_PROGRAM_TOKEN=${HPC_PROGRAM_TOKEN:-}.$1
    [[ $HPC_PROGRAM_TOKEN == .* ]] || hpc_escapees_end "line $1: "
  else
    hpc_escapees_end
  fi
  return 0
}

# hpc_checkpoint_written [SINCE_FILE [SUMS [UNTIL_FILE]]]: true when a file in
# $HPC_CHECKPOINT_DIR (any depth) was written during this attempt (or since SINCE_FILE)
# while its program ran (up to UNTIL_FILE, default $HPC_ATTEMPT_DIR/ended when there:
# hpc_program_ended): not empty, newer than its start, not a temporary (*.tmp, *.part),
# not the toolkit's own (.hpc_run: runs.sh), not one the attempt only appended to
# (hpc_ckpt_appended, against SUMS, default $HPC_ATTEMPT_DIR/sums). HPC_CKPT_APPENDED
# lists the appended files it passed over.
hpc_checkpoint_written() {
  local since=${1:-$HPC_ATTEMPT_DIR/start} sums=${2:-$HPC_ATTEMPT_DIR/sums} f
  local until=${3:-$HPC_ATTEMPT_DIR/ended} upto=()
  HPC_CKPT_APPENDED=()
  [[ -n $HPC_ATTEMPT_DIR && -e $since && -d $HPC_CHECKPOINT_DIR ]] || return 1
  [[ ! -e $until ]] || upto=('!' -newer "$until")
  while IFS= read -r -d '' f; do
    hpc_ckpt_appended "$f" "$sums" || return 0
    HPC_CKPT_APPENDED+=("${f#"$HPC_CHECKPOINT_DIR"/}")
  done < <(find "$HPC_CHECKPOINT_DIR" "${HPC_CKPT_FILE_TESTS[@]}" -newer "$since" "${upto[@]}" -print0 2>/dev/null)
  return 1
}

# hpc_requeue_verdict_to VAR REQUEUE RC STOPPED WROTE RESTARTS MAX [TOOK [OVER]]: what to
# do once a warned program has ended (pure; tests/unit/requeue_signals.bats):
#   finished     it exited 0 by itself (not STOPPED) and no process of it TOOK the
#                warning (TOOK=0): it had finished its work; the job is complete
#   failed       it failed by itself (RC != 0, not STOPPED) without taking the warning:
#                its own failure, not the warning's; the job ends with its code
#   off          REQUEUE is not yes (--no-requeue): end with the program's code
#   started-over it wrote again a checkpoint that an earlier attempt had written before
#                its newest one (OVER=1): it starts over instead of resuming
#   no-progress  it WROTE no checkpoint during this attempt: requeueing would only
#                start it over
#   limit        RESTARTS reached MAX (--max-restarts)
#   requeue      otherwise: it took the warning or was stopped, and wrote a checkpoint
hpc_requeue_verdict_to() {
  local -n _verdict=$1
  local requeue=$2 rc=$3 stopped=$4 wrote=$5 restarts=$6 max=$7 took=${8:-1} over=${9:-0}
  if ((rc == 0 && stopped == 0 && took == 0)); then
    _verdict=finished
  elif ((stopped == 0 && took == 0)); then
    _verdict=failed
  elif [[ $requeue != yes ]]; then
    _verdict=off
  elif ((over == 1)); then
    _verdict="started-over"
  elif ((wrote == 0)); then
    _verdict=no-progress
  elif ((restarts >= max)); then
    _verdict=limit
  else
    _verdict=requeue
  fi
}

# hpc_watchdog_end PID: end a warning's watchdog (hpc_on_warning, pack.sh's per line) once
# its program has ended, and wait for it. One that has just passed the warning on writes
# its mark and log line first (its TERM trap waits for them): a program that took the
# warning and exited at once is judged as warned, even on a node so loaded that the
# watchdog had not marked it yet (seen: a packed line's checkpoint judged "finished").
hpc_watchdog_end() {
  [[ -n ${1:-} ]] || return 0
  kill "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  return 0
}

# hpc_after_unstarted: the job was signalled before its command started (a long preflight,
# staging or setup; Slurm may send the wall-time warning up to 60 s early). Nothing ran, so
# nothing may end as finished (it did: COMPLETED 0:0 with no result). A preemption is
# requeued (the next attempt runs the command), within --max-restarts; the wall-time
# warning ends the job with the no-progress code, as for a packed line that never
# started (pack.sh): another attempt would spend its time the same way.
hpc_after_unstarted() {
  local restarts=$((${SLURM_RESTART_COUNT:-0} - ${HPC_EXCUSED_RESTARTS:-0}))
  case $HPC_SIGNALLED in
    preempt)
      if [[ ${HPC_REQUEUE:-yes} == yes ]] && ((restarts < HPC_MAX_RESTARTS)); then
        hpc_log "preempted before the command started: requeued, the next attempt runs it"
        hpc_requeue_now 0 "$restarts"
        return
      fi
      HPC_ATTEMPT_OUTCOME=not-requeued
      hpc_log "preempted before the command started, and not requeued (--no-requeue, or the restart limit of $HPC_MAX_RESTARTS): the command never ran"
      return "$HPC_EXIT_NO_PROGRESS"
      ;;
    walltime)
      HPC_ATTEMPT_OUTCOME=no-progress
      hpc_log "the command never started: the wall-time warning came $SECONDS s after the job began (its setup: preflight, data staging, venv). Give more --time (Slurm may warn up to 60 s before --signal-grace), a smaller --signal-grace, or a shorter --preflight"
      return "$HPC_EXIT_NO_PROGRESS"
      ;;
  esac
  HPC_ATTEMPT_OUTCOME=not-requeued
  return $((128 + 15)) # cancelled: the command never ran
}

# hpc_after_command RC: once the program has ended. Returns the job's exit code, or does
# not return at all when the job is requeued.
hpc_after_command() {
  # (Requeues for a node, preflight or lost, are not the program's: longruns.sh.)
  local rc=$1 stopped=0 wrote=0 took=1 over=0 file="" verdict restarts=$((${SLURM_RESTART_COUNT:-0} - ${HPC_EXCUSED_RESTARTS:-0}))
  if [[ $HPC_SIGNALLED == stall ]]; then
    hpc_after_stall "$rc" # (longruns.sh)
    return
  fi
  [[ $HPC_SIGNALLED == walltime || $HPC_SIGNALLED == preempt ]] || return "$rc"
  hpc_watchdog_end "$HPC_WATCHDOG_PID"
  [[ -z $HPC_ATTEMPT_DIR || ! -e $HPC_ATTEMPT_DIR/stopped ]] || stopped=1
  # Stopped, its main process ended on SIGTERM, but processes of its group that ignore
  # SIGTERM (DataLoader workers) would outlive it: the SIGKILL the watchdog had for them.
  if ((stopped)) && [[ -n ${HPC_CHILD_PID:-} ]] && kill -0 -- "-$HPC_CHILD_PID" 2>/dev/null; then
    hpc_log "processes of the program outlived it, ignoring SIGTERM (DataLoader workers?): killing them (SIGKILL)"
    kill -s KILL -- "-$HPC_CHILD_PID" 2>/dev/null
  fi
  hpc_took_warning "" || took=0
  # A preempted job's steps get Slurm's own SIGTERM, which the program may take before the
  # toolkit's warning reaches it (no marker then; seen on 24.11/26.05 with Lightning): a
  # checkpoint written since the preemption began is its answer, a pause, not a finish.
  if ((took == 0)) && [[ $HPC_SIGNALLED == preempt && -n $HPC_ATTEMPT_DIR ]] &&
    hpc_checkpoint_written "$HPC_ATTEMPT_DIR/preempted"; then
    took=1
    hpc_log "the program saved a checkpoint after Slurm's own preemption signal: a pause, not a finish"
  fi
  ! hpc_checkpoint_written || wrote=1
  if ((wrote)) && [[ -n $HPC_ATTEMPT_DIR ]]; then
    hpc_ckpt_started_over_to file "$HPC_CHECKPOINT_DIR" "$HPC_ATTEMPT_DIR/before" "$HPC_ATTEMPT_DIR/start"
    [[ -z $file ]] || over=1
  fi
  hpc_requeue_verdict_to verdict "${HPC_REQUEUE:-yes}" "$rc" "$stopped" "$wrote" "$restarts" \
    "$HPC_MAX_RESTARTS" "$took" "$over"
  HPC_ATTEMPT_OUTCOME=$verdict
  case $verdict in
    finished)
      hpc_log "the program exited 0 without taking the $HPC_SIGNALLED warning: it had finished; the job is complete, not requeued"
      return 0
      ;;
    failed)
      hpc_log "the program failed by itself (exit code $rc) without taking the $HPC_SIGNALLED warning: not requeued"
      return "$rc"
      ;;
    off)
      HPC_ATTEMPT_OUTCOME=not-requeued
      hpc_log "not requeued (--no-requeue); the program exited with $rc"
      return "$rc"
      ;;
    started-over)
      hpc_log "this attempt started over instead of resuming: it wrote $HPC_CHECKPOINT_DIR/$file again, which an earlier attempt had written before its newest checkpoint (exit code $rc, attempt $((restarts + 1)))"
      hpc_log "not requeued: another attempt would start over again. Make the program load its newest checkpoint when HPC_RESUMING=1 (README: Runs, attempts and checkpoints)"
      return "$HPC_EXIT_NO_PROGRESS"
      ;;
    no-progress)
      if ((rc == 0 && !stopped)); then
        hpc_log "the program took the warning and exited 0, but nothing in $HPC_CHECKPOINT_DIR was written during this attempt (attempt $((restarts + 1)), $restarts restart(s) so far)"
      elif ((stopped)); then
        hpc_log "the program had to be stopped (exit code $rc) and nothing in $HPC_CHECKPOINT_DIR was written during this attempt (attempt $((restarts + 1)), $restarts restart(s) so far)"
      else
        hpc_log "the program exited with $rc after the warning and nothing in $HPC_CHECKPOINT_DIR was written during this attempt (attempt $((restarts + 1)), $restarts restart(s) so far)"
      fi
      if ((${#HPC_CKPT_APPENDED[@]})); then
        hpc_log "only appended to: ${HPC_CKPT_APPENDED[*]} (a file whose content at the attempt's start is still there, unchanged, is a log, not a checkpoint)"
        ((!stopped)) || hpc_log "a program that had finished its work and then hung at exit (DataLoader workers that ignore SIGTERM) ends here too, instead of being requeued in a loop: docs/requeue.md#a-program-that-hangs-at-exit"
      fi
      hpc_log "no checkpoint was written after the warning: not requeued"
      hpc_log "to be requeued, save to \$HPC_CHECKPOINT_DIR when SIGUSR1 (or SIGTERM) arrives and exit (docs/requeue.md)"
      return "$HPC_EXIT_NO_PROGRESS"
      ;;
    limit)
      HPC_ATTEMPT_OUTCOME=restart-limit
      hpc_log "restart limit reached ($restarts of --max-restarts $HPC_MAX_RESTARTS): not requeued. The checkpoint is in $HPC_CHECKPOINT_DIR; to go on, rerun this run (job_submitter.sh --rerun ${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-JOB}}) or submit again with --resume"
      return "$HPC_EXIT_RESTART_LIMIT"
      ;;
  esac
  hpc_requeue_now "$rc" "$restarts"
}

# _hpc_requeue_took RC: scontrol requeue exited RC (not 0), yet Slurm did requeue the job:
# the requeue ends the batch step at once, and scontrol, still in it, can die of that
# SIGTERM before it returns (CI, 24.11: exit 143, and the run never resumed). The job's
# restart count is one up then; when Slurm does not say, a SIGTERM counts as the requeue.
_hpc_requeue_took() {
  local state when restarts
  hpc_job_state_to state when restarts
  if [[ -n $restarts ]]; then
    ((restarts > HPC_RESTART_COUNT))
  else
    (($1 == 128 + 15))
  fi
}

# hpc_results_lost_stop: after the exit hooks of an attempt about to be requeued: when its
# results could be neither copied back nor kept (staging.sh), say that the job ends here and
# how to go on, and return 0 (the caller ends the job with HPC_EXIT_RESULTS_LOST); else 1.
hpc_results_lost_stop() {
  [[ -n ${HPC_RESULTS_LOST:-} ]] || return 1
  hpc_log "ERROR: not requeued: this attempt's results did not come back and could not be kept (above): the job ends here, exit code ${HPC_EXIT_RESULTS_LOST:-74}. Make room, then rerun this run (job_submitter.sh --rerun ${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-JOB}}): it resumes from $HPC_CHECKPOINT_DIR"
  return 0
}

# hpc_requeue_now RC RESTARTS: results back (the exit hooks), then scontrol requeue.
hpc_requeue_now() {
  local rc=$1 restarts=$2 target
  HPC_ATTEMPT_OUTCOME=warned-requeued
  [[ $HPC_SIGNALLED != preempt ]] || HPC_ATTEMPT_OUTCOME=preempted-requeued
  [[ $HPC_SIGNALLED != stall ]] || HPC_ATTEMPT_OUTCOME=stalled-requeued
  hpc_run_exit_hooks_now "$rc"
  ! hpc_results_lost_stop || return "${HPC_EXIT_RESULTS_LOST:-74}"
  target=$(hpc_job_target)
  if hpc_ckpt_has_files "$HPC_CHECKPOINT_DIR"; then
    hpc_log "requeueing job $target: restart $((restarts + 1)) of at most $HPC_MAX_RESTARTS; the next attempt resumes from $HPC_CHECKPOINT_DIR"
  else
    hpc_log "requeueing job $target: restart $((restarts + 1)) of at most $HPC_MAX_RESTARTS; nothing in $HPC_CHECKPOINT_DIR to resume from"
  fi
  HPC_REQUEUED=1
  local rq=0
  scontrol requeue "$target" || rq=$?
  if ((rq)) && ! _hpc_requeue_took "$rq"; then
    HPC_REQUEUED=0
    hpc_log "ERROR: scontrol requeue $target failed (exit code $rq): the job ends here; submit again to resume"
    return 1
  fi
  # Slurm kills this shell now; until it does, do nothing more.
  sleep 300 &
  wait $! 2>/dev/null
  return 0
}
