# shellcheck shell=bash
# Step 5 of job_submitter.sh: write the commands file and every chunk's batch script
# beside the logs, then hand them to hpc_sbatch (sbatch.sh) in order. Nothing is left
# behind if sbatch refuses one: the chunks already in are cancelled, every file removed.
# When no one can tell whether sbatch queued a chunk (no job id in its answer, squeue not
# answering), nothing is removed: a queued job reads these files.

# hpc_submission_paths STAMP: this submission's id (EXP-STAMP), its home J_HOME (the folder
# that holds everything about it: job_lib.sh's table names its files) and when it was made.
# Part of the plan: prepare names them.
hpc_submission_paths() {
  J_SUBMISSION_ID=$J_EXP_NAME-$1 # names the submission in the ledger (ledger.sh)
  hpc_home_dir_to J_HOME "$J_SCRATCH_DIR" "$J_SUBMISSION_ID"
  hpc_home_chain_check
  # When, from the stamp (YYYYmmdd-HHMMSS-PID): a run's record says it (runs.sh).
  J_SUBMITTED_AT=$1
  [[ ! $1 =~ ^([0-9]{4})([0-9]{2})([0-9]{2})-([0-9]{2})([0-9]{2})([0-9]{2}) ]] ||
    J_SUBMITTED_AT=${BASH_REMATCH[1]}-${BASH_REMATCH[2]}-${BASH_REMATCH[3]}T${BASH_REMATCH[4]}:${BASH_REMATCH[5]}:${BASH_REMATCH[6]}
}

# hpc_home_chain_check: the job runs what its home holds (the commands, the script), and
# writes under $SCRATCH/<project>: every folder down to the homes' folder that exists now
# must be safe from other users (hpc_unsafe_chain_to: yours or root's, writable by no one
# else unless sticky), else another user who can write to one could swap the home for a
# copy whose commands run as you. Refused, before anything is written (exit 2).
hpc_home_chain_check() {
  local dir=${J_HOME%/*} unsafe
  while [[ ! -d $dir && $dir == /*/* ]]; do dir=${dir%/*}; done
  hpc_unsafe_chain_to unsafe "$dir" "set SCRATCH to a folder of your own (mode 700 or 755)"
  [[ -z $unsafe ]] ||
    die "not submitted: the submission's files would go in ${J_HOME%/*}, but $unsafe. Another user could then change the commands your job runs as you"
}

# _write_atomic FILE CONTENT: FILE appears whole or not at all.
_write_atomic() {
  _write_atomic_from "$1" printf '%s' "$2"
}

# _write_atomic_from FILE CMD...: FILE holds what CMD prints, whole or not at all (CMD runs
# in this shell: no subshell, and a die inside it leaves no file behind).
_write_atomic_from() {
  local tmp=$1.tmp.$$
  hpc_remove_at_exit "$tmp"
  "${@:2}" >"$tmp" || { rm -f -- "$tmp"; die "cannot write $1"; }
  mv -f -- "$tmp" "$1" || { rm -f -- "$tmp"; die "cannot write $1"; }
  hpc_keep_at_exit "$tmp"
}

# _write_in_home FILE CMD...: FILE, in this submission's new home, holds what CMD prints
# (CMD runs in this shell). Written in place, not through a rename (an `mv` process for
# each file was a cost of every submission): nothing reads the home before sbatch is
# called, and a submission that stops before that removes the whole home at its exit.
_write_in_home() {
  "${@:2}" >"$1" || die "cannot write $1"
}

# hpc_submit_plan SUBMITTED_VAR [VENV_JOB]: write the files and submit every chunk; the
# job ids, one per chunk in order, into the array SUBMITTED_VAR. The ledger gets the venv
# job (VENV_JOB) and these in one write.
hpc_submit_plan() {
  local -n _submitted=$1
  local venv_job=${2:-} commands_text k script manifest vars args id prev="" log f why tasks sbatch_rc commands
  local -a _written=() _ids=()
  _submitted=()
  hpc_submission_home_make
  hpc_home_path_to commands "$J_HOME" commands
  printf -v commands_text '%s\n' "${J_COMMANDS[@]}"
  _write_in_home "$commands" printf '%s' "$commands_text"
  _written=("$commands")
  hpc_plan_log_pattern_to log
  for k in "${!J_CHUNKS[@]}"; do
    hpc_plan_script_path_to script "$k"
    hpc_home_plan_of_to manifest "$script"
    # The job's variables once, for the manifest and the script's exports alike.
    hpc_plan_with_chunk "$k" hpc_plan_manifest_to vars "$k"
    _write_in_home "$manifest" hpc_plan_manifest "$k" "$vars"
    _write_in_home "$script" hpc_plan_script "$k" "$vars"
    _written+=("$manifest" "$script")
    hpc_plan_chunk_to f "$k"
    hpc_plan_sbatch_args_to args "$k" "$venv_job" "$prev"
    hpc_plan_chunk_tasks_to tasks "$k" # the ledger counts array tasks, not packed lines
    sbatch_rc=0
    # From the first sbatch on, a queued job may read the home: an interrupted submission
    # must not remove it at exit (a refusal below removes what it wrote itself).
    hpc_submission_home_keep
    hpc_sbatch id --ledger job "$tasks" "$script" "${f[1]}" "$log" "${args[@]}" || sbatch_rc=$?
    if ((sbatch_rc == 2)); then
      hpc_ledger_flush # the jobs known to be in
      hpc_sbatch_unsure_die "$script" "${_ids[@]}"
    fi
    if ((sbatch_rc != 0)); then
      # What went in goes out again: the venv job too, which nothing would wait for.
      _ids=(${venv_job:+"$venv_job"} "${_ids[@]}")
      ((${#_ids[@]} == 0)) || scancel "${_ids[@]}" || warn "could not cancel jobs ${_ids[*]}: cancel them with scancel"
      rm -f -- "${_written[@]}"
      rmdir -- "$J_HOME" 2>/dev/null || true
      hpc_explain_refusal_to why
      if hpc_plan_is_plain; then
        [[ -n $why ]] || why="Its message above says why (a partition, account or resource the cluster does not have?)"
        die "sbatch did not accept the job ($HPC_SBATCH_SAID); nothing was submitted. $why"
      fi
      die "${why:+$why }sbatch did not accept array $((k + 1)) of ${#J_CHUNKS[@]} ($HPC_SBATCH_SAID); nothing was submitted${_ids[*]:+ (jobs ${_ids[*]} were cancelled)}"
    fi
    _ids+=("$id") prev=$id
    hpc_plan_with_chunk "$k" hpc_staging_record_job "$id"
    hpc_venv_local_record_job "$id"
  done
  hpc_ledger_flush
  _submitted=("${_ids[@]}")
}

# hpc_submission_home_make: make this submission's home, J_HOME (its id is new: a folder of
# that name already there is refused, never shared), the folder of the homes if missing.
# Removed again at exit unless sbatch was called (hpc_submission_home_keep).
hpc_submission_home_make() {
  local homes=${J_HOME%/*}
  [[ -d $homes ]] || mkdir -p -- "$homes" ||
    die "cannot create $homes: check that \$SCRATCH is writable"
  [[ ! -e $J_HOME ]] || die "$J_HOME already exists: submit again in a second"
  mkdir -- "$J_HOME" || die "cannot create $J_HOME: check that \$SCRATCH is writable"
  hpc_remove_at_exit "$J_HOME"
}

# hpc_submission_home_keep: sbatch is called: a job may read the home, which stays.
hpc_submission_home_keep() {
  [[ -z ${J_HOME:-} ]] || hpc_keep_at_exit "$J_HOME"
}

# hpc_sbatch_unsure_die SCRIPT [ID...]: sbatch's answer for SCRIPT held no job id and Slurm
# could not be asked whether it queued it: nothing is removed or cancelled (a queued job
# reads its batch script and commands file), and the user is told how to find out.
hpc_sbatch_unsure_die() {
  local script=$1
  shift
  hpc_submission_home_keep
  # An offline sweep's folder too: a queued point's agent reads it.
  [[ -z ${HPC_SWEEP_WRITTEN_DIR:-} ]] || hpc_keep_at_exit "$HPC_SWEEP_WRITTEN_DIR"
  die "could not tell whether sbatch queued $script: its answer held no job id ($HPC_SBATCH_SAID) and squeue could not be asked. Every file is kept, since a queued job reads them${*:+; jobs $* are in}. Check with: squeue -u ${USER:-\$USER} -o '%A %o' (the job whose command is $script); if there is none, submit again"
}

# hpc_print_submitted ID...: what was submitted (one job id per chunk, in order): the
# job, or the array, with its log and script; a plan of several chunks, one line each.
hpc_print_submitted() {
  local ids=("$@") log name n=${#J_COMMANDS[@]} k f spec script
  hpc_plan_log_pattern_to log
  if hpc_plan_is_plain; then
    # Only the file's name holds the pattern; the folder may hold a literal '%'.
    name=${log##*/} name=${name//%j/${ids[0]}} name=${name//%A/${ids[0]}}
    if ((n > 1)); then
      printf 'Submitted batch job %s (array of %d tasks, 0-%d)\n' "${ids[0]}" "$n" "$((n - 1))"
      printf '  logs:   %s\n' "${log%/*}/${name//%a/<task>}"
    else
      log=${log%/*}/$name
      printf 'Submitted batch job %s\n' "${ids[0]}"
      printf '  log:    %s\n' "$log"
    fi
    hpc_plan_script_path_to script 0
    printf '  script: %s\n' "$script"
    return 0
  fi
  for k in "${!ids[@]}"; do
    hpc_plan_chunk_to f "$k"
    if ((f[2] > 1)); then # packed (pack.sh): f[2] lines per task
      hpc_plan_chunk_tasks_to n "$k"
      printf 'Submitted batch job %s (array of %d tasks, 0-%d)\n' "${ids[k]}" "$n" "$((n - 1))"
      continue
    fi
    hpc_plan_ranges_shift_to spec "${f[0]}" "${f[1]}"
    hpc_plan_ranges_count_to n "${f[0]}"
    printf 'Submitted batch job %s (array of %d task(s): %s as array indices %s)\n' \
      "${ids[k]}" "$n" "${f[0]}" "$spec"
  done
  name=${log##*/} name=${name//%A/<job>}
  printf '  logs:   %s\n' "${log%/*}/${name//%a/<index>}"
  if ((${#ids[@]} > 1)); then
    printf '  scripts: %s/job-part1..%d.sbatch\n' "$J_HOME" "${#ids[@]}"
  else
    hpc_plan_script_path_to script 0
    printf '  script: %s\n' "$script"
  fi
}
