# shellcheck shell=bash
# Runs and their attempts (README: Runs, attempts and checkpoints). A run is one line of
# one submission (HPC_SUBMISSION_ID, line HPC_TASK_INDEX); its attempts are the times
# Slurm starts it (requeues). A run owns its checkpoint folder: the folder's .hpc_run says
# which run made it, so that an attempt resumes only its own run's checkpoints (or, on
# purpose, another's: --resume, HPC_RESUME=yes), and says so to the program:
#   HPC_RESUMING=1|0       this attempt continues checkpoints of this run (or --resume's)
#   HPC_INIT_FROM=resume|scratch   the same, as a word for programs that take a flag
#                                   (nanoGPT: --init_from=$HPC_INIT_FROM)
# Each attempt leaves one line per event in <home>/attempts/T (job_lib.sh: attempts)
# (T: the task's index), which `hpc status` reads:
#   attempt=A job=J start=EPOCH end=EPOCH|- outcome=O exit=E|- [node=NODES] [why=WORD]
# O: running (written at the start), finished, failed, warned-requeued,
# preempted-requeued, requeued (from outside), no-progress, started-over, restart-limit,
# not-requeued (--no-requeue), cancelled; stalled, stalled-requeued, preflight-failed
# (node=, why=: the check), node-failure (node=) (longruns.sh).
# The submitting side reads .hpc_run too (hpc_files/lib/runs.sh sources this file for
# hpc_run_record_to and hpc_ckpt_has_files). Sets no shell options.

# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"

HPC_RUN_FILE=.hpc_run
# find's tests for a checkpoint file: non-empty, not the toolkit's own (.hpc_*), not a
# temporary (*.tmp, *.part). Every look at $HPC_CHECKPOINT_DIR uses these (here, requeue.sh).
HPC_CKPT_FILE_TESTS=(-type f -size +0 ! -name '.hpc_*' ! -name '*.tmp' ! -name '*.part')

# _hpc_run_job_to VAR: this job as Slurm names it (ARRAYID_TASK for an array task), or
# local-PID outside Slurm.
_hpc_run_job_to() {
  local -n _j=$1
  _j=local-$$
  [[ -z ${SLURM_JOB_ID:-} ]] || _j=$SLURM_JOB_ID
  [[ -z ${SLURM_ARRAY_TASK_ID:-} || -z ${SLURM_ARRAY_JOB_ID:-} ]] || _j=${SLURM_ARRAY_JOB_ID}_$SLURM_ARRAY_TASK_ID
}

# hpc_dir_bare DIR: DIR is missing, empty, or holds only the toolkit's own .hpc_* files:
# a glob in this shell, so that the checks below start no find for a task's fresh folder.
hpc_dir_bare() {
  local e
  [[ -d $1 ]] || return 0
  for e in "$1"/* "$1"/.[!.]* "$1"/..?*; do
    [[ -e $e || -L $e ]] || continue # (a pattern that matched nothing)
    [[ ${e##*/} == .hpc_* && -f $e && ! -L $e ]] || return 1
  done
  return 0
}

# hpc_ckpt_has_files DIR: DIR holds a checkpoint: a non-empty file, at any depth, other
# than the toolkit's own (.hpc_*) and temporaries (*.tmp, *.part).
hpc_ckpt_has_files() {
  ! hpc_dir_bare "$1" || return 1
  [[ -n $(find "$1" "${HPC_CKPT_FILE_TESTS[@]}" \
    -print -quit 2>/dev/null) ]]
}

# hpc_run_record_to ARRAY DIR: DIR/.hpc_run as an associative ARRAY (run, job, submitted,
# started, command, resumed_from); empty when there is none. Unknown keys are skipped.
hpc_run_record_to() {
  local -n _rec=$1
  local line key
  _rec=()
  [[ -f $2/$HPC_RUN_FILE ]] || return 0
  while IFS= read -r line; do
    key=${line%%=*}
    case $key in
      run | job | submitted | started | command | resumed_from) _rec["$key"]=${line#*=} ;;
    esac
  done <"$2/$HPC_RUN_FILE" 2>/dev/null
  return 0
}

# hpc_run_describe_to VAR ARRAY: "job J, submitted DATE, command: CMD" for a record, or
# "a run that left no record (.hpc_run)".
hpc_run_describe_to() {
  local -n _desc=$1 _r=$2
  if [[ -z ${_r[run]:-} ]]; then
    _desc="a run that left no record of itself ($HPC_RUN_FILE)"
    return 0
  fi
  _desc="job ${_r[job]:-?} (run ${_r[run]}), submitted ${_r[submitted]:-?}, command: ${_r[command]:-?}"
}

# hpc_run_claim DIR LINE COMMAND [RESUMED_FROM]: write DIR/.hpc_run for this run, whole
# or not at all.
hpc_run_claim() {
  local file=$1/$HPC_RUN_FILE text job now
  _hpc_run_job_to job
  printf -v now '%(%Y-%m-%dT%H:%M:%S%z)T' -1
  printf -v text 'run=%s/%s\njob=%s\nsubmitted=%s\nstarted=%s\n%scommand=%s\n' \
    "$HPC_SUBMISSION_ID" "$2" "$job" "${HPC_SUBMITTED_AT:-?}" "$now" \
    "${4:+resumed_from=$4$'\n'}" "${3//$'\n'/ }"
  { printf '%s' "$text" >"$file.tmp.$$" && mv -f -- "$file.tmp.$$" "$file"; } 2>/dev/null && return 0
  rm -f -- "$file.tmp.$$" 2>/dev/null
  hpc_log "could not write $file: the next submission cannot tell whose checkpoints these are"
}

# hpc_run_settle DIR LINE COMMAND [LOG_PREFIX]: whose checkpoints DIR holds, and whether
# this attempt resumes them: exports HPC_RESUMING and HPC_INIT_FROM, claims DIR for this
# run. Returns 2 (said in the log) when DIR holds another run's checkpoints and this
# run may not take them (no --resume): the submission refuses that case; a job meets it
# only when another job wrote there after this one was submitted.
hpc_run_settle() {
  local dir=$1 line=$2 cmd=$3 pfx=${4:-} me has=0 desc
  local -A owner=()
  hpc_ckpt_has_files "$dir" && has=1
  export HPC_RESUMING=$has HPC_INIT_FROM=scratch
  if [[ -z ${HPC_SUBMISSION_ID:-} ]]; then # a batch script from an older toolkit
    ((has && ${HPC_RESTART_COUNT:-0} > 0)) || HPC_RESUMING=0
  else
    me=$HPC_SUBMISSION_ID/$line
    hpc_run_record_to owner "$dir"
    if [[ ${owner[run]:-} == "$me" ]]; then
      : # its own: an earlier attempt, or a --rerun of this line
    elif ((has == 0)); then
      hpc_run_claim "$dir" "$line" "$cmd"
    elif [[ ${HPC_RESUME:-no} == yes ]]; then
      hpc_run_describe_to desc owner
      hpc_log "${pfx}--resume: continuing the checkpoints in $dir of $desc"
      hpc_run_claim "$dir" "$line" "$cmd" "${owner[run]:-unknown}"
    else
      hpc_run_describe_to desc owner
      HPC_RESUMING=0
      hpc_log "${pfx}ERROR: $dir holds checkpoints of another run: $desc. This run neither resumes nor overwrites them: submit again with --resume (continue them), --fresh (start over, keeping them aside) or another --exp-name"
      return 2
    fi
  fi
  HPC_RESUME_FROM="" # (not unset: a packed line's is a local of pack.sh)
  if ((HPC_RESUMING)); then
    HPC_INIT_FROM=resume
    local newest="" path entry
    local -A skipped=()
    # The entry of DIR that holds the newest file (a Trainer's checkpoint-N/), for scripts
    # that resume only from a path they are given (--resume_from_checkpoint). A Trainer's
    # checkpoint-N/ without its trainer_state.json (written last) was cut short, by the
    # end of an attempt mid-save: resuming from it fails, so the next newest is taken.
    while IFS= read -r path; do
      path=${path#* }
      [[ -n $newest ]] || newest=$path
      entry=${path%%/*}
      if [[ $path == */* && $entry == checkpoint-[0-9]* && ! -e $dir/$entry/trainer_state.json ]]; then
        [[ -n ${skipped[$entry]:-} ]] ||
          hpc_log "${pfx}$dir/$entry has no trainer_state.json (cut short): not resumed from"
        skipped[$entry]=1
        continue
      fi
      export HPC_RESUME_FROM=$dir/$entry
      break
    done < <(find "$dir" "${HPC_CKPT_FILE_TESTS[@]}" -printf '%T@ %P\n' 2>/dev/null | sort -rn)
    hpc_log "${pfx}resuming: $dir holds this run's checkpoints (newest: $newest); HPC_RESUMING=1 HPC_INIT_FROM=resume${HPC_RESUME_FROM:+ HPC_RESUME_FROM=$HPC_RESUME_FROM}"
  else
    hpc_log "${pfx}starting from scratch: nothing to resume in $dir; HPC_RESUMING=0 HPC_INIT_FROM=scratch"
  fi
  return 0
}

# hpc_ckpt_snapshot DIR FILE: at an attempt's start, the checkpoints already there
# ("EPOCH SIZE PATH" lines, newest first), for hpc_ckpt_started_over_to.
hpc_ckpt_snapshot() {
  ! hpc_dir_bare "$1" || { : >"$2" && return 0; }
  find "$1" "${HPC_CKPT_FILE_TESTS[@]}" \
    -printf '%T@ %s %P\n' 2>/dev/null | sort -rn >"$2" 2>/dev/null || : >"$2"
}

# hpc_ckpt_started_over_to VAR DIR SNAPSHOT START: VAR = a checkpoint of an earlier
# attempt, older than the newest one it had left, that this attempt wrote again (newer
# than START) and did not grow (a log appended to is no rewrite): the program started
# over instead of resuming (a resuming program writes the newest again, or new names).
# "" when none (or nothing to compare with).
hpc_ckpt_started_over_to() {
  local -n _over=$1
  local dir=$2 snap=$3 start=$4 first=1 t size path now
  _over=""
  [[ -s $snap && -e $start ]] || return 0
  while read -r t size path; do
    if ((first)); then
      first=0
      continue # the newest: a resuming program may well write it again
    fi
    [[ -e $dir/$path && $dir/$path -nt $start ]] || continue
    now=$(stat -c %s -- "$dir/$path" 2>/dev/null) || continue
    ((now <= size)) || continue # appended to (a log): not a rewrite
    _over=$path
    return 0
  done <"$snap"
}

# hpc_attempt_file_to VAR: this task's attempts file ("" outside a submission's job).
hpc_attempt_file_to() {
  local -n _af=$1
  _af=""
  [[ -n ${HPC_COMMANDS_FILE:-} && -n ${HPC_TASK_INDEX:-} ]] || return 0
  hpc_job_path_to _af attempts
  _af+=/$HPC_TASK_INDEX
}

# hpc_attempt_record OUTCOME EXIT: one line in this task's attempts file (appended in one
# write); HPC_ATTEMPT_STARTED is the attempt's start (epoch seconds).
hpc_attempt_record() {
  local file text job now end=-
  hpc_attempt_file_to file
  [[ -n $file ]] || return 0
  _hpc_run_job_to job
  printf -v now '%(%s)T' -1
  [[ $1 == running ]] || end=$now
  printf -v text 'attempt=%s job=%s start=%s end=%s outcome=%s exit=%s%s%s\n' \
    "$((${HPC_RESTART_COUNT:-0} + 1))" "$job" "${HPC_ATTEMPT_STARTED:-$now}" "$end" "$1" "$2" \
    "${HPC_ATTEMPT_NODE:+ node=$HPC_ATTEMPT_NODE}" "${HPC_ATTEMPT_WHY:+ why=$HPC_ATTEMPT_WHY}"
  { { [[ -d ${file%/*} ]] || mkdir -p -- "${file%/*}"; } && printf '%s' "$text" >>"$file"; } 2>/dev/null ||
    hpc_log "could not write $file (attempt outcome $1): hpc status will not show it"
}

# hpc_attempt_outcome_to VAR RC: how this attempt ended, for hpc_attempt_record:
# HPC_ATTEMPT_OUTCOME when a decision set it (requeue.sh), else from the exit code and
# what signalled the job.
hpc_attempt_outcome_to() {
  local -n _out=$1
  if [[ -n ${HPC_ATTEMPT_OUTCOME:-} ]]; then
    _out=$HPC_ATTEMPT_OUTCOME
  elif ((${HPC_REQUEUED:-0})); then
    _out=requeued
  elif [[ ${HPC_SIGNALLED:-} == cancel ]]; then
    _out=cancelled
  elif (($2 == 0)); then
    _out=finished
  else
    _out=failed
  fi
}

# hpc_attempt_end_record RC: an exit hook: the attempt's outcome, once.
hpc_attempt_end_record() {
  local out
  [[ -z ${HPC_ATTEMPT_RECORDED:-} ]] || return 0
  HPC_ATTEMPT_RECORDED=1
  hpc_attempt_outcome_to out "${HPC_EXIT_CODE:-$1}"
  # (HPC_ATTEMPT_EXIT: "-" for an attempt ended by its node, whose code is not the program's.)
  hpc_attempt_record "$out" "${HPC_ATTEMPT_EXIT:-${HPC_EXIT_CODE:-$1}}"
}
