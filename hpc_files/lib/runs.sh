# shellcheck shell=bash
# Runs and their checkpoints, submitting side (README: Runs, attempts and checkpoints).
# A run is one line of one submission; it owns the checkpoint folder it writes
# (<exp>/checkpoints, or <exp>/checkpoints/task_I in an array or packed job), and the
# folder's .hpc_run says so (written by the job: virtual_env_hpc_files/runs.sh, whose
# reader this file shares). A new submission that would use a folder holding another
# run's checkpoints is refused before anything is written, unless --resume (continue
# them: the plan exports HPC_RESUME=yes) or --fresh (they are moved aside to
# <exp>/old_checkpoints/ first); and it is refused while another submission of the same
# experiment is queued or running. Sweeps keep their folders as they are (HPC_RESUME=yes):
# their tasks are agents, not runs.

# shellcheck source=virtual_env_hpc_files/runs.sh
source "${BASH_SOURCE[0]%/*}/../../virtual_env_hpc_files/runs.sh"

# hpc_runs_validate: --resume and --fresh exclude each other, and mean nothing to a sweep.
hpc_runs_validate() {
  ((OPT_RESUME == 0 || OPT_FRESH == 0)) ||
    die "--resume and --fresh exclude each other: --resume continues the checkpoints found, --fresh keeps them aside and starts over"
  if ((OPT_RESUME || OPT_FRESH)) && hpc_sweep_requested; then
    die "--resume and --fresh are for the commands file's runs; a sweep's agents always continue their task folders (--resume-sweep runs the unfinished points again)"
  fi
}

# hpc_runs_exports: the run's identity for the job (runs.sh): which submission (its lines
# are its runs), when, and whether it takes over checkpoints it finds (--resume).
hpc_runs_exports() {
  _export HPC_SUBMISSION_ID "$J_SUBMISSION_ID"
  _export HPC_SUBMITTED_AT "$J_SUBMITTED_AT"
  if ((${OPT_RESUME:-0})) || hpc_sweep_requested; then
    _export HPC_RESUME yes
  fi
}

# hpc_runs_taken_to ARRAY: the folders of this submission that hold checkpoints (which a
# new submission never owns), in line order. Its lines use <exp>/checkpoints (one line)
# or <exp>/checkpoints/task_I (line I of an array or packed job). Only the folders that
# exist are looked at: one listing, not a test per line (20,000 lines).
hpc_runs_taken_to() {
  local -n _taken=$1
  local base=$J_SCRATCH_DIR/$J_EXP_NAME/checkpoints n=${#J_COMMANDS[@]} d i
  local -a _present=()
  _taken=()
  if ((n > 1)) || [[ -n ${J_PACK:-} ]]; then
    [[ -d $base ]] || return 0
    for d in "$base"/task_*; do
      i=${d##*/task_}
      if [[ $i == 0 || ($i == [1-9]* && $i != *[!0-9]* && ${#i} -le 9) ]] && ((i < n)); then
        _present[i]=1
      fi
    done
    for i in "${!_present[@]}"; do
      ! hpc_ckpt_has_files "$base/task_$i" || _taken+=("$base/task_$i")
    done
  else
    ! hpc_ckpt_has_files "$base" || _taken+=("$base")
  fi
}

# hpc_runs_check: refuse (exit 2) a submission that would take another run's checkpoints
# without --resume or --fresh, and one whose experiment is queued or running already.
# Reads files (and squeue, for --local) only; writes nothing.
hpc_runs_check() {
  hpc_sweep_requested && return 0
  # (a submission checks under the experiment's lock: hpc_runs_claim; --local here)
  ((OPT_DRY_RUN || !OPT_LOCAL)) || hpc_runs_check_active
  hpc_runs_foreign_check # (--fresh, --resume: never another user's files)
  ((OPT_RESUME == 0 && OPT_FRESH == 0)) || return 0
  local -a taken
  local -A rec
  local desc msg d shown=0
  hpc_runs_taken_to taken
  ((${#taken[@]})) || return 0
  msg="the checkpoint folder(s) this submission would use already hold checkpoints of another run:"
  for d in "${taken[@]}"; do
    if ((shown == 3)); then
      msg+=$'\n'"  ... and $((${#taken[@]} - 3)) more"
      break
    fi
    hpc_run_record_to rec "$d"
    hpc_run_describe_to desc rec
    msg+=$'\n'"  $d: $desc"
    ((++shown))
  done
  msg+=$'\n'"A new submission neither resumes nor overwrites them. Choose one:"
  msg+=$'\n'"  --resume           continue them on purpose (the program finds them; HPC_RESUMING=1)"
  msg+=$'\n'"  --fresh            start over; they are kept in $J_SCRATCH_DIR/$J_EXP_NAME/old_checkpoints/"
  msg+=$'\n'"  --exp-name NAME    use another experiment folder"
  die "$msg"
}

# hpc_runs_check_active [SWEEP_JOBS]: refuse while a submission of the same experiment
# (the ledger's jobs of J_EXP_NAME, less the job ids SWEEP_JOBS lists: a resumed offline
# sweep's own) is queued or running: two never share a checkpoint folder. A queued
# job counts only under the experiment's name: a job number the ledger holds can belong to
# another job now (a cluster whose Slurm started its numbers afresh, two clusters that
# share $SCRATCH, numbers that wrapped around).
hpc_runs_check_active() {
  local ledger queued id name
  hpc_ledger_file_to ledger "$J_SCRATCH_DIR"
  local -A mine=() own=()
  local -a f
  [[ -r $ledger ]] && command -v squeue >/dev/null || return 0
  if [[ -n ${1:-} && -r $1 ]]; then # an offline sweep's jobs.tsv: its own jobs
    while IFS=$'\t' read -r id name; do own[$id]=1; done <"$1"
  fi
  local -a lines
  local line
  hpc_ledger_lines_of_to lines "$J_EXP_NAME"
  for line in "${lines[@]}"; do
    hpc_split_to f $'\t' "$line"
    [[ ${f[2]:-} == "$J_EXP_NAME" && ${f[6]:-job} == job && ${f[1]:-} =~ ^[0-9]+$ ]] || continue
    [[ -z ${own[${f[1]}]:-} ]] || continue
    mine[${f[1]}]=${f[5]:-${f[1]}}
  done
  ((${#mine[@]})) || return 0
  # (-n: only the jobs of this name; the name is checked again below)
  queued=$(squeue -h -o '%i %j' -u "${USER:-$(id -un)}" -n "$J_EXP_NAME" 2>/dev/null) || return 0
  hpc_lines_to lines "$queued"
  for line in "${lines[@]}"; do
    hpc_split_to f ' ' "$line"
    id=${f[0]:-} name=${f[1]:-}
    [[ -n $id && $name == "$J_EXP_NAME" ]] || continue
    id=${id%%_*} # an array's task (123_4, 123_[5-9]): the array's id, as the ledger has it
    [[ -n ${mine[$id]:-} ]] || continue
    die "submission ${mine[$id]} (job $id) of experiment '$J_EXP_NAME' is still queued or running and uses its checkpoint folders ($J_SCRATCH_DIR/$J_EXP_NAME/checkpoints): wait for it to end (hpc status), cancel it (hpc cancel $id), or submit with another --exp-name"
  done
}

# hpc_runs_claim WHAT: claim the experiment for this submission: under its lock
# (hpc_outputs/jobs/.EXP.lock, an flock held until this process exits, so across sbatch and
# the ledger's append), check again that none of its submissions is queued or running. Of
# two submissions of one experiment at once, the second is refused (exit 1) naming the
# first; one that comes after the first has submitted finds its jobs (exit 2). WHAT: the
# command, for the lock's note. An offline sweep is checked too, less its own jobs (a
# --resume-sweep runs beside its running points); an online sweep's agents (more of them
# may join) only lock.
hpc_runs_claim() {
  local lock
  hpc_exp_lock_file_to lock "$J_SCRATCH_DIR" "$J_EXP_NAME"
  local fd=${HPC_SUBMISSION_LOCK_FD:-} holder=${HPC_SUBMISSION_HOLDER:-} made=0
  [[ -d ${lock%/*} ]] || mkdir -p -- "${lock%/*}" ||
    die "cannot create ${lock%/*}: check that \$SCRATCH is writable"
  [[ -e $lock ]] || made=1
  hpc_submission_lock "$lock" "$lock" "experiment '$J_EXP_NAME'"
  # Made here and held, it goes again if nothing is submitted (hpc_ledger_append keeps
  # it); one refused never removes it (another holds it).
  ((made == 0)) || { HPC_RUNS_LOCK=$lock && hpc_remove_at_exit "$lock"; }
  hpc_submission_lock_note "$1"
  # (a lock taken before, a rerun's or a sweep's, keeps its own note)
  HPC_SUBMISSION_LOCK_FD=$fd HPC_SUBMISSION_HOLDER=$holder
  if ! hpc_sweep_requested; then
    hpc_runs_check_active
  elif [[ -n ${J_SWEEP_DIR:-} ]]; then
    hpc_runs_check_active "$J_SWEEP_DIR/jobs.tsv"
  fi
}

# hpc_runs_fresh_plan_to ARRAY: "FROM<TAB>TO" for every folder --fresh moves aside: to
# <exp>/old_checkpoints/<folder name>.<job>-<when it was submitted>.
hpc_runs_fresh_plan_to() {
  local -n _moves=$1
  local -a taken
  local -A rec
  local d name when to k
  _moves=()
  ((${OPT_FRESH:-0})) || return 0
  hpc_runs_taken_to taken
  for d in "${taken[@]}"; do
    hpc_run_record_to rec "$d"
    when=${rec[submitted]:-}
    [[ $when =~ ^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2}) ]] &&
      when=${BASH_REMATCH[1]}${BASH_REMATCH[2]}${BASH_REMATCH[3]}-${BASH_REMATCH[4]}${BASH_REMATCH[5]}${BASH_REMATCH[6]}
    [[ -n $when && $when != '?' ]] || when=$(date -r "$d" +%Y%m%d-%H%M%S 2>/dev/null) || when=unknown
    name=${d##*/}.job${rec[job]:-unknown}-$when
    to=$J_SCRATCH_DIR/$J_EXP_NAME/old_checkpoints/$name
    k=1
    while [[ -e $to ]]; do to=$J_SCRATCH_DIR/$J_EXP_NAME/old_checkpoints/$name.$((k++)); done
    _moves+=("$d"$'\t'"$to")
  done
}

# hpc_runs_results_plan_to VAR: "FROM<TAB>TO" when this submission starts a new run of the
# experiment (not --resume, not a sweep, results copied back) and <exp>/results holds what
# an earlier run copied back: it goes to <exp>/old_results/results.job<J>-<when>, the
# experiment's latest job in the ledger and its submission time (else the folder's time),
# so that two runs' results never mix. "" when nothing moves. A --rerun continues its run
# and keeps them (it does not come here).
hpc_runs_results_plan_to() {
  local -n _move=$1
  local from=$J_SCRATCH_DIR/$J_EXP_NAME/results ledger
  hpc_ledger_file_to ledger "$J_SCRATCH_DIR"
  local job="" when="" name to k
  local -a f
  _move=""
  ((${OPT_RESUME:-0} == 0)) && [[ ${J_RESULTS_FOLDER:-results} != none ]] || return 0
  ! hpc_sweep_requested || return 0
  [[ -d $from && -n $(find "$from" ! -type d -print -quit 2>/dev/null) ]] || return 0
  if [[ -r $ledger ]]; then
    local -a lines
    local line
    hpc_ledger_lines_of_to lines "$J_EXP_NAME"
    for line in "${lines[@]}"; do
      hpc_split_to f $'\t' "$line"
      [[ ${f[2]:-} == "$J_EXP_NAME" && ${f[6]:-job} == job && ${f[1]:-} =~ ^[0-9]+$ ]] || continue
      job=${f[1]} when=${f[0]}
    done
  fi
  if [[ $when =~ ^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2}) ]]; then
    when=${BASH_REMATCH[1]}${BASH_REMATCH[2]}${BASH_REMATCH[3]}-${BASH_REMATCH[4]}${BASH_REMATCH[5]}${BASH_REMATCH[6]}
  else
    when=$(date -r "$from" +%Y%m%d-%H%M%S 2>/dev/null) || when=unknown
  fi
  name=results.job${job:-unknown}-$when
  to=$J_SCRATCH_DIR/$J_EXP_NAME/old_results/$name
  k=1
  while [[ -e $to ]]; do to=$J_SCRATCH_DIR/$J_EXP_NAME/old_results/$name.$((k++)); done
  _move=$from$'\t'$to
}

# hpc_runs_fresh_note: --dry-run: what --fresh would move, and the earlier results a new
# run moves aside.
hpc_runs_fresh_note() {
  local -a moves
  local m
  hpc_runs_fresh_plan_to moves
  for m in "${moves[@]}"; do
    say "--fresh would keep ${m%%$'\t'*} as ${m#*$'\t'} (not moved: --dry-run)"
  done
  hpc_runs_results_plan_to m
  [[ -z $m ]] ||
    say "an earlier run's results in ${m%%$'\t'*} would be kept as ${m#*$'\t'}, for this run's own (not moved: --dry-run; --resume keeps them in place)"
}

# hpc_runs_fresh_move: just before sbatch: the old checkpoints go aside (--fresh), and the
# results of an earlier run (a new run: hpc_runs_results_plan_to).
hpc_runs_fresh_move() {
  local -a moves
  local m from to
  hpc_runs_results_plan_to m
  if [[ -n $m ]]; then
    from=${m%%$'\t'*} to=${m#*$'\t'}
    { mkdir -p -- "${to%/*}" && mv -- "$from" "$to"; } ||
      die "could not move the earlier results $from to $to; nothing was submitted"
    say "the results of an earlier run of '$J_EXP_NAME' are kept as $to: this run's own go to $from (--resume continues a run and keeps them)"
  fi
  # What an earlier run could not copy back (staging.sh: EXP/.hpc_results_kept) is that
  # run's: it goes with its results, never into this run's (issue 32).
  local kept=$J_SCRATCH_DIR/$J_EXP_NAME/.hpc_results_kept
  if [[ -d $kept && ! -L $kept ]] && ((${OPT_RESUME:-0} == 0)) && ! hpc_sweep_requested; then
    to=$J_SCRATCH_DIR/$J_EXP_NAME/old_results/kept.$(date +%Y%m%d-%H%M%S)
    [[ -z $m ]] || to=${m#*$'\t'}/.hpc_results_kept
    { mkdir -p -- "${to%/*}" && mv -T -- "$kept" "$to"; } ||
      die "could not move $kept (results an earlier run could not copy back) to $to; nothing was submitted"
    say "results an earlier run of '$J_EXP_NAME' could not copy back are kept as $to (they were in $kept)"
  fi
  hpc_runs_fresh_plan_to moves
  for m in "${moves[@]}"; do
    from=${m%%$'\t'*} to=${m#*$'\t'}
    if ! { mkdir -p -- "${to%/*}" && mv -- "$from" "$to"; }; then
      die "--fresh: could not move $from to $to; nothing was submitted"
    fi
    say "--fresh: the checkpoints in $from are kept as $to"
  done
}

# hpc_runs_foreign_check: --fresh moves the checkpoint folders it finds aside, --resume has
# the job write into them: refused (exit 2) when the experiment's checkpoints folder leads
# to another user's folder (a link to a shared one), or a folder it would move or continue
# holds anything of another user (issue 32). Root's folders (a shared sticky one) are
# no one's files: only the entries in them are judged.
hpc_runs_foreign_check() {
  ((${OPT_RESUME:-0} || ${OPT_FRESH:-0})) || return 0
  local base=$J_SCRATCH_DIR/$J_EXP_NAME/checkpoints opt=--fresh me d found owner
  local -a taken
  ((${OPT_FRESH:-0})) || opt=--resume
  [[ -e $base ]] || return 0
  me=$(id -u)
  hpc_runs_taken_to taken
  for d in "$base" "${taken[@]}"; do
    if [[ $d == "$base" ]]; then
      found=$(find -H "$d" -maxdepth 0 ! -uid "$me" ! -uid 0 ! -uid 65534 -print -quit 2>/dev/null)
    else
      # (65534, nobody: what an NFSv4 mount whose ids do not map shows; no user's own)
      found=$(find -H "$d" ! -uid "$me" ! -uid 65534 -print -quit 2>/dev/null)
    fi
    [[ -n $found ]] || continue
    owner=$(stat -c %U -- "$found" 2>/dev/null) || owner="another user"
    die "$opt would move or write into files of another user: $found belongs to $owner (through $base$([[ -L $base ]] && printf ' -> %s' "$(readlink -- "$base")")). The toolkit never moves, removes or writes into another user's files: make $base a folder of your own (ask $owner to take theirs), or submit with another --exp-name"
  done
}
