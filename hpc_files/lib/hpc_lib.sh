# shellcheck shell=bash
# The one helper library every hpc_files script sources: messages, quoting and
# the validators for user input. It sets no shell options; the executables do.

HPC_PROG=${HPC_PROG:-hpc_files}

# The job side's library: the primitives both sides need (sizes: is_size, human_bytes_to;
# %n/%u paths; Slurm versions), in one place. The job side never sources hpc_files/.
# Exported for the batch scripts that sbatch runs from a copy in its spool folder
# (build_venv.sh, plai_cleanups/cleanup_node.sh): they cannot find it beside themselves.
HPC_JOB_LIB=${BASH_SOURCE[0]%/*}/../../virtual_env_hpc_files/job_lib.sh
[[ $HPC_JOB_LIB == /* ]] || HPC_JOB_LIB=$PWD/$HPC_JOB_LIB
export HPC_JOB_LIB
if [[ ! -r $HPC_JOB_LIB ]]; then
  printf '%s: the toolkit is incomplete: %s is missing; copy virtual_env_hpc_files/ beside hpc_files/ (bash hpc_files/install_into_project.sh does)\n' \
    "$HPC_PROG" "$HPC_JOB_LIB" >&2
  exit 1
fi
# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "$HPC_JOB_LIB"

# hpc_forget_enclosing_job: unset, in this shell, what an enclosing Slurm job or step set
# for itself (SLURM_*, SLURMD_*, SRUN_*, SALLOC_*), keeping sbatch's own inputs (SLURM_CONF,
# SLURM_DEBUG_FLAGS, SLURM_EXIT_ERROR, SLURM_UMASK; the user's SBATCH_* stay too). sbatch
# passes the environment on, and Slurm sets only some of these for the new job: a job
# submitted from an array task's line saw the parent's SLURM_ARRAY_TASK_ID (and ran its
# line), SLURM_MEM_PER_NODE, SLURM_NTASKS, SRUN_CPUS_PER_TASK. Run it in the subshell
# that starts sbatch or salloc (sbatch.sh, local.sh), so the submitting shell keeps them.
# (The names by ${!PREFIX@}, not $(compgen -e): no subshell, whose fork of the large
# submitting shell was a cost of every submission; a shell variable of these names that
# is not exported goes too, which changes nothing for the command the subshell starts.)
hpc_forget_enclosing_job() {
  local _fej_name
  for _fej_name in ${!SLURM_@} ${!SLURMD_@} ${!SRUN_@} ${!SALLOC_@}; do
    case $_fej_name in
      SLURM_CONF | SLURM_DEBUG_FLAGS | SLURM_EXIT_ERROR | SLURM_UMASK) ;;
      *) unset -v "$_fej_name" ;;
    esac
  done
  # (the enclosing program's mark, by which its job ends what it left running: proc_tree.sh)
  unset -v HPC_PROGRAM_TOKEN
}

# hpc_lines_to ARRAY TEXT: TEXT's non-empty lines into ARRAY, with no process and no pipe
# (mapfile <<< TEXT reads a short text back from a pipe a byte at a time): hpc_split_to
# at newlines, which takes runs of them as one, so empty lines vanish.
hpc_lines_to() {
  hpc_split_to "$1" $'\n' "$2"
}

# hpc_split_to ARRAY SEP LINE: LINE's fields at each SEP (one character) into ARRAY, as
# IFS=SEP read -r -a ARRAY <<<"LINE" splits a line (a whitespace SEP, such as a tab, takes
# runs of it as one and trims the ends), with no pipe: bash passes a here-string through a
# pipe and reads it back a byte at a time. Globbing is off inside this function only.
hpc_split_to() {
  local -n _st_fields=$1
  local -
  set -f
  local IFS=$2
  # shellcheck disable=SC2206 # split on SEP on purpose, globs off
  _st_fields=($3)
}

# die MESSAGE...: "prog: message" on stderr, exit HPC_DIE_STATUS (default 1). An
# executable sets HPC_DIE_STATUS=2 while it judges its input, so every refusal of bad
# input exits 2, as a usage error does (die_usage); later failures exit 1.
# HPC_DIE_CONTEXT, when set, says where the input at fault was written ("configs file 'F',
# line 3: "): a directive's options are judged by the same code as the command line's.
die() {
  printf '%s: %s%s\n' "$HPC_PROG" "${HPC_DIE_CONTEXT:-}" "$*" >&2
  exit "${HPC_DIE_STATUS:-1}"
}

die_usage() {
  printf '%s: %s%s\n' "$HPC_PROG" "${HPC_DIE_CONTEXT:-}" "$*" >&2
  printf "Run '%s --help' for the list of options.\n" "$HPC_PROG" >&2
  exit 2
}

warn() {
  printf '%s: warning: %s\n' "$HPC_PROG" "$*" >&2
}

# hpc_autoload LIB FUNCTION...: each FUNCTION, of hpc_files/lib/LIB.sh, loads LIB.sh when it
# is first called (which defines the real one), then runs it: a submission parses only the
# libraries of the features it uses (job_submitter.sh's table; each costs about 1 ms).
HPC_LIB_DIR=${BASH_SOURCE[0]%/*}
[[ $HPC_LIB_DIR == /* ]] || HPC_LIB_DIR=$PWD/$HPC_LIB_DIR
declare -gA HPC_AUTOLOADED=()
hpc_autoload() {
  local lib=$1 f
  shift
  for f; do
    eval "$f() { hpc_autoload_now $lib $f && $f \"\$@\"; }"
  done
}

# hpc_autoload_now LIB FUNCTION: load LIB.sh, for FUNCTION, once.
hpc_autoload_now() {
  [[ -z ${HPC_AUTOLOADED[$1]:-} ]] ||
    die "internal error: $HPC_LIB_DIR/$1.sh does not define $2 (job_submitter.sh's hpc_autoload table); reinstall the toolkit (bash hpc_files/install_into_project.sh)"
  HPC_AUTOLOADED[$1]=1
  # shellcheck source=/dev/null
  source "$HPC_LIB_DIR/$1.sh"
}

# The one EXIT trap of the submitting side: what a submission wrote before it stopped (a
# die, Ctrl-C) goes. hpc_remove_at_exit PATH... lists files or folders to remove should
# the script exit now; hpc_keep_at_exit PATH... takes them off again once they may stay.
HPC_AT_EXIT_PATHS=()
hpc_remove_at_exit() {
  HPC_AT_EXIT_PATHS+=("$@")
  trap _hpc_at_exit EXIT
}

hpc_keep_at_exit() {
  local keep path left=()
  for path in "${HPC_AT_EXIT_PATHS[@]}"; do
    for keep; do
      [[ $path != "$keep" ]] || continue 2
    done
    left+=("$path")
  done
  HPC_AT_EXIT_PATHS=("${left[@]}")
}

_hpc_at_exit() {
  local rc=$?
  ((${#HPC_AT_EXIT_PATHS[@]} == 0)) || rm -rf -- "${HPC_AT_EXIT_PATHS[@]}"
  exit "$rc"
}

# say MESSAGE...: progress for a person; silent under HPC_QUIET=1.
say() {
  [[ ${HPC_QUIET:-0} == 1 ]] || printf '%s\n' "$*" >&2
}

# quote VALUE: print VALUE as one single-quoted shell word ('it'\''s').
quote() {
  local q="'\\''"
  printf "'%s'" "${1//\'/$q}"
}

# quote_to VAR VALUE: like quote, into VAR (no subshell).
quote_to() {
  local _qsep="'\\''"
  printf -v "$1" "'%s'" "${2//\'/$_qsep}"
}

# --- validators: each returns 0/1 and prints nothing ---------------------------

# Counts have at most HPC_MAX_COUNT_DIGITS digits: more than any cluster has of anything,
# and far below 2^63, so bash arithmetic never wraps (2^64+1 GPUs is not 1 GPU).
HPC_MAX_COUNT_DIGITS=9

is_uint() { [[ $1 =~ ^[0-9]+$ ]] && ((10#$1 >= 0)); }

is_posint() { [[ $1 =~ ^[0-9]+$ ]] && ((10#$1 > 0)); }

# is_count VALUE: a whole number of at most HPC_MAX_COUNT_DIGITS digits (check_count dies).
is_count() { [[ $1 =~ ^[0-9]+$ ]] && ((${#1} <= HPC_MAX_COUNT_DIGITS)); }

# check_count NAME VALUE [MIN] [UNIT]: die unless VALUE is a whole number of at most
# HPC_MAX_COUNT_DIGITS digits and at least MIN (default 0). The one validator of every
# count: options (--gpus, --signal-grace ...) and profile settings alike.
check_count() {
  local name=$1 value=$2 min=${3:-0} unit=${4:-}
  [[ $value =~ ^[0-9]+$ ]] || die "$name must be a whole number${unit:+ of $unit}, not '$value'"
  is_count "$value" ||
    die "$name '$value' is far too large (more than $HPC_MAX_COUNT_DIGITS digits): give a realistic number"
  ((10#$value >= min)) || die "$name must be at least $min, not '$value'"
}

# Slurm names (account, partition, gpu type, experiment): no spaces, quotes, slashes,
# shell metacharacters or leading dash; these end up in paths and #SBATCH lines.
is_safe_name() { [[ $1 =~ ^[A-Za-z0-9_][A-Za-z0-9_.+-]*$ ]]; }

# is_exp_name NAME: an experiment name (it names folders under $SCRATCH): a safe name of at
# most 100 characters. Also applied to the name read back from a sweep's sweep.json.
is_exp_name() { is_safe_name "$1" && ((${#1} <= 100)); }

# Partition lists may hold commas (sbatch takes "gpu,cpu").
is_partition_list() { [[ $1 =~ ^[A-Za-z0-9_][A-Za-z0-9_.+-]*(,[A-Za-z0-9_][A-Za-z0-9_.+-]*)*$ ]]; }

# is_slurm_time T: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (sbatch --time forms),
# with minutes and seconds below 60, hours below 24 after a day count, and not zero.
is_slurm_time() {
  local t=$1 d=0 h=0 m=0 s=0 r
  [[ ! $t =~ [0-9]{$((HPC_MAX_COUNT_DIGITS + 1))} ]] || return 1 # would wrap
  if [[ $t =~ ^([0-9]+)-([0-9]{1,2})(:([0-9]{1,2}))?(:([0-9]{1,2}))?$ ]]; then
    r=("${BASH_REMATCH[@]}")
    d=$((10#${r[1]})) h=$((10#${r[2]})) m=$((10#${r[4]:-0})) s=$((10#${r[6]:-0}))
    ((h < 24)) || return 1
  elif [[ $t =~ ^([0-9]+)$ ]]; then
    m=$((10#$t))
  elif [[ $t =~ ^([0-9]+):([0-9]{1,2})$ ]]; then
    m=$((10#${BASH_REMATCH[1]})) s=$((10#${BASH_REMATCH[2]}))
    ((s < 60)) || return 1
  elif [[ $t =~ ^([0-9]+):([0-9]{1,2}):([0-9]{1,2})$ ]]; then
    h=$((10#${BASH_REMATCH[1]})) m=$((10#${BASH_REMATCH[2]})) s=$((10#${BASH_REMATCH[3]}))
    ((m < 60 && s < 60)) || return 1
  else
    return 1
  fi
  ((m < 60 || (d == 0 && h == 0 && s == 0))) || return 1
  ((s < 60 && d * 86400 + h * 3600 + m * 60 + s > 0))
}

# slurm_time_seconds_to VAR T: seconds in a valid Slurm time, into VAR (no subshell).
slurm_time_seconds_to() {
  local _t=$2 _d=0 _rest _a _b _c
  if [[ $_t == *-* ]]; then
    _d=$((10#${_t%%-*})) _rest=${_t#*-}
    IFS=: read -r _a _b _c <<<"$_rest"
    printf -v "$1" '%d' $((_d * 86400 + 10#$_a * 3600 + 10#${_b:-0} * 60 + 10#${_c:-0}))
    return
  fi
  IFS=: read -r _a _b _c <<<"$_t"
  if [[ -n $_c ]]; then
    printf -v "$1" '%d' $((10#$_a * 3600 + 10#$_b * 60 + 10#$_c))
  else
    printf -v "$1" '%d' $((10#$_a * 60 + 10#${_b:-0}))
  fi
}

# slurm_time_seconds T: seconds in a valid Slurm time (prints the number).
slurm_time_seconds() {
  local seconds
  slurm_time_seconds_to seconds "$1"
  printf '%s\n' "$seconds"
}

# normalize_mem_to VAR SIZE: Slurm memory size (digits with optional K/M/G/T, an
# optional trailing B, any case) into VAR as sbatch writes it ("16gb" -> "16G").
# Returns 1 when SIZE is not a memory size.
normalize_mem_to() {
  local size=$2 number unit
  [[ $size =~ ^[0-9]+[Bb]$ ]] && return 1
  [[ $size =~ ^([0-9]{1,12})([KkMmGgTt])?[Bb]?$ ]] || return 1
  number=$((10#${BASH_REMATCH[1]})) unit=${BASH_REMATCH[2]^^}
  ((number > 0)) || return 1
  printf -v "$1" '%s%s' "$number" "${unit:-M}"
}

# sbatch_filename_to VAR PATH: PATH written for sbatch's --output/--error, whose '%'
# starts a replacement (%j, %a, ...): a literal '%' becomes '%%'. Returns 1 when PATH holds
# a backslash, which switches every replacement off (Slurm offers no escape for it).
sbatch_filename_to() {
  [[ $2 != *\\* ]] || return 1
  printf -v "$1" '%s' "${2//%/%%}"
}

# has_newline VALUE: true when VALUE holds a newline or carriage return.
has_newline() { [[ $1 == *$'\n'* || $1 == *$'\r'* ]]; }

# print_usage_header FILE: the comment block at the top of FILE (after the #! line), without
# the '#' marks: the --help text of the toolkit's commands.
print_usage_header() {
  local line
  while IFS= read -r line; do
    [[ $line == '#!'* ]] && continue
    [[ $line == '#'* ]] || break
    line=${line#\#}
    printf '%s\n' "${line# }"
  done <"$1"
}
