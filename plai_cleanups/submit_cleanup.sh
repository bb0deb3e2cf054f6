#!/usr/bin/env bash
# Summary: remove your leftover per-job folders from the node-local scratch of every node
# of a partition, once or every INTERVAL. Folders of your jobs still queued stay.
#
# Usage: bash plai_cleanups/submit_cleanup.sh [OPTIONS]
#
# Submits one small job per node of the partition (the nodes come from sinfo). Each job
# removes the folders hpc_job_<job id>_<node> that your jobs left in the profile's local scratch
# (HPC_LOCAL_SCRATCH) when no job of yours with that id is still in the queue, and the
# node-local venv copies of --venv-to-local (HPC_VENV_LOCAL_DIR) that no job of yours in the
# queue used on that node, and writes
# what it freed (folders, bytes) into one log. Nothing else is touched: no other names,
# no other user's files, no links followed, no other filesystem (see docs/cluster-admins.md, "Cleaning node-local scratch").
#
# Options:
# @options: one row each in cleanup_options below, listed here by --help
#
# The log is DIR/<partition>.log. Stop a schedule with
#   scancel --user="$USER" --name=hpc_cleanup_every.<partition>
# Environment: HPC_CLUSTER, SCRATCH, HPC_CLEANUP_TIME (time limit of each job, default
# 00:15:00), HPC_CLEANUP_MEM (memory of each job, default 256M).
set -euo pipefail

HPC_PROG=submit_cleanup.sh
CLEANUP_MIN_EVERY_S=600
CLEANUP_MAX_EVERY_S=$((366 * 86400))

usage() {
  hpc_options_use cleanup_options
  hpc_options_usage "${BASH_SOURCE[0]}"
}

# This folder and the toolkit beside it, found from this file so it runs from anywhere.
CLEANUP_DIR=${BASH_SOURCE[0]}
[[ $CLEANUP_DIR == /* ]] || CLEANUP_DIR=$PWD/$CLEANUP_DIR
CLEANUP_DIR=${CLEANUP_DIR%/*}
if ! HPC_TOOLKIT_DIR=$(cd -- "$CLEANUP_DIR/../hpc_files" 2>/dev/null && pwd -P) ||
  [[ ! -f $HPC_TOOLKIT_DIR/lib/hpc_lib.sh ]]; then
  printf '%s: hpc_files/ not found beside %s: copy both folders into the project\n' \
    "$HPC_PROG" "$CLEANUP_DIR" >&2
  exit 1
fi
# shellcheck source=hpc_files/lib/hpc_lib.sh
source "$HPC_TOOLKIT_DIR/lib/hpc_lib.sh"
# shellcheck source=hpc_files/lib/profile.sh
source "$HPC_TOOLKIT_DIR/lib/profile.sh"
# shellcheck source=hpc_files/lib/sbatch.sh
source "$HPC_TOOLKIT_DIR/lib/sbatch.sh"
# shellcheck source=hpc_files/lib/options.sh
source "$HPC_TOOLKIT_DIR/lib/options.sh"

# --- parse ------------------------------------------------------------------------------

# The options: one row each (the format is in hpc_files/lib/options.sh, whose parser reads it).
# shellcheck disable=SC2016 # the help texts name variables ($SCRATCH), not expand them
cleanup_options() {
  hpc_option -C --cluster value PROFILE OPT_CLUSTER '$HPC_CLUSTER, else generic' 'cluster profile: a name in hpc_files/clusters/ or a path to a .conf'
  hpc_option -p --partition value NAME OPT_PARTITION "the profile's, else the cluster's default partition" 'the partition whose nodes to clean (one partition)'
  hpc_option -A --account value NAME OPT_ACCOUNT "the profile's" 'Slurm account for the cleanup jobs'
  hpc_option - --every value INTERVAL OPT_EVERY '' 'run again every INTERVAL: a number and d, h or m (1d, 12h, 30m), from 10m to 366d; one schedule per partition and user'
  hpc_option - --replace flag '' OPT_REPLACE '' 'with --every: replace the schedule already there'
  hpc_option -n --dry-run flag '' OPT_DRY_RUN '' 'the jobs only list what they would remove; nothing is removed'
  hpc_option - --log-dir value DIR OPT_LOG_DIR '$SCRATCH/hpc_outputs/cleanup' 'folder of the log, on the shared filesystem'
  hpc_option -h --help flag '' OPT_HELP '' 'this help'
}

parse_options() {
  hpc_options_use cleanup_options
  hpc_options_reset
  hpc_options_parse "$@"
}

# --- validate ---------------------------------------------------------------------------

# interval_seconds INTERVAL: Nd, Nh or Nm in seconds; returns 1 when it is not one.
interval_seconds() {
  [[ $1 =~ ^([0-9]{1,6})([dhm])$ ]] || return 1
  local n=$((10#${BASH_REMATCH[1]}))
  case ${BASH_REMATCH[2]} in
    d) printf '%d\n' $((n * 86400)) ;;
    h) printf '%d\n' $((n * 3600)) ;;
    m) printf '%d\n' $((n * 60)) ;;
  esac
}

# check_template TEMPLATE [NAME]: the profile's HPC_LOCAL_SCRATCH (or NAME) can name a
# folder on a node.
check_template() {
  local t=$1 rest where="cluster profile $HPC_PROFILE_FILE: ${2:-HPC_LOCAL_SCRATCH}"
  [[ $t == /* ]] || die "$where '$t' is not an absolute path: set it to the nodes' local disk, e.g. /local/scratch/%u"
  has_newline "$t" && die "$where holds a newline"
  [[ /$t/ != */../* && /$t/ != */./* ]] || die "$where '$t' holds a . or .. part: write the path plainly"
  [[ ${t//\//} != "" ]] || die "$where is '/': the cleanup needs a scratch folder, not the root of the disk"
  rest=${t//%n/}
  rest=${rest//%u/}
  [[ $rest != *%* ]] || die "$where '$t' uses a % other than %n (node name) and %u (user)"
}

# settle: profile and options into the C_* variables; dies on any bad value.
settle() {
  hpc_profile_load "${OPT_CLUSTER:-${HPC_CLUSTER:-generic}}" "$HPC_TOOLKIT_DIR/clusters"
  [[ $HPC_PROFILE_FILE == /* ]] || HPC_PROFILE_FILE=$PWD/$HPC_PROFILE_FILE
  check_template "$HPC_LOCAL_SCRATCH"
  C_TEMPLATE=$HPC_LOCAL_SCRATCH
  # The node-local venv copies of --venv-to-local (stale ones go too).
  check_template "$HPC_VENV_LOCAL_DIR" HPC_VENV_LOCAL_DIR
  C_VENVS=$HPC_VENV_LOCAL_DIR

  C_PARTITION=${OPT_PARTITION:-$HPC_DEFAULT_PARTITION}
  [[ -z $C_PARTITION ]] || is_safe_name "$C_PARTITION" ||
    die "--partition '$C_PARTITION' is not a partition name: give one partition (sinfo -s lists them)"
  C_ACCOUNT=${OPT_ACCOUNT:-$HPC_DEFAULT_ACCOUNT}
  [[ -z $C_ACCOUNT ]] || is_safe_name "$C_ACCOUNT" || die "--account '$C_ACCOUNT' is not an account name"

  C_EVERY_S=""
  if [[ -n $OPT_EVERY ]]; then
    C_EVERY_S=$(interval_seconds "$OPT_EVERY") ||
      die_usage "--every '$OPT_EVERY' is not an interval: use a number and d, h or m, e.g. 1d, 12h or 30m"
    ((C_EVERY_S >= CLEANUP_MIN_EVERY_S && C_EVERY_S <= CLEANUP_MAX_EVERY_S)) ||
      die_usage "--every '$OPT_EVERY' is out of range: give at least 10m and at most 366d"
    ((OPT_DRY_RUN == 0)) ||
      die_usage "--dry-run cannot be periodic: try it once without --every, then schedule without --dry-run"
  fi
  ((OPT_REPLACE == 0)) || [[ -n $OPT_EVERY ]] || die_usage "--replace only goes with --every (it replaces a schedule)"

  C_TIME=${HPC_CLEANUP_TIME:-00:15:00}
  is_slurm_time "$C_TIME" || die "HPC_CLEANUP_TIME '$C_TIME' is not a Slurm time, e.g. 00:15:00"
  normalize_mem_to C_MEM "${HPC_CLEANUP_MEM:-256M}" || die "HPC_CLEANUP_MEM '${HPC_CLEANUP_MEM:-}' is not a memory size, e.g. 256M"

  settle_log_dir
}

# settle_log_dir: C_LOG_DIR (absolute); Slurm reads % in a log path as a pattern.
settle_log_dir() {
  local dir=$OPT_LOG_DIR
  if [[ -z $dir ]]; then
    [[ -n ${SCRATCH:-} ]] ||
      die "SCRATCH is not set: export SCRATCH=/path/to/scratch (the log goes to \$SCRATCH/hpc_outputs/cleanup), or give --log-dir DIR on the shared filesystem"
    [[ $SCRATCH == /* ]] || die "SCRATCH='$SCRATCH' is not an absolute path: export SCRATCH=/absolute/path/to/scratch"
    dir=${SCRATCH%/}/hpc_outputs/cleanup
  fi
  [[ $dir == /* ]] || dir=$PWD/$dir
  has_newline "$dir" && die "the log folder's path holds a newline: choose another --log-dir"
  [[ $dir != *%* && $dir != *\\* ]] || die "the log folder '$dir' holds a % or \\, which Slurm reads as a pattern: choose another --log-dir"
  C_LOG_DIR=${dir%/}
}

# --- ask Slurm ----------------------------------------------------------------------------

check_tools() {
  local tool
  for tool in sbatch squeue sinfo scancel; do
    command -v "$tool" >/dev/null ||
      die "$tool not found on PATH: run this on a Slurm login node (or start the local test cluster: bash tests/cluster/local_cluster.sh start)"
  done
}

# default_partition: the cluster's default partition (sinfo marks it with *).
default_partition() {
  local p
  p=$(sinfo -h -o '%P') || die "sinfo failed: is Slurm reachable from here?"
  p=$(grep -m1 '\*$' <<<"$p") || die "the cluster has no default partition: give --partition NAME (sinfo -s lists them)"
  printf '%s\n' "${p%\*}"
}

# nodes_to ARRAY PARTITION: the partition's nodes that take jobs now. Nodes that are down,
# drained or not responding are skipped with a warning: a job there would wait forever.
nodes_to() {
  local -n _nodes=$1
  local part=$2 out node state
  local -A seen=()
  out=$(sinfo -N -h -p "$part" -o '%N %t') || die "sinfo failed: is Slurm reachable from here?"
  [[ -n $out ]] || die "partition '$part' not found (or it has no nodes): sinfo -s lists the partitions"
  _nodes=()
  while read -r node state; do
    [[ -n $node && -z ${seen[$node]:-} ]] || continue
    seen[$node]=1
    is_safe_name "$node" || die "sinfo gave a node name this script cannot use: '$node'"
    case $state in
      idle | mix | alloc | comp) _nodes+=("$node") ;;
      *) warn "skipping $node: its state is '$state', it would not run the cleanup job" ;;
    esac
  done <<<"$out"
  ((${#_nodes[@]})) || die "no node of partition '$part' takes jobs now: nothing submitted"
}

# queued_named_to ARRAY NAME: ids of this user's jobs named NAME, less the job running this.
queued_named_to() {
  local -n _ids=$1
  local out id
  out=$(squeue -h -u "$C_USER" -n "$2" -o '%A') || die "squeue failed: nothing submitted"
  _ids=()
  for id in $out; do
    [[ $id == "${SLURM_JOB_ID:-}" ]] || _ids+=("$id")
  done
}

# queued_by_name_to MAP: NAME -> a job id, for every job of this user in the queue (one
# squeue call for all the nodes).
queued_by_name_to() {
  local -n _by_name=$1
  local out id name
  out=$(squeue -h -u "$C_USER" -o '%A %j') || die "squeue failed: nothing submitted"
  while read -r id name; do
    [[ -z $name ]] || _by_name["$name"]=$id
  done <<<"$out"
}

# --- submit -------------------------------------------------------------------------------

# common_argv_to ARRAY NAME: the sbatch options every cleanup job has.
common_argv_to() {
  local -n _opts=$1
  _opts=("--job-name=$2" "--partition=$C_PARTITION" --nodes=1 --ntasks=1
    --cpus-per-task=1 "--mem=$C_MEM" "--time=$C_TIME" "--chdir=$C_LOG_DIR"
    "--output=$C_LOG" "--error=$C_LOG" --open-mode=append)
  [[ -z $C_ACCOUNT ]] || _opts+=("--account=$C_ACCOUNT")
}

# sbatch_id ARG...: submit through hpc_sbatch (hpc_files/lib/sbatch.sh), print the job
# id; dies when sbatch refuses.
sbatch_id() {
  local id
  hpc_sbatch id "$@" ||
    die "sbatch did not accept the cleanup job ($HPC_SBATCH_SAID): its message above says why"
  printf '%s\n' "$id"
}

# submit_node NODE QUEUED_MAP: one cleanup job pinned to NODE, unless one is queued there
# already; prints "NODE  job ID" (or why not).
submit_node() {
  local node=$1 name="hpc_cleanup.$C_PARTITION.$1" argv id
  local -n _queued=$2
  if [[ -n ${_queued[$name]:-} ]]; then
    printf '  %-14s job %s already queued there: not submitted again\n' "$node" "${_queued[$name]}"
    return 0
  fi
  common_argv_to argv "$name"
  argv+=("--nodelist=$node" "$CLEANUP_DIR/cleanup_node.sh")
  ((OPT_DRY_RUN == 0)) || argv+=(--dry-run)
  argv+=(--venvs "$C_VENVS" "$C_TEMPLATE")
  id=$(sbatch_id "${argv[@]}") || die "the cleanup of $node was not submitted (the nodes listed above were)"
  printf '  %-14s job %s\n' "$node" "$id"
}

# check_schedule NAME: refuse a second schedule, or cancel the old one with --replace.
check_schedule() {
  local name=$1 old=()
  queued_named_to old "$name"
  ((${#old[@]})) || return 0
  if ((OPT_REPLACE == 0)); then
    die "a periodic cleanup of partition $C_PARTITION is already scheduled (job ${old[*]}): nothing submitted. Add --replace to replace it, or stop it with: scancel ${old[*]}"
  fi
  scancel "${old[@]}" || die "scancel ${old[*]} failed: the old schedule is still there; nothing submitted"
  say "cancelled the earlier periodic cleanup (job ${old[*]})"
}

# schedule_next NAME: the job that runs this script again after C_EVERY_S seconds.
schedule_next() {
  local name=$1 argv cmd word id all=()
  cmd="bash $(quote "$CLEANUP_DIR/submit_cleanup.sh")"
  for word in --cluster "$HPC_PROFILE_FILE" --partition "$C_PARTITION" --every "$OPT_EVERY" \
    --log-dir "$C_LOG_DIR"; do
    cmd+=" $(quote "$word")"
  done
  [[ -z $C_ACCOUNT ]] || cmd+=" --account $(quote "$C_ACCOUNT")"
  common_argv_to argv "$name"
  argv+=("--begin=now+$C_EVERY_S" "--wrap=$cmd")
  id=$(sbatch_id "${argv[@]}")
  # Two submissions at the same moment both passed check_schedule: the later one yields.
  queued_named_to all "$name"
  if ((${#all[@]} > 1)) && [[ $(printf '%s\n' "${all[@]}" | sort -n | head -1) != "$id" ]]; then
    scancel "$id" || true
    die "another periodic cleanup of partition $C_PARTITION was scheduled at the same moment; job $id withdrawn, the other one stays"
  fi
  printf '  %-14s job %s, not before %(%Y-%m-%d %H:%M)T (every %s)\n' "next run:" "$id" \
    $((EPOCHSECONDS + C_EVERY_S)) "$OPT_EVERY"
  printf '  %-14s scancel --user=%s --name=%s\n' "stop it:" "$C_USER" "$name"
}

main() {
  # A refusal of the options or the environment's settings is a usage error: exit 2.
  HPC_DIE_STATUS=2
  parse_options "$@"
  if ((OPT_HELP)); then
    usage
    return 0
  fi
  settle
  HPC_DIE_STATUS=1
  check_tools
  C_USER=$(id -un)
  [[ -n $C_PARTITION ]] || C_PARTITION=$(default_partition)
  is_safe_name "$C_PARTITION" || die "sinfo gave a partition name this script cannot use: '$C_PARTITION'"
  C_LOG=$C_LOG_DIR/$C_PARTITION.log
  local nodes=() node schedule="hpc_cleanup_every.$C_PARTITION" next=""
  local -A queued=()
  nodes_to nodes "$C_PARTITION"
  [[ -z $C_EVERY_S ]] || check_schedule "$schedule"
  mkdir -p -- "$C_LOG_DIR" || die "cannot create the log folder $C_LOG_DIR: give --log-dir DIR"

  # The scheduled run writes into the log: say when it ran.
  [[ ${SLURM_JOB_NAME:-} != "$schedule" ]] ||
    printf '== %(%Y-%m-%dT%H:%M:%S%z)T scheduled run (job %s)\n' -1 "${SLURM_JOB_ID:-}"
  # The next run is scheduled before this round's jobs: a round that fails half-way
  # (a node job refused) still leaves the schedule in place.
  if [[ -n $C_EVERY_S ]]; then
    next=$(schedule_next "$schedule")
  fi
  if ((OPT_DRY_RUN)); then
    printf 'Dry-run cleanup (nothing is removed) of %s on %d nodes of partition %s:\n' \
      "$C_USER" "${#nodes[@]}" "$C_PARTITION"
  else
    printf 'Cleanup of %s on %d nodes of partition %s:\n' "$C_USER" "${#nodes[@]}" "$C_PARTITION"
  fi
  queued_by_name_to queued
  for node in "${nodes[@]}"; do
    submit_node "$node" queued
  done
  printf '  %-14s %s\n' "local scratch:" "$C_TEMPLATE" "local venvs:" "$C_VENVS" "log:" "$C_LOG"
  [[ -z $next ]] || printf '%s\n' "$next"
}

[[ ${BASH_SOURCE[0]} != "$0" ]] || main "$@"
