# shellcheck shell=bash
# What the cluster itself allows, asked once at submission: job_submitter.sh reads the
# Slurm version and checks the request against the partition (hpc_cluster_check). What
# differs between versions (hpc_slurm_*) is in the job side's library, sourced here: one
# place for both sides. Versions tested: 22.05 (Debian 12) and 24.11 (Debian 13); docs/cluster-admins.md,
# "Slurm versions".

# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/../../virtual_env_hpc_files/job_lib.sh"

# The oldest Slurm the toolkit supports: srun --overlap (20.11), SRUN_CPUS_PER_TASK (22.05).
HPC_SLURM_MIN_VERSION=22.05

# _hpc_refuse MESSAGE: a request this cluster cannot take: the message, exit 2, nothing
# written or submitted (the checks run before anything is).
_hpc_refuse() {
  printf '%s: %s%s\n' "${HPC_PROG:-hpc_files}" "${HPC_DIE_CONTEXT:-}" "$*" >&2
  exit 2
}

# --- submission side ----------------------------------------------------------------

# hpc_cluster_version: J_SLURM_VERSION from `sbatch --version`, once; refuses (exit 2) a
# Slurm older than HPC_SLURM_MIN_VERSION or one that does not say its version.
hpc_cluster_version() {
  [[ -z ${J_SLURM_VERSION:-} ]] || return 0
  local out=""
  hpc_sbatch_version_to out || die "'sbatch --version' failed (${out:-no output}): is this a Slurm login node?"
  hpc_slurm_version_parse_to J_SLURM_VERSION "$out"
  [[ -n $J_SLURM_VERSION ]] ||
    _hpc_refuse "could not read Slurm's version from 'sbatch --version' (it said: ${out:-nothing}); the toolkit needs Slurm $HPC_SLURM_MIN_VERSION or newer"
  hpc_slurm_at_least "$HPC_SLURM_MIN_VERSION" "$J_SLURM_VERSION" ||
    _hpc_refuse "this cluster runs Slurm $J_SLURM_VERSION, older than the oldest this toolkit supports ($HPC_SLURM_MIN_VERSION: it needs srun --overlap and SRUN_CPUS_PER_TASK). Ask the cluster's admins, or submit with your own sbatch script"
}

# hpc_cluster_ask_start: ask Slurm now, in the background, what the checks will need:
# `sbatch --version` (sbatch.sh) and the job's partition (`scontrol show partition -o
# NAME`, or every partition for the default one); the answers wait in pipes while the
# submission reads its configs (each takes a few ms, mostly loading Slurm's library).
hpc_cluster_ask_start() {
  hpc_sbatch_version_start
  [[ -z ${HPC_PARTITIONS_FD:-} ]] && command -v scontrol >/dev/null || return 0
  _hpc_partitions_ask
  # `scontrol show config` too: the array limits (arrays.sh) and PreemptType (below).
  [[ -n ${HPC_SLURM_CONFIG+set} ]] || exec {HPC_CONFIG_FD}< <(scontrol show config 2>/dev/null)
}

# hpc_slurm_config_to VAR: `scontrol show config`, asked once per submission (in the
# background by hpc_cluster_ask_start, else now); "" when Slurm does not answer.
hpc_slurm_config_to() {
  local -n _cfg=$1
  if [[ -z ${HPC_SLURM_CONFIG+set} ]]; then
    HPC_SLURM_CONFIG=""
    if [[ -n ${HPC_CONFIG_FD:-} ]]; then
      IFS= read -r -d '' -u "$HPC_CONFIG_FD" HPC_SLURM_CONFIG || true
      exec {HPC_CONFIG_FD}<&-
      HPC_CONFIG_FD=""
    elif command -v scontrol >/dev/null; then
      HPC_SLURM_CONFIG=$(scontrol show config 2>/dev/null) || HPC_SLURM_CONFIG=""
    fi
  fi
  _cfg=$HPC_SLURM_CONFIG
}

# hpc_slurm_setting_to VAR NAME: the value of NAME in `scontrol show config` ("" if none).
hpc_slurm_setting_to() {
  local -n _set=$1
  local config re=$'(^|\n)'"$2"$'[ \t]*=[ \t]*([^\n]*)'
  _set=""
  hpc_slurm_config_to config
  [[ $config =~ $re ]] || return 0
  _set=${BASH_REMATCH[2]}
  _set=${_set%"${_set##*[![:space:]]}"}
}

# hpc_preempt_watch_to VAR: whether the job of the chunk in force starts the preemption
# watch step (requeue.sh; a step in every task). HPC_PREEMPT_WATCH yes or no as set; unset
# (auto), "no" where this submission asked Slurm and it said the job cannot be preempted:
# PreemptType preempt/none, or preempt/partition_prio with PreemptMode=OFF on the job's
# partition. Else (a QOS decides, a dry run that asked nothing) "yes".
hpc_preempt_watch_to() {
  local -n _pw=$1
  local type mode key=${J_PARTITION:-<default>}
  _pw=${J_PREEMPT_WATCH:-yes}
  [[ $_pw == auto ]] || return 0
  _pw=yes
  ((${OPT_DRY_RUN:-0} == 0 && ${OPT_LOCAL:-0} == 0)) && [[ -n ${HPC_SLURM_CONFIG+set}${HPC_CONFIG_FD:-} ]] || return 0
  hpc_slurm_setting_to type PreemptType
  case $type in
    preempt/none) _pw=no ;;
    preempt/partition_prio)
      declare -gA HPC_PARTITION_INFO # (no value given: what it holds is kept)
      [[ -v HPC_PARTITION_INFO[$key] && -n ${HPC_PARTITION_INFO[$key]} ]] || return 0
      _hpc_field_to mode "${HPC_PARTITION_INFO[$key]}" PreemptMode
      [[ $mode != OFF ]] || _pw=no
      ;;
  esac
}

# _hpc_partitions_ask: `scontrol show partition -o` of J_PARTITION (every partition when
# none: the default is among them) into a pipe, read by _hpc_partitions_read.
_hpc_partitions_ask() {
  HPC_PARTITIONS_KEY=${J_PARTITION:-<default>}
  exec {HPC_PARTITIONS_FD}< <(scontrol show partition -o ${J_PARTITION:+"$J_PARTITION"} 2>/dev/null)
}

# _hpc_partitions_read: HPC_PARTITION_INFO[HPC_PARTITIONS_KEY] from _hpc_partitions_ask's
# answer: the partition's line, or the default partition's ("" when none).
_hpc_partitions_read() {
  local line info=""
  while IFS= read -r -u "$HPC_PARTITIONS_FD" line; do
    [[ $line == PartitionName=* ]] || continue
    if [[ $HPC_PARTITIONS_KEY != "<default>" || $line == *" Default=YES "* ]]; then
      info=$line
      break
    fi
  done
  exec {HPC_PARTITIONS_FD}<&-
  HPC_PARTITIONS_FD=""
  HPC_PARTITION_INFO[$HPC_PARTITIONS_KEY]=$info
}

# _hpc_partition_info_to VAR: `scontrol show partition -o` of the job's partition (its
# default when none was given); "" when Slurm does not answer. Asked once per partition
# (hpc_cluster_ask_start asks the first; resource blocks check each block's job: blocks.sh).
_hpc_partition_info_to() {
  local -n _info=$1
  local key=${J_PARTITION:-<default>}
  declare -gA HPC_PARTITION_INFO # (no value given: what it holds is kept)
  [[ -z ${HPC_PARTITIONS_FD:-} ]] || _hpc_partitions_read
  if [[ ! -v HPC_PARTITION_INFO[$key] ]]; then
    _hpc_partitions_ask
    _hpc_partitions_read
  fi
  _info=${HPC_PARTITION_INFO[$key]}
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
  slurm_time_seconds_to limit "$max"
  slurm_time_seconds_to asked "$J_TIME"
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
