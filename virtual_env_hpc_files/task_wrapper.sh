#!/bin/bash
# Runs as every srun task of a distributed launcher:
#   task_wrapper.sh plain|ranks COMMAND_LINE
# "ranks" exports torch.distributed's variables from Slurm's (for hand-written
# torch.distributed code); "plain" leaves them to the program (Lightning reads Slurm's).
# Runs COMMAND_LINE with bash, as on a laptop (run_line.sh), passes on the wall-time
# warning, TERM and INT, and when the command fails on its own (not stopped by a signal)
# leaves "time node rank code" in $HPC_RANK_STATUS_DIR, so the job can report the rank that failed first and its code.
mode=${1:?usage: task_wrapper.sh plain|ranks COMMAND_LINE}
line=${2:?usage: task_wrapper.sh plain|ranks COMMAND_LINE}
if [[ $mode == ranks ]]; then
  export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID
  export NODE_RANK=$SLURM_NODEID GROUP_RANK=$SLURM_NODEID
  export LOCAL_WORLD_SIZE=${HPC_TASKS_PER_NODE:-1}
fi
# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"
# shellcheck source=virtual_env_hpc_files/proc_tree.sh
source "${BASH_SOURCE[0]%/*}/proc_tree.sh"
# shellcheck source=virtual_env_hpc_files/node_results.sh
source "${BASH_SOURCE[0]%/*}/node_results.sh"

# This node's SLURM_TMPDIR, not the first node's: the job's own folder here (staging.sh),
# or where Slurm sets only TMPDIR, this node's job folder.
hpc_node_tmpdir_to node_tmpdir && [[ -n $node_tmpdir ]] && export SLURM_TMPDIR=$node_tmpdir
# This node's $HPC_RESULTS_DIR, not the first node's (node_results.sh).
hpc_node_results_setup || exit 74
# This rank's own $HPC_HEARTBEAT, which the stall watch reads (longruns.sh).
if [[ -n ${HPC_ATTEMPT_DIR:-} && -d $HPC_ATTEMPT_DIR/heartbeat ]]; then
  export HPC_HEARTBEAT=$HPC_ATTEMPT_DIR/heartbeat/${SLURMD_NODENAME:-node}.rank${SLURM_PROCID:-0}
fi

# On stderr: srun holds a task's unfinished stdout line (a progress bar's "\r") apart from
# its stderr, so the toolkit's line reaches the log as a line of its own.
# shellcheck disable=SC2317 # called by hpc_proc_warn_loop
rank_log() {
  hpc_log "rank ${SLURM_PROCID:-0}: $*" >&2
}

# The wall-time warning comes from the batch shell as SIGURG to every process of the
# step (requeue.sh; ignored by default, so harmless to the rest): this shell passes it on
# to the program's processes that handle it (proc_tree.sh). SIGUSR1 sent to the whole
# step by someone else reaches the program from Slurm itself: caught here and dropped.
# Caught, never ignored: the program (run_line.sh) starts with the default dispositions.
signalled=0 warned=0
# shellcheck disable=SC2317 # a trap
on_warning() {
  ((warned == 0)) || return 0
  warned=1
  hpc_proc_warn_loop "$child" "${HPC_SIGNAL_GRACE:-60}" rank_log \
    "${HPC_ATTEMPT_DIR:+$HPC_ATTEMPT_DIR/warned.rank${SLURM_PROCID:-0}}" &
}
# The line as rank 0 runs it, beside the log's "command:" (the other ranks differ only in
# their rank variables).
if [[ ${SLURM_PROCID:-0} == 0 ]]; then
  hpc_line_expanded_to ran "$line"
  [[ -z $ran ]] || rank_log "runs as: $ran"
fi
trap ':' USR1
trap on_warning URG
bash "${BASH_SOURCE[0]%/*}/run_line.sh" "$line" </dev/null &
child=$!
# Where the stall watch finds this rank's program (longruns.sh: hpc_note_program_pid).
[[ -z ${HPC_ATTEMPT_DIR:-} || ! -d $HPC_ATTEMPT_DIR/pids ]] ||
  printf 'rank %s\n' "${SLURM_PROCID:-0}" >"$HPC_ATTEMPT_DIR/pids/${SLURMD_NODENAME:-node}.$child" 2>/dev/null
trap 'signalled=1; kill -s TERM "$child" 2>/dev/null' TERM
trap 'signalled=1; kill -s INT "$child" 2>/dev/null' INT
while :; do
  wait "$child" 2>/dev/null # (no "Killed" notice from bash: the job logs the code)
  rc=$?
  kill -0 "$child" 2>/dev/null || break
done
# A rank that took the warning and then exits non-zero (saving and exiting 1 is how
# torchrun's workers pause) ends the step for every rank (srun kills the others): it first
# waits until every rank's program has ended (each marks ended.rankN), so the others can
# take their own warning and save; at most the grace period (the batch shell stops a
# program that runs on). Seen on 24.11 under load: rank 0 saved and exited within a
# second, and rank 1 was killed before its warning reached it, its checkpoint unwritten.
[[ -z ${HPC_ATTEMPT_DIR:-} ]] || { : >"$HPC_ATTEMPT_DIR/ended.rank${SLURM_PROCID:-0}"; } 2>/dev/null
if ((warned && !signalled && rc != 0 && ${SLURM_NTASKS:-1} > 1)) && [[ -n ${HPC_ATTEMPT_DIR:-} ]]; then
  settle_end=$((SECONDS + ${HPC_SIGNAL_GRACE:-60}))
  shopt -s nullglob
  while marks=("$HPC_ATTEMPT_DIR"/ended.rank*) && ((${#marks[@]} < SLURM_NTASKS && SECONDS < settle_end)); do
    sleep 0.1
  done
  shopt -u nullglob
fi
# What this node's ranks wrote to $HPC_RESULTS_DIR comes back (node K > 0; the batch shell
# copies the first node's). A rank that succeeded but whose results did not come back
# fails, with the code the batch shell uses for that (74, staging.sh).
if ! hpc_node_results_copy && ((rc == 0)); then
  rc=74
fi
if ((rc != 0 && signalled == 0)) && [[ -n ${HPC_RANK_STATUS_DIR:-} ]]; then
  printf '%s %s %s %s\n' "$EPOCHREALTIME" "${SLURMD_NODENAME:-?}" "${SLURM_PROCID:-?}" "$rc" \
    >"$HPC_RANK_STATUS_DIR/rank_${SLURM_PROCID:-0}" 2>/dev/null
fi
exit "$rc"
