#!/bin/bash
# Job side: start the user's line the way a terminal would, with the DEFAULT disposition
# of SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGQUIT and SIGHUP, inside the container when the
# job has one (--singularity-container). A non-interactive bash cannot trap a signal that
# was ignored when it started, so a program must never inherit an ignored SIGUSR1: this
# file is the one place the toolkit starts a user's command from.
#
#   run_line.sh LINE                  bash -c LINE
#   run_line.sh -- COMMAND [ARGS...]  COMMAND as given (a launcher's own command)
#
# It execs: the program gets this process's pid. Until then it survives the signals by
# catching them (a handler is reset to the default by exec; an ignored signal would not be).
trap ':' USR1 USR2 TERM INT QUIT HUP
if [[ ${1:-} == -- ]]; then
  shift
  (($#)) || { echo "usage: run_line.sh LINE | run_line.sh -- COMMAND [ARGS...]" >&2 && exit 2; }
  argv=("$@")
else
  [[ -n ${1:-} ]] || { echo "usage: run_line.sh LINE | run_line.sh -- COMMAND [ARGS...]" >&2 && exit 2; }
  argv=(bash -c "$1")
fi
# shellcheck source=singularity_hpc_files/container.sh
source "${BASH_SOURCE[0]%/*}/../singularity_hpc_files/container.sh"
hpc_container_prefix_to ctr # "bash container.sh" with --singularity-container, else nothing
# Background commands of a non-interactive shell start with SIGINT and SIGQUIT ignored
# (and a caller may have ignored others): coreutils' env (8.31+) sets them back.
if env --default-signal=USR1 true 2>/dev/null; then
  exec env --default-signal=USR1,USR2,TERM,INT,QUIT,HUP "${ctr[@]}" "${argv[@]}"
fi
exec "${ctr[@]}" "${argv[@]}"
