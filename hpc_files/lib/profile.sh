# shellcheck shell=bash
# Step 2 of job_submitter.sh: read the cluster profile (--cluster NAME|PATH, else
# $HPC_CLUSTER, else "generic") into the HPC_* profile variables.

hpc_profile_defaults() {
  HPC_DEFAULT_ACCOUNT="" HPC_DEFAULT_PARTITION="" HPC_DEFAULT_TIME="01:00:00"
  HPC_DEFAULT_CPUS_PER_TASK=1 HPC_DEFAULT_MEM="" HPC_MAX_GPUS_PER_NODE=8
  HPC_GPU_DIRECTIVE="gres" HPC_MAX_ARRAY_PARALLEL="" HPC_MODULES=""
  HPC_PROVIDES_TMPDIR="auto" HPC_LOCAL_SCRATCH="/tmp" HPC_VENV_PATH=""
  HPC_VENV_TO_LOCAL="no" HPC_VENV_LOCAL_DIR="/tmp/hpc_venvs_%u"
  HPC_SIGNAL_GRACE=120 HPC_MAX_RESTARTS=10
  HPC_REMOTE="" HPC_REMOTE_DIR=""
  HPC_STALL_TIMEOUT=1h HPC_PREFLIGHT="" HPC_PREFLIGHT_RETRIES=3
}

# hpc_profile_load NAME_OR_PATH CLUSTERS_DIR: sets HPC_PROFILE_NAME and HPC_PROFILE_FILE too.
hpc_profile_load() {
  local name=$1 dir=$2 file
  if [[ $name == */* || $name == *.conf ]]; then
    file=$name
  else
    is_safe_name "$name" || die "cluster profile name '$name' is not valid: use a name from $dir or a path to a .conf file"
    file=$dir/$name.conf
  fi
  if [[ ! -f $file ]]; then
    local available=() f
    for f in "$dir"/*.conf; do
      f=${f##*/}
      available+=("${f%.conf}")
    done
    die "cluster profile '$name' not found ($file). Available: ${available[*]}; or give a path to your own .conf file"
  fi
  hpc_profile_defaults
  # shellcheck source=/dev/null
  source "$file" || die "cluster profile $file could not be read"
  HPC_PROFILE_FILE=$file
  HPC_PROFILE_NAME=${file##*/}
  HPC_PROFILE_NAME=${HPC_PROFILE_NAME%.conf}
  case $HPC_GPU_DIRECTIVE in
    gres | gpus-per-node) ;;
    *) die "cluster profile $file: HPC_GPU_DIRECTIVE must be 'gres' or 'gpus-per-node', not '$HPC_GPU_DIRECTIVE'" ;;
  esac
  case $HPC_PROVIDES_TMPDIR in
    auto | yes | no) ;;
    *) die "cluster profile $file: HPC_PROVIDES_TMPDIR must be 'auto', 'yes' or 'no', not '$HPC_PROVIDES_TMPDIR'" ;;
  esac
  hpc_profile_check_values "$file"
}

# hpc_profile_check_values FILE: the profile's values get the checks their command-line
# options get (a profile is user input too): counts, names, times, paths.
hpc_profile_check_values() {
  local file=$1 pair name min
  for pair in HPC_MAX_GPUS_PER_NODE:0 HPC_SIGNAL_GRACE:1 HPC_MAX_RESTARTS:0 HPC_DEFAULT_CPUS_PER_TASK:1; do
    name=${pair%:*} min=${pair#*:}
    check_count "cluster profile $file: $name" "${!name}" "$min"
  done
  [[ -z $HPC_MAX_ARRAY_PARALLEL ]] ||
    check_count "cluster profile $file: HPC_MAX_ARRAY_PARALLEL" "$HPC_MAX_ARRAY_PARALLEL" 1
  [[ -z $HPC_DEFAULT_ACCOUNT ]] || is_safe_name "$HPC_DEFAULT_ACCOUNT" ||
    die "cluster profile $file: HPC_DEFAULT_ACCOUNT '$HPC_DEFAULT_ACCOUNT' is not a Slurm account name (letters, digits, . _ + -)"
  [[ -z $HPC_DEFAULT_PARTITION ]] || is_partition_list "$HPC_DEFAULT_PARTITION" ||
    die "cluster profile $file: HPC_DEFAULT_PARTITION '$HPC_DEFAULT_PARTITION' is not a partition name or comma-separated list of them"
  is_slurm_time "$HPC_DEFAULT_TIME" ||
    die "cluster profile $file: HPC_DEFAULT_TIME '$HPC_DEFAULT_TIME' is not a Slurm time (for example 01:00:00 or 2-00:00:00)"
  { [[ $HPC_LOCAL_SCRATCH == /* ]] && ! has_newline "$HPC_LOCAL_SCRATCH"; } ||
    die "cluster profile $file: HPC_LOCAL_SCRATCH '$HPC_LOCAL_SCRATCH' must be an absolute path on one line (for example /tmp)"
  case $HPC_VENV_TO_LOCAL in
    yes | no) ;;
    *) die "cluster profile $file: HPC_VENV_TO_LOCAL must be 'yes' or 'no', not '$HPC_VENV_TO_LOCAL'" ;;
  esac
  for name in HPC_MODULES HPC_VENV_PATH HPC_VENV_LOCAL_DIR; do
    ! has_newline "${!name}" || die "cluster profile $file: $name must be one line"
  done
}
