# shellcheck shell=bash
# Long runs, submitting side (docs/requeue.md, "Stalls, preflight and lost nodes"): the
# stall timeout (--stall-timeout, profile HPC_STALL_TIMEOUT) and the preflight
# (--preflight, profile HPC_PREFLIGHT; HPC_PREFLIGHT_RETRIES), judged once here into the
# plan (J_STALL_TIMEOUT, J_STALL_TIMEOUT_S, J_PREFLIGHT, J_PREFLIGHT_RETRIES); the job side
# (virtual_env_hpc_files/longruns.sh) only runs what the plan says.
#
#   hpc_duration_seconds_to VAR TEXT   30s, 20m, 2h (a number and its unit) in seconds;
#                                      off or 0 is 0; returns 1 for anything else
#   hpc_longruns_settle                the J_* values above, or die (exit 2) saying why
#   hpc_longruns_exports               their lines of the batch script (plan.sh)

# The shortest stall timeout: the watch looks every few seconds, and a program needs a
# moment to start before it can show progress.
HPC_STALL_TIMEOUT_MIN_S=10

hpc_duration_seconds_to() {
  local -n _secs=$1
  local text=$2
  _secs=""
  if [[ $text == off || $text == 0 ]]; then
    _secs=0
    return 0
  fi
  [[ $text =~ ^([0-9]{1,6})([smh])$ ]] || return 1
  local n=$((10#${BASH_REMATCH[1]}))
  case ${BASH_REMATCH[2]} in
    s) _secs=$n ;;
    m) _secs=$((n * 60)) ;;
    h) _secs=$((n * 3600)) ;;
  esac
}

hpc_longruns_settle() {
  local text=${OPT_STALL_TIMEOUT:-${HPC_STALL_TIMEOUT:-1h}} from=--stall-timeout secs
  [[ -n ${OPT_STALL_TIMEOUT:-} ]] || from="the cluster profile's HPC_STALL_TIMEOUT"
  if ! hpc_duration_seconds_to secs "$text"; then
    [[ ! $text =~ ^[0-9]+[smh]$ ]] || die "$from '$text' is too long: at most 6 digits before its unit (e.g. 72h)"
    die "$from '$text' is not a duration: a number with s, m or h (30s, 20m, 2h), or off"
  fi
  ((secs == 0 || secs >= HPC_STALL_TIMEOUT_MIN_S)) ||
    die "$from '$text' is too short: at least ${HPC_STALL_TIMEOUT_MIN_S}s (or off)"
  J_STALL_TIMEOUT=$text J_STALL_TIMEOUT_S=$secs
  ((secs)) || J_STALL_TIMEOUT=off
  J_PREFLIGHT=${OPT_PREFLIGHT:-${HPC_PREFLIGHT:-}}
  ! has_newline "$J_PREFLIGHT" || die "--preflight (or HPC_PREFLIGHT) holds a newline: give one command line"
  J_PREFLIGHT_RETRIES=${HPC_PREFLIGHT_RETRIES:-3}
  is_count "$J_PREFLIGHT_RETRIES" ||
    die "the cluster profile's HPC_PREFLIGHT_RETRIES '$J_PREFLIGHT_RETRIES' is not a whole number"
}

hpc_longruns_exports() {
  _export HPC_STALL_TIMEOUT "$J_STALL_TIMEOUT"
  _export HPC_STALL_TIMEOUT_S "$J_STALL_TIMEOUT_S"
  _export HPC_PREFLIGHT_RETRIES "$J_PREFLIGHT_RETRIES"
  [[ -z $J_PREFLIGHT ]] || _export HPC_PREFLIGHT "$J_PREFLIGHT"
}
