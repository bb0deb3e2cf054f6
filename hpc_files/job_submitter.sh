#!/usr/bin/env bash
# Summary: submit the project's experiments to a Slurm cluster.
#
# Usage: bash hpc_files/job_submitter.sh [OPTIONS]
#
# Runs every command of experiment_configurations.txt (one job, or one job array with
# task i running line i) on the cluster, in the project's virtual environment.
# --gpus, --cpus and --mem are per node.
#
# @options: one row each in hpc_submit_options (hpc_files/lib/options.sh), listed here by --help
#
# Options take their value as the next word or after '=' (--gpus=2). Environment:
# SCRATCH (required), HPC_CLUSTER, HPC_VENV, HPC_PROJECT_NAME, HPC_QUIET, HPC_MAIL_USER.
# See README.md and docs/ (docs/reference.md: every option).
set -euo pipefail

HPC_PROG=job_submitter.sh
HPC_CONFIRM_ABOVE=${HPC_CONFIRM_ABOVE:-100}

usage() {
  hpc_options_use hpc_submit_options
  hpc_options_usage "${BASH_SOURCE[0]}"
}

# confirm_large_array N: on a terminal, ask before submitting N tasks (never blocks a
# pipe or a batch job: without a terminal there is no question).
confirm_large_array() {
  local n=$1 answer
  ((OPT_YES == 0 && n > HPC_CONFIRM_ABOVE)) || return 0
  [[ -t 0 && -t 2 ]] || return 0
  read -r -p "Submit an array of $n tasks? [y/N] " answer
  [[ $answer == [yY]* ]] || die "not submitted"
}

# print_dry_run: the whole request as it would go in: the sbatch command line and batch
# script of the first chunk (hpc_plan_chunks_note lists the others), and the commands file
# with every task's final command. Reads the plan, changes nothing.
print_dry_run() {
  local args argv line venv_job="" commands
  ((OPT_SETUP_VENV == 0)) || venv_job="<venv job id>"
  hpc_home_path_to commands "$J_HOME" commands
  hpc_plan_sbatch_args_to args 0 "$venv_job"
  hpc_sbatch_argv_to argv "${args[@]}"
  printf '# sbatch command line (not run: --dry-run):\n'
  printf -v line '%q ' "${argv[@]}"
  printf '%s\n\n# ---- batch script: %s ----\n' "${line% }" "${argv[-1]}"
  if [[ -n ${!SBATCH_@} ]]; then
    # (the script's text once, for the SBATCH_* it overrides and to be shown)
    local script overridden
    script=$(hpc_plan_script 0)
    hpc_sbatch_env_overridden_to overridden "$script"
    hpc_sbatch_env_warn "${overridden[@]}"
    printf '%s\n' "$script"
  else
    hpc_plan_script 0
  fi
  if [[ -n ${J_PACK:-} ]]; then
    printf '\n# ---- commands (%d), %d per job, as they run: %s ----\n' "${#J_COMMANDS[@]}" "$J_PACK_LINES" "$commands"
  else
    printf '\n# ---- commands (%d), one per array task, as they run: %s ----\n' "${#J_COMMANDS[@]}" "$commands"
  fi
  printf '%s\n' "${J_COMMANDS[@]}"
}

# lightning_requeue_note: with -d lightning, requeue on and more than one process in all,
# say what the job does about Lightning's own auto-requeue (it hangs in DDP).
lightning_requeue_note() {
  local procs=$((J_NODES * J_PROCS_PER_NODE))
  [[ $J_LAUNCHER == lightning && $J_REQUEUE == yes ]] && ((procs > 1)) || return 0
  if [[ $J_LIGHTNING_HOOK == no ]]; then
    say "note: Lightning's built-in SLURM auto-requeue can hang in DDP ($procs processes) and HPC_LIGHTNING_HOOK=no keeps it: add hpc_toolkit's SlurmRequeue callback to your Trainer (one line, README: Wall time, preemption and requeue), or submit with --no-requeue"
  else
    say "note: Lightning's built-in SLURM auto-requeue can hang in DDP ($procs processes): the job turns it off and uses hpc_toolkit's SlurmRequeue instead (a checkpoint at a step boundary on every rank, then a requeue that resumes from it); nothing to change in your script. Or submit with --no-requeue"
  fi
}

# need_sbatch: a real submission needs sbatch on PATH.
need_sbatch() {
  if ((OPT_DRY_RUN == 0)) && ! command -v sbatch >/dev/null; then
    HPC_DIE_STATUS=1 die "sbatch not found on PATH: run this on a Slurm login node, or start the local test cluster (bash tests/cluster/local_cluster.sh start, then eval \"\$(bash tests/cluster/local_cluster.sh env)\"), or preview with --dry-run"
  fi
}

# The toolkit's folder (hpc_files/), found from this file so it runs from anywhere.
HPC_TOOLKIT_DIR=${BASH_SOURCE[0]}
[[ $HPC_TOOLKIT_DIR == /* ]] || HPC_TOOLKIT_DIR=$PWD/$HPC_TOOLKIT_DIR
HPC_TOOLKIT_DIR=${HPC_TOOLKIT_DIR%/*}
# shellcheck source=hpc_files/lib/hpc_lib.sh
source "$HPC_TOOLKIT_DIR/lib/hpc_lib.sh"
for _part in options profile validate resources configs blocks count_args plan sbatch submit ledger coderecord mail local venv venv_local container staging wandb_key sweep arrays cluster pack runs longruns hydra; do
  # shellcheck source=/dev/null
  source "$HPC_TOOLKIT_DIR/lib/$_part.sh"
done
unset _part
# Loaded when first used (hpc_lib.sh): --rerun's and --remote's libraries, the functions
# called from outside them.
hpc_autoload rerun hpc_rerun_check_args hpc_rerun
hpc_autoload remote hpc_remote_submit

# settle_commands: --data, the container, the launcher's needs, --nodes-arg/--devices-arg
# and the torchrun rewrite for every command alike; or, when the configs file has #hpc:
# lines, for each resource block with its own options (blocks.sh).
settle_commands() {
  hpc_staging_settle
  hpc_settle_container
  hpc_hydra_commands # a Hydra app's run folder: its task's own (hydra.sh)
  if hpc_blocks_present; then
    hpc_blocks_settle
    return 0
  fi
  hpc_validate_commands
  hpc_add_count_args
  hpc_torchrun_commands
}

# prepare SOURCE_DIR STAMP ARGS...: parse, load the profile, judge everything, read the
# commands and make them final: afterwards the J_* variables hold the whole plan (its
# keys: hpc_files/lib/plan.sh), which nothing changes afterwards. Writes nothing; asks the
# cluster (version, limits) only for a real submission. STAMP names the submission's files.
prepare() {
  local source_dir=$1 stamp=$2
  shift 2
  HPC_CMDLINE=("$@") # a resource block's options replace some of them (blocks.sh)
  hpc_plan_forget_enclosing_job # inside a job: its plan's settings are not the user's
  J_GROUP_COUNT=0
  hpc_parse_options "$@"
  ((OPT_HELP == 0)) || return 0
  hpc_profile_load "${OPT_CLUSTER:-${HPC_CLUSTER:-generic}}" "$HPC_TOOLKIT_DIR/clusters"
  ! hpc_remote_requested || return 0 # --remote: judged by the login node's side (remote.sh)
  if [[ -n $OPT_RERUN ]]; then # everything else comes from the kept scripts (rerun.sh)
    hpc_wandb_key_drop
    hpc_rerun_check_args "$@"
    hpc_settle_paths "$source_dir"
    need_sbatch
    return 0
  fi
  # The W&B key leaves the environment before any command could pass it on (wandb_key.sh);
  # then Slurm's version and the partition are asked in the background: the checks read them.
  ((OPT_LOCAL)) || hpc_wandb_key_settle
  hpc_settle_job
  ((OPT_DRY_RUN || OPT_LOCAL)) || hpc_cluster_ask_start
  hpc_plan_settle_job_side
  hpc_sweep_validate # a sweep makes its own commands (hpc_sweep_stage)
  hpc_runs_validate # --resume, --fresh (runs.sh)
  if ! hpc_sweep_requested; then
    hpc_read_configs "${OPT_CONFIGS:-$source_dir/experiment_configurations.txt}"
    # (Packed, the jobs are fewer than the lines: hpc_pack_settle counts them.)
    hpc_pack_requested || hpc_check_task_count "${#J_COMMANDS[@]}" "the configs file's ${#J_COMMANDS[@]} commands"
  fi
  hpc_pack_settle # --pack, --lines-per-job (pack.sh)
  hpc_settle_paths "$source_dir"
  hpc_sweep_requested || hpc_check_scripts_exist
  hpc_sweep_requested || hpc_check_relative_outputs
  settle_commands
  hpc_venv_local_settle # --venv-to-local: the venv's archive, judged and named (venv_local.sh)
  hpc_code_settle
  hpc_mail_settle
  hpc_debug_settle # --local, --interactive, --task, --port (local.sh)
  ! hpc_sweep_requested || hpc_sweep_stage
  hpc_code_plan_snapshot
  hpc_submission_paths "$stamp"
  if hpc_blocks_several; then
    hpc_blocks_chunks # one chunk per resource block's job, with its settings (blocks.sh)
  else
    hpc_plan_chunks
  fi
  hpc_debug_check_plan # --local: every task's chunk on one node
  hpc_plan_check_dependencies # the user's --dependency joins the toolkit's (plan.sh)
  # Another run's checkpoints, or a queued submission of the experiment (runs.sh).
  ((OPT_INTERACTIVE)) || hpc_runs_check
  if ((OPT_DRY_RUN == 0 && OPT_LOCAL == 0)); then
    need_sbatch
    # The Slurm version, --time within MaxTime, --gpu-type (each distinct request of the
    # chunks: resource blocks); before anything waits.
    hpc_plan_each_distinct "J_PARTITION J_TIME J_GPU_TYPE" hpc_blocks_cluster_check
    hpc_cluster_answers_keep # for the next submission (cluster.sh)
  fi
}

main() {
  local source_dir stamp venv_job="" submitted=()
  # Until the first file is written, every refusal is of the user's input: exit 2.
  HPC_DIE_STATUS=2
  source_dir=${HPC_PROJECT_DIR:-}
  [[ $HPC_CONFIRM_ABOVE =~ ^[0-9]{1,9}$ ]] ||
    die "HPC_CONFIRM_ABOVE='$HPC_CONFIRM_ABOVE' is not a whole number: set it to the array size above which to ask (default 100), or unset it"
  if [[ -n $source_dir ]]; then
    [[ $source_dir == /* && -f $source_dir/virtual_env_hpc_files/job_runtime.sh ]] ||
      die "HPC_PROJECT_DIR='$source_dir' is not a project folder with the toolkit in it (an absolute path holding virtual_env_hpc_files/job_runtime.sh): set it to your project's folder, or unset it (the default is the folder that holds hpc_files/)"
  fi
  # The project's physical path (job_lib.sh: no subshell when it can).
  [[ -n $source_dir ]] || hpc_physical_path_to source_dir "$HPC_TOOLKIT_DIR/.." ||
    die "cannot enter the project's folder ($HPC_TOOLKIT_DIR/..): check its permissions"
  # The submission's id is EXP-STAMP: a random part keeps it unique across clusters that
  # share $SCRATCH and machines whose pids and clocks meet.
  printf -v stamp '%(%Y%m%d-%H%M%S)T-%s-%04x' -1 "$$" "$((${SRANDOM:-$RANDOM} % 65536))"
  prepare "$source_dir" "$stamp" "$@"
  if ((OPT_HELP)); then
    usage
    return 0
  fi
  if hpc_remote_requested; then
    hpc_remote_submit "$source_dir" "$@"
    return
  fi
  if [[ -n $OPT_RERUN ]]; then
    hpc_rerun "$stamp"
    return
  fi
  lightning_requeue_note
  if ((OPT_LOCAL)); then
    hpc_plan_each_distinct J_VENV hpc_venv_check
    HPC_DIE_STATUS=1
    hpc_plan_each_distinct J_DATA_ARCHIVE hpc_staging_build
    hpc_venv_local_build
    hpc_runs_fresh_move
    hpc_local_run # its exit status is the job's
    return
  fi
  hpc_wandb_key_keep_out # before anything else could pass the key on (saved unless --dry-run)
  if ((OPT_DRY_RUN)); then
    ((OPT_SETUP_VENV == 0)) || hpc_venv_dry_run
    if hpc_blocks_several; then
      hpc_blocks_dry_run_note
    else
      hpc_plan_chunks_note
    fi
    hpc_pack_dry_run_note
    hpc_sweep_dry_run_note
    hpc_runs_fresh_note
    print_dry_run
    return 0
  fi

  hpc_plan_each_distinct J_VENV hpc_venv_check
  if ((OPT_INTERACTIVE)); then
    hpc_interactive_run
    return
  fi
  local tasks
  hpc_task_count_to tasks
  confirm_large_array "$tasks"
  # The experiment is this submission's from here until its jobs are in the ledger (runs.sh).
  hpc_runs_claim "job_submitter.sh --exp-name $J_EXP_NAME"
  HPC_DIE_STATUS=1 # from here on a failure is the machine's or Slurm's, not the input's
  hpc_code_snapshot
  hpc_plan_each_distinct J_DATA_ARCHIVE hpc_staging_build # each chunk's --data archive
  hpc_venv_local_build # --venv-to-local: the venv's archive, reused while unchanged
  ((OPT_SETUP_VENV == 0)) || hpc_venv_submit_build venv_job
  ! hpc_sweep_requested || hpc_sweep_write # an offline sweep's folder, just before sbatch
  hpc_runs_fresh_move # --fresh: the old checkpoints aside (runs.sh)
  hpc_submit_plan submitted "$venv_job"
  hpc_print_submitted "${submitted[@]}"
  hpc_pack_print_submitted
  hpc_code_record
  ! hpc_sweep_requested || hpc_sweep_submitted "${submitted[@]}"
}

[[ ${BASH_SOURCE[0]} != "$0" ]] || main "$@"
