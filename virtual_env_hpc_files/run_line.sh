#!/bin/bash
# Job side: start the user's line the way a terminal would, with the DEFAULT disposition
# of SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGQUIT and SIGHUP, inside the container when the
# job has one (--singularity-container). A non-interactive bash cannot trap a signal that
# was ignored when it started, so a program must never inherit an ignored SIGUSR1: this
# file is the one place that decides how the toolkit starts a user's command.
#
#   run_line.sh LINE                  bash -o pipefail -c LINE (bash -c LINE when HPC_PIPEFAIL=no)
#   run_line.sh -- COMMAND [ARGS...]  COMMAND as given (a launcher's own command)
#
# It execs: the program gets this process's pid. Until then it survives the signals by
# catching them (a handler is reset to the default by exec; an ignored signal would not be).
#
# Sourced (by requeue.sh), it only defines hpc_run_line_argv_to, which the batch shell
# uses to start a line from a subshell of its own without this script's extra bash (a
# packed job starts one per line).

# hpc_run_line_argv_to ARRAY LINE | ARRAY -- COMMAND [ARGS...]: the command line that
# starts LINE (bash -o pipefail -c LINE: `python x.py | tee out` fails when python does;
# bash -c LINE with HPC_PIPEFAIL=no, from --no-pipefail) or COMMAND: inside the container
# when the job has one (container.sh), through `env --default-signal` where this node's env has it (asked
# once per job: HPC_ENV_DEFAULT_SIGNAL, job_lib.sh). The caller execs it, having caught
# (not ignored) the signals until then.
hpc_run_line_argv_to() {
  local -n _argv=$1
  local ctr=()
  shift
  if [[ ${1:-} == -- ]]; then
    _argv=("${@:2}")
  elif [[ ${HPC_PIPEFAIL:-yes} == no ]]; then
    _argv=(bash -c "$1")
  else
    _argv=(bash -o pipefail -c "$1")
  fi
  if [[ -n ${HPC_CONTAINER:-} ]]; then
    # shellcheck source=singularity_hpc_files/container.sh
    declare -F hpc_container_prefix_to >/dev/null || source "$HPC_RUN_LINE_DIR/../singularity_hpc_files/container.sh"
    hpc_container_prefix_to ctr # "bash container.sh"
  fi
  # Background commands of a non-interactive shell start with SIGINT and SIGQUIT ignored
  # (and a caller may have ignored others): coreutils' env (8.31+) sets them back.
  if [[ -z ${HPC_ENV_DEFAULT_SIGNAL:-} ]]; then
    # shellcheck source=virtual_env_hpc_files/job_lib.sh
    declare -F hpc_env_default_signal_settle >/dev/null || source "$HPC_RUN_LINE_DIR/job_lib.sh"
    hpc_env_default_signal_settle
  fi
  if [[ $HPC_ENV_DEFAULT_SIGNAL == yes ]]; then
    _argv=(env "--default-signal=USR1,USR2,TERM,INT,QUIT,HUP" "${ctr[@]}" "${_argv[@]}")
  else
    _argv=("${ctr[@]}" "${_argv[@]}")
  fi
}

HPC_RUN_LINE_DIR=${BASH_SOURCE[0]%/*}

main() {
  local argv=()
  if [[ ${1:-} == -- ]]; then
    (($# > 1)) || { echo "usage: run_line.sh LINE | run_line.sh -- COMMAND [ARGS...]" >&2 && exit 2; }
  else
    [[ -n ${1:-} ]] || { echo "usage: run_line.sh LINE | run_line.sh -- COMMAND [ARGS...]" >&2 && exit 2; }
  fi
  hpc_run_line_argv_to argv "$@"
  exec "${argv[@]}"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  trap ':' USR1 USR2 TERM INT QUIT HUP
  main "$@"
fi
