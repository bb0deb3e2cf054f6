# shellcheck shell=bash
# --rerun JOB_ID: submit again the tasks of a submission that did not end COMPLETED.
# Which ones: hpc_toolkit.rerun (python/; standard library only, any python3), which reads
# the ledger and asks Slurm the way `hpc status` does. How: from the batch scripts the
# submission kept in its home (hpc_outputs/jobs/ID/, job_lib.sh), each copied with its
# manifest into the rerun's own home with only its `--array` narrowed to the indices to
# run again, so resources, settings, HPC_TASK_OFFSET and the
# commands file are the original's by construction and every task keeps its line index.
# Every field of the plan is checked again here before it names a file or an argument.

# hpc_rerun_check_args ARGS...: --rerun takes its settings from the original submission;
# only --dry-run and --yes go with it.
hpc_rerun_check_args() {
  local a
  while (($#)); do
    a=$1
    shift
    case $a in
      --rerun | --remote) shift ;; # (--remote: where it runs, remote.sh)
      --rerun=* | --remote=* | -n | --dry-run | -y | --yes) ;;
      *) die "--rerun takes every setting from the submission's kept batch scripts: drop ${a%%=*} (to change resources or lines, submit again without --rerun)" ;;
    esac
  done
}

# _rerun_python_to VAR: python3 from PATH if it is 3.9 or later (the plan needs only the
# standard library), else the project's venv's python.
_rerun_python_to() {
  local -n _py=$1
  local candidate
  for candidate in "$(command -v python3)" "$J_VENV/bin/python"; do
    [[ -n $candidate && $candidate != none/* && -x $candidate ]] || continue
    "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null || continue
    _py=$candidate
    return 0
  done
  die "--rerun needs Python 3.9 or later (the standard library only): python3 on PATH, or the project's venv ($J_VENV)"
}

# _rerun_plan_to VAR: the plan's lines (hpc_toolkit.rerun). Exits 0 when nothing is to be
# rerun, 2 when it refuses (its message is on stderr).
_rerun_plan_to() {
  local -n _plan=$1
  local py rc=0
  _rerun_python_to py
  # The toolkit's python/ goes in as an argument, not PYTHONPATH (a ':' would split it).
  _plan=$("$py" -c 'import sys; sys.path.insert(0, sys.argv.pop(1))
from hpc_toolkit.rerun import main; sys.exit(main(sys.argv[1:]))' \
    "${HPC_TOOLKIT_DIR%/*}/python" --prog "$HPC_PROG" --scratch-dir "$J_SCRATCH_DIR" "$OPT_RERUN") || rc=$?
  case $rc in
    0) ;;
    3) printf '%s\n' "$_plan" && exit 0 ;;
    2) exit 2 ;;
    *) HPC_DIE_STATUS=1 die "could not work out what to rerun ($py exited $rc); nothing was submitted" ;;
  esac
}

_rerun_bad_plan() {
  die "the rerun plan has a field that is not what it should be (${1:0:200}): the ledger or a kept script was edited; submit the lines again without --rerun"
}

# _rerun_read_plan TEXT: RERUN_* from the plan, every field checked. The plan's task
# records (one per task, 20,000 for a large array) come last; one awk checks and reads
# them all (_rerun_read_tasks): a bash regex per task took 37 ms each.
_rerun_read_plan() {
  local kind a b c d e f g line jobs head=$1 tasks="" odd=""
  hpc_home_dir_to jobs "$J_SCRATCH_DIR" "" # the homes' folder, with a / at its end
  local spec_re='^[0-9]{1,9}(-[0-9]{1,9})?(,[0-9]{1,9}(-[0-9]{1,9})?)*$'
  RERUN_OF="" RERUN_EXP="" RERUN_IDS="" RERUN_SCRIPTS=() RERUN_TASKS=()
  if [[ $head == task$'\t'* ]]; then
    tasks=$head head=""
  elif [[ $head == *$'\n'task$'\t'* ]]; then
    tasks=task$'\t'${head#*$'\n'task$'\t'} head=${head%%$'\n'task$'\t'*}
  fi
  while [[ -n $head ]] && IFS= read -r line; do
    IFS=$'\t' read -r kind a b c d e f g <<<"$line"
    case $kind in
      submission)
        { is_safe_name "$a" && ((${#a} <= 200)); } || _rerun_bad_plan "submission id '$a'"
        is_exp_name "$b" || _rerun_bad_plan "experiment name '$b'"
        [[ $c =~ ^[0-9]{1,18}(,[0-9]{1,18})*$ ]] || _rerun_bad_plan "job ids '$c'"
        RERUN_OF=$a RERUN_EXP=$b RERUN_IDS=$c
        ;;
      script)
        # A home's job.sbatch or job-partN.sbatch (job_lib.sh), or an older version's
        # jobs/EXP-STAMP.sbatch.
        { [[ ${a#"$jobs"} =~ ^[A-Za-z0-9_][A-Za-z0-9._+-]{0,200}/job(-part[1-9][0-9]{0,5})?\.sbatch$ ||
          ($a == "$jobs"*.sbatch && ${a#"$jobs"} != */* && ${a#"$jobs"} != .*) ]] &&
          ! has_newline "$a"; } || _rerun_bad_plan "script '$a'"
        [[ $b == - || $b =~ $spec_re ]] || _rerun_bad_plan "array indices '$b'"
        { is_count "$c" && is_size "$d"; } || _rerun_bad_plan "task count '$c' or offset '$d'"
        { [[ $e == /* ]] && ! has_newline "$e"; } || _rerun_bad_plan "log '$e'"
        [[ $f == - || ($f == "$J_SCRATCH_DIR/$HPC_STAGING_DIRNAME/"*.jobs && $f != *..*) ]] ||
          _rerun_bad_plan "data jobs file '$f'"
        RERUN_SCRIPTS+=("$a"$'\t'"$b"$'\t'"$((10#$c))"$'\t'"$((10#$d))"$'\t'"$e"$'\t'"$f")
        ;;
      task) odd+=$line$'\n' ;; # (a task record the split above missed: awk judges it)
      *) _rerun_bad_plan "record '$kind'" ;;
    esac
  done <<<"$head"
  # (no ${tasks%...} on the whole text: bash takes seconds per MB to find no match)
  if [[ -n $odd ]]; then
    [[ -n $tasks ]] && tasks=$odd$tasks || tasks=${odd%$'\n'}
  fi
  [[ -z $tasks ]] || _rerun_read_tasks "$tasks"
  { [[ -n $RERUN_OF ]] && ((${#RERUN_SCRIPTS[@]} && ${#RERUN_TASKS[@]})); } ||
    _rerun_bad_plan "no submission, script or task"
}

# _rerun_read_tasks TEXT: RERUN_TASKS from the plan's task records "task N SLURM_ID STATE
# CODE LINES DETAIL" (tab-separated, split as bash's read splits on tabs), each field
# checked; the first bad record is refused (_rerun_bad_plan).
_rerun_read_tasks() {
  local out
  out=$(LC_ALL=C awk '
    function digits(s, most) { return s ~ /^[0-9]+$/ && length(s) <= most }
    function bad(why) { print "!" why; failed = 1; exit }
    {
      line = $0
      sub(/^\t+/, "", line); sub(/\t+$/, "", line)
      n = split(line, x, /\t+/)
      desc = "\047" x[2] " " x[3] " " x[4] " " x[5] " " x[6] "\047"
      if (x[1] != "task") bad("record \047" x[1] "\047")
      if (n > 7) bad("task " desc)
      a = x[2]; b = x[3]; c = x[4]; d = x[5]; e = x[6]; f = x[7]
      j = index(b, "_")
      if (!digits(a, 18) ||
          !(j ? digits(substr(b, 1, j - 1), 18) && digits(substr(b, j + 1), 9) : digits(b, 18)) ||
          !(c ~ /^[A-Z_]+$/ && length(c) <= 30) ||
          !(d == "-" || (split(d, p, ":") == 2 && digits(p[1], 9) && digits(p[2], 9))) ||
          !(e == "-" || (split(e, p, "-") <= 2 && digits(p[1], 9) && (p[2] == "" && e !~ /-$/ || digits(p[2], 9)))) ||
          !(f ~ /^[A-Za-z0-9 ,:;()_.-]+$/ && length(f) <= 4000))
        bad("task " desc)
      sub(/^0+/, "", a)
      out[NR] = (a == "" ? "0" : a) "\t" b "\t" c "\t" d "\t" e "\t" f
    }
    END { for (i = 1; !failed && i <= NR; i++) print out[i] }' <<<"$1")
  [[ $out != '!'* ]] || _rerun_bad_plan "${out:1}"
  mapfile -t RERUN_TASKS <<<"$out"
}

# hpc_rerun_script_text_to VAR SCRIPT SPEC NOTE [RERUN_OF]: SCRIPT's text with its #SBATCH
# --array line set to SPEC (its %N cap kept, also in RERUN_CAP), NOTE as a comment after the
# #! line. SPEC "-": unchanged. With RERUN_OF, "export HPC_RERUN_OF=RERUN_OF" goes before the
# script's first export (after every #SBATCH line): a packed job then skips the lines that
# were done in the original (virtual_env_hpc_files/pack.sh).
hpc_rerun_script_text_to() {
  local -n _text=$1
  local script=$2 spec=$3 note=$4 rerun_of=${5:-} line cap n=0 found=0 q
  _text="" RERUN_CAP=""
  while IFS= read -r line || [[ -n $line ]]; do
    if [[ -n $rerun_of && $line == 'export '* ]]; then
      quote_to q "$rerun_of"
      _text+="export HPC_RERUN_OF=$q"$'\n'
      rerun_of=""
    fi
    if [[ $spec != - && $line =~ ^#SBATCH\ --array= ]]; then
      cap=""
      [[ ! $line =~ %([0-9]+)\"?$ ]] || cap=%${BASH_REMATCH[1]}
      line="#SBATCH --array=\"$spec$cap\"" RERUN_CAP=$cap
      found=1
    fi
    _text+=$line$'\n'
    ((++n > 1)) || _text+="# $note"$'\n'
  done <"$script" || die "cannot read $script"
  [[ $spec == - ]] || ((found)) || die "$script has no #SBATCH --array line: it was edited; submit the lines again without --rerun"
}

# hpc_rerun_manifest PLAN SPEC RERUN_OF: manifest PLAN as the rerun's copy: its @array set
# to SPEC (its %N cap kept; "-": unchanged) and HPC_RERUN_OF added, the rest as it is.
hpc_rerun_manifest() {
  local line name value esc
  while IFS= read -r line || [[ -n $line ]]; do
    name=${line%%$'\t'*} value=${line#*$'\t'}
    if [[ $name == @array && $2 != - ]]; then
      [[ $value == *%* ]] && line=@array$'\t'$2%${value##*%} || line=@array$'\t'$2
    fi
    printf '%s\n' "$line"
  done <"$1" || die "cannot read $1"
  hpc_manifest_escape_to esc "$3"
  printf 'HPC_RERUN_OF\t%s\n' "$esc"
}

# _rerun_print_tasks: which lines are rerun, and why (one awk for every task: a bash
# loop took seconds for 20,000).
_rerun_print_tasks() {
  printf 'Rerun of submission %s (job(s) %s): %d task(s) did not complete:\n' \
    "$RERUN_OF" "$RERUN_IDS" "${#RERUN_TASKS[@]}"
  printf '%s\n' "${RERUN_TASKS[@]}" | LC_ALL=C awk -F '\t' '{
    state = $3 ($4 == "-" ? "" : " (exit " $4 ")")
    if ($5 == "-") printf "  task %s (line %d): %s, was %s\n", $1, $1 + 1, state, $2
    else printf "  task %s (packed, lines %s): %s, was %s; %s\n", $1, $5, state, $2, $6 # a packed job: the whole job runs again
  }'
}

# _rerun_warn_own_failures: a task whose program ended with an exit code of its own (Slurm
# FAILED with N:0, N not the toolkit's own 75 or 124) fails the same way when rerun, unless
# what it runs was fixed since: say so, naming them. Not preemption, time, memory or a
# node: those are what --rerun is for.
_rerun_warn_own_failures() {
  local named count
  named=$(printf '%s\n' "${RERUN_TASKS[@]}" | LC_ALL=C awk -F '\t' '
    $3 == "FAILED" && $4 ~ /^[0-9]+:0$/ {
      rc = substr($4, 1, index($4, ":") - 1)
      if (rc + 0 == 0 || rc + 0 == 75 || rc + 0 == 124) next
      n++
      list = list (n > 1 ? ", " : "") "task " $1 ($5 == "-" ? " (line " ($1 + 1) : " (packed lines " $5) ", exit " rc ")"
    }
    END { if (n) print n " " list }')
  [[ -n $named ]] || return 0
  count=${named%% *} named=${named#* }
  warn "$count task(s) failed on their program's own exit code (not preemption, time or a node): $named. --rerun runs the same line(s) again: unless you fixed what they run (the code, its data), they fail the same way; a wrong line (a typo in it) needs a new submission with the line fixed, not --rerun"
}

# _rerun_dry_run: what --rerun would submit; nothing written.
_rerun_dry_run() {
  local entry script spec rest
  for entry in "${RERUN_SCRIPTS[@]}"; do
    IFS=$'\t' read -r script spec rest <<<"$entry"
    if [[ $spec == - ]]; then
      printf '# would copy %s unchanged (not an array) and submit: sbatch --parsable COPY\n' "$script"
    else
      printf '# would copy %s with --array=%s and submit: sbatch --parsable COPY\n' "$script" "$spec"
    fi
  done
}

# _rerun_submit_all: copy each script of the plan (and its manifest) into the rerun's own
# home (J_HOME) and submit them, in order, through hpc_sbatch (sbatch.sh), which notes
# their ledger lines (RERUN_SUBMITTED: "ID COUNT SPEC COPY OFFSET LOG"); if sbatch refuses
# one, cancel those already in and remove every copy. The copies keep the original's
# HPC_HOME: a task's attempts stay in one place, whichever submission ran it.
_rerun_submit_all() {
  local entry script spec count offset log data k=0 text copy id prev="" sbatch_rc part=""
  local plan copy_plan
  local -a written=() ids=() dep
  RERUN_SUBMITTED=()
  hpc_submission_home_make
  for entry in "${RERUN_SCRIPTS[@]}"; do
    IFS=$'\t' read -r script spec count offset log data <<<"$entry"
    ((${#RERUN_SCRIPTS[@]} == 1)) || part=$((++k))
    hpc_home_path_to copy "$J_HOME" script "$part"
    hpc_rerun_script_text_to text "$script" "$spec" \
      "Rerun of submission $RERUN_OF (job_submitter.sh --rerun $OPT_RERUN): a copy of $script with only --array and HPC_RERUN_OF changed" "$RERUN_OF"
    hpc_home_plan_of_to plan "$script"
    hpc_home_plan_of_to copy_plan "$copy"
    if [[ -f $plan ]]; then # (an older version's submission has none)
      _write_atomic_from "$copy_plan" hpc_rerun_manifest "$plan" "$spec" "$RERUN_OF"
      written+=("$copy_plan")
    fi
    _write_atomic "$copy" "$text"
    written+=("$copy")
    # A --max-parallel cap (%N) holds across the arrays: each waits for the one before.
    dep=()
    [[ -z $prev || -z $RERUN_CAP ]] || dep=("--dependency=afterany:$prev" --kill-on-invalid-dep=yes)
    sbatch_rc=0
    hpc_submission_home_keep # (a queued job may read it from here on: submit.sh)
    hpc_sbatch id --ledger job "$count" "$copy" "$offset" "$log" "${dep[@]}" "$copy" || sbatch_rc=$?
    if ((sbatch_rc == 2)); then
      hpc_ledger_flush
      hpc_sbatch_unsure_die "$copy" "${ids[@]}"
    fi
    if ((sbatch_rc != 0)); then
      ((${#ids[@]} == 0)) || scancel "${ids[@]}" || warn "could not cancel jobs ${ids[*]}: cancel them with scancel"
      rm -f -- "${written[@]}"
      rmdir -- "$J_HOME" 2>/dev/null || true
      HPC_LEDGER_PENDING=""
      die "sbatch did not accept the rerun of $script ($HPC_SBATCH_SAID); nothing was submitted${ids[*]:+ (jobs ${ids[*]} were cancelled)}"
    fi
    prev=$id
    ids+=("$id")
    RERUN_SUBMITTED+=("$id"$'\t'"$count"$'\t'"$spec"$'\t'"$copy"$'\t'"$offset"$'\t'"$log")
    [[ $data == - ]] || printf '%s\n' "$id" >>"$data" ||
      warn "job $id submitted, but $data could not be updated: its data archive may be pruned while it waits"
  done
}

# _rerun_record: the ledger lines of the rerun (hpc_sbatch noted them, each with rerun_of:
# one append), and what was submitted.
_rerun_record() {
  local entry id count spec copy offset log
  hpc_ledger_flush
  for entry in "${RERUN_SUBMITTED[@]}"; do
    IFS=$'\t' read -r id count spec copy offset log <<<"$entry"
    if [[ $spec == - ]]; then
      printf 'Submitted batch job %s\n' "$id"
    else
      printf 'Submitted batch job %s (array of %d task(s) as array indices %s)\n' "$id" "$count" "$spec"
    fi
    printf '  script: %s\n' "$copy"
  done
  printf '  status: hpc status %s (the chain: hpc status %s)\n' "$id" "${RERUN_IDS%%,*}"
}

# hpc_rerun STAMP: the whole --rerun path, after the options were parsed.
hpc_rerun() {
  local plan
  # A job id, or a submission id (a job number Slurm handed out again names its latest).
  [[ $OPT_RERUN =~ ^[0-9]{1,18}(_[0-9]{1,9})?$ || $OPT_RERUN =~ ^[A-Za-z0-9_][A-Za-z0-9._+-]{0,200}$ ]] ||
    die "--rerun '${OPT_RERUN:0:100}' is not a Slurm job id: give a job id that job_submitter.sh printed (any job of the submission; hpc status lists them)"
  local ledger before="" after=""
  hpc_ledger_file_to ledger "$J_SCRATCH_DIR"
  [[ $OPT_DRY_RUN != 0 ]] || before=$(stat -c '%s %y' -- "$ledger" 2>/dev/null) || before=""
  _rerun_plan_to plan
  _rerun_read_plan "$plan"
  if ((OPT_DRY_RUN == 0)); then
    # One rerun of a submission at a time: the check again under its lock, held until
    # this process has submitted and written the ledger (a second one then finds this
    # one's jobs and is refused: "already rerun"). Planned again only if the ledger
    # changed meanwhile (the plan of 20,000 tasks takes a second).
    # (in the home; an older version's submission has none: beside the ledger)
    local lock home
    hpc_home_dir_to home "$J_SCRATCH_DIR" "$RERUN_OF"
    hpc_home_path_to lock "$home" rerun_lock
    [[ -d $home ]] || lock=${home%/*}/.$RERUN_OF.rerun.lock
    hpc_submission_lock "$lock" "$lock" "a rerun of submission $RERUN_OF"
    after=$(stat -c '%s %y' -- "$ledger" 2>/dev/null) || after=""
    if [[ -z $before || $after != "$before" ]]; then
      _rerun_plan_to plan
      _rerun_read_plan "$plan"
    fi
  fi
  J_EXP_NAME=$RERUN_EXP J_SUBMISSION_ID=$RERUN_EXP-$1 J_RERUN_OF=$RERUN_OF
  hpc_home_dir_to J_HOME "$J_SCRATCH_DIR" "$J_SUBMISSION_ID"
  hpc_home_chain_check
  # Its experiment too: not beside another submission of it that is queued or running.
  ((OPT_DRY_RUN)) || hpc_runs_claim "job_submitter.sh --rerun $OPT_RERUN"
  _rerun_print_tasks
  _rerun_warn_own_failures
  if ((OPT_DRY_RUN)); then
    _rerun_dry_run
    return 0
  fi
  confirm_large_array "${#RERUN_TASKS[@]}"
  HPC_DIE_STATUS=1 # from here on a failure is the machine's or Slurm's
  hpc_submission_lock_note "job_submitter.sh --rerun $OPT_RERUN"
  _rerun_submit_all
  _rerun_record
}
