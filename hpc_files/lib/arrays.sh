# shellcheck shell=bash
# Job arrays the cluster cannot take in one piece. Slurm refuses an array index at or
# above MaxArraySize (`scontrol show config`; 1001 unless the site changed it), so a longer
# array goes in as several arrays; each one's batch script exports HPC_TASK_OFFSET, which
# job_runtime.sh adds to SLURM_ARRAY_TASK_ID, so task i still runs line i+1. A subset of
# the lines (J_ARRAY_RANGES, e.g. "1 3-5", from --resume-sweep) goes the same way. Each
# array is one chunk of the plan (plan.sh); submit.sh submits them in order.

# hpc_slurm_limits: HPC_SLURM_MAX_ARRAY_SIZE and HPC_SLURM_MAX_JOB_COUNT, from the profile
# or environment (HPC_MAX_ARRAY_SIZE, HPC_MAX_JOB_COUNT), else the cluster's MaxArraySize
# and MaxJobCount (one `scontrol show config` per submission: cluster.sh), else Slurm's
# defaults 1001 and 10000.
hpc_slurm_limits() {
  [[ -z ${HPC_SLURM_MAX_JOB_COUNT:-} ]] || return 0
  local array=${HPC_MAX_ARRAY_SIZE:-} jobs=${HPC_MAX_JOB_COUNT:-}
  # (cluster.sh: asked once, in the background for a real submission)
  [[ -n $array ]] || hpc_slurm_setting_to array MaxArraySize
  [[ -n $jobs ]] || hpc_slurm_setting_to jobs MaxJobCount
  is_count "$array" && ((10#$array > 1)) || array=1001
  is_count "$jobs" && ((10#$jobs > 0)) || jobs=10000
  HPC_SLURM_MAX_ARRAY_SIZE=$((10#$array)) HPC_SLURM_MAX_JOB_COUNT=$((10#$jobs))
}

# hpc_max_array_size_to VAR: the largest array index plus one the cluster takes.
hpc_max_array_size_to() {
  local -n _max=$1
  hpc_slurm_limits
  _max=$HPC_SLURM_MAX_ARRAY_SIZE
}

# hpc_check_task_count N WHAT: die when N tasks are more than the cluster holds at once
# (MaxJobCount): such a submission could never be queued whole. WHAT says where N came from.
hpc_check_task_count() {
  local n=$1 what=$2
  ((n > 1)) || return 0
  hpc_slurm_limits
  ((n > HPC_SLURM_MAX_JOB_COUNT)) || return 0
  if hpc_cluster_answers_fresh; then # (kept answers: Slurm's of now decide)
    hpc_check_task_count "$@"
    return
  fi
  die "$what: $n tasks are more than the $HPC_SLURM_MAX_JOB_COUNT jobs this cluster holds at once (MaxJobCount): submit at most $HPC_SLURM_MAX_JOB_COUNT (split the work, or ask fewer runs)"
}

# hpc_plan_chunks: J_CHUNKS (the chunk format: plan.sh), one chunk per array the cluster
# takes: every line in one chunk when they fit, else one per MaxArraySize window of the
# original indices (J_ARRAY_RANGES, e.g. "1 3-5", when only some lines run). Sets
# J_MAX_ARRAY_SIZE when the lines had to be split or chosen ("" otherwise).
hpc_plan_chunks() {
  J_CHUNKS=() J_MAX_ARRAY_SIZE=""
  local n=${#J_COMMANDS[@]} max
  if ((n <= 1)); then
    J_CHUNKS=("0"$'\t'"0"$'\t'"1")
    return 0
  fi
  if [[ -n ${J_PACK:-} ]]; then # packed (pack.sh): one array, task a runs K lines from a*K
    hpc_max_array_size_to max
    ((J_TASKS <= max)) ||
      die "--lines-per-job $J_PACK_LINES makes $J_TASKS jobs, more than this cluster's MaxArraySize $max: raise --lines-per-job"
    J_CHUNKS=("0-$((n - 1))"$'\t'"0"$'\t'"$J_PACK_LINES")
    return 0
  fi
  local ranges=${J_ARRAY_RANGES:-0-$((n - 1))} max r lo hi end k last=-1
  hpc_check_task_count "$n" "the submission"
  hpc_max_array_size_to max
  if [[ -z ${J_ARRAY_RANGES:-} ]] && ((n <= max)); then
    J_CHUNKS=("0-$((n - 1))"$'\t'"0"$'\t'"1")
    return 0
  fi
  J_MAX_ARRAY_SIZE=$max
  local -a lines=() order=()
  for r in $ranges; do
    lo=${r%-*} hi=${r#*-}
    while ((lo <= hi)); do
      k=$((lo / max)) end=$(((lo / max + 1) * max - 1))
      ((end <= hi)) || end=$hi
      if ((k != last)); then
        order+=("$k") last=$k
      fi
      lines[k]+=${lines[k]:+,}$(_array_range "$lo" "$end")
      lo=$((end + 1))
    done
  done
  for k in "${order[@]}"; do
    J_CHUNKS+=("${lines[k]}"$'\t'"$((k * max))"$'\t'"1")
  done
}

_array_range() {
  if (($1 == $2)); then printf '%d' "$1"; else printf '%d-%d' "$1" "$2"; fi
}

# hpc_plan_chunks_note: what --dry-run does not show of a plan of several chunks (it
# prints the first one's script); nothing for a plain job or array.
hpc_plan_chunks_note() {
  ! hpc_plan_is_plain || return 0
  local f k spec n
  printf '# Submitted as %d array(s) (MaxArraySize %s); the script below is the first:\n' \
    "${#J_CHUNKS[@]}" "$J_MAX_ARRAY_SIZE"
  for k in "${!J_CHUNKS[@]}"; do
    hpc_plan_chunk_to f "$k"
    hpc_plan_ranges_shift_to spec "${f[0]}" "${f[1]}"
    hpc_plan_ranges_count_to n "${f[0]}"
    printf '#   array %d: --array=%s, HPC_TASK_OFFSET=%s: %d task(s), %s\n' \
      $((k + 1)) "$spec" "${f[1]}" "$n" "${f[0]}"
  done
  printf '\n'
}
