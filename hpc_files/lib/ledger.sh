# shellcheck shell=bash
# The submissions ledger that `hpc status|logs|cancel` read:
# $SCRATCH/<project>/hpc_outputs/jobs/submissions.tsv, one tab-separated line per Slurm
# job, all lines of one submission appended by ONE write (hpc_ledger_append), so two
# submissions at once never interleave. Fields, in this order:
#   submitted_at  job_id  exp_name  num_tasks  script  submission_id  kind  task_offset  log
# kind is job (the experiments) or venv (the --setup-venv job); task_offset is the
# submission's task number of array index 0 (HPC_TASK_OFFSET of a split array); log is
# sbatch's --output pattern (%j, %A, %a left as Slurm writes them). The lines of a rerun
# (--rerun, rerun.sh) have a tenth field, rerun_of: the submission id they rerun.

# hpc_ledger_line_to VAR JOB_ID NUM_TASKS SCRIPT KIND TASK_OFFSET LOG: one line (with \n).
hpc_ledger_line_to() {
  local -n _line=$1
  local f
  for f in "${@:2}"; do
    [[ $f != *[$'\t\n']* ]] || {
      warn "a ledger field holds a tab or newline; job $2 is not recorded for hpc status"
      _line=""
      return 0
    }
  done
  printf -v _line '%(%Y-%m-%dT%H:%M:%S%z)T\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s%s\n' -1 \
    "$2" "$J_EXP_NAME" "$3" "$4" "${J_SUBMISSION_ID:-$2}" "$5" "$6" "$7" "${J_RERUN_OF:+$'\t'$J_RERUN_OF}"
}

# hpc_ledger_append TEXT: append the lines of one submission in a single write.
hpc_ledger_append() {
  local ledger=$J_SCRATCH_DIR/hpc_outputs/jobs/submissions.tsv
  [[ -n $1 ]] || return 0
  printf '%s' "$1" >>"$ledger" ||
    warn "submitted, but $ledger could not be updated: hpc status will not list it"
}
