#!/usr/bin/env bash
# Summary: submit the project's experiments to a Slurm cluster.
#
# Usage: bash hpc_files/job_submitter.sh [OPTIONS]
#
# Runs every command of experiment_configurations.txt (one job, or one job array with
# task i running line i) on the cluster, in the project's virtual environment.
# --gpus, --cpus and --mem are per node.
#
# Resources:
#   -g, --gpus N                 GPUs per node (default 0: a CPU job)
#       --gpu-type TYPE          GPU model, e.g. v100l, a100 (needs --gpus)
#   -c, --cpus N                 CPUs per node (default: profile's CPUs per task x tasks)
#   -m, --mem SIZE               memory per node, e.g. 16G, 500M (no unit: megabytes)
#       --mem-per-gpu SIZE       memory per GPU instead of --mem
#   -t, --time TIME              wall time: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
#   -N, --num-nodes, --nodes N   nodes (more than 1 needs --which-distributed)
#   -d, --which-distributed L    launcher: none (default), lightning, torchrun, script, dask
#   -A, --account NAME           Slurm account (e.g. def-supervisor)
#   -p, --partition NAME         Slurm partition
#       --max-parallel N         at most N array tasks at once (%N)
#       --procs-per-node N       CPU jobs of a distributed launcher: processes per node
#                                (default 1; with GPUs it is one per GPU)
#       --sbatch-option OPT      any other sbatch option, e.g. --sbatch-option=--qos=high
#                                (repeatable; becomes an #SBATCH line)
#
# What to run:
#   -e, --exp-name NAME          experiment name: names the job, its logs and folders
#   -f, --configs FILE           commands file (default: <project>/experiment_configurations.txt);
#                                a line '#hpc: OPTIONS' in it sets options for the lines below
#                                (resources, time ...: README.md, "Experiment configurations")
#       --nodes-arg NAME         also pass the node count as '--NAME N' (e.g. num_nodes)
#       --devices-arg NAME       also pass the processes per node as '--NAME N' (e.g. devices)
#       --venv PATH|none         project virtual environment (default: <project>/.venv)
#       --setup-venv             first build the venv from requirements.txt in a job of its
#                                own; the experiments wait for it (--dependency=afterok)
#       --data PATH...           stage these files/folders (relative to $SCRATCH/<project>)
#                                to every node's local disk: same paths under $SLURM_TMPDIR
#       --results-dir DIR|none   results folder, copied back to $SCRATCH/<project>/<exp>/results
#                                (default: results, i.e. $SLURM_TMPDIR/results = $HPC_RESULTS_DIR)
#       --sync-every MINUTES     also copy the results back every MINUTES (e.g. 10, or 0.5)
#   -s, --singularity-container IMAGE
#                                run the commands inside this Singularity/Apptainer image
#                                (.sif file or sandbox folder; README.md, "Containers")
#       --container-to-local     copy the image to each node's local disk before the run
#
# W&B sweeps (instead of the commands file; README.md, "Sweeps"):
#       --wandb-sweepid E/P/ID   run `wandb agent` for sweep ENTITY/PROJECT/ID, one per array
#                                task; submit again to add agents to the same sweep
#       --num-agents N           how many agents (online), or runs (offline random/bayes)
#       --runs-per-agent N       runs each agent does, `wandb agent --count N` (default 1)
#       --agent-stagger SECONDS  agents starting together wait i x SECONDS (default 2)
#       --agents-per-gpu         one job, one agent per GPU of every node (--gpus, -N)
#       --sweep FILE             run a W&B sweep file offline: no W&B server needed, task i
#                                runs point i; upload later with `hpc sweep sync ID`
#       --resume-sweep ID        run again the points of offline sweep ID that did not finish
#
# Behaviour:
#   -C, --cluster PROFILE        cluster profile: a name in hpc_files/clusters/ or a path
#                                (default: $HPC_CLUSTER, else generic)
#       --signal-grace SECONDS   warn the job this long before its wall time (SIGUSR1) so it
#                                can checkpoint before it is requeued (default 120)
#       --max-restarts N         requeue at most N times (default 10)
#       --no-requeue             never requeue: the job just ends at its wall time
#   -n, --dry-run                print the batch script, the commands and the sbatch
#                                command line; write and submit nothing
#       --snapshot               run the job from a copy of the project's git-tracked files
#                                made now (edits while it waits change nothing it runs)
#       --mail                   Slurm mails at the job's end and failure ($HPC_MAIL_USER,
#                                else the profile's HPC_DEFAULT_MAIL_USER)
#       --local                  run the job here, without Slurm, to debug it before the
#                                queue: the same batch script, venv and --data staging, each
#                                line in the foreground with its exit code (one node)
#       --interactive            a shell on a compute node with the job's resources and
#                                environment (salloc + srun --pty); prints the command
#       --task I                 with --local/--interactive: only array task I (line I+1)
#       --port N                 with --interactive: print the ssh -L tunnel to port N
#   -y, --yes                    do not ask before submitting large arrays
#   -h, --help                   this help
#
# Options take their value as the next word or after '=' (--gpus=2). Environment:
# SCRATCH (required), HPC_CLUSTER, HPC_VENV, HPC_PROJECT_NAME, HPC_QUIET, HPC_MAIL_USER.
# See README.md.
set -euo pipefail

HPC_PROG=job_submitter.sh
HPC_CONFIRM_ABOVE=${HPC_CONFIRM_ABOVE:-100}

usage() {
  print_usage_header "${BASH_SOURCE[0]}"
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

print_dry_run() {
  local argv line dependency=""
  ((OPT_SETUP_VENV == 0)) || dependency="<venv job id>"
  hpc_sbatch_argv_to argv "$J_SCRIPT_PATH" "$dependency"
  printf '# sbatch command line (not run: --dry-run):\n'
  printf -v line '%q ' "${argv[@]}"
  printf '%s\n\n# ---- batch script: %s ----\n' "${line% }" "$J_SCRIPT_PATH"
  hpc_plan_script
  printf '\n# ---- commands (%d), one per array task: %s ----\n' "${#J_COMMANDS[@]}" "$J_COMMANDS_PATH"
  printf '%s\n' "${J_COMMANDS[@]}"
}

print_submitted() {
  local log n=${#J_COMMANDS[@]}
  local name
  hpc_plan_log_pattern_to log
  # Only the file's name holds the pattern; the folder may hold a literal '%'.
  name=${log##*/} name=${name//%j/$J_JOB_ID}
  log=${log%/*}/${name//%A/$J_JOB_ID}
  if ((n > 1)); then
    printf 'Submitted batch job %s (array of %d tasks, 0-%d)\n' "$J_JOB_ID" "$n" "$((n - 1))"
    printf '  logs:   %s\n' "${log//%a/<task>}"
  else
    printf 'Submitted batch job %s\n' "$J_JOB_ID"
    printf '  log:    %s\n' "$log"
  fi
  printf '  script: %s\n' "$J_SCRIPT_PATH"
}

# submit_checks: before anything is written or waits: the Slurm version, --time within
# MaxTime and --gpu-type (cluster.sh; each resource block's: blocks.sh), and the venv.
submit_checks() {
  if hpc_blocks_several; then
    hpc_blocks_submit_checks
    return 0
  fi
  hpc_cluster_check
  hpc_venv_check
}

# lightning_requeue_note: with -d lightning, requeue on and more than one process in all,
# say what the job does about Lightning's own auto-requeue (it hangs in DDP).
lightning_requeue_note() {
  local procs=$((J_NODES * J_PROCS_PER_NODE))
  [[ $J_LAUNCHER == lightning && $J_REQUEUE == yes ]] && ((procs > 1)) || return 0
  if [[ ${HPC_LIGHTNING_HOOK:-yes} == no ]]; then
    say "note: Lightning's built-in SLURM auto-requeue can hang in DDP ($procs processes) and HPC_LIGHTNING_HOOK=no keeps it: add hpc_toolkit's SlurmRequeue callback to your Trainer (one line, README: Wall time, preemption and requeue), or submit with --no-requeue"
  else
    say "note: Lightning's built-in SLURM auto-requeue can hang in DDP ($procs processes): the job turns it off and uses hpc_toolkit's SlurmRequeue instead (a checkpoint at a step boundary on every rank, then a requeue that resumes from it); nothing to change in your script. Or submit with --no-requeue"
  fi
}

# The toolkit's folder (hpc_files/), found from this file so it runs from anywhere.
HPC_TOOLKIT_DIR=${BASH_SOURCE[0]}
[[ $HPC_TOOLKIT_DIR == /* ]] || HPC_TOOLKIT_DIR=$PWD/$HPC_TOOLKIT_DIR
HPC_TOOLKIT_DIR=${HPC_TOOLKIT_DIR%/*}
# shellcheck source=hpc_files/lib/hpc_lib.sh
source "$HPC_TOOLKIT_DIR/lib/hpc_lib.sh"
for _part in options profile validate resources configs blocks count_args plan submit ledger coderecord mail local venv container staging wandb_key sweep arrays cluster; do
  # shellcheck source=/dev/null
  source "$HPC_TOOLKIT_DIR/lib/$_part.sh"
done
unset _part

# settle_commands: --data, the container, the launcher's needs and --nodes-arg/--devices-arg
# for every command alike; or, when the configs file has #hpc: lines, for each resource
# block with its own options (blocks.sh).
settle_commands() {
  hpc_staging_settle
  hpc_settle_container
  if hpc_blocks_present; then
    hpc_blocks_settle
    return 0
  fi
  hpc_validate_commands
  hpc_add_count_args
}

# prepare SOURCE_DIR ARGS...: parse, load the profile, judge everything and read the
# commands; afterwards the J_* variables hold the whole job. Writes nothing.
prepare() {
  local source_dir=$1
  shift
  HPC_CMDLINE=("$@") # a resource block's options replace some of them (blocks.sh)
  J_GROUP_COUNT=0
  hpc_parse_options "$@"
  ((OPT_HELP == 0)) || return 0
  hpc_profile_load "${OPT_CLUSTER:-${HPC_CLUSTER:-generic}}" "$HPC_TOOLKIT_DIR/clusters"
  hpc_settle_job
  hpc_sweep_validate # a sweep makes its own commands (hpc_sweep_stage)
  if ! hpc_sweep_requested; then
    hpc_read_configs "${OPT_CONFIGS:-$source_dir/experiment_configurations.txt}"
    hpc_check_task_count "${#J_COMMANDS[@]}" "the configs file's ${#J_COMMANDS[@]} commands"
  fi
  hpc_settle_paths "$source_dir"
  hpc_sweep_requested || hpc_check_scripts_exist
  settle_commands
  hpc_code_settle
  hpc_mail_settle
  hpc_debug_settle # --local, --interactive, --task, --port (local.sh)
}

main() {
  local source_dir stamp venv_job="" script_text
  # Until the first file is written, every refusal is of the user's input: exit 2.
  HPC_DIE_STATUS=2
  source_dir=${HPC_PROJECT_DIR:-$(cd -- "$HPC_TOOLKIT_DIR/.." && pwd -P)}
  prepare "$source_dir" "$@"
  if ((OPT_HELP)); then
    usage
    return 0
  fi
  lightning_requeue_note
  if ((OPT_LOCAL)); then
    hpc_venv_check
    HPC_DIE_STATUS=1
    hpc_staging_build
    hpc_local_run # its exit status is the job's
    return
  fi
  if ((OPT_DRY_RUN == 0)) && ! command -v sbatch >/dev/null; then
    HPC_DIE_STATUS=1 die "sbatch not found on PATH: run this on a Slurm login node, or start the local test cluster (bash tests/cluster/local_cluster.sh start, then eval \"\$(bash tests/cluster/local_cluster.sh env)\"), or preview with --dry-run"
  fi

  printf -v stamp '%(%Y%m%d-%H%M%S)T-%s' -1 "$$"
  hpc_wandb_key_keep_out # before anything else could pass the key on
  ! hpc_sweep_requested || hpc_sweep_stage
  hpc_submission_paths "$stamp"
  local split=0
  if hpc_blocks_several; then
    hpc_blocks_plan # one array per resource block's job (blocks.sh)
    split=1
  elif hpc_array_plan; then
    split=1 # several arrays (MaxArraySize), or some lines only
  fi

  if ((OPT_DRY_RUN)); then
    ((OPT_SETUP_VENV == 0)) || hpc_venv_dry_run
    if hpc_blocks_several; then
      hpc_blocks_dry_run_note
    elif ((split)); then
      hpc_array_dry_run_note
    fi
    print_dry_run
    return 0
  fi

  # The Slurm version, --time within MaxTime, --gpu-type (each block's); before anything waits.
  submit_checks
  if ((OPT_INTERACTIVE)); then
    hpc_interactive_run "$stamp"
    return
  fi
  confirm_large_array "${#J_COMMANDS[@]}"
  HPC_DIE_STATUS=1 # from here on a failure is the machine's or Slurm's, not the input's
  HPC_CODE_SOURCE_DIR=$J_SOURCE_DIR
  hpc_code_snapshot
  hpc_blocks_several || hpc_staging_build # (a block's archive: with its array, arrays.sh)
  ((OPT_SETUP_VENV == 0)) || hpc_venv_submit_build venv_job
  ! hpc_sweep_requested || hpc_sweep_write # an offline sweep's folder, just before sbatch
  if ((split)); then
    hpc_array_submit "$venv_job"
    hpc_array_print_submitted
  else
    script_text=$(hpc_plan_script)
    hpc_submit "$script_text"$'\n' "$venv_job"
    print_submitted
  fi
  hpc_code_record
  ! hpc_sweep_requested || hpc_sweep_submitted
}

[[ ${BASH_SOURCE[0]} != "$0" ]] || main "$@"
