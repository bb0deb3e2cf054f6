# shellcheck shell=bash
# The submissions ledger that `hpc status|logs|cancel` read:
# $SCRATCH/<project>/hpc_outputs/jobs/submissions.tsv, one tab-separated line per Slurm
# job, all lines of one submission appended by ONE write (hpc_ledger_append), so two
# submissions at once never interleave. Fields, in this order:
#   submitted_at  job_id  exp_name  num_tasks  script  submission_id  kind  task_offset  log
#   rerun_of  cluster  user
# kind is job (the experiments) or venv (the --setup-venv job); task_offset is the
# submission's task number of array index 0 (HPC_TASK_OFFSET of a split array); log is
# sbatch's --output pattern (%j, %A, %a left as Slurm writes them); rerun_of is the
# submission id a rerun (--rerun, rerun.sh) reruns, else empty; cluster is slurm.conf's
# ClusterName (empty when not known). Slurm hands job numbers out again: submitted_at,
# cluster and the job's name (the experiment's) tell whose a number is (hpc status).
# Older versions wrote the first 5, 9 or 10 fields.

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
  [[ -n ${HPC_LEDGER_CLUSTER+set} ]] || hpc_ledger_cluster_to HPC_LEDGER_CLUSTER
  local user=${USER:-}
  [[ $user =~ ^[A-Za-z0-9_.@-]{1,64}$ ]] || user=""
  printf -v _line '%(%Y-%m-%dT%H:%M:%S%z)T\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' -1 \
    "$2" "$J_EXP_NAME" "$3" "$4" "${J_SUBMISSION_ID:-$2}" "$5" "$6" "$7" "${J_RERUN_OF:-}" \
    "$HPC_LEDGER_CLUSTER" "$user"
}

# hpc_ledger_cluster_to VAR: this cluster's ClusterName from slurm.conf ($SLURM_CONF, else
# /etc/slurm/slurm.conf), read as a file (no call to slurmctld); "" when it cannot be told.
hpc_ledger_cluster_to() {
  local -n _cluster=$1
  local line re='^[[:space:]]*[Cc][Ll][Uu][Ss][Tt][Ee][Rr][Nn][Aa][Mm][Ee][[:space:]]*=[[:space:]]*([A-Za-z0-9_.-]{1,64})[[:space:]]*(#.*)?$'
  local conf=${SLURM_CONF:-/etc/slurm/slurm.conf}
  _cluster=""
  [[ -f $conf && -r $conf ]] || return 0
  # The first ClusterName line, read here (no grep process at every submission).
  while IFS= read -r line || [[ -n $line ]]; do
    [[ $line == *[Cc][Ll][Uu][Ss][Tt][Ee][Rr][Nn][Aa][Mm][Ee]* &&
      $line =~ ^[[:space:]]*[Cc][Ll][Uu][Ss][Tt][Ee][Rr][Nn][Aa][Mm][Ee][[:space:]]*= ]] || continue
    [[ ! $line =~ $re ]] || _cluster=${BASH_REMATCH[1]}
    return 0
  done <"$conf"
}

# hpc_ledger_lines_of_to ARRAY EXP: the ledger's lines that may be experiment EXP's (a
# field exactly EXP: the caller checks which), from one grep (a bash loop over every line
# of a ledger of months, 200,000 lines, took seconds at each submission), into ARRAY.
hpc_ledger_lines_of_to() {
  local -n _ll=$1
  local _ll_ledger
  _ll=()
  hpc_ledger_file_to _ll_ledger "$J_SCRATCH_DIR"
  [[ -r $_ll_ledger ]] || return 0
  # (-a: a stray NUL must not make it "binary"; grep is the one process: no subshell)
  mapfile -t _ll < <(LC_ALL=C grep -aF -e $'\t'"$2"$'\t' -- "$_ll_ledger" 2>/dev/null)
}

# hpc_ledger_append TEXT: append the lines of one submission whole: under an exclusive
# flock of the ledger, which every writer takes, so that another submission's lines never
# land inside them (bash writes a long text in several write() calls: a 20 KB record went
# out as two).
hpc_ledger_append() {
  local ledger fd
  hpc_ledger_file_to ledger "$J_SCRATCH_DIR"
  [[ -n $1 ]] || return 0
  if ! exec {fd}>>"$ledger"; then
    warn "submitted, but $ledger could not be updated: hpc status will not list it"
    return 0
  fi
  flock -x "$fd" || warn "could not lock $ledger; appending without the lock"
  printf '%s' "$1" >&"$fd" ||
    warn "submitted, but $ledger could not be updated: hpc status will not list it"
  exec {fd}>&-
  # Jobs are in: the experiment's lock file (hpc_runs_claim) stays.
  [[ -z ${HPC_RUNS_LOCK:-} ]] || hpc_keep_at_exit "$HPC_RUNS_LOCK"
}

# hpc_submission_lock FILE HOLDER WHAT: hold, until this process exits, a lock on FILE (a
# sweep's sweep.json; for a rerun, jobs/.SUBMISSION.rerun.lock, made if missing), taken
# before the check of what to submit again and held across sbatch and the ledger's append:
# of two --rerun or --resume-sweep of one submission at once, the second is refused (exit
# 1), naming the first from HOLDER, the note it writes (hpc_submission_lock_note) once it
# is about to submit.
hpc_submission_lock() {
  local holder="" rc=0
  exec {HPC_SUBMISSION_LOCK_FD}<>"$1" || die "cannot open $1 to lock it: check that \$SCRATCH is writable"
  # 75: held by another. Anything else: the filesystem has no flock (Lustre mounted
  # without -o flock answers ENOSYS): go on unlocked, as before locks, and say so.
  flock -n -E 75 "$HPC_SUBMISSION_LOCK_FD" 2>/dev/null || rc=$?
  if ((rc == 75)); then
    [[ ! -f $2 ]] || IFS= read -r holder <"$2" || true
    HPC_DIE_STATUS=1 die "$3 is being submitted right now by another job_submitter.sh (${holder:-it has not said which yet}): nothing was submitted; when it has ended, see hpc status"
  elif ((rc != 0)); then
    warn "could not lock $1 (does its filesystem support flock?): $3 goes on without the lock that keeps two of them from submitting at once"
  fi
  HPC_SUBMISSION_HOLDER=$2
  [[ ! -s $2 ]] || : >"$2" # an earlier holder's note (it has ended) is not this one's
}

# hpc_submission_lock_note WHAT: say, in the lock's HOLDER file, who holds it: WHAT (the
# command), this pid and host, since when.
hpc_submission_lock_note() {
  local host
  host=${HOSTNAME:-$(hostname 2>/dev/null || uname -n)}
  printf '%s: pid %s on %s since %(%Y-%m-%d %H:%M:%S)T\n' "$1" "$$" "$host" -1 >"$HPC_SUBMISSION_HOLDER" ||
    warn "could not write $HPC_SUBMISSION_HOLDER (who is submitting)"
}
