# shellcheck shell=bash
# What the cluster itself allows, asked once at submission, and what differs between
# Slurm versions. One place for both sides: job_submitter.sh reads the version and checks
# the request against the partition (hpc_cluster_check); the job side (job_runtime.sh,
# requeue.sh) asks the hpc_slurm_* functions below how this version behaves.
# Versions tested: 22.05 (Debian 12) and 24.11 (Debian 13); README.md, "Slurm versions".

# The oldest Slurm the toolkit supports: srun --overlap (20.11), SRUN_CPUS_PER_TASK (22.05).
HPC_SLURM_MIN_VERSION=22.05

# _hpc_refuse MESSAGE: a request this cluster cannot take: the message, exit 2, nothing
# written or submitted (the checks run before anything is).
_hpc_refuse() {
  printf '%s: %s\n' "${HPC_PROG:-hpc_files}" "$*" >&2
  exit 2
}

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
  local have=${2-${HPC_SLURM_VERSION:-}}
  [[ -n $have ]] || return 0
  (($(hpc_slurm_version_code "$have") >= $(hpc_slurm_version_code "$1")))
}

# --- submission side ----------------------------------------------------------------

# hpc_cluster_version: J_SLURM_VERSION from `sbatch --version`, once; refuses (exit 2) a
# Slurm older than HPC_SLURM_MIN_VERSION or one that does not say its version.
hpc_cluster_version() {
  [[ -z ${J_SLURM_VERSION:-} ]] || return 0
  local out=""
  out=$(sbatch --version 2>&1) || die "'sbatch --version' failed (${out:-no output}): is this a Slurm login node?"
  hpc_slurm_version_parse_to J_SLURM_VERSION "$out"
  [[ -n $J_SLURM_VERSION ]] ||
    _hpc_refuse "could not read Slurm's version from 'sbatch --version' (it said: ${out:-nothing}); the toolkit needs Slurm $HPC_SLURM_MIN_VERSION or newer"
  hpc_slurm_at_least "$HPC_SLURM_MIN_VERSION" "$J_SLURM_VERSION" ||
    _hpc_refuse "this cluster runs Slurm $J_SLURM_VERSION, older than the oldest this toolkit supports ($HPC_SLURM_MIN_VERSION: it needs srun --overlap and SRUN_CPUS_PER_TASK). Ask the cluster's admins, or submit with your own sbatch script"
}

# _hpc_partition_info_to VAR: `scontrol show partition -o` of the job's partition (its
# default when none was given); "" when Slurm does not answer.
_hpc_partition_info_to() {
  local -n _info=$1
  local line
  _info=""
  if [[ -n ${J_PARTITION:-} ]]; then
    _info=$(scontrol show partition -o "$J_PARTITION" 2>/dev/null) || _info=""
    return 0
  fi
  while IFS= read -r line; do
    [[ $line != *" Default=YES "* ]] || { _info=$line; return 0; }
  done < <(scontrol show partition -o 2>/dev/null)
}

# _hpc_field_to VAR LINE NAME: the value of NAME=VALUE in a `scontrol -o` line.
_hpc_field_to() {
  local -n _f=$1
  _f=""
  [[ " $2 " =~ \ $3=([^ ]*)\  ]] && _f=${BASH_REMATCH[1]}
  return 0
}

# hpc_cluster_check_time: --time within the partition's MaxTime, before anything waits
# (with EnforcePartLimits sbatch refuses vaguely; without it the job pends forever).
hpc_cluster_check_time() {
  local info name max limit asked
  _hpc_partition_info_to info
  [[ -n $info ]] || return 0 # Slurm does not say: sbatch will judge
  _hpc_field_to name "$info" PartitionName
  _hpc_field_to max "$info" MaxTime
  [[ -n $max && $max != UNLIMITED && $max != INFINITE ]] || return 0
  is_slurm_time "$max" || return 0
  limit=$(slurm_time_seconds "$max")
  asked=$(slurm_time_seconds "$J_TIME")
  ((asked > limit)) || return 0
  _hpc_refuse "--time $J_TIME is longer than partition $name allows (MaxTime=$max): ask for at most --time $max, or choose another partition with -p (sinfo -o '%P %l' lists their limits)"
}

# hpc_cluster_gpu_types_to ARRAY: the GPU types (gres gpu:TYPE:N) of the partition's nodes.
hpc_cluster_gpu_types_to() {
  local -n _types=$1
  local gres part=() item seen=" "
  _types=()
  [[ -z ${J_PARTITION:-} ]] || part=(-p "$J_PARTITION")
  gres=$(sinfo -h "${part[@]}" -o '%G' 2>/dev/null) || return 1
  for item in ${gres//,/ }; do
    item=${item%%(*}
    [[ $item =~ ^gpu:([A-Za-z][^:]*):[0-9]+$ ]] || continue
    [[ $seen == *" ${BASH_REMATCH[1]} "* ]] && continue
    seen+="${BASH_REMATCH[1]} "
    _types+=("${BASH_REMATCH[1]}")
  done
}

# hpc_cluster_check_gpu_type: --gpu-type names a type the partition's nodes have.
hpc_cluster_check_gpu_type() {
  [[ -n ${J_GPU_TYPE:-} ]] || return 0
  local types t where=${J_PARTITION:+partition $J_PARTITION}
  hpc_cluster_gpu_types_to types || return 0 # Slurm does not say: sbatch will judge
  for t in "${types[@]}"; do
    [[ $t != "$J_GPU_TYPE" ]] || return 0
  done
  if ((${#types[@]} == 0)); then
    _hpc_refuse "--gpu-type $J_GPU_TYPE: the GPUs of ${where:-the default partition} have no type in Slurm (gres gpu:N): leave out --gpu-type, or choose a partition with typed GPUs (sinfo -o '%P %G')"
  fi
  _hpc_refuse "--gpu-type $J_GPU_TYPE: ${where:-the default partition} has GPU types ${types[*]}: use one of them (sinfo -o '%P %G' lists every partition's)"
}

# hpc_cluster_check: the version, then the request against the cluster (real submissions).
hpc_cluster_check() {
  hpc_cluster_version
  hpc_cluster_check_time
  hpc_cluster_check_gpu_type
}

# --- job side -------------------------------------------------------------------------

# hpc_slurm_job_version: HPC_SLURM_VERSION as the submission read it; a batch script
# written by hand has none, so ask srun (once).
hpc_slurm_job_version() {
  [[ -z ${HPC_SLURM_VERSION:-} ]] || return 0
  local out
  out=$(srun --version 2>/dev/null) || out=""
  hpc_slurm_version_parse_to HPC_SLURM_VERSION "$out"
  export HPC_SLURM_VERSION
}

# hpc_slurm_tmpdir_to VAR: the node-local folder Slurm made for this job: $SLURM_TMPDIR,
# or on clusters that set only TMPDIR, $TMPDIR when it is this job's own (its path names
# the job id: a TMPDIR of /tmp, or one passed on from the login node, is not); else "".
hpc_slurm_tmpdir_to() {
  local -n _tmp=$1
  _tmp=${SLURM_TMPDIR:-}
  [[ -z $_tmp ]] || return 0
  if [[ -n ${TMPDIR:-} && -n ${SLURM_JOB_ID:-} && -d ${TMPDIR:-} && $TMPDIR == *"$SLURM_JOB_ID"* ]]; then
    _tmp=$TMPDIR
  fi
  return 0
}

# hpc_slurm_requeue_outlives_attempt: a requeue request can outlive the attempt it was
# for. Measured: 22.05 no; 24.11 yes (a job that requeued itself during a preemption's
# grace time ran attempt 2 to its end, then Slurm requeued it again "per user/system
# request"). Not measured between them: treated as yes from 23.02 on (the guard is
# harmless where it is not needed).
hpc_slurm_requeue_outlives_attempt() {
  hpc_slurm_at_least 23.02
}

# hpc_slurm_finished_file: the marker a finished job leaves beside its logs, so that an
# attempt started by a stale requeue request ends at once instead of running again.
hpc_slurm_finished_file() {
  printf '%s/jobs/.hpc_finished.%s\n' "${HPC_OUTPUT_DIR:-${scratch_dir:-.}/hpc_outputs}" \
    "${SLURM_ARRAY_JOB_ID:+${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}}${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-none}}"
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
