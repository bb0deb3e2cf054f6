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

# hpc_cluster_ask_start: what the checks will need from Slurm: `sbatch --version`
# (sbatch.sh), every partition (`scontrol -a -o show partition`) and `scontrol show
# config`. From the answers kept by an earlier submission when they are still good
# (below), else asked now, in the background: the answers wait in pipes while the
# submission reads its configs (each takes a few ms, mostly loading Slurm's library).
hpc_cluster_ask_start() {
  [[ -z ${HPC_CLUSTER_CACHE_TTL:-} ]] || check_count HPC_CLUSTER_CACHE_TTL "$HPC_CLUSTER_CACHE_TTL" 0 seconds
  ! _hpc_answers_load || return 0
  HPC_SLURM_ANSWERS=asked
  hpc_sbatch_version_start
  [[ -z ${HPC_PARTITIONS_FD:-} ]] && command -v scontrol >/dev/null || return 0
  _hpc_partitions_ask
  # `scontrol show config` too: the array limits (arrays.sh) and PreemptType (below).
  [[ -n ${HPC_SLURM_CONFIG+set} ]] || exec {HPC_CONFIG_FD}< <(scontrol show config 2>/dev/null)
}

# --- answers kept between submissions ----------------------------------------------------
# Asking Slurm costs a submission more than anything but sbatch itself (three of Slurm's
# commands, each loading its library). A submission that asked keeps the answers, for
# HPC_CLUSTER_CACHE_TTL seconds (300; 0: never kept), in a file of the user's own:
# ${XDG_CACHE_HOME:-~/.cache}/hpc_files/slurm-answers.HOST. The next submission from the
# same login node uses them unless the file is not the user's, Slurm's commands or its
# slurm.conf ($SLURM_CONF) changed since, or the file is not whole. A check that would
# refuse on kept answers asks Slurm again first (hpc_cluster_answers_fresh): kept answers
# never refuse a submission. HPC_SLURM_ANSWERS: "kept" (from the file), "asked", or ""
# (nothing asked: a dry run, --local).
HPC_SLURM_ANSWERS=""
HPC_SLURM_ANSWERS_FORMAT="hpc_files slurm answers 1"
HPC_SLURM_ANSWERS_SEP=$'\036' # (ASCII RS: in no answer of Slurm's; one that has it is not kept)

# _hpc_path_of_to VAR NAME: where NAME runs from on PATH ("" if nowhere), without a process.
_hpc_path_of_to() {
  local -n _po=$1
  local dir rest=${PATH:-}:
  _po=""
  while [[ -n $rest ]]; do
    dir=${rest%%:*} rest=${rest#*:}
    [[ -f ${dir:-.}/$2 && -x ${dir:-.}/$2 ]] || continue
    _po=${dir:-.}/$2
    return 0
  done
}

# _hpc_answers_file_to FILE_VAR KEY_VAR [COMMANDS_ARRAY]: the file of kept answers (""
# when none are kept) and what they must have been asked under: the host, $SLURM_CONF,
# sbatch and scontrol (whose paths go into COMMANDS_ARRAY too).
_hpc_answers_file_to() {
  local -n _af=$1 _ak=$2
  local _af_none=() ttl=${HPC_CLUSTER_CACHE_TTL:-300} sb sc
  local -n _acmds=${3:-_af_none}
  _af="" _ak="" _acmds=()
  [[ $ttl =~ ^[0-9]{1,9}$ ]] && ((10#$ttl > 0)) && [[ -n ${XDG_CACHE_HOME:-${HOME:-}} ]] || return 0
  _hpc_path_of_to sb sbatch
  _hpc_path_of_to sc scontrol
  [[ -n $sb && -n $sc ]] || return 0
  _af=${XDG_CACHE_HOME:-$HOME/.cache}/hpc_files/slurm-answers.${HOSTNAME:-host}
  _ak=${HOSTNAME:-host}$'\t'${SLURM_CONF:-}$'\t'$sb$'\t'$sc
  _acmds=("$sb" "$sc")
}

# _hpc_answers_load: the kept answers, when they are good (see above); returns 1 if not.
_hpc_answers_load() {
  local file key t now conf=${SLURM_CONF:-/etc/slurm/slurm.conf} sep=$HPC_SLURM_ANSWERS_SEP
  local head version partitions config end
  local -a cmds
  _hpc_answers_file_to file key cmds
  [[ -n $file && -f $file && ! -L $file && -O $file ]] || return 1
  # Written after slurm.conf and Slurm's commands last changed (an upgrade, a new setting).
  [[ $file -nt ${cmds[0]} && $file -nt ${cmds[1]} && (! -e $conf || $file -nt $conf) ]] || return 1
  # Read part by part (a pattern over the whole text would cost more than asking Slurm).
  {
    IFS= read -r -d "$sep" head && IFS= read -r -d "$sep" version &&
      IFS= read -r -d "$sep" partitions && IFS= read -r -d "$sep" config &&
      { IFS= read -r -d '' end || [[ -n $end ]]; }
  } <"$file" || return 1
  [[ $head == "$HPC_SLURM_ANSWERS_FORMAT"$'\n'"key"$'\t'"$key"$'\n'"time"$'\t'* && $end == $'end\n' ]] || return 1
  t=${head#*$'\n'time$'\t'} t=${t%$'\n'}
  printf -v now '%(%s)T' -1
  [[ $t =~ ^[0-9]{1,12}$ ]] && ((now >= 10#$t && now - 10#$t < 10#${HPC_CLUSTER_CACHE_TTL:-300})) || return 1
  [[ $version == $'version\n'?* && $partitions == $'partitions\nPartitionName='* && $config == $'config\n'?* ]] || return 1
  version=${version#version$'\n'} partitions=${partitions#partitions$'\n'} config=${config#config$'\n'}
  HPC_SBATCH_VERSION_SAID=${version%$'\n'} HPC_SBATCH_VERSION_RC=0
  HPC_PARTITIONS_TEXT=$partitions HPC_SLURM_CONFIG=$config HPC_SLURM_ANSWERS=kept
}

# hpc_cluster_answers_keep: keep this submission's answers for the next (asked, whole,
# and from a Slurm the version check took); nothing when they came from the file.
hpc_cluster_answers_keep() {
  [[ $HPC_SLURM_ANSWERS == asked && -n ${J_SLURM_VERSION:-} ]] || return 0
  local file key version config partitions now sep=$HPC_SLURM_ANSWERS_SEP
  _hpc_answers_file_to file key
  [[ -n $file ]] || return 0
  hpc_sbatch_version_to version || return 0
  hpc_slurm_config_to config
  _hpc_partitions_text_to partitions
  [[ -n $version && -n $config && $partitions == PartitionName=* ]] || return 0
  [[ $version$config$partitions != *"$sep"* ]] || return 0
  # shellcheck disable=SC2174 # (only the last folder needs to be private)
  [[ -d ${file%/*} ]] || mkdir -p -m 700 -- "${file%/*}" 2>/dev/null || return 0
  [[ -O ${file%/*} && ! -L ${file%/*} ]] || return 0
  printf -v now '%(%s)T' -1
  { printf '%s\nkey\t%s\ntime\t%s\n%sversion\n%s\n%spartitions\n%s\n%sconfig\n%s\n%send\n' \
    "$HPC_SLURM_ANSWERS_FORMAT" "$key" "$now" "$sep" "$version" "$sep" "${partitions%$'\n'}" \
    "$sep" "${config%$'\n'}" "$sep" >"$file.$$" && mv -f -- "$file.$$" "$file"; } 2>/dev/null ||
    rm -f -- "$file.$$" 2>/dev/null
  return 0
}

# hpc_cluster_answers_fresh: before a check refuses on Slurm's answers: when they were the
# kept ones, forget them (the file too) and return 0, so that the caller checks again
# with Slurm's answers of now (a partition's MaxTime raised since, say); returns 1 when
# the answers are Slurm's of now: the refusal stands. (The version stays: it is the
# version of the sbatch that is there now, which has not changed since it was kept.)
hpc_cluster_answers_fresh() {
  [[ $HPC_SLURM_ANSWERS == kept ]] || return 1
  local file key
  _hpc_answers_file_to file key
  [[ -z $file ]] || rm -f -- "$file" 2>/dev/null
  unset HPC_PARTITIONS_TEXT HPC_SLURM_CONFIG HPC_SLURM_MAX_JOB_COUNT HPC_SLURM_MAX_ARRAY_SIZE
  declare -gA HPC_PARTITION_INFO=()
  HPC_SLURM_ANSWERS=asked
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

# _hpc_partitions_ask: every partition (`scontrol -a -o show partition`: hidden ones and
# those of other groups too) into a pipe, read by _hpc_partitions_text_to.
_hpc_partitions_ask() {
  exec {HPC_PARTITIONS_FD}< <(scontrol -a -o show partition 2>/dev/null)
}

# _hpc_partitions_text_to VAR: every partition's line (HPC_PARTITIONS_TEXT), asked once
# per submission ("" when Slurm does not answer).
_hpc_partitions_text_to() {
  local -n _pt=$1
  if [[ -z ${HPC_PARTITIONS_TEXT+set} ]]; then
    [[ -n ${HPC_PARTITIONS_FD:-} ]] || _hpc_partitions_ask
    HPC_PARTITIONS_TEXT=""
    IFS= read -r -d '' -u "$HPC_PARTITIONS_FD" HPC_PARTITIONS_TEXT || true
    exec {HPC_PARTITIONS_FD}<&-
    HPC_PARTITIONS_FD=""
  fi
  _pt=$HPC_PARTITIONS_TEXT
}

# _hpc_partition_info_to VAR: `scontrol -o show partition` of the job's partition (its
# default when none was given); "" when Slurm does not answer or has no such partition.
# Memoized per partition in HPC_PARTITION_INFO (hpc_preempt_watch_to reads it).
_hpc_partition_info_to() {
  local -n _info=$1
  local _pi_key=${J_PARTITION:-<default>} _pi_text _pi_line _pi_found=""
  declare -gA HPC_PARTITION_INFO # (no value given: what it holds is kept)
  if [[ ! -v HPC_PARTITION_INFO[$_pi_key] ]]; then
    _hpc_partitions_text_to _pi_text
    while IFS= read -r _pi_line; do
      if [[ $_pi_key == "<default>" && $_pi_line == PartitionName=*" Default=YES "* ]] ||
        [[ $_pi_line == "PartitionName=$_pi_key "* ]]; then
        _pi_found=$_pi_line
        break
      fi
    done <<<"$_pi_text"
    HPC_PARTITION_INFO[$_pi_key]=$_pi_found
  fi
  _info=${HPC_PARTITION_INFO[$_pi_key]}
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
  if hpc_cluster_answers_fresh; then # (kept answers: Slurm's of now decide)
    hpc_cluster_check_time
    return
  fi
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
