# shellcheck shell=bash
# Packing (--pack N, --lines-per-job K): several lines of the configs file in one job.
# Each job (array task) takes K consecutive lines (default N) and runs them N at a time on
# its first node, each on 1/N of the job's GPUs and CPUs; the job side is
# virtual_env_hpc_files/pack.sh. Line I keeps its index: HPC_TASK_INDEX=I, checkpoints
# in <exp>/checkpoints/task_I, results in <exp>/results/task_I, as without packing.
#
# Packing is defined for the 'none' launcher only (one process per line, one node): a
# multi-node or multi-process launcher is refused, and so are sweeps and --interactive.
# N must divide the job's GPUs per node (or its CPUs, in a CPU job). --local --pack N runs
# every line here as one packed job (local.sh), each line on 1/N of this machine's CPUs
# (its CPU affinity) and of the job's GPUs.
#
# Per-line outcomes: one file per line in <commands file minus .commands>.lines/I
# (docs/lines-and-packing.md, "Packing"), written by the job side.

# hpc_pack_requested: true when --pack or --lines-per-job was given.
hpc_pack_requested() {
  [[ -n ${OPT_PACK:-} || -n ${OPT_LINES_PER_JOB:-} ]]
}

# hpc_pack_settle: judge --pack/--lines-per-job and set J_PACK, J_PACK_LINES and J_TASKS
# (the number of jobs: array tasks). After hpc_settle_job and hpc_read_configs.
hpc_pack_settle() {
  J_PACK="" J_PACK_LINES="" J_TASKS=""
  hpc_pack_requested || return 0
  [[ -z ${OPT_PACK:-} ]] || check_count --pack "$OPT_PACK" 1
  [[ -z ${OPT_LINES_PER_JOB:-} ]] || check_count --lines-per-job "$OPT_LINES_PER_JOB" 1
  local n=$((10#${OPT_PACK:-1})) k
  k=$((10#${OPT_LINES_PER_JOB:-$n}))
  ((k >= n || OPT_LOCAL)) ||
    die "--lines-per-job $k is fewer than --pack $n: each job would leave $((n - k)) of its $n slots idle; give --lines-per-job $n or more (or a smaller --pack)"
  if [[ $J_LAUNCHER != none ]]; then
    die "--pack/--lines-per-job run whole lines side by side on one node, each as one process; --which-distributed $J_LAUNCHER starts its own processes (on several nodes): packing is not defined for it. Drop --which-distributed, or drop --pack"
  fi
  if hpc_sweep_requested; then
    die "--pack/--lines-per-job pack the lines of the configs file; a sweep (--wandb-sweepid, --sweep, --resume-sweep) runs agents: drop one of them"
  fi
  # Resource blocks make one array per set of options; a packed job's lines share one job's
  # resources, so the two do not combine (yet): say so rather than run lines twice.
  if hpc_blocks_present; then
    die "--pack/--lines-per-job cannot be used with '#hpc:' resource blocks (the configs file '${J_CONFIGS_FILE:-}' has some): pack a configs file without '#hpc:' lines, or submit its blocks without --pack"
  fi
  ((OPT_INTERACTIVE == 0)) ||
    die "--pack/--lines-per-job cannot be used with --interactive (one session, one line): try one line there (--task I) without packing, or --local --pack N"
  if ((OPT_LOCAL)); then
    # --local --pack N: this machine is the one job; it runs every line, N at once.
    [[ -n ${OPT_PACK:-} ]] || die "--lines-per-job is for submitted jobs; --local runs every line: drop it (or add --pack N to run N lines at once)"
    [[ -z ${OPT_LINES_PER_JOB:-} ]] ||
      die "--local --pack N runs every line of the configs file in one go, N at once: drop --lines-per-job"
    [[ -z ${OPT_TASK:-} ]] ||
      die "--local --pack N runs every line, N at once; --task runs one: drop one of them"
    k=${#J_COMMANDS[@]}
    ((k >= n)) || k=$n
  fi
  if ((J_GPUS > 0)); then
    ((J_GPUS % n == 0)) ||
      die "--pack $n must divide the job's $J_GPUS GPU(s) per node (each line gets $J_GPUS/$n): use --gpus $((J_GPUS < n ? n : J_GPUS - J_GPUS % n)) or a --pack that divides $J_GPUS"
  elif ((OPT_LOCAL == 0)); then # (--local: the lines share this machine's CPUs, pack.sh)
    ((J_CPUS % n == 0)) ||
      die "--pack $n must divide the job's $J_CPUS CPU(s) (a CPU job: each line gets $J_CPUS/$n CPUs): use --cpus $((J_CPUS < n ? n : J_CPUS - J_CPUS % n)) or a --pack that divides $J_CPUS"
  fi
  J_PACK=$n J_PACK_LINES=$k
  local lines=${#J_COMMANDS[@]}
  J_TASKS=$(((lines + k - 1) / k))
  hpc_check_task_count "$J_TASKS" "the configs file's $lines commands, $k per job"
}

# hpc_pack_exports: the batch script's packing variables (plan.sh), nothing when unpacked.
hpc_pack_exports() {
  [[ -n ${J_PACK:-} ]] || return 0
  _export HPC_PACK "$J_PACK"
  _export HPC_PACK_LINES "$J_PACK_LINES"
  _export HPC_PACK_TOTAL "${#J_COMMANDS[@]}"
}

# hpc_task_count_to VAR: how many jobs (array tasks) the submission makes: one per line,
# or one per --lines-per-job lines when packed.
hpc_task_count_to() {
  local -n _count=$1
  _count=${J_TASKS:-${#J_COMMANDS[@]}}
}

# hpc_pack_dry_run_note: what packing does, for --dry-run.
hpc_pack_dry_run_note() {
  [[ -n ${J_PACK:-} ]] || return 0
  local per=$((J_GPUS > 0 ? J_GPUS / J_PACK : J_CPUS / J_PACK)) what=GPU
  ((J_GPUS > 0)) || what=CPU
  printf '# Packed: %d line(s) in %d job(s) of up to %d line(s), %d at once, %d %s(s) each\n\n' \
    "${#J_COMMANDS[@]}" "$J_TASKS" "$J_PACK_LINES" "$J_PACK" "$per" "$what"
}

# hpc_pack_print_submitted: after "Submitted batch job": where each line's log and outcome go.
hpc_pack_print_submitted() {
  [[ -n ${J_PACK:-} ]] || return 0
  printf '  packed: %d line(s), %d at once, up to %d per job\n' "${#J_COMMANDS[@]}" "$J_PACK" "$J_PACK_LINES"
  local lines outputs
  hpc_outputs_dir_to outputs "$J_SCRATCH_DIR"
  printf '  line logs: %s/%s-%s-line<I>.out\n' "$outputs" "$J_EXP_NAME" "${J_JOB_ID:-<job>}"
  hpc_home_path_to lines "$J_HOME" lines
  printf '  outcomes:  %s/<I> (state=done|failed|requeue|running|stopped)\n' "$lines"
}

# hpc_pack_script_note: which lines a job runs, for the batch script's header comment.
hpc_pack_script_note() {
  if [[ -n ${J_PACK:-} ]]; then
    printf 'job (array task) t runs lines %s*t+1..%s*t+%s, %s at once.' "$J_PACK_LINES" "$J_PACK_LINES" "$J_PACK_LINES" "$J_PACK"
  else
    printf 'array task i runs line i+1.'
  fi
}
