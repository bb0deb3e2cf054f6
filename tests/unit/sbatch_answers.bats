#!/usr/bin/env bats
# Slurm's answers, read exactly (issue 22, item 5): the job id wherever it stands in
# sbatch's --parsable answer; no file of a job that may be queued is removed (Slurm is asked
# when unsure); the user's --dependency is joined to the toolkit's, and --dry-run shows it.

# shellcheck disable=SC2030,SC2031,SC2016 # each @test runs in a subshell of its own; the inner shells expand $
load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'python a.py --x 1' 'python a.py --x 2'
  : >"$PROJECT/a.py"
  mkdir -p "$PROJECT/.venv/bin" && : >"$PROJECT/.venv/bin/activate"
  mkdir -p "$BATS_TEST_TMPDIR/wrap"
  export PATH=$BATS_TEST_TMPDIR/wrap:$PATH
}

# lib CODE: run CODE with the submitting side's libraries loaded.
lib() {
  # shellcheck disable=SC2016
  run --separate-stderr bash -c 'source "$1/hpc_files/job_submitter.sh"; eval "$2"' _ "$PROJECT" "$1"
}

# wrapper_sbatch BEFORE AFTER [NO_ID]: an sbatch first on PATH that prints BEFORE, then the
# recording stub's answer (left out with NO_ID), then AFTER, as a site's wrapper does.
wrapper_sbatch() {
  cat >"$BATS_TEST_TMPDIR/wrap/sbatch" <<WRAPPER
#!/usr/bin/env bash
[[ \${1:-} != --version ]] || exec "$REPO_ROOT/tests/helpers/stubs/sbatch" "\$@"
printf '%s\n' "$1"
id=\$("$REPO_ROOT/tests/helpers/stubs/sbatch" "\$@") || exit
[[ -n "${3:-}" ]] || printf '%s\n' "\$id"
printf '%s\n' "$2"
WRAPPER
  chmod +x "$BATS_TEST_TMPDIR/wrap/sbatch"
}

# squeue_says LINES: a squeue first on PATH that prints LINES ("ID COMMAND"), or fails
# with "fail".
squeue_says() {
  if [[ $1 == fail ]]; then
    printf '#!/bin/sh\necho "squeue: error: Unable to contact slurm controller" >&2\nexit 1\n' >"$BATS_TEST_TMPDIR/wrap/squeue"
  else
    printf '#!/bin/sh\ncat <<"X"\n%s\nX\n' "$1" >"$BATS_TEST_TMPDIR/wrap/squeue"
  fi
  chmod +x "$BATS_TEST_TMPDIR/wrap/squeue"
}

@test "the job id is read from its own line of sbatch's answer, wherever it stands" {
  lib 'for out in "4242" "4242;cl1" $'"'"'NOTICE: maintenance at 9\n4242'"'"' $'"'"'4242\nbye'"'"' \
    $'"'"'a\n77 apples\n4242\r'"'"' "Submitted batch job 12" "" "job 12;"; do
      hpc_sbatch_id_to id "$out"; printf "[%s]\n" "$id"; done'
  [ "$status" -eq 0 ]
  [ "$output" = "$(printf '[%s]\n' 4242 4242 4242 4242 4242 '' '' '')" ]
}

@test "a wrapper's notice before the id: submitted, every file kept, the ledger holds the id" {
  wrapper_sbatch "NOTICE: this cluster is under maintenance on Friday" "thank you"
  run --separate-stderr submitter -e w
  echo "$output$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"Submitted batch job 4242 (array of 2 tasks"* ]]
  [ "$(find "$SCRATCH/proj/hpc_outputs/jobs" -path '*/w-*/job*.sbatch' | wc -l)" -eq 1 ]
  [ "$(find "$SCRATCH/proj/hpc_outputs/jobs" -path '*/w-*/commands' | wc -l)" -eq 1 ]
  [ "$(cut -f2 "$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv")" = 4242 ]
}

@test "no id in an answer of exit 0, and squeue cannot be asked: nothing removed or cancelled, the user told how to check" {
  wrapper_sbatch "NOTICE: queued" "" no-id
  squeue_says fail
  run --separate-stderr submitter -e w
  echo "$stderr"
  [ "$status" -eq 1 ]
  [[ $stderr == *"could not tell whether sbatch queued"*"Every file is kept"*"squeue -u"* ]]
  [ "$(find "$SCRATCH/proj/hpc_outputs/jobs" -path '*/w-*/job*.sbatch' | wc -l)" -eq 1 ]
  [ "$(find "$SCRATCH/proj/hpc_outputs/jobs" -path '*/w-*/commands' | wc -l)" -eq 1 ]
}

@test "no id in an answer of exit 0: Slurm is asked by the script; its job counts as submitted" {
  wrapper_sbatch "NOTICE: queued" "" no-id
  # The script's name has the submission's stamp: answer for whatever script was submitted.
  cat >"$BATS_TEST_TMPDIR/wrap/squeue" <<SQUEUE
#!/usr/bin/env bash
echo "17 /somewhere/else.sbatch"
for f in "$SCRATCH"/proj/hpc_outputs/jobs/w-*/job.sbatch; do echo "991 \$f"; done
SQUEUE
  chmod +x "$BATS_TEST_TMPDIR/wrap/squeue"
  run --separate-stderr submitter -e w
  echo "$output$stderr"
  [ "$status" -eq 0 ]
  [[ $stderr == *"held no job id"*"Slurm has job 991"*"taken as submitted"* ]]
  [[ $output == *"Submitted batch job 991"* ]]
  [ "$(cut -f2 "$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv")" = 991 ]
}

@test "no id in an answer of exit 0, and Slurm has no such job: nothing was submitted, files removed" {
  wrapper_sbatch "NOTICE: queued" "" no-id
  squeue_says "17 /somewhere/else.sbatch"
  run --separate-stderr submitter -e w
  [ "$status" -eq 1 ]
  [[ $stderr == *"nothing was submitted"* ]]
  [ -z "$(find "$SCRATCH" -name 'w-*')" ]
}

@test "dependencies: the user's and the toolkit's are joined with ','; alternatives ('?') cannot be" {
  lib 'for u in "" afterok:1:2 afterok:1,afterany:2 singleton afterok:1?afterok:2; do
      for o in "" afterok:9 afterok:9,afterany:8; do
        if hpc_plan_dependency_combine_to d "$u" "$o"; then echo "[$u]+[$o]=[$d]"; else echo "[$u]+[$o] refused"; fi
      done; done'
  [ "$status" -eq 0 ]
  [ "$output" = "[]+[]=[]
[]+[afterok:9]=[afterok:9]
[]+[afterok:9,afterany:8]=[afterok:9,afterany:8]
[afterok:1:2]+[]=[afterok:1:2]
[afterok:1:2]+[afterok:9]=[afterok:1:2,afterok:9]
[afterok:1:2]+[afterok:9,afterany:8]=[afterok:1:2,afterok:9,afterany:8]
[afterok:1,afterany:2]+[]=[afterok:1,afterany:2]
[afterok:1,afterany:2]+[afterok:9]=[afterok:1,afterany:2,afterok:9]
[afterok:1,afterany:2]+[afterok:9,afterany:8]=[afterok:1,afterany:2,afterok:9,afterany:8]
[singleton]+[]=[singleton]
[singleton]+[afterok:9]=[singleton,afterok:9]
[singleton]+[afterok:9,afterany:8]=[singleton,afterok:9,afterany:8]
[afterok:1?afterok:2]+[]=[afterok:1?afterok:2]
[afterok:1?afterok:2]+[afterok:9] refused
[afterok:1?afterok:2]+[afterok:9,afterany:8] refused" ]
}

@test "--setup-venv with the user's --dependency: the experiments wait for both; --dry-run shows it" {
  printf 'pyyaml\n' >"$PROJECT/requirements.txt"
  run --separate-stderr submitter -e x --setup-venv --dry-run --sbatch-option=--dependency=afterok:77:78
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *'--dependency=afterok:77:78\,afterok:\<venv\ job\ id\>'* ]]
  run --separate-stderr submitter -e x --setup-venv --sbatch-option=--dep=afterany:77
  echo "$output$stderr"
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 2 ]
  grep -qx -- "--dependency=afterany:77,afterok:4242" "$SBATCH_STUB_LOG"
  grep -qx -- '#SBATCH --dep="afterany:77"' "$SBATCH_STUB_LOG.script.2"
}

@test "without a dependency of the toolkit's, the user's stays the script's own #SBATCH line" {
  run --separate-stderr submitter -e x --sbatch-option=--dependency=afterok:77?afterok:78
  [ "$status" -eq 0 ]
  run ! grep -q -- '^--dependency' "$SBATCH_STUB_LOG"
  grep -qx -- '#SBATCH --dependency="afterok:77?afterok:78"' "$SBATCH_STUB_LOG.script.1"
}

@test "--dependency of alternatives ('?') with --setup-venv: refused before anything is written" {
  printf 'pyyaml\n' >"$PROJECT/requirements.txt"
  refused "cannot join to the toolkit's own dependency for --setup-venv" -e x --setup-venv \
    --sbatch-option=--dependency=afterok:77?afterok:78
  [ "$status" -eq 2 ]
}

@test "resource blocks with --max-parallel: each array waits for the one before and for the user's dependency" {
  printf '%s\n' 'python a.py --x 1' '#hpc: --cpus 2' 'python a.py --x 2' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter -e b --max-parallel 1 --sbatch-option=--dependency=afterok:55
  echo "$output$stderr"
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 2 ]
  grep -qx -- "--dependency=afterok:55,afterany:4242" "$SBATCH_STUB_LOG"
  run --separate-stderr submitter -e b --max-parallel 1 --dry-run --sbatch-option=--dependency=afterok:55
  [[ $output == *'--dependency=afterok:55\,afterany:\<array\ 1\>'* ]]
  : >"$SBATCH_STUB_LOG"
  rm -rf "${SCRATCH:?}"/*
  refused "--max-parallel across 2 arrays" -e b --max-parallel 1 --sbatch-option=--dependency=afterok:55?afterok:56
}

@test "no id and no squeue for an offline sweep: its folder is kept too (a queued point's agent reads it)" {
  rm -rf "$PROJECT/.venv"
  ln -s "$REPO_ROOT/.venv" "$PROJECT/.venv"
  printf 'program: x.py\nmethod: grid\nparameters:\n  lr: {values: [1, 2]}\n' >"$PROJECT/sweep.yml"
  wrapper_sbatch "NOTICE: queued" "" no-id
  squeue_says fail
  run --separate-stderr submitter --sweep sweep.yml -e sw
  echo "$stderr"
  [ "$status" -eq 1 ]
  [[ $stderr == *"could not tell whether sbatch queued"* ]]
  [ "$(find "$SCRATCH/proj/sweeps" -name sweep.json | wc -l)" -eq 1 ]
}

@test "SBATCH_* variables that would override the script's own #SBATCH lines are named; the others, and those for options the script leaves alone, stay" {
  local script=$'#!/bin/bash\n#SBATCH --job-name="e"\n#SBATCH --time="5"\n#SBATCH --mem="4G"\n#SBATCH --array="0-1"\n\necho "#SBATCH --partition=late"\n#SBATCH --partition="after the first command: sbatch ignores it"\n'
  T=$script lib 'hpc_sbatch_env_overridden_to o "$T"; echo "none: ${#o[@]}"
    export SBATCH_JOB_NAME=x SBATCH_TIMELIMIT=9 SBATCH_MEM_PER_CPU=1G SBATCH_ARRAY_INX=3 SBATCH_QOS=high SBATCH_HOLD=1 SBATCH_PARTITION=p SBATCH_GRES=gpu:1
    hpc_sbatch_env_overridden_to o "$T"; echo "${o[*]}"'
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "none: 0" ]
  [ "${lines[1]}" = "SBATCH_ARRAY_INX SBATCH_JOB_NAME SBATCH_MEM_PER_CPU SBATCH_TIMELIMIT" ]
}

@test "a real submission leaves those SBATCH_* out of sbatch's environment, once said; dry run says the same" {
  cat >"$BATS_TEST_TMPDIR/wrap/sbatch" <<WRAPPER
#!/usr/bin/env bash
[[ \${1:-} == --version ]] || env | grep "^SBATCH_" | grep -v "^SBATCH_STUB_" | sort >"$BATS_TEST_TMPDIR/sbatch.env"
exec "$REPO_ROOT/tests/helpers/stubs/sbatch" "\$@"
WRAPPER
  chmod +x "$BATS_TEST_TMPDIR/wrap/sbatch"
  SBATCH_TIMELIMIT=9 SBATCH_QOS=high run --separate-stderr submitter -e envsb
  [ "$status" -eq 0 ]
  [[ $stderr == *"not used for this submission: SBATCH_TIMELIMIT=9 (your environment"* ]]
  cat "$BATS_TEST_TMPDIR/sbatch.env"
  [ "$(cat "$BATS_TEST_TMPDIR/sbatch.env")" = SBATCH_QOS=high ]
  SBATCH_TIMELIMIT=9 run --separate-stderr submitter -e envsb2 --dry-run
  [[ $stderr == *"not used for this submission: SBATCH_TIMELIMIT=9 (your environment"* ]]
}
