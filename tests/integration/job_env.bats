#!/usr/bin/env bats
# Issue 22 on the real local cluster: a job's environment is its plan's (item 3: a
# submission from inside a running job, from an --interactive session and from a shell
# whose job-read HPC_* variables hold garbage behave as one from a clean shell; a BASH_ENV
# that prints a line does not break a 2-node job); submissions that race (item 4: two
# --rerun at once); Slurm's answers read exactly (item 5: a site's sbatch wrapper that
# prints a notice before the job id).

# shellcheck disable=SC2016,SC2030,SC2031 # the lines of configs files, expanded by the job; each @test is a subshell
load ../helpers/cluster

setup() {
  integration_setup proj
  # A child submission's lines: each notes which line ran with which index, and leaves a
  # mark in its results folder (copied back to <exp>/results[/task_i]).
  printf '%s\n' 'echo "line=$1 index=$HPC_TASK_INDEX" >>"$SCRATCH/ran.$HPC_EXP_NAME"' \
    'echo "$1" >"$HPC_RESULTS_DIR/mark"' >"$PROJECT/rec.sh"
  printf '%s\n' 'bash rec.sh 0' 'bash rec.sh 1' 'bash rec.sh 2' >"$PROJECT/child3.txt"
  printf '%s\n' 'bash rec.sh 0' >"$PROJECT/child1.txt"
}

# child_submit_line EXP CONFIGS: a line that submits CONFIGS as experiment EXP (its output
# to $SCRATCH/submit.EXP).
child_submit_line() {
  printf 'bash hpc_files/job_submitter.sh --configs %s -e %s --time 5 >"$SCRATCH/submit.%s" 2>&1' "$2" "$1" "$1"
}

# wait_child EXP: the job the child submission EXP printed has ended.
wait_child() {
  local id
  id=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' "$SCRATCH/submit.$1")
  [ -n "$id" ] || { cat "$SCRATCH/submit.$1"; return 1; }
  wait_job "$id" 180 "$2"
}

# outcome EXP: what the submission EXP did: the lines that ran with their index, and
# the marks in its results folders (the experiment's name left out).
outcome() {
  sort "$SCRATCH/ran.$1"
  (cd "$SCRATCH/proj/$1/results" && find . -name mark -printf '%p ' -exec cat {} \; | sort)
}

# clean_child EXP CONFIGS [ROWS]: the same child submitted from this clean shell, ended.
clean_child() {
  submit --configs "$2" -e "$1" --time 5
  wait_job "$JOB_ID" 180
}

@test "from inside a running job (an array task of a packed job): each child runs as from a clean shell" {
  # The parent: 4 lines packed 2 per task; line 2 (in array task 1) submits two children.
  printf '%s\n' 'true' 'true' "$(child_submit_line inj3 child3.txt); $(child_submit_line inj1 child1.txt)" 'true' \
    >"$PROJECT/experiment_configurations.txt"
  submit -e parent --pack 2 --cpus 2 --time 5
  wait_job "$JOB_ID" 180
  cat "$SCRATCH/submit.inj3" "$SCRATCH/submit.inj1"
  [ "$(job_states "$JOB_ID" | grep -c '|COMPLETED|')" -eq 2 ]
  wait_child inj3 3
  wait_child inj1 1
  clean_child clean3 child3.txt
  clean_child clean1 child1.txt
  echo "in a job:"; outcome inj3; outcome inj1
  echo "clean:"; outcome clean3; outcome clean1
  [ "$(outcome inj3)" = "$(outcome clean3)" ]
  [ "$(outcome inj1)" = "$(outcome clean1)" ]
  [ "$(outcome clean3 | head -3 | tr '\n' ' ')" = "line=0 index=0 line=1 index=1 line=2 index=2 " ]
  [ "$(outcome clean1 | head -1)" = "line=0 index=0" ]
  # No child's log speaks of the parent's packing or lines.
  run ! grep -h 'HPC_PACK\|bad array subscript\|has no line\|should run lines' "$SCRATCH"/proj/hpc_outputs/inj*.out
}

@test "from a shell where every job-read HPC_* variable holds garbage: as from a clean shell" {
  local -a garbage=()
  local name settings
  # The submitting side's own settings (read as ${HPC_X:-default}) are the user's to give;
  # every other name the job side reads gets garbage.
  settings=" $(grep -rhoE '\$\{HPC_[A-Z0-9_]+:-' "$REPO_ROOT/hpc_files" | sed 's/^..//; s/:-$//' | sort -u | tr '\n' ' ') "
  while IFS= read -r name; do
    [[ $settings == *" $name "* || $name == HPC_PROJECT_* ]] || garbage+=("$name=garbage")
  done < <(grep -rhoE 'HPC_[A-Z0-9_]*[A-Z0-9]' "$REPO_ROOT/virtual_env_hpc_files" "$REPO_ROOT/singularity_hpc_files" "$REPO_ROOT/python" | sort -u)
  garbage+=(HPC_TASK_OFFSET=1 HPC_RESULTS_FOLDER=/elsewhere HPC_PACK_ORDER=x HPC_PACK=2 HPC_NUM_LINES=9)
  [ "${#garbage[@]}" -gt 50 ]
  run --separate-stderr researcher env "${garbage[@]}" bash -c 'cd "$1" && bash hpc_files/job_submitter.sh --configs child3.txt -e garb3 --time 5' _ "$PROJECT"
  echo "$output$stderr"
  [ "$status" -eq 0 ]
  JOB_ID=$(submitted_ids | tail -1) JOB_TASKS=3
  wait_job "$JOB_ID" 180
  clean_child clean3 child3.txt
  [ "$(outcome garb3)" = "$(outcome clean3)" ]
  [ ! -e /elsewhere ]
}

# in_session ARGS... <<< COMMANDS: job_submitter.sh --interactive ARGS in a terminal
# (`script`), COMMANDS typed into the session's shell. Sets status and output.
in_session() {
  local cmd
  printf -v cmd '%q ' bash hpc_files/job_submitter.sh --interactive "$@"
  run researcher bash -c 'cd "$1" && exec timeout 180 script -qec "$2" /dev/null' _ "$PROJECT" "$cmd"
}

@test "from an --interactive session (task 1 of a split array): the child runs as from a clean shell" {
  printf '%s\n' 'echo zero' 'echo one' 'echo two' >"$PROJECT/experiment_configurations.txt"
  HPC_MAX_ARRAY_SIZE=2 in_session --task 2 --exp-name inter --time 5 <<EOF2
cd '$PROJECT' && $(child_submit_line int3 child3.txt); $(child_submit_line int1 child1.txt)
exit
EOF2
  echo "$output"
  [ "$status" -eq 0 ]
  cat "$SCRATCH/submit.int3" "$SCRATCH/submit.int1"
  wait_child int3 3
  wait_child int1 1
  clean_child clean3 child3.txt
  clean_child clean1 child1.txt
  [ "$(outcome int3)" = "$(outcome clean3)" ]
  [ "$(outcome int1)" = "$(outcome clean1)" ]
}

@test "a BASH_ENV that prints a line: a 2-node job makes its folders on both nodes and runs; the command keeps BASH_ENV" {
  printf '%s\n' 'echo "a line from BASH_ENV"' >"$BATS_TEST_TMPDIR/bash_env.sh"
  printf '%s\n' 'echo "rank $RANK: BASH_ENV=${BASH_ENV:-none}"' >"$PROJECT/experiment_configurations.txt"
  BASH_ENV=$BATS_TEST_TMPDIR/bash_env.sh submit -e benv -N 2 -d script --partition notmpdir --time 5
  wait_job "$JOB_ID" 180
  local log
  log=$(job_log "$JOB_ID" benv)
  cat "$log"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -q 'made by the job on 2 node(s)' "$log"
  grep -qx "rank 0: BASH_ENV=$BATS_TEST_TMPDIR/bash_env.sh" "$log"
  grep -qx "rank 1: BASH_ENV=$BATS_TEST_TMPDIR/bash_env.sh" "$log"
  run ! grep -q 'srun --overlap' "$log"
}

@test "a site's sbatch wrapper prints a notice before the job id: the job is submitted, runs, and keeps its files" {
  local real
  real=$(type -P sbatch) # the program: the harness makes `sbatch` a function that runs as the user
  mkdir -p "$BATS_TEST_TMPDIR/wrap"
  printf '#!/bin/sh\n[ "$1" = --version ] || echo "NOTICE: maintenance on Friday; jobs longer than 2 days wait"\nexec %q "$@"\n' "$real" \
    >"$BATS_TEST_TMPDIR/wrap/sbatch"
  chmod +x "$BATS_TEST_TMPDIR/wrap/sbatch"
  printf '%s\n' 'echo "the line ran"' >"$PROJECT/experiment_configurations.txt"
  PATH=$BATS_TEST_TMPDIR/wrap:$PATH submit -e wrapped --time 5
  echo "$output$stderr"
  [[ $stderr != *"did not accept"* ]]
  wait_job "$JOB_ID" 180
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -q 'the line ran' "$(job_log "$JOB_ID" wrapped)"
  [ -n "$(find "$SCRATCH/proj/hpc_outputs/jobs" -path '*/wrapped-*/job*.sbatch')" ]
  [ -n "$(find "$SCRATCH/proj/hpc_outputs/jobs" -path '*/wrapped-*/commands')" ]
  [ "$(cut -f2 "$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv")" = "$JOB_ID" ]
}

@test "two --rerun of one submission at once: exactly one is submitted, the other is refused naming it" {
  printf '%s\n' 'true' 'test -e "$SCRATCH/fixed"' >"$PROJECT/experiment_configurations.txt"
  local since
  since=$(date +%Y-%m-%dT%H:%M:%S)
  submit -e race --time 5
  local first=$JOB_ID
  wait_job "$first" 180
  touch "$SCRATCH/fixed"
  # sbatch waits at a gate, so the two reruns overlap for sure.
  local real gate=$BATS_TEST_TMPDIR/gate
  real=$(type -P sbatch) # the program: the harness makes `sbatch` a function that runs as the user
  mkdir -p "$BATS_TEST_TMPDIR/wrap"
  printf '#!/bin/sh\n[ "$1" = --version ] || { touch %q.reached; while [ ! -e %q ]; do sleep 0.1; done; }\nexec %q "$@"\n' \
    "$gate" "$gate" "$real" >"$BATS_TEST_TMPDIR/wrap/sbatch"
  chmod +x "$BATS_TEST_TMPDIR/wrap/sbatch"
  (cd "$PROJECT" && PATH=$BATS_TEST_TMPDIR/wrap:$PATH researcher bash hpc_files/job_submitter.sh --rerun "$first") \
    >"$BATS_TEST_TMPDIR/first.out" 2>&1 &
  local pid=$! i
  for ((i = 0; i < 600; i++)); do [[ -e $gate.reached ]] && break; sleep 0.1; done
  [ -e "$gate.reached" ]
  # (The real sbatch: were it not refused, it would submit, and the test fail.)
  run --separate-stderr researcher bash -c 'cd "$1" && bash hpc_files/job_submitter.sh --rerun "$2"' _ "$PROJECT" "$first"
  echo "$stderr"
  [ "$status" -eq 1 ]
  [[ $stderr == *"is being submitted right now by another job_submitter.sh (job_submitter.sh --rerun $first: pid "* ]]
  touch "$gate"
  wait "$pid"
  cat "$BATS_TEST_TMPDIR/first.out"
  local rerun
  rerun=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' "$BATS_TEST_TMPDIR/first.out")
  [ -n "$rerun" ]
  wait_job "$rerun" 180 1
  # The experiment has two jobs: the original and one rerun.
  [ "$(jobs_named race "$since" | wc -l)" -eq 2 ]
  [ "$(wc -l <"$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv")" -eq 2 ]
}
