# shellcheck shell=bash
# Step 5 of job_submitter.sh: write the batch script and the commands file beside the
# logs, then hand them to `sbatch --parsable`. Nothing is left behind if sbatch refuses.

# hpc_submission_paths STAMP: J_SCRIPT_PATH and J_COMMANDS_PATH for this submission.
hpc_submission_paths() {
  local base=$J_SCRATCH_DIR/hpc_outputs/jobs/$J_EXP_NAME-$1
  J_SCRIPT_PATH=$base.sbatch
  J_COMMANDS_PATH=$base.commands
  J_SUBMISSION_ID=$J_EXP_NAME-$1 # names the submission in the ledger (ledger.sh)
}

# hpc_sbatch_argv_to ARRAY SCRIPT [DEPENDENCY]: the exact sbatch command line.
hpc_sbatch_argv_to() {
  local -n _argv=$1
  _argv=(sbatch --parsable)
  # A failed venv job cancels the experiments instead of leaving them pending forever.
  [[ -z ${3:-} ]] || _argv+=("--dependency=afterok:$3" --kill-on-invalid-dep=yes)
  _argv+=("$2")
}

# _write_atomic FILE CONTENT: FILE appears whole or not at all.
_write_atomic() {
  local tmp=$1.tmp.$$
  printf '%s' "$2" >"$tmp" || { rm -f -- "$tmp"; die "cannot write $1"; }
  mv -f -- "$tmp" "$1" || { rm -f -- "$tmp"; die "cannot write $1"; }
}

# hpc_submit SCRIPT_TEXT [DEPENDENCY]: write the files, submit; sets J_JOB_ID.
hpc_submit() {
  local script_text=$1 dependency=${2:-} commands_text out rc argv
  mkdir -p -- "$J_SCRATCH_DIR/hpc_outputs/jobs" ||
    die "cannot create $J_SCRATCH_DIR/hpc_outputs: check that \$SCRATCH is writable"
  [[ ! -e $J_SCRIPT_PATH ]] || die "$J_SCRIPT_PATH already exists: submit again in a second"
  printf -v commands_text '%s\n' "${J_COMMANDS[@]}"
  _write_atomic "$J_COMMANDS_PATH" "$commands_text"
  _write_atomic "$J_SCRIPT_PATH" "$script_text"
  hpc_sbatch_argv_to argv "$J_SCRIPT_PATH" "$dependency"
  rc=0
  out=$("${argv[@]}") || rc=$?
  if ((rc != 0)) || [[ ! ${out%%;*} =~ ^[0-9]+$ ]]; then
    rm -f -- "$J_SCRIPT_PATH" "$J_COMMANDS_PATH"
    local why
    hpc_explain_refusal_to why
    [[ -n $why ]] || why="Its message above says why (a partition, account or resource the cluster does not have?)"
    die "sbatch did not accept the job (exit $rc${out:+, said: $out}); nothing was submitted. $why"
  fi
  J_JOB_ID=${out%%;*}
  hpc_staging_record_job "$J_JOB_ID"
  # The ledger `hpc status` reads (ledger.sh): the venv job and this one, in one write.
  local log venv_line="" line
  hpc_plan_log_pattern_to log
  [[ -z $dependency ]] || hpc_ledger_line_to venv_line "$dependency" 1 "" venv 0 \
    "$J_SCRATCH_DIR/hpc_outputs/$J_EXP_NAME-venv-%j.out"
  hpc_ledger_line_to line "$J_JOB_ID" "${#J_COMMANDS[@]}" "$J_SCRIPT_PATH" job 0 "$log"
  hpc_ledger_append "$venv_line$line"
}
