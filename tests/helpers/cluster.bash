# shellcheck shell=bash
# Helpers for integration tests on the real local Slurm cluster (tests/cluster/).
# A test that needs the cluster fails loudly when it is not running; it never skips.
#
# The researcher is a normal user (HPC_TEST_USER, hpcalice; tests/helpers/users.bash):
# integration_setup moves the test's folder (BATS_TEST_TMPDIR, and with it HOME, SCRATCH
# and the project) out of bats' root-only /tmp folder into one that user owns, under
# HPC_TEST_RUN_DIR (tests/integration/setup_suite.bash; outside /tmp, which a private /tmp
# per job would hide). There, the Slurm clients a researcher runs (sbatch, srun, salloc,
# scancel, scontrol, squeue, sacct), git and `hpc` are functions that run the real command as
# that user, as does `submitter`: a test written through them submits, follows, cancels and
# cleans up as the user. Only what must be root (playing an admin, or the other user with
# as_other) says so: `as_admin CMD...`.

load ../helpers/common

CLUSTER_SCRIPT=$REPO_ROOT/tests/cluster/local_cluster.sh

# cluster_beside SUFFIX PORTS_ABOVE [NAME=VALUE...] -- start|stop: a second cluster beside
# the run's own (its folder + SUFFIX, its ports PORTS_ABOVE higher, the settings NAME=VALUE),
# for a test file that needs a cluster set up differently; suites run side by side never
# share it. A file's setup_file exports BESIDE_DIR and BESIDE_OFFSET first (the run's own
# values, before `start` replaces HPC_LOCAL_CLUSTER_DIR).
cluster_beside() {
  local suffix=$1 above=$2
  shift 2
  local settings=()
  while [[ $1 != -- ]]; do settings+=("$1") && shift; done
  shift
  # (shared disks unless its settings say otherwise, whatever the run's own cluster has)
  env HPC_LOCAL_CLUSTER_DIR="${BESIDE_DIR}$suffix" \
    HPC_LOCAL_CLUSTER_PORT_OFFSET=$((BESIDE_OFFSET + above)) HPC_LOCAL_NODE_DISKS=shared "${settings[@]}" \
    bash "$CLUSTER_SCRIPT" "$@"
}

# cluster_beside_start ARGS...: export the run's own folder and offset, start the cluster
# beside it (cluster_beside ARGS... -- start) and point Slurm's clients at it.
cluster_beside_start() {
  export BESIDE_DIR=${HPC_LOCAL_CLUSTER_DIR:-/tmp/hpc_local_cluster}
  export BESIDE_OFFSET=${HPC_LOCAL_CLUSTER_PORT_OFFSET:-0}
  local env_lines
  env_lines=$(cluster_beside "$@" -- start)
  eval "$env_lines"
  export SLURM_CONF HPC_LOCAL_CLUSTER_DIR
}

# node_tmpdir NODE JOB: the $SLURM_TMPDIR the local cluster gives JOB on NODE: one path on
# every node with per-node disks (its files in BASE/localscratch/NODE), else NODE's own.
node_tmpdir() {
  local base=${HPC_LOCAL_CLUSTER_DIR:-/tmp/hpc_local_cluster} disks
  disks=$(sed -n 's/^node_disks=//p' "$base/cluster.settings")
  if [[ $disks == pernode:* ]]; then
    printf '%s/job_%s' "${disks#pernode:}" "$2"
  else
    printf '%s/localscratch/%s/job_%s' "$base" "$1" "$2"
  fi
}

# wait_file FILE [TIMEOUT_S]: until FILE exists (240 s unless told).
wait_file() {
  local start=$SECONDS
  until [[ -e $1 ]]; do
    ((SECONDS - start < ${2:-240})) || { echo "no $1 after ${2:-240} s" >&2 && return 1; }
    sleep 0.5
  done
}

# cluster_env: Slurm's client variables for the local cluster; fails when it is down.
cluster_env() {
  local env_lines
  env_lines=$(bash "$CLUSTER_SCRIPT" env) || {
    echo "the local Slurm cluster is not running: bash tests/cluster/local_cluster.sh start" >&2
    return 1
  }
  eval "$env_lines"
  sinfo -h >/dev/null || {
    echo "the local Slurm cluster does not answer (sinfo failed): bash tests/cluster/local_cluster.sh start" >&2
    return 1
  }
}

# user_folders: the test's folder becomes one the test user owns (mode 700) under
# HPC_TEST_RUN_DIR, with HOME and SCRATCH in it; researcher (common.bash) then runs as the
# user. The bats folder of the test is left for bats.
user_folders() {
  [[ -n ${HPC_TEST_RUN_DIR:-} && -d ${HPC_TEST_RUN_DIR:-} ]] || {
    echo "HPC_TEST_RUN_DIR is not set: run the integration tests with bats from tests/integration (its setup_suite.bash makes it)" >&2
    return 1
  }
  ensure_test_users
  local dir=$HPC_TEST_RUN_DIR/${BATS_SUITE_TEST_NUMBER:-0}.${BATS_TEST_NAME:0:40}
  rm -rf -- "$dir"
  mkdir -p -- "$dir"
  chown "$HPC_TEST_USER:" "$dir"
  chmod 0700 "$dir"
  BATS_TEST_TMPDIR=$dir
  export HOME=$dir/home SCRATCH=$dir/scratch TEST_AS_USER=$HPC_TEST_USER
  mkdir -p "$HOME" "$SCRATCH"
  hand_over
}

# integration_setup: hermetic env (as the test user) with the real Slurm commands and a
# project that has a (small, pip-less) venv, so the job's python is the venv's.
integration_setup() {
  hermetic_env
  user_folders
  cluster_env
  # Shared scratch must be visible from the nodes: on this machine every path is.
  make_project "${1:-proj}"
  cp "$REPO_ROOT/tests/helpers/argv_dump.py" "$PROJECT/argv_dump.py"
  researcher "$TEST_VENV/bin/python3" -m venv --without-pip "$PROJECT/.venv"
}

# project_venv: the project's .venv is the test venv (torch, lightning, wandb, ...).
project_venv() {
  rm -rf -- "$PROJECT/.venv"
  ln -s -- "$TEST_VENV" "$PROJECT/.venv"
}

# The Slurm clients and the hpc command as the researcher (see the header). `command X`
# or as_admin runs the real one as root.
sbatch() { researcher sbatch "$@"; }
srun() { researcher srun "$@"; }
salloc() { researcher salloc "$@"; }
scancel() { researcher scancel "$@"; }
scontrol() { researcher scontrol "$@"; }
squeue() { researcher squeue "$@"; }
sacct() { researcher sacct "$@"; }
# The researcher's git, in the researcher's project (root's git refuses a repository
# another user owns: "dubious ownership").
git() { researcher git "$@"; }

# hpc ARGS...: the `hpc` command, run in the project with the project's own copy of
# hpc_toolkit (python/, from this tree) first on the path, as the researcher.
hpc() {
  (cd "$PROJECT" && researcher "$TEST_VENV/bin/python3" -c \
    'import sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = "hpc"; from hpc_toolkit.cli import app; app()' \
    "$PROJECT/python" "$@")
}

# as_admin CMD ARGS...: CMD as root (an admin's scontrol, or a test's own look).
as_admin() {
  local cmd=$1
  shift
  command "$cmd" "$@"
}

# submitted_ids: the job ids the last submission printed ($output), in order.
submitted_ids() {
  sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' <<<"$output"
}

# jobs_named NAME SINCE: the ids of the jobs named NAME (the experiment's name) that are
# queued or were submitted since SINCE (a date +%Y-%m-%dT%H:%M:%S): empty when none was.
# Counting the whole queue instead races with other tests' jobs leaving it.
jobs_named() {
  {
    squeue -h -n "$1" -o %i
    sacct -X -n -P --name "$1" -S "$2" -o JobID
  } | cut -d_ -f1 | sort -u
}

# failing_lines N FAILING...: a configs file of N lines "bash line.sh I" (the test writes
# line.sh, which fails unless $SCRATCH/fixed.I exists); the FAILING ones fail until fixed.
failing_lines() {
  local n=$1 i
  shift
  : >"$PROJECT/experiment_configurations.txt"
  for ((i = 0; i < n; i++)); do
    echo "bash line.sh $i" >>"$PROJECT/experiment_configurations.txt"
    touch "$SCRATCH/fixed.$i"
  done
  for i; do rm -f "$SCRATCH/fixed.$i"; done
}

# submit ARGS...: job_submitter.sh through the project; sets JOB_ID (fails if none).
submit() {
  run --separate-stderr submitter "$@"
  if [ "$status" -ne 0 ]; then
    echo "submission failed ($status): $stderr" >&2
    return 1
  fi
  JOB_ID=$(submitted_ids | tail -1)
  [[ -n $JOB_ID ]] || { echo "no job id in: $output" >&2; return 1; }
  # An array: how many task rows sacct must show before the job counts as recorded.
  JOB_TASKS=$(sed -n 's/^Submitted batch job [0-9]* (array of \([0-9]*\) task.*/\1/p' <<<"$output" | tail -1)
  JOB_TASKS=${JOB_TASKS:-1}
}

# job_states ID: one "jobid|state|exitcode" line per job or array task (sacct, no steps).
job_states() {
  sacct -X -n -P -j "$1" -o JobID,State,ExitCode 2>/dev/null
}

# wait_gone ID...: until squeue lists none of the jobs as pending, running, completing or
# configuring (a cluster without accounting: no sacct to wait on); fails after 120 s.
wait_gone() {
  local waited=0
  while [[ -n $(squeue -h -t pending,running,completing,configuring -j "$(IFS=,; echo "$*")" -o %i 2>/dev/null) ]]; do
    ((waited++ < 240)) || return 1
    sleep 0.5
  done
}

# wait_job ID [TIMEOUT_S] [ROWS]: until the job (every array task) has left the queue and sacct
# has its final record. slurmdbd gets the records a few seconds after the queue empties;
# until then an array is one row and the partition is blank, so for the job `submit` made
# the rows of all its array tasks are awaited. Fails on timeout.
wait_job() {
  local id=$1 timeout=${2:-120} start=$SECONDS states rows=${3:-1}
  [[ -n ${3:-} || $id != "${JOB_ID:-}" ]] || rows=${JOB_TASKS:-1}
  while ((SECONDS - start < timeout)); do
    if [[ -z $(squeue -h -j "$id" -o %i 2>/dev/null) ]]; then
      states=$(sacct -X -n -P -j "$id" -o Partition,State 2>/dev/null)
      if [[ -n $states ]] && (($(wc -l <<<"$states") >= rows)) && ! grep -q '^|' <<<"$states" &&
        ! grep -qE '\|(PENDING|RUNNING|REQUEUED|COMPLETING|CONFIGURING|RESIZING|SUSPENDED)' <<<"$states"; then
        return 0
      fi
    fi
    sleep 0.5
  done
  echo "job $id not finished after ${timeout}s:" >&2
  squeue -j "$id" >&2 || true
  job_states "$id" >&2
  return 1
}

# hold_preemptible_node: this test has the cluster's one preemptible node (and the urgent
# jobs that preempt it) to itself until it ends. requeue.bats and requeue_programs.bats run
# at once in CI: the other file's urgent job would preempt this test's job at any moment
# (before its handler is set, say). An flock on a file of the cluster's folder, held by the
# test's own process: released when the test ends, pass or fail.
hold_preemptible_node() {
  local lock=${HPC_LOCAL_CLUSTER_DIR:-/tmp/hpc_local_cluster}/preemptible.lock
  exec {HPC_PREEMPT_LOCK_FD}>>"$lock"
  flock -w 900 "$HPC_PREEMPT_LOCK_FD" || {
    echo "the preemptible node was not free within 900 s ($lock held)" >&2
    return 1
  }
}

# completed_or_torch_exit_abort LOG [ID]: the job ID (default JOB_ID) COMPLETED; or torch 2.13's gloo aborted a
# process at its exit, after its work ("terminate called without an active exception",
# SIGABRT: 1 to 5 runs in 12 of Accelerate and Transformers programs on CPU with no Slurm and
# no toolkit at all, tests/helpers/third_party; a 2-node Lightning DDP job under CI's load),
# and then the job FAILED: the toolkit passed the failure on.
completed_or_torch_exit_abort() {
  local id=${2:-$JOB_ID}
  if grep -q "terminate called without an active exception" "$1"; then
    echo "torch's exit abort (gloo), not the toolkit's: the job must have FAILED" >&2
    [ "$(job_state "$id")" = FAILED ]
  else
    [ "$(job_state "$id")" = COMPLETED ]
  fi
}

# attempts ID: every attempt of the job in sacct, "state|exit" one per line, oldest first.
attempts() {
  sacct --duplicates -X -n -P -j "$1" -o State,ExitCode
}

# job_state ID: the state of a single (non-array) job, e.g. COMPLETED or FAILED.
job_state() {
  job_states "$1" | awk -F'|' -v id="$1" '$1 == id { print $2 }'
}

# job_exit ID: its ExitCode, e.g. 3:0.
job_exit() {
  job_states "$1" | awk -F'|' -v id="$1" '$1 == id { print $3 }'
}

# job_log ID [TASK]: the job's log file (the name job_submitter.sh printed).
job_log() {
  local exp=$2 task=${3:-}
  if [[ -n $task ]]; then
    printf '%s/%s/hpc_outputs/%s-%s_%s.out' "$SCRATCH" "${PROJECT##*/}" "$exp" "$1" "$task"
  else
    printf '%s/%s/hpc_outputs/%s-%s.out' "$SCRATCH" "${PROJECT##*/}" "$exp" "$1"
  fi
}
