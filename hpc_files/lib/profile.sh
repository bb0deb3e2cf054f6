# shellcheck shell=bash
# Step 2 of job_submitter.sh: read the cluster profile (--cluster NAME|PATH, else
# $HPC_CLUSTER, else "generic") into the HPC_* profile variables.

hpc_profile_defaults() {
  HPC_DEFAULT_ACCOUNT="" HPC_DEFAULT_PARTITION="" HPC_DEFAULT_TIME="01:00:00"
  HPC_DEFAULT_CPUS_PER_TASK=1 HPC_DEFAULT_MEM="" HPC_MAX_GPUS_PER_NODE=8
  HPC_GPU_DIRECTIVE="gres" HPC_MAX_ARRAY_PARALLEL="" HPC_MODULES=""
  HPC_PROVIDES_TMPDIR="auto" HPC_LOCAL_SCRATCH="/tmp" HPC_VENV_PATH=""
  HPC_SIGNAL_GRACE=120 HPC_MAX_RESTARTS=10
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
  is_uint "$HPC_MAX_GPUS_PER_NODE" || die "cluster profile $file: HPC_MAX_GPUS_PER_NODE must be a whole number"
  is_posint "$HPC_SIGNAL_GRACE" || die "cluster profile $file: HPC_SIGNAL_GRACE must be a positive number of seconds"
  is_uint "$HPC_MAX_RESTARTS" || die "cluster profile $file: HPC_MAX_RESTARTS must be a whole number"
  is_posint "$HPC_DEFAULT_CPUS_PER_TASK" || die "cluster profile $file: HPC_DEFAULT_CPUS_PER_TASK must be a positive whole number"
}
