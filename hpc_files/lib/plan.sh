# shellcheck shell=bash
# Step 4 of job_submitter.sh: the batch scripts, each made by a pure function of the plan
# and one chunk (same inputs, same script; no clock, no pid, no files read). --dry-run
# prints them; submit.sh writes them beside the logs and hands them to hpc_sbatch.
#
# THE PLAN: the contract between the submitting side and the job. `prepare`
# (job_submitter.sh) builds it once; nothing changes it afterwards (tests/unit/plan.bats
# checks that the dry run and the submission leave every J_* variable as prepare left it).
# It is the J_* variables: the ones read here are
#   J_SOURCE_DIR J_PROJECT_NAME J_SCRATCH_DIR J_EXP_NAME      paths and names
#   J_SUBMISSION_ID J_HOME  this submission's id and its home, the folder of its files
#                        (submit.sh; their names: virtual_env_hpc_files/job_lib.sh)
#   J_COMMANDS (array)   the final command of every line, in the configs file's order: the
#                        --nodes-arg/--devices-arg counts and the torchrun rewrite applied;
#                        what only the job knows stays a shell variable ($MASTER_ADDR ...)
#   J_CHUNKS (array)     the sbatch jobs of the submission, below
#   J_LAUNCHER J_NODES J_GPUS J_GPU_TYPE J_CPUS J_MEM J_MEM_PER_GPU J_TIME J_ACCOUNT
#   J_PARTITION J_SBATCH_OPTIONS (array) J_MAX_PARALLEL       the Slurm request
#   J_TASKS_PER_NODE J_CPUS_PER_TASK J_PROCS_PER_NODE J_SRUN_MODE  the launcher's shape
#                        (one table: HPC_LAUNCHER_TABLE, resources.sh)
#   J_SIGNAL_GRACE J_MAX_RESTARTS J_REQUEUE J_REQUEUE_MARGIN J_REQUEUE_ON_TERM
#   J_LIGHTNING_HOOK      requeue (requeue.sh, launchers.sh on the job side)
#   J_PIPEFAIL            yes | no (--no-pipefail): how a line runs (run_line.sh)
#   J_VENV_TO_LOCAL J_VENV_LOCAL_*                             --venv-to-local (venv_local.sh)
#   J_VENV J_MODULES J_CONTAINER J_CONTAINER_TO_LOCAL J_PROVIDES_TMPDIR J_LOCAL_SCRATCH
#   J_DATA_* J_RESULTS_FOLDER J_SYNC_EVERY_S J_WANDB_KEY_FILE J_GIT_COMMIT J_SLURM_VERSION
#
# A CHUNK is one sbatch job of the submission: a plain job is a plan of one chunk; an
# array longer than MaxArraySize, a subset of the lines (--resume-sweep) and, later,
# resource blocks (#hpc: lines), packed jobs (--pack N) and --rerun are plans of several.
# J_CHUNKS holds one entry per chunk, in submission order, tab-separated fields:
#   LINES   the ORIGINAL 0-based indices of J_COMMANDS it runs (line i+1 of the commands
#           file), as comma-separated ranges: "0-999", "1,3-5", "7"
#   OFFSET  the index that array index 0 stands for (exported as HPC_TASK_OFFSET, 0 left
#           out): with PACK 1, array task a runs index OFFSET+a, so its --array is LINES
#           less OFFSET (each below MaxArraySize)
#   PACK    lines per array task: 1 (reserved for --pack N: task a runs the N entries
#           a*N .. a*N+N-1 of LINES, which the script then exports as HPC_TASK_LINES)
#   NAME=VALUE ...  zero or more further fields: this chunk's own settings over the plan's,
#           each a J_* variable and a value without tab or newline (resource blocks, #hpc:
#           lines: J_GPUS=2, J_TIME=01:00:00 ...); a list is NAME[]=ITEMS, each item ended
#           by the byte 0x1f (J_SBATCH_OPTIONS[]=--qos=high<0x1f>, J_DATA[]= for none).
#           hpc_plan_with_chunk applies them as locals (arrays for lists) around whatever
#           reads the chunk (its script, checks, --data archive, ledger record, --local),
#           so the plan itself stays as it is
# J_CHUNK_GROUP (array, resource blocks only) the block group each chunk runs (blocks.sh)
# The submission is an array when J_COMMANDS has more than one line (every chunk is then
# an array, even of one task: task i's folders are task_i, whichever chunk runs it).
#
# THE BATCH SCRIPT exports, before it sources job_runtime.sh, every value the job reads:
# lower-case source_dir, project_name, scratch_dir, exp_name (documented aliases of
# HPC_SOURCE_DIR, J_PROJECT_NAME, HPC_SCRATCH_DIR, HPC_EXP_NAME), then HPC_*: paths
# (HPC_EXP_DIR, HPC_OUTPUT_DIR, HPC_TASK_SUBDIRS), the launcher's shape and the job-side
# settings (hpc_plan_settle_job_side). The job reads no setting from the submitting
# shell's environment that sbatch happens to pass on: the exports start by unsetting every
# HPC_* variable that came through, so a value the plan leaves out is unset in the job.

# _directive_add TEXT_VAR NAME [VALUE]: one "#SBATCH --name=VALUE" line, added to TEXT_VAR.
# sbatch reads directive lines like a shell would (quotes removed, a backslash escapes the
# next character, even inside quotes, nothing expanded), so the value is double-quoted with
# \ and " escaped. Newlines never reach here (validate.sh refuses them).
_directive_add() {
  local -n _dt=$1
  if (($# == 2)); then
    _dt+="#SBATCH --$2"$'\n'
  else
    local _dv=${3//\\/\\\\}
    _dv=${_dv//\"/\\\"}
    _dt+="#SBATCH --$2=\"$_dv\""$'\n'
  fi
}

# _export NAME VALUE: one NAME<TAB>VALUE line of the manifest that hpc_plan_manifest_to
# (its caller, up the stack) is making, in its local _plan_manifest: VALUE escaped
# (job_lib.sh: \\, \t, \n), so that bash and Python read it back whole.
_export() {
  local esc
  hpc_manifest_escape_to esc "$2"
  _plan_manifest+=$1$'\t'$esc$'\n'
}

# hpc_plan_settle_job_side: the settings the job side reads, decided here once from the
# submitting environment (docs/requeue.md, docs/data.md, docs/containers.md).
hpc_plan_settle_job_side() {
  J_REQUEUE_MARGIN=${HPC_REQUEUE_MARGIN:-15}
  J_REQUEUE_ON_TERM=${HPC_REQUEUE_ON_TERM:-auto}
  J_KILL_AFTER=${HPC_KILL_AFTER:-5}
  J_PREEMPT_WATCH=${HPC_PREEMPT_WATCH:-auto} # auto: where the partition can preempt (cluster.sh)
  ((OPT_LOCAL == 0)) || J_PREEMPT_WATCH=no # nothing to watch without Slurm
  J_LIGHTNING_HOOK=${HPC_LIGHTNING_HOOK:-yes}
  J_PIPEFAIL=yes # each line runs as bash -o pipefail -c LINE (run_line.sh)
  ((${OPT_NO_PIPEFAIL:-0} == 0)) || J_PIPEFAIL=no
  J_KEEPER_TIMEOUT=${HPC_KEEPER_TIMEOUT:-120}
  J_RESULTS_BWLIMIT=${HPC_RESULTS_BWLIMIT:-}
  [[ -z $J_RESULTS_BWLIMIT ]] || is_count "$J_RESULTS_BWLIMIT" ||
    die "HPC_RESULTS_BWLIMIT='$J_RESULTS_BWLIMIT' is not a whole number of KiB/s: fix or unset it"
  J_CONTAINER_RUNTIME=${HPC_CONTAINER_RUNTIME:-}
  J_LOCAL_RUN=$((OPT_LOCAL))
  hpc_longruns_settle # --stall-timeout, --preflight (longruns.sh)
  local name
  for name in J_REQUEUE_MARGIN J_KILL_AFTER J_KEEPER_TIMEOUT; do
    is_count "${!name}" || die "HPC_${name#J_}='${!name}' is not a whole number of seconds: fix or unset it"
  done
  [[ $J_REQUEUE_ON_TERM =~ ^(yes|no|auto)$ ]] || die "HPC_REQUEUE_ON_TERM='$J_REQUEUE_ON_TERM' is not yes, no or auto: fix or unset it"
  [[ $J_PREEMPT_WATCH =~ ^(yes|no|auto)$ ]] || die "HPC_PREEMPT_WATCH='$J_PREEMPT_WATCH' is not yes, no or auto: fix or unset it"
  [[ $J_LIGHTNING_HOOK =~ ^(yes|no)$ ]] || die "HPC_LIGHTNING_HOOK='$J_LIGHTNING_HOOK' is not yes or no: fix or unset it"
  ! has_newline "$J_CONTAINER_RUNTIME" || die "HPC_CONTAINER_RUNTIME holds a newline"
}

# The job-side settings the submitting side reads from its environment (docs/reference.md:
# The job's environment) and the plan exports again for the job: inside a job of the toolkit
# they hold that job's plan, not the user's wish (tests/unit/job_env.bats keeps this list
# complete).
HPC_PLAN_ENV_SETTINGS=(HPC_VENV HPC_REQUEUE_MARGIN HPC_REQUEUE_ON_TERM HPC_KILL_AFTER
  HPC_PREEMPT_WATCH HPC_LIGHTNING_HOOK HPC_KEEPER_TIMEOUT HPC_CONTAINER_RUNTIME HPC_RESULTS_BWLIMIT)

# hpc_plan_forget_enclosing_job: a submission from inside a job of the toolkit (a line that
# submits follow-up work, an --interactive session) plans as one from a clean shell: each
# of HPC_PLAN_ENV_SETTINGS whose value is the one the enclosing job's batch script (or
# session rcfile, $HPC_JOB_SCRIPT) exported is unset here. A value the line set itself
# (HPC_VENV=/other bash hpc_files/job_submitter.sh ...) differs from it, and counts.
hpc_plan_forget_enclosing_job() {
  local script text name q plan value
  [[ -n ${HPC_JOB_SCRIPT+set} ]] || return 0 # (not ${..:-}: HPC_JOB_SCRIPT is no setting)
  script=$HPC_JOB_SCRIPT
  hpc_home_plan_of_to plan "$script"
  if [[ -f $plan && -r $plan ]]; then # the batch script's manifest (job_lib.sh)
    for name in "${HPC_PLAN_ENV_SETTINGS[@]}"; do
      [[ -n ${!name+set} ]] || continue
      ! hpc_manifest_get_to value "$plan" "$name" || [[ $value != "${!name}" ]] || unset -v "$name"
    done
    return 0
  fi
  # An --interactive session's rcfile, or an older version's batch script: its exports.
  [[ -f $script && -r $script ]] || return 0
  text=$'\n'$(<"$script")$'\n' || return 0
  for name in "${HPC_PLAN_ENV_SETTINGS[@]}"; do
    [[ -n ${!name+set} ]] || continue
    quote_to q "${!name}"
    [[ $text != *$'\n'"export $name=$q"$'\n'* ]] || unset -v "$name"
  done
}

# hpc_plan_is_array: the submission is an array (more than one line).
hpc_plan_is_array() {
  ((${#J_COMMANDS[@]} > 1))
}

# hpc_plan_chunk_to ARRAY K: chunk K's fields (LINES OFFSET PACK NAME=VALUE...).
hpc_plan_chunk_to() {
  hpc_split_to "$1" $'\t' "${J_CHUNKS[$2]}"
}

# hpc_plan_ranges_count_to VAR RANGES: how many indices "1,3-5" holds (4).
hpc_plan_ranges_count_to() {
  local -n _count=$1
  local r
  _count=0
  for r in ${2//,/ }; do
    _count=$((_count + ${r#*-} - ${r%-*} + 1))
  done
}

# hpc_plan_chunk_tasks_to VAR K: the array tasks (jobs) of chunk K: its lines, or a packed
# chunk's lines by PACK (pack.sh: a task runs PACK lines).
hpc_plan_chunk_tasks_to() {
  local -n _tasks=$1
  local -a _ct_f
  hpc_plan_chunk_to _ct_f "$2"
  hpc_plan_ranges_count_to _tasks "${_ct_f[0]}"
  _tasks=$(((_tasks + _ct_f[2] - 1) / _ct_f[2]))
}

# hpc_plan_ranges_shift_to VAR RANGES D: every index of RANGES less D ("1001-2001" 1001: "0-1000").
hpc_plan_ranges_shift_to() {
  local -n _shifted=$1
  local r lo hi
  _shifted=""
  for r in ${2//,/ }; do
    lo=$((${r%-*} - $3)) hi=$((${r#*-} - $3))
    if ((lo == hi)); then
      _shifted+=${_shifted:+,}$lo
    else
      _shifted+=${_shifted:+,}$lo-$hi
    fi
  done
}

# hpc_plan_is_plain: one chunk that runs every line from index 0 (a job, or one array).
hpc_plan_is_plain() {
  local f n=${#J_COMMANDS[@]}
  ((${#J_CHUNKS[@]} == 1)) || return 1
  hpc_plan_chunk_to f 0
  ((${#f[@]} == 3 && f[1] == 0 && f[2] == 1)) || return 1
  [[ ${f[0]} == "0-$((n - 1))" ]] || ((n == 1))
}

# hpc_plan_script_path_to VAR K: chunk K's batch script in the home (job.sbatch, or
# job-partK+1.sbatch of several).
hpc_plan_script_path_to() {
  local part=""
  ((${#J_CHUNKS[@]} == 1)) || part=$(($2 + 1))
  hpc_home_path_to "$1" "$J_HOME" script "$part"
}

# hpc_plan_log_pattern_to VAR [sbatch]: the log path with %j (or %A_%a for arrays) for the
# job's number; with "sbatch", as given to --output: a '%' of the folder's path doubled,
# so that Slurm does not take it for a replacement (validate.sh refuses a backslash).
hpc_plan_log_pattern_to() {
  local -n _out=$1
  local dir
  hpc_outputs_dir_to dir "$J_SCRATCH_DIR"
  [[ ${2:-} != sbatch ]] || sbatch_filename_to dir "$dir"
  if hpc_plan_is_array; then
    _out=$dir/$J_EXP_NAME-%A_%a.out
  else
    _out=$dir/$J_EXP_NAME-%j.out
  fi
}

# hpc_plan_array_to VAR K: chunk K's --array value ("" for a plain job), with the %N cap.
hpc_plan_array_to() {
  local -n _arr=$1
  local f n
  _arr=""
  hpc_plan_is_array || return 0
  hpc_plan_chunk_to f "$2"
  if ((f[2] == 1)); then
    hpc_plan_ranges_shift_to _arr "${f[0]}" "${f[1]}"
  else
    hpc_plan_chunk_tasks_to n "$2"
    _arr=0-$((n - 1))
  fi
  [[ -z $J_MAX_PARALLEL ]] || _arr+="%$J_MAX_PARALLEL"
}

# hpc_plan_sbatch_args_to ARRAY K [VENV_JOB [PREVIOUS_JOB]]: hpc_sbatch's arguments for
# chunk K: a failed venv job cancels it (afterok) instead of leaving it pending forever;
# with --max-parallel each chunk waits for the one before (afterany), so the cap holds.
# The user's own --sbatch-option=--dependency=... (an #SBATCH line of the script, which a
# --dependency on the command line would replace) is joined to these, never dropped.
hpc_plan_sbatch_args_to() {
  local -n _args=$1
  local dep=${3:+afterok:$3} script user all
  [[ -z $J_MAX_PARALLEL || -z ${4:-} ]] || dep+=${dep:+,}afterany:$4
  hpc_plan_script_path_to script "$2"
  _args=()
  if [[ -n $dep ]]; then
    hpc_plan_with_chunk "$2" hpc_plan_user_dependency_to user
    hpc_plan_dependency_combine_to all "$user" "$dep" ||
      die "chunk $(($2 + 1)): --dependency '$user' cannot be joined to $dep (hpc_plan_check_dependencies lets none through)"
    _args+=("--dependency=$all" --kill-on-invalid-dep=yes)
  fi
  _args+=("$script")
}

# hpc_plan_user_dependency_to VAR: the value of the user's --sbatch-option=--dependency=...
# in force (sbatch takes any unambiguous prefix, --dep=...; the last one wins, as in
# sbatch), "" when there is none.
hpc_plan_user_dependency_to() {
  local -n _ud=$1
  local _ud_o _ud_name
  _ud=""
  for _ud_o in "${J_SBATCH_OPTIONS[@]}"; do
    [[ $_ud_o == --*=* ]] || continue
    _ud_name=${_ud_o%%=*} _ud_name=${_ud_name#--}
    if ((${#_ud_name} >= 3)) && [[ dependency == "$_ud_name"* ]]; then
      _ud=${_ud_o#*=}
    fi
  done
}

# hpc_plan_dependency_combine_to VAR USER OWN: one --dependency value that asks for both
# the user's dependency and the toolkit's: "USER,OWN" (',': all of them hold; USER may be
# "afterok:1:2" or "afterok:1,afterany:2"). A USER of alternatives ("afterok:1?afterok:2",
# '?': any of them) cannot be joined to OWN, since Slurm does not mix ',' and '?' in one
# value: returns 1.
hpc_plan_dependency_combine_to() {
  local -n _dc=$1
  if [[ -z $2 || -z $3 ]]; then
    _dc=$2$3
    return 0
  fi
  [[ $2 != *\?* ]] || return 1
  _dc=$2,$3
}

# hpc_plan_check_dependencies: before anything is written, refuse a user's dependency of
# alternatives ('?') where the toolkit adds its own (--setup-venv on every chunk;
# --max-parallel on every chunk after the first).
hpc_plan_check_dependencies() {
  local k user own
  for k in "${!J_CHUNKS[@]}"; do
    hpc_plan_with_chunk "$k" hpc_plan_user_dependency_to user
    [[ $user == *\?* ]] || continue
    own=""
    ((OPT_SETUP_VENV == 0)) || own="--setup-venv (the venv job must succeed first)"
    ((k == 0)) || [[ -z $J_MAX_PARALLEL ]] ||
      own+="${own:+, and }--max-parallel across ${#J_CHUNKS[@]} arrays (each waits for the one before)"
    [[ -z $own ]] ||
      die "--sbatch-option=--dependency=$user gives alternatives ('?': any of them), which Slurm cannot join to the toolkit's own dependency for $own in one --dependency: write yours with ',' (all of them), or drop what adds the toolkit's"
  done
}

# hpc_plan_manifest_to VAR K [SCRIPT]: chunk K's job variables as manifest lines
# (NAME<TAB>VALUE, job_lib.sh), every value the job reads (SCRIPT: the file that sets them,
# HPC_JOB_SCRIPT; default chunk K's batch script).
hpc_plan_manifest_to() {
  local -n _pm_out=$1
  local _plan_manifest=""
  _plan_manifest_pairs "${@:2}"
  _pm_out=$_plan_manifest
}

# hpc_plan_manifest K [VARS]: chunk K's manifest file (job_lib.sh: job.plan): what sbatch is
# asked for (@ lines: the job's name, --array, the log's pattern), then the job's variables
# (VARS: hpc_plan_manifest_to's lines for chunk K, when the caller has them already).
hpc_plan_manifest() {
  hpc_plan_with_chunk "$1" _plan_manifest_file "$@"
}

_plan_manifest_file() {
  local text=${2-} array log
  hpc_plan_array_to array "$1"
  hpc_plan_log_pattern_to log
  [[ -n ${2+set} ]] || hpc_plan_manifest_to text "$1"
  local _plan_manifest=""
  _export @format 1
  _export @job_name "$J_EXP_NAME"
  _export @array "$array"
  _export @log "$log"
  # (the header's backslashes as printf prints them: \\ is one)
  printf '%s\n' '# The plan of the batch script beside this file, written once at submission: NAME<TAB>VALUE,' \
    '# a backslash, tab and newline of a VALUE escaped as \\, \t and \n. See docs/how-it-works.md.'
  printf '%s' "$_plan_manifest" "$text"
}

# hpc_plan_exports K [SCRIPT [VARS]]: the job's variables for chunk K as its batch script
# sets them before it sources job_runtime.sh, rendered from the manifest's lines (SCRIPT:
# the file that holds them; also the start of an --interactive session's shell: local.sh;
# VARS: those lines, when the caller has them already). Printed; _hpc_plan_exports_add adds
# them to a text instead.
hpc_plan_exports() {
  local _pe_text=""
  _hpc_plan_exports_add _pe_text "$@"
  printf '%s' "$_pe_text"
}

# _hpc_plan_exports_add TEXT_VAR K [SCRIPT [VARS]]: hpc_plan_exports's lines, added to
# TEXT_VAR (a script is written with one write, not one per line).
_hpc_plan_exports_add() {
  local -n _ea=$1
  local _ea_manifest=${4-} _ea_line _ea_name _ea_value
  local -a _ea_lines
  [[ -n ${4+set} ]] || hpc_plan_manifest_to _ea_manifest "$2" "${3:-}"
  # The plan alone speaks to the job: no HPC_* variable of the submitting shell (another
  # job's, an --interactive session's, a stray export) comes through sbatch (README: The
  # job's environment). tests/unit/job_env.bats holds the job side to this.
  # shellcheck disable=SC2016 # the script's text
  _ea+='# The plan alone: no HPC_* variable of the submitting shell reaches the job.
for _hpc_v in $(compgen -v HPC_); do unset -v "$_hpc_v"; done
unset -v _hpc_v
'
  hpc_lines_to _ea_lines "$_ea_manifest"
  for _ea_line in "${_ea_lines[@]}"; do
    _ea_name=${_ea_line%%$'\t'*} _ea_value=""
    [[ -n $_ea_name ]] || continue
    [[ $_ea_line != *$'\t'* ]] || hpc_manifest_unescape_to _ea_value "${_ea_line#*$'\t'}"
    _hpc_plan_shell_export_add _ea "$_ea_name" "$_ea_value"
  done
}

# hpc_plan_shell_export NAME VALUE: "export NAME='VALUE'" with VALUE as one shell word.
hpc_plan_shell_export() {
  local _se_text=""
  _hpc_plan_shell_export_add _se_text "$1" "$2"
  printf '%s' "$_se_text"
}

# _hpc_plan_shell_export_add TEXT_VAR NAME VALUE: hpc_plan_shell_export's line, added to TEXT_VAR.
_hpc_plan_shell_export_add() {
  local -n _sa=$1
  local _sa_q
  quote_to _sa_q "$3"
  _sa+="export $2=$_sa_q"$'\n'
}

_plan_manifest_pairs() {
  local f script=${2:-} subdirs=no watch
  hpc_plan_chunk_to f "$1"
  [[ -n $script ]] || hpc_plan_script_path_to script "$1"
  ! hpc_plan_is_array || subdirs=yes
  [[ -z ${J_PACK:-} ]] || subdirs=no # a packed job's lines each have task_I (pack.sh)
  _export source_dir "$J_SOURCE_DIR"
  _export project_name "$J_PROJECT_NAME"
  _export scratch_dir "$J_SCRATCH_DIR"
  _export exp_name "$J_EXP_NAME"
  _export HPC_SOURCE_DIR "$J_SOURCE_DIR"
  _export HPC_SCRATCH_DIR "$J_SCRATCH_DIR"
  _export HPC_EXP_NAME "$J_EXP_NAME"
  # The folders every task writes to: an array's tasks each have a task_<i> subfolder of
  # checkpoints/ and results/ (HPC_TASK_SUBDIRS=yes), a plain job none.
  _export HPC_EXP_DIR "$J_SCRATCH_DIR/$J_EXP_NAME"
  local outputs
  hpc_outputs_dir_to outputs "$J_SCRATCH_DIR"
  _export HPC_OUTPUT_DIR "$outputs"
  _export HPC_TASK_SUBDIRS "$subdirs"
  # Its home: every file of the submission (virtual_env_hpc_files/job_lib.sh).
  _export HPC_HOME "$J_HOME"
  local commands
  hpc_home_path_to commands "$J_HOME" commands
  _export HPC_COMMANDS_FILE "$commands"
  # Its number of lines, which HPC_TASK_INDEX counts in (job_runtime.sh: HPC_NUM_TASKS;
  # a packed job's is HPC_PACK_TOTAL: pack.sh). A plain job's too, so that no job counts
  # the commands file's lines itself.
  [[ -n ${J_PACK:-} ]] || _export HPC_NUM_LINES "${#J_COMMANDS[@]}"
  # One of several arrays: its task a runs line HPC_TASK_OFFSET+a+1.
  ((f[1] == 0)) || _export HPC_TASK_OFFSET "${f[1]}"
  _export HPC_JOB_SCRIPT "$script"
  hpc_pack_exports # --pack, --lines-per-job (pack.sh); absent when not packed
  hpc_runs_exports # the run's identity, --resume (runs.sh)
  # The cluster's Slurm, read once at submission (cluster.sh); not known in a dry run.
  [[ -z ${J_SLURM_VERSION:-} ]] || _export HPC_SLURM_VERSION "$J_SLURM_VERSION"
  # The code it runs (coderecord.sh); absent outside git.
  [[ -z ${J_GIT_COMMIT:-} ]] || _export HPC_GIT_COMMIT "$J_GIT_COMMIT"
  _export HPC_LAUNCHER "$J_LAUNCHER"
  _export HPC_SRUN_MODE "$J_SRUN_MODE"
  _export HPC_NUM_NODES "$J_NODES"
  _export HPC_GPUS_PER_NODE "$J_GPUS"
  _export HPC_CPUS_PER_NODE "$J_CPUS"
  _export HPC_TASKS_PER_NODE "$J_TASKS_PER_NODE"
  _export HPC_CPUS_PER_TASK "$J_CPUS_PER_TASK"
  _export HPC_DEVICES_PER_NODE "$J_PROCS_PER_NODE"
  _export HPC_SIGNAL_GRACE "$J_SIGNAL_GRACE"
  _export HPC_MAX_RESTARTS "$J_MAX_RESTARTS"
  _export HPC_REQUEUE "$J_REQUEUE"
  # Job-side settings taken from the submitting environment once, here (docs/requeue.md),
  # not through what sbatch passes on.
  _export HPC_REQUEUE_MARGIN "$J_REQUEUE_MARGIN"
  _export HPC_REQUEUE_ON_TERM "$J_REQUEUE_ON_TERM"
  _export HPC_KILL_AFTER "$J_KILL_AFTER"
  hpc_preempt_watch_to watch # auto: yes or no from what Slurm said of the partition
  _export HPC_PREEMPT_WATCH "$watch"
  hpc_longruns_exports # --stall-timeout, --preflight (longruns.sh)
  [[ ${J_PIPEFAIL:-yes} == yes ]] || _export HPC_PIPEFAIL no # --no-pipefail (run_line.sh)
  [[ ! $J_LAUNCHER =~ ^(lightning|script|torchrun)$ ]] || _export HPC_LIGHTNING_HOOK "$J_LIGHTNING_HOOK"
  _export HPC_VENV "$J_VENV"
  # --venv-to-local (venv_local.sh): the archive the job unpacks on every node; absent when not used.
  if [[ ${J_VENV_TO_LOCAL:-no} == yes && $J_VENV != none ]]; then
    _export HPC_VENV_LOCAL_ARCHIVE "$J_VENV_LOCAL_ARCHIVE"
    _export HPC_VENV_LOCAL_SHA "$J_VENV_LOCAL_SHA"
    _export HPC_VENV_LOCAL_BYTES "$J_VENV_LOCAL_BYTES"
    _export HPC_VENV_LOCAL_DIR "$J_VENV_LOCAL_DIR"
    _export HPC_VENV_LOCAL_REAL "$J_VENV_LOCAL_REAL"
  fi
  [[ -z ${J_WANDB_KEY_FILE:-} ]] || _export HPC_WANDB_KEY_FILE "$J_WANDB_KEY_FILE"
  _export HPC_MODULES "$J_MODULES"
  _export HPC_PROVIDES_TMPDIR "$J_PROVIDES_TMPDIR"
  _export HPC_LOCAL_SCRATCH "$J_LOCAL_SCRATCH"
  _export HPC_KEEPER_TIMEOUT "$J_KEEPER_TIMEOUT"
  [[ -z ${J_RESULTS_BWLIMIT:-} ]] || _export HPC_RESULTS_BWLIMIT "$J_RESULTS_BWLIMIT"
  # --local: the job runs on this machine, under local_slurm/'s stand-ins (local.sh).
  [[ ${J_LOCAL_RUN:-0} == 0 ]] || _export HPC_LOCAL_RUN 1
  # --data, --results-dir, --sync-every (staging.sh); absent when not used.
  if [[ -n ${J_DATA_ARCHIVE:-} ]]; then
    _export HPC_DATA_ARCHIVE "$J_DATA_ARCHIVE"
    _export HPC_DATA_BYTES "$J_DATA_BYTES"
    _export HPC_DATA_ENTRIES "$J_DATA_ENTRIES"
    _export HPC_DATA_SHA "$J_DATA_SHA"
  fi
  [[ ${J_RESULTS_FOLDER:-results} == results ]] || _export HPC_RESULTS_FOLDER "$J_RESULTS_FOLDER"
  [[ ${J_SYNC_EVERY_S:-0} == 0 ]] || _export HPC_SYNC_EVERY_S "$J_SYNC_EVERY_S"
  if [[ -n ${J_CONTAINER:-} ]]; then
    _export HPC_CONTAINER "$J_CONTAINER"
    _export HPC_CONTAINER_TO_LOCAL "$J_CONTAINER_TO_LOCAL"
    [[ -z ${J_CONTAINER_RUNTIME:-} ]] || _export HPC_CONTAINER_RUNTIME "$J_CONTAINER_RUNTIME"
  fi
}

# hpc_plan_with_chunk K CMD...: run CMD with chunk K's own settings in force: its NAME=VALUE
# fields as locals over the plan's (a list field NAME[]=..., as a local array), so the plan
# itself stays as it is; HPC_PLAN_CHUNK is K meanwhile.
hpc_plan_with_chunk() {
  local -a _chunk
  local _setting _name HPC_PLAN_CHUNK=$1
  hpc_plan_chunk_to _chunk "$1"
  for _setting in "${_chunk[@]:3}"; do
    if [[ $_setting =~ ^(J_[A-Z0-9_]+)\[\]= ]]; then
      _name=${BASH_REMATCH[1]}
      local -a "$_name"
      # shellcheck disable=SC2229 # it reads into the array named by _name
      IFS=$'\x1f' read -r -a "$_name" <<<"${_setting#*=}"
    elif [[ $_setting =~ ^J_[A-Z0-9_]+= ]]; then
      local "${_setting%%=*}=${_setting#*=}"
    else
      die "chunk $1 of the plan has a setting '$_setting' that is not J_NAME=VALUE or J_NAME[]=ITEMS"
    fi
  done
  "${@:2}"
}

# hpc_plan_chunk_of_to VAR I: the chunk that runs line index I (0 when none does).
hpc_plan_chunk_of_to() {
  local -n _of=$1
  local -a _of_f
  local _of_k _of_r
  _of=0
  for _of_k in "${!J_CHUNKS[@]}"; do
    hpc_plan_chunk_to _of_f "$_of_k"
    for _of_r in ${_of_f[0]//,/ }; do
      if (($2 >= ${_of_r%-*} && $2 <= ${_of_r#*-})); then
        _of=$_of_k
        return 0
      fi
    done
  done
}

# _plan_values_to VAR NAMES: the values of the variables NAMES (space-separated), joined.
_plan_values_to() {
  local -n _pv=$1
  local _pv_name
  _pv=""
  for _pv_name in $2; do _pv+=${!_pv_name-}$'\x1f'; done
}

# hpc_plan_each_distinct NAMES CMD...: run CMD in the context of each chunk (hpc_plan_with_chunk)
# whose values of the variables NAMES no chunk before it had: once for a plan whose chunks
# share them (the checks and the --data archive are per distinct request, not per chunk).
hpc_plan_each_distinct() {
  local _ed_k _ed_key _ed_seen=$'\n'
  for _ed_k in "${!J_CHUNKS[@]}"; do
    hpc_plan_with_chunk "$_ed_k" _plan_values_to _ed_key "$1"
    [[ $_ed_seen != *$'\n'"$_ed_key"$'\n'* ]] || continue
    _ed_seen+=$_ed_key$'\n'
    hpc_plan_with_chunk "$_ed_k" "${@:2}"
  done
}

# hpc_plan_script K [VARS]: print chunk K's whole batch script on stdout, with its own
# settings (VARS: as for hpc_plan_manifest), in one write.
hpc_plan_script() {
  local _ps_text=""
  hpc_plan_with_chunk "$1" _plan_script_add _ps_text "$@"
  printf '%s' "$_ps_text"
}

# _plan_script_add TEXT_VAR K [VARS]: the batch script, added to TEXT_VAR.
_plan_script_add() {
  local -n _st=$1
  shift
  local gpu array log script q_script q_runtime
  hpc_gpu_directive_to gpu
  hpc_plan_array_to array "$1"
  hpc_plan_log_pattern_to log sbatch
  hpc_plan_script_path_to script "$1"
  quote_to q_script "$script"
  quote_to q_runtime "$J_SOURCE_DIR/virtual_env_hpc_files/job_runtime.sh"

  _st+='#!/bin/bash'$'\n'
  _directive_add _st job-name "$J_EXP_NAME"
  [[ -z $J_ACCOUNT ]] || _directive_add _st account "$J_ACCOUNT"
  [[ -z $J_PARTITION ]] || _directive_add _st partition "$J_PARTITION"
  _directive_add _st nodes "$J_NODES"
  _directive_add _st ntasks-per-node "$J_TASKS_PER_NODE"
  _directive_add _st cpus-per-task "$J_CPUS_PER_TASK"
  if [[ -n $gpu ]]; then
    gpu=${gpu#--}
    _directive_add _st "${gpu%%=*}" "${gpu#*=}"
  fi
  [[ -z $J_MEM ]] || _directive_add _st mem "$J_MEM"
  [[ -z $J_MEM_PER_GPU ]] || _directive_add _st mem-per-gpu "$J_MEM_PER_GPU"
  _directive_add _st time "$J_TIME"
  [[ -z $array ]] || _directive_add _st array "$array"
  _directive_add _st output "$log"
  _directive_add _st open-mode append
  # The wall-time warning goes to this batch shell (B:), which passes it on to the program.
  _directive_add _st signal "B:USR1@$J_SIGNAL_GRACE"
  if [[ $J_REQUEUE == yes ]]; then
    _directive_add _st requeue
  else
    _directive_add _st no-requeue
  fi
  local extra pipefail_note="# Each runs as bash -o pipefail -c LINE: a failing command of a pipeline fails the line."
  [[ ${J_PIPEFAIL:-yes} == yes ]] || pipefail_note="# Each runs as bash -c LINE (--no-pipefail): a pipeline's status is its last command's."
  for extra in "${J_SBATCH_OPTIONS[@]}"; do
    extra=${extra#--}
    if [[ $extra == *=* ]]; then
      _directive_add _st "${extra%%=*}" "${extra#*=}"
    else
      _directive_add _st "$extra"
    fi
  done
  # (Strings, not here-documents: bash passes a short one through a pipe and reads it back
  # a byte at a time.)
  _st+="#
# Made by hpc_files/job_submitter.sh (cluster profile: $HPC_PROFILE_NAME). Everything the
# job needs is here; to run it again by hand: sbatch $q_script
# The commands are the lines of \$HPC_COMMANDS_FILE, as they run; array task i runs line i+1.
$pipefail_note

"
  _hpc_plan_exports_add _st "$1" "$script" ${2+"$2"}
  # With a container the image, not a venv, provides Python (singularity_hpc_files/).
  # shellcheck disable=SC2016 # the script's text
  local env_step='hpc_activate_venv  # $HPC_VENV; a missing venv fails the job here'
  if [[ -n ${J_CONTAINER:-} ]]; then
    # shellcheck disable=SC2016
    env_step='hpc_container_prepare  # the runtime and $HPC_CONTAINER; the commands run inside it'
  fi
  _st+="
# shellcheck source=/dev/null
source $q_runtime || exit 1

hpc_job_begin      # log header, the job's folders, this task's command
hpc_preflight      # every node: GPUs, local disk, rendezvous port, --preflight
hpc_prepare_tmpdir # \$SLURM_TMPDIR on every node; \$HPC_RESULTS_DIR, copied back at the end
hpc_stage_data     # --data: the archive extracted into \$SLURM_TMPDIR, once per node
hpc_load_modules   # \$HPC_MODULES, when the cluster has modules
$env_step
hpc_run_command    # the command, through \$HPC_LAUNCHER, in \$source_dir
exit \"\$?\"
"
}
