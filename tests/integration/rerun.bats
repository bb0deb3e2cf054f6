#!/usr/bin/env bats
# job_submitter.sh --rerun JOB_ID on the real local cluster (states from sacct): exactly
# the tasks that did not complete go again, from copies of the kept batch scripts, and
# see their original indices (HPC_TASK_INDEX, log names, results folders); refused while
# a task is still queued or running; split arrays; offline sweeps (the same points); the
# chain in `hpc status`; edited kept files and hostile ledger lines.

# shellcheck disable=SC2030,SC2031 # each @test runs in a subshell of its own: run sets status and output per test (rerun_refused reads them)
load ../helpers/cluster
load ../helpers/hostile_state

setup() {
  integration_setup proj
  LEDGER=$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv
  # Each line records that it ran (ran.N, one line per attempt) and its index, then fails
  # unless $SCRATCH/fixed.N exists.
  # shellcheck disable=SC2016 # run by the job
  printf '%s\n' \
    'echo "$HPC_TASK_INDEX" >>"$SCRATCH/ran.$1"; echo "$HPC_TASK_INDEX" >"$HPC_RESULTS_DIR/index"' \
    'echo "line $1 task $HPC_TASK_INDEX"; test -e "$SCRATCH/fixed.$1"' >"$PROJECT/line.sh"
}


@test "two failures of six: exactly those two lines again, with their indices, logs and results folders" {
  failing_lines 5 1 3
  # Line 5 is requeued once (by itself), then completes: it counts by its final state.
  # (The end of the first attempt stops the program's sleep: exit 9 keeps it from going on.
  # The requeue is asked again when Slurm refuses it at first: once, on 26.05 under the
  # whole suite's load, the task ran its sleep out and FAILED 9, never requeued.)
  # shellcheck disable=SC2016
  echo '[ "${SLURM_RESTART_COUNT:-0}" -ge 1 ] || { for _ in 1 2 3 4 5; do scontrol requeue "${SLURM_ARRAY_JOB_ID}_$SLURM_ARRAY_TASK_ID" && break; sleep 2; done; sleep 60; exit 9; }; bash line.sh 5' \
    >>"$PROJECT/experiment_configurations.txt"
  touch "$SCRATCH/fixed.5"
  submit -e five --time 5
  local first=$JOB_ID
  wait_job "$first" 180 6
  job_states "$first" # shown when the test fails
  [ "$(job_states "$first" | grep -c '|FAILED|')" -eq 2 ]
  [ "$(sacct -D -X -n -P -j "${first}_5" -o State | tr '\n' ' ')" = "REQUEUED COMPLETED " ]
  touch "$SCRATCH/fixed.1" "$SCRATCH/fixed.3"
  local before
  before=$(wc -l <"$LEDGER")
  submit --rerun "$first"
  echo "$output"
  [[ $output == *"Rerun of submission five-"*"(job(s) $first): 2 task(s) did not complete:"* ]]
  [[ $output == *"task 1 (line 2): FAILED (exit 1:0), was ${first}_1"* ]]
  [[ $output == *"task 3 (line 4): FAILED (exit 1:0), was ${first}_3"* ]]
  # Both programs failed by themselves (exit 1): the rerun says it runs the same lines.
  [[ $stderr == *"2 task(s) failed on their program's own exit code (not preemption, time or a node): task 1 (line 2, exit 1), task 3 (line 4, exit 1). --rerun runs the same line(s) again"* ]]
  [[ $output == *"Submitted batch job $JOB_ID (array of 2 task(s) as array indices 1,3)"* ]]
  wait_job "$JOB_ID" 120 2
  # Slurm ran exactly array indices 1 and 3 of the new job, both completed.
  [ "$(job_states "$JOB_ID" | sort)" = "$(printf '%s\n' "${JOB_ID}_1|COMPLETED|0:0" "${JOB_ID}_3|COMPLETED|0:0")" ]
  # Lines 0, 2, 4, 5 ran once; lines 1 and 3 twice, both times as their own index.
  local i
  for i in 0 1 2 3 4 5; do echo "ran.$i: $(tr '\n' ' ' <"$SCRATCH/ran.$i")"; done
  for i in 0 2 4 5; do [ "$(cat "$SCRATCH/ran.$i")" = "$i" ]; done
  for i in 1 3; do [ "$(cat "$SCRATCH/ran.$i")" = "$(printf '%s\n' "$i" "$i")" ]; done
  # The rerun's logs are named by the original index; results go to the task's folder.
  grep -q "line 1 task 1" "$(job_log "$JOB_ID" five 1)"
  grep -q "line 3 task 3" "$(job_log "$JOB_ID" five 3)"
  [ "$(cat "$SCRATCH/proj/five/results/task_1/index")" = 1 ]
  [ "$(cat "$SCRATCH/proj/five/results/task_3/index")" = 3 ]
  # One new ledger line: the rerun, linked to its original; the copy differs only in
  # its --array line, the note that says so and the HPC_RERUN_OF export.
  [ "$(wc -l <"$LEDGER")" -eq $((before + 1)) ]
  local -a f
  mapfile -t f < <(tail -1 "$LEDGER" | tr '\t' '\n') # (read -a would merge empty fields)
  [ "${f[1]}" = "$JOB_ID" ]
  [ "${f[3]}" = 2 ]
  [ "${f[9]}" = "$(head -1 "$LEDGER" | cut -f6)" ]
  run diff "$(head -1 "$LEDGER" | cut -f5)" "${f[4]}"
  [ "$(grep -c '^[<>] ' <<<"$output")" -eq 4 ]
  [[ $output == *'< #SBATCH --array="0-5"'* && $output == *'> #SBATCH --array="1,3"'* ]]
  [[ $output == *"> export HPC_RERUN_OF="* ]]
  [[ $output == *"> # Rerun of submission "* ]]
  # hpc status shows the chain both ways.
  run --separate-stderr hpc status
  echo "$output"
  [[ $output == *"   rerun as ${f[5]} (jobs $JOB_ID)"* ]]
  [[ $output == *"   rerun of ${f[9]} (jobs $first): 2 task(s) that did not complete"* ]]
  [ "$(awk -v j="$JOB_ID" '$2 ~ "^"j"_" { print $1, $3 }' <<<"$output" | tr '\n' ' ')" = "1 COMPLETED 3 COMPLETED " ]
  # Everything completed now: a rerun of the rerun has nothing to do; the original
  # points to its rerun.
  run --separate-stderr submitter --rerun "$JOB_ID"
  [ "$status" -eq 0 ]
  [[ $output == "Nothing to rerun: every task of submission ${f[5]} (job(s) $JOB_ID) completed" ]]
  run --separate-stderr submitter --rerun "${first}_2"
  [ "$status" -eq 2 ]
  [[ $stderr == *"was already rerun as job(s) $JOB_ID: rerun that one instead (--rerun $JOB_ID)"* ]]
  [ "$(wc -l <"$LEDGER")" -eq $((before + 1)) ]
}

@test "refused while a task of the submission is queued or running: which, and what to do" {
  failing_lines 3 2
  # Line 0 waits for a file; line 2 fails at once.
  # shellcheck disable=SC2016
  sed -i '1s/.*/while [ ! -e "$SCRATCH\/go" ]; do sleep 0.2; done/' "$PROJECT/experiment_configurations.txt"
  submit -e busy --time 5 --max-parallel 2
  local first=$JOB_ID
  # Until task 2 has failed, task 0 is running and task 1 or 2 pending/running.
  local start=$SECONDS
  until job_states "$first" | grep -q "^${first}_2|FAILED"; do
    ((SECONDS - start < 120)) || false
    sleep 0.5
  done
  local lines_before
  lines_before=$(wc -l <"$LEDGER")
  run --separate-stderr submitter --rerun "$first"
  echo "$stderr"
  [ "$status" -eq 2 ]
  [ -z "$output" ]
  [[ $stderr == *"1 task(s) of submission busy-"*"are still queued or running: task 0 (${first}_0 RUNNING)."* ]]
  [[ $stderr == *"Wait until they end (hpc status $first), or cancel them (hpc cancel $first), then run --rerun $first again"* ]]
  [ "$(wc -l <"$LEDGER")" -eq "$lines_before" ]
  # no home but those the ledger names (a rerun's would be a new one)
  [ "$(find "$SCRATCH/proj/hpc_outputs/jobs" -mindepth 1 -maxdepth 1 -type d | wc -l)" -eq "$(cut -f6 "$LEDGER" | sort -u | wc -l)" ]
  touch "$SCRATCH/go" "$SCRATCH/fixed.2"
  wait_job "$first" 120 3
  submit --rerun "$first"
  [[ $output == *"Submitted batch job $JOB_ID (array of 1 task(s) as array indices 2)"* ]]
  # The %2 cap is the original's.
  grep -q '^#SBATCH --array="2%2"$' "$(tail -1 "$LEDGER" | cut -f5)"
  wait_job "$JOB_ID" 120 1
  [ "$(job_states "$JOB_ID")" = "${JOB_ID}_2|COMPLETED|0:0" ]
}

@test "a split array (MaxArraySize 2): one rerun array per affected part, offsets kept" {
  failing_lines 5 1 4
  HPC_MAX_ARRAY_SIZE=2 submit -e split --time 5
  local -a parts
  mapfile -t parts < <(submitted_ids)
  [ "${#parts[@]}" -eq 3 ]
  wait_job "${parts[0]}" 120 2
  wait_job "${parts[1]}" 120 2
  wait_job "${parts[2]}" 120 1
  touch "$SCRATCH/fixed.1" "$SCRATCH/fixed.4"
  # Any job id of the submission names it.
  submit --rerun "${parts[1]}"
  echo "$output"
  [[ $output == *"task 1 (line 2): FAILED (exit 1:0), was ${parts[0]}_1"* ]]
  [[ $output == *"task 4 (line 5): FAILED (exit 1:0), was ${parts[2]}_0"* ]]
  local -a again
  mapfile -t again < <(submitted_ids)
  [ "${#again[@]}" -eq 2 ]
  [[ $output == *"Submitted batch job ${again[0]} (array of 1 task(s) as array indices 1)"* ]]
  [[ $output == *"Submitted batch job ${again[1]} (array of 1 task(s) as array indices 0)"* ]]
  wait_job "${again[0]}" 120 1
  wait_job "${again[1]}" 120 1
  [ "$(job_states "${again[0]}")" = "${again[0]}_1|COMPLETED|0:0" ]
  [ "$(job_states "${again[1]}")" = "${again[1]}_0|COMPLETED|0:0" ]
  [ "$(cat "$SCRATCH/ran.4")" = "$(printf '4\n4\n')" ]
  [ "$(cat "$SCRATCH/ran.1")" = "$(printf '1\n1\n')" ]
  [ "$(cat "$SCRATCH/proj/split/results/task_4/index")" = 4 ]
  for i in 0 2 3; do [ "$(wc -l <"$SCRATCH/ran.$i")" -eq 1 ]; done
  # hpc status numbers the rerun's tasks as the submission's (offset 4 for the last part).
  run --separate-stderr hpc status "${again[1]}"
  echo "$output"
  [ "$(awk -v j="${again[1]}_0" '$2 == j { print $1 }' <<<"$output")" = 4 ]
  [ "$(tail -2 "$LEDGER" | cut -f8 | tr '\n' ' ')" = "0 4 " ]
}

@test "an offline sweep: the failed point runs again with the same values" {
  project_venv # wandb, PyYAML
  cat >"$PROJECT/grid.yml" <<'EOF'
method: grid
parameters:
  lr: {values: [0.1, 0.2, 0.3]}
command:
  - bash
  - fail_point.sh
  - ${args}
EOF
  # shellcheck disable=SC2016
  printf '%s\n' 'echo "$HPC_TASK_INDEX $*" >>"$SCRATCH/points"' \
    '[ "$HPC_TASK_INDEX" != 1 ] || [ -e "$SCRATCH/fixed" ]' >"$PROJECT/fail_point.sh"
  submit --sweep grid.yml -e grid --time 5
  local first=$JOB_ID
  wait_job "$first" 240 3
  [ "$(job_states "$first" | grep -c '|FAILED|')" -eq 1 ]
  touch "$SCRATCH/fixed"
  submit --rerun "$first"
  echo "$output"
  [[ $output == *"task 1 (line 2): FAILED"* ]]
  wait_job "$JOB_ID" 240 1
  [ "$(job_states "$JOB_ID")" = "${JOB_ID}_1|COMPLETED|0:0" ]
  # Point 1 ran twice, with the same values; the others once.
  cat "$SCRATCH/points"
  [ "$(grep -c '^1 ' "$SCRATCH/points")" -eq 2 ]
  [ "$(grep '^1 ' "$SCRATCH/points" | sort -u | wc -l)" -eq 1 ]
  [[ $(grep '^1 ' "$SCRATCH/points" | head -1) == *"--lr=0.2"* ]]
  [ "$(wc -l <"$SCRATCH/points")" -eq 4 ]
}

# rerun_refused JOB MESSAGE: --rerun JOB is refused as a wrong input (exit 2), nothing on
# stdout, MESSAGE on stderr.
rerun_refused() {
  run --separate-stderr submitter --rerun "$1"
  [ "$status" -eq 2 ]
  [ -z "$output" ]
  [[ $stderr == *"$2"* ]]
}

@test "edited kept files and hostile ledger lines: refused with the reason, nothing submitted" {
  failing_lines 2 1
  local start
  start=$(date +%Y-%m-%dT%H:%M:%S)
  submit -e edit --time 5
  local first=$JOB_ID
  wait_job "$first" 120 2
  local script commands
  script=$(head -1 "$LEDGER" | cut -f5)
  commands=${script%/*}/commands
  cp "$LEDGER" "$BATS_TEST_TMPDIR/ledger.orig"

  # The commands file edited after the submission (its time set to an hour later).
  cp "$commands" "$BATS_TEST_TMPDIR/commands.orig"
  echo 'echo other' >>"$commands"
  touch -d '+1 hour' "$commands"
  rerun_refused "$first" "$commands was changed after job $first was submitted"
  cp -p "$BATS_TEST_TMPDIR/commands.orig" "$commands"
  touch -r "$script" "$commands"

  # The script edited after the submission.
  cp -p "$script" "$BATS_TEST_TMPDIR/script.orig"
  echo '# edited' >>"$script"
  touch -d '+1 hour' "$script"
  rerun_refused "$first" "$script was changed after job $first was submitted"
  cp -p "$BATS_TEST_TMPDIR/script.orig" "$script"

  # Its manifest (the plan the rerun reads) edited, its time kept: its offset is no
  # longer the ledger's.
  local plan=${script%/*}/job.plan
  cp -p "$plan" "$BATS_TEST_TMPDIR/plan.orig"
  printf 'HPC_TASK_OFFSET\t3\n' >>"$plan"
  touch -r "$BATS_TEST_TMPDIR/plan.orig" "$plan"
  rerun_refused "$first" "$plan has HPC_TASK_OFFSET '3' where the ledger says 0"
  # ... or edited later: refused for that.
  touch -d '+1 hour' "$plan"
  rerun_refused "$first" "$plan was changed after job $first was submitted"
  cp -p "$BATS_TEST_TMPDIR/plan.orig" "$plan"

  # The ledger's script field pointed elsewhere.
  sed "s|\t$script\t|\t/etc/passwd.sbatch\t|" "$BATS_TEST_TMPDIR/ledger.orig" >"$LEDGER"
  rerun_refused "$first" "the ledger line of job $first names script '/etc/passwd.sbatch'"

  # Hostile values in every field that is read back: the line is skipped (with a
  # warning) or refused, never evaluated; the job is then not found.
  export PWNED=$BATS_TEST_TMPDIR/pwned
  hostile_state_values
  local v col
  for v in "${HOSTILE_STATE[@]}"; do
    for col in 2 4 6 7 8 9 10 11 12; do
      # Still legal: no submission id means the job id (older lines); any name is a
      # possible submission id (a rerun of one no longer in the ledger); no rerun_of, no
      # cluster (not known) or any user name. (Another cluster's name: refused, exit 2.)
      if [[ ($col == 6 || $col == 10 || $col == 11) && -z $v ]] || [[ ($col == 6 || $col == 10) && $v =~ ^[A-Za-z0-9_][A-Za-z0-9._+-]*$ ]] ||
        [[ $col == 12 && $v =~ ^[A-Za-z0-9_.@-]{0,64}$ ]]; then
        continue
      fi
      awk -F'\t' -v OFS='\t' -v c="$col" -v v="$v" '{ $c = v; print }' "$BATS_TEST_TMPDIR/ledger.orig" >"$LEDGER"
      run --separate-stderr submitter --rerun "$first"
      [ "$status" -eq 2 ] || { echo "field $col = '$v': status $status: $output $stderr"; false; }
      [ -z "$output" ]
      [ ! -e "$PWNED" ] || { echo "field $col = '$v' ran code"; false; }
    done
  done
  # Bad job ids: exit 2, nothing submitted.
  cp "$BATS_TEST_TMPDIR/ledger.orig" "$LEDGER"
  for v in "${HOSTILE_STATE[@]}" 12345 "${first}_x" "$first,$first"; do
    run --separate-stderr submitter --rerun "$v"
    [ "$status" -eq 2 ] || { echo "--rerun '$v': status $status"; false; }
    [ -z "$output" ]
    [ ! -e "$PWNED" ] || { echo "--rerun '$v' ran code"; false; }
  done
  # The only job of this experiment since the test began is the original (other test
  # files may be using the cluster meanwhile).
  [ "$(jobs_named edit "$start")" = "$first" ]
  # no home but those the ledger names (a rerun's would be a new one)
  [ "$(find "$SCRATCH/proj/hpc_outputs/jobs" -mindepth 1 -maxdepth 1 -type d | wc -l)" -eq "$(cut -f6 "$LEDGER" | sort -u | wc -l)" ]
  cmp "$LEDGER" "$BATS_TEST_TMPDIR/ledger.orig"
}

@test "a packed job (--pack 2): only the failed line of the job runs again, with its index; the done one does not" {
  failing_lines 5 1
  submit -e pk --time 5 --pack 2 --cpus 2
  local first=$JOB_ID
  wait_job "$first" 120 3
  touch "$SCRATCH/fixed.1"
  submit --rerun "$first"
  echo "$output"
  [[ $output == *"task 0 (packed, lines 0-1): FAILED (exit 1:0), was ${first}_0; lines that did not complete: 1 (failed, exit 1); done, not run again: 0"* ]]
  [[ $output == *"Submitted batch job $JOB_ID (array of 1 task(s) as array indices 0)"* ]]
  wait_job "$JOB_ID" 120 1
  [ "$(job_states "$JOB_ID")" = "${JOB_ID}_0|COMPLETED|0:0" ]
  # Line 1 ran twice, with its own index; line 0 (done, in the same job) and the others once.
  [ "$(cat "$SCRATCH/ran.1")" = "$(printf '1\n1\n')" ]
  local i
  for i in 0 2 3 4; do [ "$(cat "$SCRATCH/ran.$i")" = "$i" ]; done
  grep -q "^export HPC_RERUN_OF=" "$(tail -1 "$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv" | cut -f5)"
}
