# shellcheck shell=bash
# The project's virtual environment: warn at submission when it is missing, or build it
# in a job of its own (--setup-venv) that the experiments wait for with afterok.

hpc_venv_requirements() {
  printf '%s/requirements.txt' "$J_SOURCE_DIR"
}

# hpc_venv_check: a missing venv fails the job at its start; say so now, unless
# --setup-venv builds it first.
hpc_venv_check() {
  [[ $J_VENV == none ]] && return 0
  if ((OPT_SETUP_VENV)); then
    [[ -f $J_PROJECT_DIR/requirements.txt ]] ||
      die "--setup-venv builds the venv from $J_PROJECT_DIR/requirements.txt, which does not exist: write it (one package per line) or drop --setup-venv"
    return 0
  fi
  [[ -f $J_VENV/bin/activate ]] ||
    warn "no virtual environment at $J_VENV: the job will stop at its start. Create it (python3 -m venv '$J_VENV'), add --setup-venv to build it in a job first, or pass --venv PATH|none"
}

# hpc_venv_build_args_to ARRAY: hpc_sbatch's arguments for the venv-building job.
hpc_venv_build_args_to() {
  local -n _v=$1
  local logs
  hpc_outputs_dir_to logs "$J_SCRATCH_DIR"
  sbatch_filename_to logs "$logs" # '%' doubled (validate.sh)
  _v=("--job-name=$J_EXP_NAME-venv"
    "--output=$logs/$J_EXP_NAME-venv-%j.out" --open-mode=append
    --nodes=1 --ntasks=1 "--cpus-per-task=$J_CPUS_PER_TASK" --time=01:00:00)
  [[ -z $J_ACCOUNT ]] || _v+=("--account=$J_ACCOUNT")
  [[ -z $J_PARTITION ]] || _v+=("--partition=$J_PARTITION")
  _v+=("$J_SOURCE_DIR/virtual_env_hpc_files/build_venv.sh" "$J_VENV" "$(hpc_venv_requirements)" "$J_MODULES")
}

hpc_venv_dry_run() {
  local args argv line
  hpc_venv_build_args_to args
  hpc_sbatch_argv_to argv "${args[@]}"
  printf '# venv job (--setup-venv), submitted first; the job below waits for it with\n'
  printf '# --dependency=afterok:<its job id>:\n'
  printf -v line '%q ' "${argv[@]}"
  printf '%s\n\n' "${line% }"
}

# hpc_venv_submit_build VAR: submit the build job, its id into VAR (and the ledger).
hpc_venv_submit_build() {
  local -n _id=$1
  local args
  hpc_venv_check
  [[ $J_VENV != none ]] || die "--setup-venv with --venv none: there is no venv to build"
  local outputs
  hpc_outputs_dir_to outputs "$J_SCRATCH_DIR"
  mkdir -p -- "$outputs"
  hpc_venv_build_args_to args
  hpc_sbatch _id --ledger venv 1 "" 0 "$outputs/$J_EXP_NAME-venv-%j.out" "${args[@]}" ||
    die "sbatch did not accept the venv job ($HPC_SBATCH_SAID); nothing was submitted"
  printf 'Submitted venv job %s (builds %s; the experiments start after it succeeds)\n' "$_id" "$J_VENV"
}
