#!/usr/bin/env bats
# The job's environment is the plan's and nothing else (issue 22, item 3): every variable
# the job side reads is set, or unset, by the batch script, whatever the submitting shell
# holds; a submission from inside a job plans as one from a clean shell; sbatch and salloc
# get nothing of an enclosing job's Slurm variables.

# shellcheck disable=SC2030,SC2031 # each @test runs in a subshell of its own
load ../helpers/common
load ../helpers/container

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'python a.py --x 1' 'python a.py --x 2' 'python a.py --x 3'
  : >"$PROJECT/a.py"
}

# job_read_names: every HPC_* name the job side mentions (its shell, its container helper,
# the Python package a job's program imports), and the plan's lower-case aliases.
job_read_names() {
  grep -rhoE 'HPC_[A-Z0-9_]*[A-Z0-9]' "$REPO_ROOT/virtual_env_hpc_files" \
    "$REPO_ROOT/singularity_hpc_files" "$REPO_ROOT/python" | sort -u
  printf '%s\n' source_dir project_name scratch_dir exp_name
}

# scripts_for ARGS...: every chunk's batch script of this submission, into $BATS_TEST_TMPDIR/scripts/K.
scripts_for() {
  rm -rf "$BATS_TEST_TMPDIR/scripts"
  mkdir -p "$BATS_TEST_TMPDIR/scripts"
  # shellcheck disable=SC2016 # the inner shell's
  bash -c 'source "$1/hpc_files/job_submitter.sh"; p=$1 out=$2; shift 2
    prepare "$p" 20260101-000000-1 "$@"
    for k in "${!J_CHUNKS[@]}"; do hpc_plan_script "$k" >"$out/$k"; done' \
    _ "$PROJECT" "$BATS_TEST_TMPDIR/scripts" "$@"
}

# env_after_exports SCRIPT [NAME=VALUE...]: in a shell that starts with only these
# variables (and PATH), run SCRIPT's lines up to the one that sources job_runtime.sh, then
# print every job-read variable: its value, or "unset".
env_after_exports() {
  local script=$1 names
  shift
  names=$(job_read_names | tr '\n' ' ')
  # shellcheck disable=SC2016 # the inner shell's
  env -i PATH="$PATH" "$@" bash -c 'source <(sed "/job_runtime.sh/,\$d" "$1")
    for n in $2; do if [[ -n ${!n+set} ]]; then printf "%s=%q\n" "$n" "${!n}"; else echo "$n unset"; fi; done' \
    _ "$script" "$names"
}

# garbage_env_to ARRAY: NAME=garbage for every job-read variable.
garbage_env_to() {
  local -n _g=$1
  local n
  _g=()
  for n in $(job_read_names); do _g+=("$n=garbage 1"); done
  _g+=(HPC_TASK_OFFSET=1 HPC_RESULTS_FOLDER=/elsewhere HPC_PACK_ORDER=x)
}

@test "guard: every variable the job side reads is set or unset by the batch script, whatever the submitting shell held" {
  local -a garbage
  garbage_env_to garbage
  [ "${#garbage[@]}" -gt 60 ] # the job side's names were found
  local spec script clean dirty
  # Plans that export different sets: a plain GPU job, an array with a cap, a packed array,
  # --data with --results-dir and --sync-every, a container, a split at MaxArraySize.
  mkdir -p "$SCRATCH/proj/ds"
  echo x >"$SCRATCH/proj/ds/f"
  for spec in "--gpus 1 -d lightning" "--max-parallel 2" "--pack 2 --cpus 2" \
    "--data ds --results-dir out --sync-every 60" "-s $BATS_TEST_TMPDIR/img.sif" "--resume-lines"; do
    [[ $spec != -s* ]] || make_sif_image "$BATS_TEST_TMPDIR/img.sif"
    if [[ $spec == --resume-lines ]]; then
      # Two arrays: the second one's task 0 runs line 3 (HPC_TASK_OFFSET=2).
      HPC_MAX_ARRAY_SIZE=2 scripts_for --dry-run
    else
      # shellcheck disable=SC2086 # the spec's words
      scripts_for --dry-run $spec
    fi
    for script in "$BATS_TEST_TMPDIR"/scripts/*; do
      clean=$(env_after_exports "$script")
      dirty=$(env_after_exports "$script" "${garbage[@]}")
      if [[ $clean != "$dirty" ]]; then
        echo "plan '$spec', $script: the submitting shell changed the job's variables:"
        diff <(echo "$clean") <(echo "$dirty") || true
        return 1
      fi
    done
  done
}

@test "guard: the batch script unsets what its plan leaves out (HPC_TASK_OFFSET, HPC_PACK, HPC_RESULTS_FOLDER from the shell are gone)" {
  scripts_for --dry-run
  run env_after_exports "$BATS_TEST_TMPDIR/scripts/0" HPC_TASK_OFFSET=1 HPC_RESULTS_FOLDER=/elsewhere HPC_PACK=2 HPC_PACK_ORDER=x HPC_RERUN_OF=e-1
  [ "$status" -eq 0 ]
  [[ $output == *"HPC_TASK_OFFSET unset"* ]]
  [[ $output == *"HPC_RESULTS_FOLDER unset"* ]]
  [[ $output == *"HPC_PACK unset"* ]]
  [[ $output == *"HPC_PACK_ORDER unset"* ]]
  [[ $output == *"HPC_RERUN_OF unset"* ]]
  [[ $output == *"HPC_NUM_LINES=3"* ]]
}

@test "guard: HPC_PLAN_ENV_SETTINGS lists exactly the settings the submitting side reads and the plan exports again" {
  local read exported both listed
  read=$(grep -rhoE '\$\{HPC_[A-Z0-9_]+:-' "$REPO_ROOT/hpc_files" | sed 's/^..//; s/:-$//' | sort -u)
  exported=$(grep -hoE '_export HPC_[A-Z0-9_]+' "$REPO_ROOT/hpc_files/lib/plan.sh" | sed 's/^_export //' | sort -u)
  both=$(comm -12 <(echo "$read") <(echo "$exported"))
  # shellcheck disable=SC2016
  listed=$(bash -c 'source "$1/hpc_files/job_submitter.sh"; printf "%s\n" "${HPC_PLAN_ENV_SETTINGS[@]}"' _ "$PROJECT" | sort)
  echo "read and exported: $both"
  echo "listed: $listed"
  [ -n "$both" ]
  [ "$both" = "$listed" ]
}

# child_plans_as_from_a_clean_shell SCRIPT [strip]: a line of the job whose batch script is
# SCRIPT (its exports in force, HPC_JOB_SCRIPT naming it; with strip, SCRIPT then loses its
# exports) plans twice: as is, it gets the defaults and the project's venv, not the
# parent's margin of 60 and venv; with HPC_REQUEUE_MARGIN=61 of its own, that counts.
child_plans_as_from_a_clean_shell() {
  # shellcheck disable=SC2016
  run --separate-stderr bash -c 'source <(sed "/job_runtime.sh/,\$d" "$1"); export HPC_JOB_SCRIPT=$1
    [[ -z $3 ]] || sed -i "/^export /d" "$1"
    source "$2/hpc_files/job_submitter.sh"
    prepare "$2" 20260101-000000-2 --dry-run
    echo "margin=$J_REQUEUE_MARGIN venv=$J_VENV"
    HPC_REQUEUE_MARGIN=61 prepare "$2" 20260101-000000-3 --dry-run
    echo "margin=$J_REQUEUE_MARGIN"' _ "$1" "$PROJECT" "${2:-}"
  echo "$output $stderr"
  [ "$status" -eq 0 ]
  [[ ${lines[0]} == "margin=15 venv=$PROJECT/.venv" ]]
  [[ ${lines[1]} == "margin=61" ]]
}

@test "inside a job, the enclosing plan's settings are not the user's: a child plans as from a clean shell; a value the line sets itself counts" {
  # The parent: submitted with a margin of 60 s and a venv of its own.
  mkdir -p "$BATS_TEST_TMPDIR/pvenv/bin" && : >"$BATS_TEST_TMPDIR/pvenv/bin/activate"
  HPC_REQUEUE_MARGIN=60 scripts_for --dry-run --venv "$BATS_TEST_TMPDIR/pvenv"
  local parent=$BATS_TEST_TMPDIR/parent.sbatch
  cp "$BATS_TEST_TMPDIR/scripts/0" "$parent"
  # Its line's environment, as the batch script leaves it (HPC_JOB_SCRIPT names the
  # kept copy, here this file).
  child_plans_as_from_a_clean_shell "$parent"
}

@test "inside a job of this version, the enclosing plan's settings are read from its manifest, not its batch script" {
  mkdir -p "$BATS_TEST_TMPDIR/pvenv/bin" && : >"$BATS_TEST_TMPDIR/pvenv/bin/activate"
  local home=$BATS_TEST_TMPDIR/home
  mkdir -p "$home"
  # The parent's batch script and manifest, as a submission writes them into its home.
  # shellcheck disable=SC2016
  HPC_REQUEUE_MARGIN=60 bash -c 'source "$1/hpc_files/job_submitter.sh"; prepare "$1" 20260101-000000-1 --venv "$2"
    hpc_plan_script 0 >"$3/job.sbatch"; hpc_plan_manifest 0 >"$3/job.plan"' _ "$PROJECT" "$BATS_TEST_TMPDIR/pvenv" "$home"
  grep -qxF $'HPC_REQUEUE_MARGIN\t60' "$home/job.plan"
  # The line's environment as the batch script leaves it; then the script loses its
  # exports (nobody parses it: only the manifest is read).
  child_plans_as_from_a_clean_shell "$home/job.sbatch" strip
}

@test "sbatch gets nothing of an enclosing job's Slurm variables; SLURM_CONF and the user's SBATCH_* stay" {
  sbatch_env_stub
  SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_JOB_ID=77 SLURM_JOB_ID=78 SLURM_MEM_PER_NODE=100 \
    SLURM_NTASKS=4 SRUN_CPUS_PER_TASK=2 SLURMD_NODENAME=node9 SALLOC_PARTITION=x \
    SLURM_CONF=/etc/slurm/x.conf SBATCH_QOS=high run submitter
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 1 ]
  run ! grep -E '^(SLURM_ARRAY|SLURM_JOB_ID|SLURM_MEM|SLURM_NTASKS|SRUN_|SLURMD_|SALLOC_)' "$BATS_TEST_TMPDIR/sbatch.env"
  run cat "$BATS_TEST_TMPDIR/sbatch.env"
  grep -qx 'SLURM_CONF=/etc/slurm/x.conf' <<<"$output"
  grep -qx 'SBATCH_QOS=high' <<<"$output"
}
