# shellcheck shell=bash
# Summary: the job side's one library (its git-sh-setup): the log line, fail, this node's
# name and local paths (%n, %u), the Slurm version's job-side behaviour, modules, sizes.
#
# Usage: source virtual_env_hpc_files/job_lib.sh
#
# Every script that runs inside a job sources it (job_runtime.sh and what it sources,
# node_tmpdir.sh, task_wrapper.sh, sweep_agent.sh, container.sh, ...); none of them sources
# anything under hpc_files/. The submitting side may source this file for the same
# primitives (hpc_files/lib/hpc_lib.sh and cluster.sh do), never the reverse. It sources
# nothing and sets no shell options: the executables do. Tests: tests/unit/job_lib.bats.
#
#   hpc_log MESSAGE...            the job's log line on stdout:
#                                     [hpc YYYY-MM-DD HH:MM:SS NODE] MESSAGE
#                                 (python/hpc_toolkit/sweep/agent.py writes the same line);
#                                 always at a line's start, also after a progress bar
#   hpc_line_expanded_to VAR LINE the words of a simple LINE as bash expands them here,
#                                 quoted for the log, secrets masked ("" when there is
#                                 nothing to expand, or LINE is not a simple command)
#   hpc_error MESSAGE...          the log line with "ERROR: " before MESSAGE, on stderr
#   hpc_fail MESSAGE [CODE]       hpc_error MESSAGE, then exit CODE (default 1: FAILED)
#   hpc_node_name_to VAR          this node: $SLURMD_NODENAME, else $HOSTNAME, else "?"
#   hpc_job_user_to VAR           the job's user: $SLURM_JOB_USER, else $USER, else id -un
#   hpc_expand_path_to VAR TEMPLATE NODE USER
#                                 TEMPLATE with %n = NODE and %u = USER, in one pass
#   hpc_node_path_to VAR TEMPLATE TEMPLATE for this node and user (a node whose name
#                                 cannot name a folder: message, VAR "", return 1)
#   hpc_slurm_tmpdir_to VAR       the node-local folder Slurm made for this job, or ""
#   hpc_unsafe_chain_to VAR DIR [ADVICE]  "" when no other user can swap what the job makes
#                                 in DIR (owners and modes of DIR and the folders above), else why
#   hpc_physical_path_to VAR DIR  DIR with every link resolved (pwd -P), no subshell when it can
#   hpc_node_tmpdir_to VAR        this node's $SLURM_TMPDIR: HPC_TMPDIR_MAP or HPC_TMPDIR_PATTERN for this
#                                 node when the job makes its own, else Slurm's
#   hpc_slurm_*                   the Slurm version, and what differs between versions
#   hpc_load_modules              module load $HPC_MODULES
#   hpc_env_default_signal_settle HPC_ENV_DEFAULT_SIGNAL (exported): yes when this node's env
#                                 can reset signals to their default (run_line.sh)
#   hpc_dir_entries_to ARRAY DIR  the names in DIR, dot files too (globbing: no process)
#   hpc_dir_has_file DIR          DIR holds a file at any depth (an empty DIR: no process)
#   is_size VALUE                 digits only, at most 18 (safe in bash arithmetic)
#   human_bytes_to VAR BYTES      "512 B", "8.0 KiB", "1.5 GiB"

# Loaded once per shell: job_runtime.sh's parts each source this file (ten times a task
# before), and a second source returns at once.
declare -F hpc_job_lib_loaded >/dev/null && return 0
hpc_job_lib_loaded() { :; }

# --- a submission's home: the one table of its paths -----------------------------------
# (python/hpc_toolkit/paths.py holds the same table for Python; tests/python/test_paths.py
# checks that they agree)
#
# Every submission of job_submitter.sh has one folder, its home:
#   $SCRATCH/<project>/hpc_outputs/jobs/<SUBMISSION_ID>/
# named by its submission id (EXP-YYYYmmdd-HHMMSS-PID-RAND: unique across clusters that
# share $SCRATCH and across a cluster started afresh, which hand job numbers out again).
# Beside the homes lies their index, the ledger (jobs/submissions.tsv, ledger.sh). A home
# holds, under these names (KEY: NAME):
#   script    job.sbatch        the batch script (chunk N of several: job-partN.sbatch)
#   plan      job.plan          its manifest: the plan as NAME<TAB>VALUE lines, read by the
#                               job's batch script (as exports), hpc, --rerun and the
#                               submissions from inside a job; nobody parses the script
#                               (chunk N of several: job-partN.plan)
#   commands  commands          the final command of every line (task i runs line i+1)
#   code      code.git          the code record (coderecord.sh); code.diff: uncommitted
#   diff      code.diff         changes
#   attempts  attempts/T        each task's attempts, one event per line (runs.sh)
#   lines     lines/I           each packed line's outcome (pack.sh)
#   writes    writes/T/         files the tasks wrote into the project (project_writes.sh)
#   finished  finished.JOB      the marker a finished job leaves (job_lib.sh; the key names
#                               the prefix, JOB is added: 123 or 123_4)
#   rerun_lock rerun.lock       held while this submission is rerun (rerun.sh)
#   interactive_rc interactive.rc  an --interactive session's shell start (local.sh)
#   node_env  node_env.NODE     what a node's env can do, found by the first task there
#                               (hpc_env_default_signal_settle; the key names the prefix)
#   keepers_stop keepers.stop.JOB.RESTART  tells a multi-node job's per-node folder
#                               keepers to end (staging.sh; the key names the prefix)
# The logs stay in hpc_outputs/ (EXP-JOB.out, where researchers look); each chunk's
# manifest names their pattern (@log), as the ledger does.
# Submissions made before homes (hpc_outputs/jobs/EXP-STAMP.sbatch, .commands, ...) are
# read by hpc as before (paths.py: Home.legacy); a job of theirs that runs with this
# version finds its files by hpc_job_path_to's legacy names.
#
#   hpc_outputs_dir_to VAR SCRATCH_DIR       SCRATCH_DIR/hpc_outputs
#   hpc_home_dir_to VAR SCRATCH_DIR ID       the home of submission ID
#   hpc_ledger_file_to VAR SCRATCH_DIR       the homes' index, the ledger (ledger.sh)
#   hpc_exp_lock_file_to VAR SCRATCH_DIR EXP the lock of experiment EXP (runs.sh)
#   hpc_home_path_to VAR HOME KEY [PART]     a file of HOME (PART: the chunk's 1-based
#                                            number when there are several, else "")
#   hpc_home_plan_of_to VAR SCRIPT           the manifest of batch script SCRIPT
#   hpc_job_path_to VAR KEY                  inside a job: a file of its home ($HPC_HOME;
#                                            a job of an older version: its legacy name)
#   hpc_manifest_escape_to VAR VALUE         VALUE as one manifest field (\ \t \n escaped)
#   hpc_manifest_unescape_to VAR FIELD       the value back
#   hpc_manifest_get_to VAR FILE NAME        NAME's value in manifest FILE (1: not there)

HPC_OUTPUTS_NAME='hpc_outputs'
HPC_HOMES_NAME='jobs'

hpc_outputs_dir_to() {
  local -n _od=$1
  _od=$2/$HPC_OUTPUTS_NAME
}

hpc_home_dir_to() {
  local -n _hd=$1
  _hd=$2/$HPC_OUTPUTS_NAME/$HPC_HOMES_NAME/$3
}

hpc_ledger_file_to() {
  local -n _lf=$1
  _lf=$2/$HPC_OUTPUTS_NAME/$HPC_HOMES_NAME/submissions.tsv
}

hpc_exp_lock_file_to() {
  local -n _el=$1
  _el=$2/$HPC_OUTPUTS_NAME/$HPC_HOMES_NAME/.$3.lock
}

hpc_home_path_to() {
  local -n _hp=$1
  local _hp_part=${4:+-part$4}
  case $3 in
    script) _hp=$2/job$_hp_part.sbatch ;;
    plan) _hp=$2/job$_hp_part.plan ;;
    commands) _hp=$2/commands ;;
    code) _hp=$2/code.git ;;
    diff) _hp=$2/code.diff ;;
    attempts) _hp=$2/attempts ;;
    lines) _hp=$2/lines ;;
    writes) _hp=$2/writes ;;
    finished) _hp=$2/finished. ;;
    rerun_lock) _hp=$2/rerun.lock ;;
    interactive_rc) _hp=$2/interactive.rc ;;
    node_env) _hp=$2/node_env. ;;
    keepers_stop) _hp=$2/keepers.stop. ;;
    *) return 1 ;;
  esac
}

hpc_home_plan_of_to() {
  local -n _po=$1
  _po=${2%.sbatch}.plan
}

# (legacy: files beside the commands file, EXP-STAMP.attempts and so on; the finished
# markers in jobs/ as .hpc_finished.ID.JOB)
hpc_job_path_to() {
  local -n _jp=$1
  if [[ -n ${HPC_HOME:-} ]]; then
    hpc_home_path_to _jp "$HPC_HOME" "$2"
    return
  fi
  local _jp_base=${HPC_COMMANDS_FILE%.commands}
  case $2 in
    commands) _jp=$HPC_COMMANDS_FILE ;;
    code) _jp=$_jp_base.git ;;
    diff) _jp=$_jp_base.diff ;;
    attempts | lines | writes) _jp=$_jp_base.$2 ;;
    finished) _jp=${HPC_OUTPUT_DIR:-${scratch_dir:-.}/$HPC_OUTPUTS_NAME}/$HPC_HOMES_NAME/.hpc_finished.${HPC_SUBMISSION_ID:+$HPC_SUBMISSION_ID.} ;;
    *) return 1 ;;
  esac
}

hpc_manifest_escape_to() {
  local -n _me=$1
  _me=$2
  [[ $_me == *[$'\\\t\n']* ]] || return 0
  _me=${_me//\\/\\\\}
  _me=${_me//$'\t'/\\t}
  _me=${_me//$'\n'/\\n}
}

# (printf %b also knows \c, \x.. and the like; an escaped field holds only \\, \t and \n)
hpc_manifest_unescape_to() {
  local -n _mu=$1
  if [[ $2 == *\\* ]]; then
    printf -v _mu '%b' "$2"
  else
    _mu=$2
  fi
}

hpc_manifest_get_to() {
  local -n _mg=$1
  local _mg_name _mg_value # (prefixed: a caller's VAR named value must not be these)
  [[ -f $2 && -r $2 ]] || return 1
  while IFS=$'\t' read -r _mg_name _mg_value; do
    [[ $_mg_name == "$3" ]] || continue
    hpc_manifest_unescape_to _mg "$_mg_value"
    return 0
  done <"$2"
  return 1
}

# --- the log line -------------------------------------------------------------------------

# hpc_node_name_to VAR: the node's name for the log line and the node's folders.
hpc_node_name_to() {
  printf -v "$1" '%s' "${SLURMD_NODENAME:-${HOSTNAME:-?}}"
}

hpc_log() {
  local _node _nl=""
  hpc_node_name_to _node
  # Once the program runs (HPC_CHILD_PID), its output shares the log: a progress bar
  # ("\r", no newline) can leave the file mid-line. The toolkit's line then starts on a
  # line of its own, so that grep '^\[hpc' finds every one.
  [[ -z ${HPC_CHILD_PID:-} ]] || hpc_log_at_line_start || _nl=$'\n'
  printf '%s[hpc %(%F %T)T %s] %s\n' "$_nl" -1 "$_node" "$*"
}

# hpc_log_at_line_start: false when stdout is a file whose last byte is not a newline (it is
# read from the file, one small `tail`); true otherwise (a terminal, a pipe, empty).
hpc_log_at_line_start() {
  local _out=/proc/$BASHPID/fd/1 _last
  [[ -f $_out && -s $_out ]] || return 0
  _last=$(tail -c 1 -- "$_out" 2>/dev/null) || return 0
  [[ -n $_last ]] && return 1 # ($(...) drops a final newline: empty means there was one)
  return 0
}

# hpc_line_expanded_to VAR LINE: "the command as it ran", for the log beside the line as
# written (`--dataset=$SLURM_TMPDIR/d` -> `--dataset=/localscratch/job_7/d`): LINE's words
# expanded by a bash in this environment and folder, then each quoted only where it needs
# it. Only for a simple command: a line that would run something to be expanded (`$(..)`,
# backquotes, `$((..))`) or is more than one command (`;`, `&&`, `|`, redirections,
# subshells, backslashes outside quotes) gives "", as does a line with nothing to expand.
# The value of WANDB_API_KEY (the toolkit keeps it out of logs) reads <WANDB_API_KEY>, and
# so does the value of any variable the line names whose name looks secret
# (HPC_SECRET_NAME_RE: HF_TOKEN, DB_PASSWORD, OPENAI_API_KEY ... read <HF_TOKEN>): the log
# is read by others more often than the line (a shared project's scratch, a support ticket).
HPC_SECRET_NAME_RE='(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|_PASS$|^PASS|KEY|CREDENTIAL|AUTH|PRIVATE|COOKIE|SESSION)'
# The longest command the log shows whole; a longer one is shown by its start (issue 32: a
# 128 KiB line was written whole into the log).
HPC_LOG_LINE_MAX=2000

# hpc_shown_line_to VAR LINE WHERE: LINE for the log: whole, or when longer than
# HPC_LOG_LINE_MAX its first 1,000 characters, its length and WHERE the whole line is.
hpc_shown_line_to() {
  local -n _shown=$1
  if ((${#2} <= HPC_LOG_LINE_MAX)); then
    _shown=$2
  else
    _shown="${2:0:1000} ... (${#2} bytes in all: the whole command is $3)"
  fi
}

hpc_line_expanded_to() {
  local -n _lx=$1
  local line=$2 bare="" rest q word out="" re
  local -a words=()
  _lx=""
  ((${#line} <= HPC_LOG_LINE_MAX)) || return 0 # (a long line is not logged whole: hpc_shown_line_to)
  [[ $line == *[\$~*?[]* ]] || return 0 # (nothing a shell would expand)
  # shellcheck disable=SC2016 # the characters $( and a backquote, not expansions
  [[ $line != *'$('* && $line != *'`'* ]] || return 0
  # What is outside quotes may hold no operator; quoted text is kept out of that check.
  re=$'^([^\'"]*)(\'[^\']*\'|"([^"\\\\`$]|\\\\.|\\$[^(])*")(.*)$'
  rest=$line
  while [[ $rest =~ $re ]]; do
    bare+=${BASH_REMATCH[1]}_ rest=${BASH_REMATCH[4]}
  done
  bare+=$rest
  [[ $bare != *[\;\&\|\<\>\(\)\\\'\"]* ]] || return 0
  # The line's words as arguments of printf: expanded (parameters, ~, globs, braces) and
  # printed, nothing run. (A fresh bash: nothing of this shell's state changes.)
  mapfile -d '' -t words < <(bash -c "printf '%s\\0' $line" 2>/dev/null) || return 0
  # The values of secret-looking variables the line names are masked as <NAME>.
  local secret
  local -a secrets=()
  [[ -z ${WANDB_API_KEY:-} ]] || secrets=(WANDB_API_KEY)
  rest=$line
  while [[ $rest =~ \$\{?([A-Za-z_][A-Za-z0-9_]*)(.*)$ ]]; do
    word=${BASH_REMATCH[1]} rest=${BASH_REMATCH[2]}
    [[ ${word^^} =~ $HPC_SECRET_NAME_RE && -n ${!word:-} ]] && secrets+=("$word")
  done
  for word in "${words[@]}"; do
    for secret in "${secrets[@]}"; do
      word=${word//"${!secret}"/<$secret>}
    done
    if [[ $word =~ ^[][A-Za-z0-9_./=:,+@%^-]+$ ]]; then
      q=$word
    else
      q=${word@Q}
    fi
    out+=${out:+ }$q
  done
  [[ $out != "$line" ]] || return 0
  _lx=$out
}

hpc_error() {
  hpc_log "ERROR: $*" >&2
}

# hpc_fail MESSAGE [CODE]: say what went wrong and end the job (FAILED in Slurm).
hpc_fail() {
  hpc_error "$1"
  exit "${2:-1}"
}

# --- this node's paths --------------------------------------------------------------------

hpc_job_user_to() {
  local _hju_user=${SLURM_JOB_USER:-${USER:-}}
  [[ -n $_hju_user ]] || _hju_user=$(id -un)
  printf -v "$1" '%s' "$_hju_user"
}

# hpc_expand_path_to VAR TEMPLATE NODE USER: every %n becomes NODE and every %u USER, in
# one pass: what they put in is never expanded again, and a '&' in them stays a '&'
# (bash's ${x//pat/rep} would put the match there). Any other %X stays as it is.
hpc_expand_path_to() {
  local _hep_rest=$2 _hep_node=$3 _hep_user=$4 _hep_out=""
  while [[ $_hep_rest == *%* ]]; do
    _hep_out+=${_hep_rest%%\%*}
    _hep_rest=${_hep_rest#*%}
    case ${_hep_rest:0:1} in
      n) _hep_out+=$_hep_node _hep_rest=${_hep_rest:1} ;;
      u) _hep_out+=$_hep_user _hep_rest=${_hep_rest:1} ;;
      *) _hep_out+=% ;;
    esac
  done
  printf -v "$1" '%s' "$_hep_out$_hep_rest"
}

# hpc_node_path_to VAR TEMPLATE: TEMPLATE (HPC_LOCAL_SCRATCH, HPC_TMPDIR_PATTERN) on this
# node, for this job's user. The node's name becomes part of a folder name: nothing but a
# plain host name.
hpc_node_path_to() {
  local _hnp_node _hnp_user=%u
  hpc_node_name_to _hnp_node
  if [[ $2 == *%n* && ! $_hnp_node =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]]; then
    hpc_error "this node's name '$_hnp_node' cannot name a folder: set SLURMD_NODENAME"
    printf -v "$1" '%s' ""
    return 1
  fi
  [[ $2 != *%u* ]] || hpc_job_user_to _hnp_user
  hpc_expand_path_to "$1" "$2" "$_hnp_node" "$_hnp_user"
}

# hpc_slurm_tmpdir_to VAR: the node-local folder Slurm made for this job: $SLURM_TMPDIR,
# or on clusters that set only TMPDIR, $TMPDIR when it is this job's own; else "". Only
# positive evidence counts: a component of its path that is the job id the way Slurm's
# prologs name a job's folder (<id>, job_<id>, job<id>, slurm-<id>, <user>.<id>.<n>).
# A path that merely contains the digits (a login node's pam_tmpdir
# /tmp/user/tmp-95-96-97 passed on by sbatch) is not: array tasks would share it.
hpc_slurm_tmpdir_to() {
  local -n _tmp=$1
  local _id=${SLURM_JOB_ID:-} _part _parts
  _tmp=${SLURM_TMPDIR:-}
  [[ -z $_tmp ]] || return 0
  [[ -n ${TMPDIR:-} && $_id =~ ^[0-9]+$ && -d $TMPDIR ]] || return 0
  IFS=/ read -r -a _parts <<<"$TMPDIR"
  for _part in "${_parts[@]}"; do
    if [[ $_part =~ ^((job|slurm|slurm_job|slurmjob)[_.-]?)?${_id}$ ||
      $_part =~ ^[A-Za-z0-9_-]+\.${_id}\.[0-9]+$ ]]; then
      _tmp=$TMPDIR
      return 0
    fi
  done
  return 0
}

# hpc_node_tmpdir_to VAR: this node's $SLURM_TMPDIR: the job's own folder when the job
# makes one (staging.sh): the one HPC_TMPDIR_MAP names for this node (a folder made under
# another name because the usual one was taken), else HPC_TMPDIR_PATTERN for this node
# (%n); else the one Slurm set. Steps on other nodes inherit the first node's value: they
# ask here for their own.
hpc_node_tmpdir_to() {
  if [[ -n ${HPC_TMPDIR_PATTERN:-} ]]; then
    local _hnt_node _hnt_line
    hpc_node_name_to _hnt_node
    while IFS= read -r _hnt_line; do
      if [[ $_hnt_line == "$_hnt_node"$'\t'* ]]; then
        printf -v "$1" '%s' "${_hnt_line#*$'\t'}"
        return 0
      fi
    done <<<"${HPC_TMPDIR_MAP:-}"
    hpc_node_path_to "$1" "$HPC_TMPDIR_PATTERN"
  else
    hpc_slurm_tmpdir_to "$1"
  fi
}

# hpc_unsafe_chain_to VAR DIR [ADVICE]: "" when every folder DIR relies on is safe for the job's
# files: DIR and each folder above it (as written, and once links are resolved) belongs to
# this user or root, and no other user can write to it unless it is sticky (/tmp, 1777:
# others cannot rename or remove what is yours there). A folder writable by its group
# counts as safe only for the user's own group (named as the user). Else VAR says which
# folder fails, why, and what to do. Another user who owns or can write to a folder above
# the job's could swap the job's folder for a link to theirs while it runs.
hpc_unsafe_chain_to() {
  local -n _unsafe=$1
  local dir=$2 real
  _unsafe=""
  if [[ $dir != /* ]]; then
    _unsafe="$dir is not an absolute path"
    return 0
  fi
  _hpc_chain_walk_to _unsafe "$dir" "${3:-}"
  [[ -z $_unsafe ]] || return 0
  hpc_physical_path_to real "$dir" || {
    _unsafe="$dir cannot be entered"
    return 0
  }
  [[ $real == "$dir" ]] || _hpc_chain_walk_to _unsafe "$real" "${3:-}"
}

# hpc_physical_path_to VAR DIR: DIR's path with every link resolved (pwd -P); returns 1
# (VAR "") when DIR cannot be entered. By cd -P and back in this shell when the shell's own
# folder can be found again by its path (no subshell: a fork of the large submitting shell
# cost each submission about 1 ms), else in a subshell (a folder removed since the shell
# entered it stays the shell's). PWD and OLDPWD are left as they were; a relative DIR is
# taken from here, never from CDPATH.
hpc_physical_path_to() {
  local -n _pp=$1
  local _pp_dir=$2 _pp_old=${OLDPWD-}
  [[ $_pp_dir == /* ]] || _pp_dir=./$_pp_dir
  _pp=""
  if [[ $PWD == /* && -d $PWD && -x $PWD ]] && builtin cd -P -- "$_pp_dir" 2>/dev/null; then
    _pp=$PWD
    if builtin cd -- "$OLDPWD" 2>/dev/null; then
      OLDPWD=$_pp_old
      return 0
    fi
    builtin cd -- "$_pp" || true # (the way back went: stay somewhere real, as the subshell would)
  fi
  _pp=$(builtin cd -P -- "$_pp_dir" 2>/dev/null && pwd -P) || {
    _pp=""
    return 1
  }
}

# _hpc_chain_walk_to VAR DIR [ADVICE]: hpc_unsafe_chain_to's check of DIR's path as
# written (a link is judged by its own owner; its target by the second walk). One stat for
# all. ADVICE ends the message (default: set HPC_LOCAL_SCRATCH, for a node's folders).
_hpc_chain_walk_to() {
  local -n _walk=$1
  local dir=${2%/} paths=(/) p rest me my_group uid gid mode owner group type i=0
  local advice=${3:-set HPC_LOCAL_SCRATCH in the cluster profile to a folder only you can write}
  rest=${dir#/}
  p=""
  while [[ -n $rest ]]; do
    p+=/${rest%%/*}
    if [[ $rest == */* ]]; then rest=${rest#*/}; else rest=""; fi
    [[ ${p##*/} == "" ]] || paths+=("$p")
  done
  me=$EUID my_group="" # (asked of id only for a folder its group may write: rare)
  while read -r uid gid mode owner group type; do
    p=${paths[i++]}
    if [[ $uid != 0 && $uid != "$me" ]]; then
      _walk="$p belongs to $owner, not to you or root: $owner could replace the job's folder below it with a link to files of theirs. Use a folder of your own: ask the admins for one, or $advice"
      return 0
    fi
    [[ $type == directory ]] || continue
    mode=$((8#$mode))
    if ((mode & 8#1000)); then
      continue # sticky: others may add their own entries, never touch yours
    fi
    ((mode & 8#020)) && [[ -z $my_group ]] && my_group=$(id -un)
    if ((mode & 8#002)) || { ((mode & 8#020)) && [[ $group != "$my_group" ]]; }; then
      _walk="$p can be written by other users (mode $(printf '%04o' "$mode"), not sticky): any of them could replace the job's folder in it. Make it yours only (chmod go-w '$p') or sticky (chmod +t '$p'), or $advice"
      return 0
    fi
  done < <(stat -c '%u %g %a %U %G %F' -- "${paths[@]}" 2>/dev/null)
  ((i == ${#paths[@]})) || _walk="${paths[i]:-$dir} cannot be read (stat failed): the job cannot check who may write there"
}

# --- Slurm versions (job side) ------------------------------------------------------------
# Versions tested: 22.05 (Debian 12) and 24.11 (Debian 13); docs/cluster-admins.md, "Slurm versions".

# hpc_slurm_version_parse_to VAR TEXT: "24.11.5" from `sbatch --version` output
# ("slurm 24.11.5", "slurm-wlm 22.05.8"); "" when TEXT holds no version.
hpc_slurm_version_parse_to() {
  local -n _v=$1
  _v=""
  [[ $2 =~ (^|[^0-9.])([0-9]+\.[0-9]+(\.[0-9]+)?) ]] && _v=${BASH_REMATCH[2]}
  return 0
}

# hpc_slurm_version_code VERSION: YY.MM as one comparable number (24.11 -> 2411).
hpc_slurm_version_code() {
  local major=${1%%.*} rest=${1#*.}
  printf '%d\n' $((10#$major * 100 + 10#${rest%%.*}))
}

# hpc_slurm_at_least VERSION [HAVE]: HAVE (default: this job's HPC_SLURM_VERSION) is
# VERSION or newer. Unknown versions count as new (the toolkit's default behaviour).
hpc_slurm_at_least() {
  local have=${2-${HPC_SLURM_VERSION:-}} want=$1
  [[ -n $have ]] || return 0
  # (hpc_slurm_version_code's sum, without its two subshells: the submission asks this)
  local h=${have#*.} w=${want#*.}
  ((10#${have%%.*} * 100 + 10#${h%%.*} >= 10#${want%%.*} * 100 + 10#${w%%.*}))
}

# hpc_slurm_job_version: HPC_SLURM_VERSION as the submission read it; a batch script
# written by hand has none, so ask srun (once).
hpc_slurm_job_version() {
  [[ -z ${HPC_SLURM_VERSION:-} ]] || return 0
  local out
  out=$(srun --version 2>/dev/null) || out=""
  hpc_slurm_version_parse_to HPC_SLURM_VERSION "$out"
  export HPC_SLURM_VERSION
}

# hpc_slurm_requeue_outlives_attempt: a requeue request can outlive the attempt it was
# for. Measured: 22.05 no; 24.11 yes (a job that requeued itself during a preemption's
# grace time ran attempt 2 to its end, then Slurm requeued it again "per user/system
# request"). Not measured between them: treated as yes from 23.02 on (the guard is
# harmless where it is not needed).
hpc_slurm_requeue_outlives_attempt() {
  hpc_slurm_at_least 23.02
}

# hpc_slurm_finished_file: the marker a finished job leaves in its submission's home
# (job_lib.sh: finished.JOB), so that an attempt started by a stale requeue request ends at
# once instead of running again. In the home: Slurm hands job numbers out again (a cluster
# started afresh, two clusters sharing $SCRATCH), and another submission's job of the same
# number must not end at its attempt 2 as "already finished".
hpc_slurm_finished_file() {
  local prefix job=${SLURM_JOB_ID:-none}
  hpc_job_path_to prefix finished
  [[ -z ${SLURM_ARRAY_JOB_ID:-} ]] || job=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID:-}
  printf '%s%s\n' "$prefix" "$job"
}

# hpc_slurm_job_finished RC: this job is done (RC is its exit code) and must not run again:
# record it, so that an attempt started by a stale requeue request ends at once with RC.
# Not `scontrol update Requeue=0`: measured on 24.11, that stops the extra attempt but
# Slurm then records the finished job as PREEMPTED (exit 0), which no afterok dependency
# or status check takes for a success; the stale attempt ending at once leaves COMPLETED.
hpc_slurm_job_finished() {
  [[ -n ${SLURM_JOB_ID:-} ]] || return 0
  hpc_slurm_requeue_outlives_attempt || return 0
  local file
  file=$(hpc_slurm_finished_file)
  mkdir -p -- "${file%/*}" 2>/dev/null
  printf '%s %s\n' "$1" "${SLURM_RESTART_COUNT:-0}" >"$file.tmp.$$" 2>/dev/null &&
    mv -f -- "$file.tmp.$$" "$file" 2>/dev/null
  return 0
}

# hpc_slurm_stale_attempt_to RC_VAR: true when an earlier attempt of this job already
# finished (its exit code in RC_VAR): this attempt comes from a stale requeue request.
hpc_slurm_stale_attempt_to() {
  local -n _rc=$1
  local file line
  _rc=0
  [[ -n ${SLURM_JOB_ID:-} ]] || return 1
  file=$(hpc_slurm_finished_file)
  [[ -r $file ]] || return 1
  IFS= read -r line <"$file" || return 1
  [[ $line =~ ^([0-9]+)\ ([0-9]+)$ ]] || return 1
  ((${SLURM_RESTART_COUNT:-0} > BASH_REMATCH[2])) || return 1
  _rc=${BASH_REMATCH[1]}
}

# --- modules ------------------------------------------------------------------------------

# hpc_load_modules: `module load $HPC_MODULES` (clusters with environment modules).
hpc_load_modules() {
  [[ -n ${HPC_MODULES:-} ]] || return 0
  if ! declare -F module >/dev/null && ! command -v module >/dev/null; then
    local init
    for init in /etc/profile.d/lmod.sh /etc/profile.d/modules.sh /usr/share/lmod/lmod/init/bash; do
      # shellcheck source=/dev/null
      [[ -r $init ]] && source "$init" && break
    done
  fi
  declare -F module >/dev/null || command -v module >/dev/null ||
    hpc_fail "the cluster profile asks for modules ($HPC_MODULES) but this node has no 'module' command: set HPC_MODULES=\"\" in the profile"
  # shellcheck disable=SC2086 # a space-separated list of modules
  module load $HPC_MODULES || hpc_fail "module load $HPC_MODULES failed (module names differ between clusters: fix HPC_MODULES in the profile)"
  hpc_log "modules: $HPC_MODULES"
}

# --- starting programs ------------------------------------------------------------------

# hpc_env_default_signal_settle: HPC_ENV_DEFAULT_SIGNAL=yes (exported) when this node's env
# has --default-signal (coreutils 8.31+), which run_line.sh uses to start a program with
# the default disposition of every signal, else no. Asked once per job, by the batch shell.
hpc_env_default_signal_settle() {
  local cache="" answer=""
  # The first task of a submission on a node asks env (two processes), the others read its
  # answer in the home (an array of 1,000 tasks on 4 nodes asks 4 times).
  if [[ -n ${HPC_HOME:-} && ${SLURMD_NODENAME:-} =~ ^[A-Za-z0-9._-]{1,200}$ ]]; then
    hpc_home_path_to cache "$HPC_HOME" node_env
    cache+=$SLURMD_NODENAME
    if [[ -f $cache ]] && IFS= read -r answer <"$cache" 2>/dev/null &&
      [[ $answer =~ ^default-signal=(yes|no)$ ]]; then
      export HPC_ENV_DEFAULT_SIGNAL=${BASH_REMATCH[1]}
      return 0
    fi
  fi
  HPC_ENV_DEFAULT_SIGNAL=no
  ! env --default-signal=USR1 true 2>/dev/null || HPC_ENV_DEFAULT_SIGNAL=yes
  export HPC_ENV_DEFAULT_SIGNAL
  # (written in place: a reader that finds half a line asks env itself)
  [[ -z $cache ]] || { printf 'default-signal=%s\n' "$HPC_ENV_DEFAULT_SIGNAL" >"$cache"; } 2>/dev/null || true
}

# hpc_dir_entries_to ARRAY DIR: the names of DIR's entries, dot files too, by the shell's
# own globbing: no process (each task lists folders several times). Under a glob setting
# that changes what a pattern gives (nullglob, failglob, dotglob, nocaseglob, set -f: a
# BASH_ENV may set them), find lists them.
hpc_dir_entries_to() {
  local -n _de=$1
  local _de_e
  _de=()
  if [[ :$BASHOPTS: == *:@(nullglob|failglob|dotglob|nocaseglob):* || $- == *f* ]]; then
    mapfile -d '' -t _de < <(find "$2" -mindepth 1 -maxdepth 1 -printf '%P\0' 2>/dev/null)
    return 0
  fi
  for _de_e in "$2"/* "$2"/.[!.]* "$2"/..?*; do
    [[ ! -e $_de_e && ! -L $_de_e ]] || _de+=("${_de_e##*/}")
  done
}

# hpc_dir_has_file DIR: DIR holds a file (anything but a folder) at any depth. An empty
# DIR (a task that wrote no results: the common case) is told without a process.
hpc_dir_has_file() {
  local -a _hf
  hpc_dir_entries_to _hf "$1"
  ((${#_hf[@]})) || return 1
  [[ -n $(find "$1" -mindepth 1 ! -type d -print -quit 2>/dev/null) ]]
}

# --- sizes ----------------------------------------------------------------------------

# is_size VALUE: digits only, at most 18 of them (fits bash arithmetic without wrapping).
# For every number read back from a file the toolkit wrote earlier (sizes, counts, job
# ids): such a file may have been edited, and bash arithmetic evaluates what it is given.
is_size() { [[ $1 =~ ^[0-9]{1,18}$ ]]; }

# human_bytes_to VAR BYTES: "512 B", "8.0 KiB", "1.5 GiB" (bash arithmetic only). BYTES
# that is not a count (is_size) gives "? B": it is never evaluated.
human_bytes_to() {
  local -n _h=$1
  local b=$2 unit=0 units=(B KiB MiB GiB TiB PiB)
  if ! is_size "$b"; then
    _h="? B"
    return 0
  fi
  b=$((10#$b))
  while ((b >= 1048576 && unit < 4)); do
    b=$((b / 1024)) unit=$((unit + 1))
  done
  if ((b >= 1024)); then
    b=$((b * 10 / 1024))
    _h="$((b / 10)).$((b % 10)) ${units[unit + 1]}"
  elif ((unit == 0)); then
    _h="$b B"
  else
    _h="$b ${units[unit]}"
  fi
}

