# shellcheck shell=bash
# Job arrays the cluster cannot take in one piece. Slurm refuses an array index at or
# above MaxArraySize (`scontrol show config`; 1001 unless the site changed it), so a longer
# array goes in as several arrays; each one's batch script exports HPC_TASK_OFFSET, which
# job_runtime.sh adds to SLURM_ARRAY_TASK_ID, so task i still runs line i+1. A subset of
# the lines (J_ARRAY_RANGES, e.g. "1 3-5", from --resume-sweep) goes the same way.
# With a --max-parallel cap, each array waits for the one before (afterany), so the cap
# holds across them.

# hpc_slurm_limits: HPC_SLURM_MAX_ARRAY_SIZE and HPC_SLURM_MAX_JOB_COUNT, from the profile
# or environment (HPC_MAX_ARRAY_SIZE, HPC_MAX_JOB_COUNT), else the cluster's MaxArraySize
# and MaxJobCount (one `scontrol show config` per submission, and only for arrays), else
# Slurm's defaults 1001 and 10000.
hpc_slurm_limits() {
  [[ -z ${HPC_SLURM_MAX_JOB_COUNT:-} ]] || return 0
  local line array=${HPC_MAX_ARRAY_SIZE:-} jobs=${HPC_MAX_JOB_COUNT:-}
  if [[ -z $array || -z $jobs ]] && command -v scontrol >/dev/null; then
    while IFS= read -r line; do
      if [[ -z ${HPC_MAX_ARRAY_SIZE:-} && $line =~ ^MaxArraySize[[:space:]]*=[[:space:]]*([0-9]+) ]]; then
        array=${BASH_REMATCH[1]}
      elif [[ -z ${HPC_MAX_JOB_COUNT:-} && $line =~ ^MaxJobCount[[:space:]]*=[[:space:]]*([0-9]+) ]]; then
        jobs=${BASH_REMATCH[1]}
      fi
    done < <(scontrol show config 2>/dev/null)
  fi
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
  ((n <= HPC_SLURM_MAX_JOB_COUNT)) ||
    die "$what: $n tasks are more than the $HPC_SLURM_MAX_JOB_COUNT jobs this cluster holds at once (MaxJobCount): submit at most $HPC_SLURM_MAX_JOB_COUNT (split the work, or ask fewer runs)"
}

# hpc_array_plan: fills J_ARRAY_CHUNKS, one "OFFSET<TAB>SPEC<TAB>COUNT<TAB>TASKS" entry
# per array (SPEC: its --array indices; TASKS: the same tasks numbered from 0 over the
# whole submission). Returns 0 when the submission needs hpc_array_submit (more than one
# array, or a subset of the lines), 1 when one ordinary array or job does.
hpc_array_plan() {
  J_ARRAY_CHUNKS=() J_MAX_ARRAY_SIZE=""
  local n=${#J_COMMANDS[@]}
  ((n > 1)) || return 1
  local ranges=${J_ARRAY_RANGES:-0-$((n - 1))} max r lo hi end k last=-1
  hpc_check_task_count "$n" "the submission"
  hpc_max_array_size_to max
  [[ -n ${J_ARRAY_RANGES:-} ]] || ((n > max)) || return 1
  J_MAX_ARRAY_SIZE=$max
  local -a spec=() count=() tasks=() order=()
  for r in $ranges; do
    lo=${r%-*} hi=${r#*-}
    while ((lo <= hi)); do
      k=$((lo / max)) end=$(((lo / max + 1) * max - 1))
      ((end <= hi)) || end=$hi
      if ((k != last)); then
        order+=("$k") last=$k
      fi
      spec[k]+=${spec[k]:+,}$(_array_range $((lo - k * max)) $((end - k * max)))
      tasks[k]+=${tasks[k]:+,}$(_array_range "$lo" "$end")
      count[k]=$((${count[k]:-0} + end - lo + 1))
      lo=$((end + 1))
    done
  done
  for k in "${order[@]}"; do
    J_ARRAY_CHUNKS+=("$((k * max))"$'\t'"${spec[k]}"$'\t'"${count[k]}"$'\t'"${tasks[k]}")
  done
  return 0
}

_array_range() {
  if (($1 == $2)); then printf '%d' "$1"; else printf '%d-%d' "$1" "$2"; fi
}

# hpc_array_use_chunk ENTRY: the plan's inputs for one array of the submission. An entry
# of a resource block's array (blocks.sh) has a fifth field, its group: its job is settled.
hpc_array_use_chunk() {
  local count tasks group
  IFS=$'\t' read -r J_TASK_OFFSET J_ARRAY_SPEC count tasks group <<<"$1"
  [[ -z $group ]] || hpc_blocks_use_group "$group"
}

# hpc_array_dry_run_note: what --dry-run does not show (the script shown is the first's).
hpc_array_dry_run_note() {
  local entry offset spec count tasks group k=0
  printf '# Submitted as %d array(s) (MaxArraySize %s); the script below is the first:\n' \
    "${#J_ARRAY_CHUNKS[@]}" "$J_MAX_ARRAY_SIZE"
  for entry in "${J_ARRAY_CHUNKS[@]}"; do
    IFS=$'\t' read -r offset spec count tasks group <<<"$entry"
    printf '#   array %d: --array=%s, HPC_TASK_OFFSET=%s: %d task(s), %s\n' \
      $((++k)) "$spec" "$offset" "$count" "$tasks"
  done
  hpc_array_use_chunk "${J_ARRAY_CHUNKS[0]}"
  ((${#J_ARRAY_CHUNKS[@]} == 1)) || J_SCRIPT_PATH=${J_SCRIPT_PATH%.sbatch}-part1.sbatch
  printf '\n'
}

# hpc_array_submit [VENV_JOB]: write the commands and one script per array, submit them
# in order; if sbatch refuses one, cancel those already in and remove every file.
hpc_array_submit() {
  local venv_job=${1:-} base=${J_SCRIPT_PATH%.sbatch} entry offset spec count tasks group
  local k=0 script dep prev="" out rc commands_text argv ids=() written=()
  mkdir -p -- "$J_SCRATCH_DIR/hpc_outputs/jobs" ||
    die "cannot create $J_SCRATCH_DIR/hpc_outputs: check that \$SCRATCH is writable"
  [[ ! -e $J_COMMANDS_PATH ]] || die "$J_COMMANDS_PATH already exists: submit again in a second"
  printf -v commands_text '%s\n' "${J_COMMANDS[@]}"
  _write_atomic "$J_COMMANDS_PATH" "$commands_text"
  written=("$J_COMMANDS_PATH")
  HPC_ARRAY_SUBMITTED=()
  for entry in "${J_ARRAY_CHUNKS[@]}"; do
    IFS=$'\t' read -r offset spec count tasks group <<<"$entry"
    script=$base.sbatch
    ((${#J_ARRAY_CHUNKS[@]} == 1)) || script=$base-part$((++k)).sbatch
    hpc_array_use_chunk "$entry"
    # A resource block's --data: its archive (the plain submission's was built before).
    [[ -z $group ]] || hpc_staging_build
    J_SCRIPT_PATH=$script
    _write_atomic "$script" "$(hpc_plan_script)"$'\n'
    written+=("$script")
    dep=${venv_job:+afterok:$venv_job}
    [[ -z $J_MAX_PARALLEL || -z $prev ]] || dep+=${dep:+,}afterany:$prev
    argv=(sbatch --parsable)
    [[ -z $dep ]] || argv+=("--dependency=$dep" --kill-on-invalid-dep=yes)
    argv+=("$script")
    rc=0
    out=$("${argv[@]}") || rc=$?
    if ((rc != 0)) || [[ ! ${out%%;*} =~ ^[0-9]+$ ]]; then
      ((${#ids[@]} == 0)) || scancel "${ids[@]}" || warn "could not cancel jobs ${ids[*]}: cancel them with scancel"
      rm -f -- "${written[@]}"
      local why
      hpc_explain_refusal_to why
      die "${why:+$why }sbatch did not accept array $((${#ids[@]} + 1)) of ${#J_ARRAY_CHUNKS[@]} (exit $rc${out:+, said: $out}); nothing was submitted${ids[*]:+ (jobs ${ids[*]} were cancelled)}"
    fi
    prev=${out%%;*}
    ids+=("$prev")
    hpc_staging_record_job "$prev"
    HPC_ARRAY_SUBMITTED+=("$prev"$'\t'"$count"$'\t'"$tasks"$'\t'"$spec"$'\t'"$script")
  done
  J_JOB_ID=$prev
  local entry_out id text="" line log=$J_SCRATCH_DIR/hpc_outputs/$J_EXP_NAME-%A_%a.out
  [[ -z $venv_job ]] || hpc_ledger_line_to text "$venv_job" 1 "" venv 0 \
    "$J_SCRATCH_DIR/hpc_outputs/$J_EXP_NAME-venv-%j.out"
  for entry_out in "${HPC_ARRAY_SUBMITTED[@]}"; do
    IFS=$'\t' read -r id count tasks spec script <<<"$entry_out"
    offset=${tasks%%[-,]*}
    hpc_ledger_line_to line "$id" "$count" "$script" job "$((offset - ${spec%%[-,]*}))" "$log"
    text+=$line
  done
  hpc_ledger_append "$text"
}

# hpc_array_print_submitted: one line per array: its job id and which tasks it runs.
hpc_array_print_submitted() {
  local entry id count tasks spec script log
  for entry in "${HPC_ARRAY_SUBMITTED[@]}"; do
    IFS=$'\t' read -r id count tasks spec script <<<"$entry"
    printf 'Submitted batch job %s (array of %d task(s): %s as array indices %s)\n' \
      "$id" "$count" "$tasks" "$spec"
  done
  log=$J_SCRATCH_DIR/hpc_outputs/$J_EXP_NAME-%A_%a.out
  log=${log//%A/<job>}
  printf '  logs:   %s\n' "${log//%a/<index>}"
  if ((${#HPC_ARRAY_SUBMITTED[@]} > 1)); then
    printf '  scripts: %s-part1..%d.sbatch\n' "${script%-part*}" "${#HPC_ARRAY_SUBMITTED[@]}"
  else
    printf '  script: %s\n' "$script"
  fi
}
