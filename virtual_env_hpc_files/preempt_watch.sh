#!/bin/bash
# Job side: a one-task step that waits inside the job and turns a preemption into a notice
# for the batch shell. Slurm (measured on 22.05) tells a preempted job at the start of its
# GraceTime only through SIGTERM to the job's steps, not to the batch shell, and the job
# still shows RUNNING; so this step, on SIGTERM, asks Slurm whether the job has a
# PreemptTime, and if so sends SIGUSR2 to the batch shell (scancel --batch), which then
# checkpoints and requeues (requeue.sh). Started by hpc_start_preempt_watch.
#
#   preempt_watch.sh JOB STOP_FILE
# JOB: the job id, or ARRAY_TASK for an array task. The step ends quietly (exit 0) once
# STOP_FILE exists: the batch shell makes it when the program has ended.
set -u
job=${1:?usage: preempt_watch.sh JOB STOP_FILE}
stop=${2:?usage: preempt_watch.sh JOB STOP_FILE}
# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"

# A preemption: Slurm's PreemptTime field holds a time (squeue -O reads the field itself;
# the text of `scontrol show job` also holds the job's name and Comment=, anyone's words).
preempted() {
  local when
  when=$(squeue -h -j "$job" -O PreemptTime:40 2>/dev/null) || return 1
  when=${when//[[:space:]]/}
  [[ $when =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T ]]
}

notice() {
  if preempted; then
    scancel --batch --signal=USR2 "$job" 2>/dev/null ||
      hpc_error "preempt watch: the job is preempted but its batch shell could not be told (scancel --batch failed)"
  fi
  exit 0
}

# The toolkit's own signals to the job's steps (USR1 warnings, INT) are not for this step.
trap '' USR1 USR2 INT HUP URG
trap notice TERM
until [[ -e $stop ]]; do
  sleep 0.5 &
  wait $! 2>/dev/null
done
