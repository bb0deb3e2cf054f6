#!/usr/bin/env bats
# Submissions that race (issue 22, item 4), with a recording sbatch that can be held at a
# gate: of two --rerun (or --resume-sweep) of one submission at once, exactly one submits
# and the other is refused naming it; a resume counts queued points as taken; a ledger
# record is appended whole, under the ledger's lock.

# shellcheck disable=SC2030,SC2031 # each @test runs in a subshell of its own
load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'echo 0' 'echo 1' 'echo 2' 'echo 3' 'echo 4'
  mkdir -p "$PROJECT/.venv/bin" && : >"$PROJECT/.venv/bin/activate"
  LEDGER=$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv
  mkdir -p "$BATS_TEST_TMPDIR/slurm"
  # sacct answers $SACCT_ROWS (the states of the stub's jobs); squeue knows no job.
  # shellcheck disable=SC2016
  printf '#!/bin/sh\nprintf "%%s" "$SACCT_ROWS"\n' >"$BATS_TEST_TMPDIR/slurm/sacct"
  printf '#!/bin/sh\nexit 0\n' >"$BATS_TEST_TMPDIR/slurm/squeue"
  chmod +x "$BATS_TEST_TMPDIR/slurm/sacct" "$BATS_TEST_TMPDIR/slurm/squeue"
  export PATH=$BATS_TEST_TMPDIR/slurm:$PATH
  GATE=$BATS_TEST_TMPDIR/gate
}

# gated_sbatch: from now on sbatch, called with GATED=1 in its environment, says "at the
# gate" (in $GATE.reached) and waits until $GATE exists before it answers; without GATED
# it answers at once (so a second submission that should have been refused submits,
# and the test fails, instead of waiting forever).
gated_sbatch() {
  cat >"$BATS_TEST_TMPDIR/slurm/sbatch" <<GATED
#!/usr/bin/env bash
[[ \${1:-} != --version && -n \${GATED:-} ]] || exec "$REPO_ROOT/tests/helpers/stubs/sbatch" "\$@"
echo "\$\$" >>"$GATE.reached"
while [[ ! -e "$GATE" ]]; do sleep 0.05; done
exec "$REPO_ROOT/tests/helpers/stubs/sbatch" "\$@"
GATED
  chmod +x "$BATS_TEST_TMPDIR/slurm/sbatch"
}

# wait_for FILE: until FILE exists (a bounded wait for the other process to get there).
wait_for() {
  local i
  for ((i = 0; i < 600; i++)); do
    [[ -e $1 ]] && return 0
    sleep 0.05
  done
  echo "never came: $1"
  return 1
}

# five_submitted: a 5-task array as job 4242, tasks 1 and 3 failed.
five_submitted() {
  submitter -e five >/dev/null
  export SACCT_ROWS='4242_0|COMPLETED|0:0
4242_1|FAILED|3:0
4242_2|COMPLETED|0:0
4242_3|OUT_OF_MEMORY|0:125
4242_4|COMPLETED|0:0
'
}

@test "two --rerun of one submission at once: exactly one submits; the other is refused, naming it" {
  five_submitted
  gated_sbatch
  GATED=1 submitter --rerun 4242 >"$BATS_TEST_TMPDIR/first.out" 2>&1 &
  local first=$!
  wait_for "$GATE.reached"
  run --separate-stderr submitter --rerun 4242
  echo "$stderr"
  [ "$status" -eq 1 ]
  [[ $stderr == *"a rerun of submission five-"*"is being submitted right now by another job_submitter.sh (job_submitter.sh --rerun 4242: pid "*" since "*"nothing was submitted"* ]]
  touch "$GATE"
  wait "$first"
  cat "$BATS_TEST_TMPDIR/first.out"
  [ "$(sbatch_calls)" -eq 2 ] # the original and one rerun
  [ "$(wc -l <"$LEDGER")" -eq 2 ]
  # Afterwards a rerun finds the first one's jobs: already rerun.
  run --separate-stderr submitter --rerun 4242
  [ "$status" -eq 2 ]
  [[ $stderr == *"was already rerun as job(s) 4243"* ]]
  [ "$(sbatch_calls)" -eq 2 ]
}

@test "a --rerun that planned before another rerun of the submission landed plans again under the lock: refused, nothing submitted twice" {
  five_submitted
  # sacct, asked with GATED_SACCT=1, waits at the gate: that --rerun has read the ledger
  # (its plan reads it first) and waits there while the other one submits.
  cat >"$BATS_TEST_TMPDIR/slurm/sacct" <<GATED
#!/bin/sh
if [ -n "\${GATED_SACCT:-}" ]; then
  : >>"$GATE.sacct"
  while [ ! -e "$GATE" ]; do sleep 0.05; done
fi
printf "%s" "\$SACCT_ROWS"
GATED
  GATED_SACCT=1 submitter --rerun 4242 >"$BATS_TEST_TMPDIR/late.out" 2>&1 &
  local late=$!
  wait_for "$GATE.sacct"
  run --separate-stderr submitter --rerun 4242
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 2 ]
  touch "$GATE"
  local rc=0
  wait "$late" || rc=$?
  cat "$BATS_TEST_TMPDIR/late.out"
  [ "$rc" -eq 2 ]
  grep -q "was already rerun as job(s) 4243" "$BATS_TEST_TMPDIR/late.out"
  [ "$(sbatch_calls)" -eq 2 ] # the original and one rerun
}

# a_sweep N: an offline grid sweep of N points submitted as job 4242 (its folder: SWEEP_DIR).
a_sweep() {
  ln -sfn "$REPO_ROOT/.venv" "$PROJECT/.venv"
  printf 'program: x.py\nmethod: grid\nparameters:\n  lr: {values: [%s]}\n' "$(seq -s, 1 "$1")" >"$PROJECT/sweep.yml"
  run --separate-stderr submitter --sweep sweep.yml -e sw
  echo "$output$stderr"
  [ "$status" -eq 0 ]
  SWEEP_ID=$(sed -n 's/^Offline sweep \([a-z0-9]*\) .*/\1/p' <<<"$output")
  SWEEP_DIR=$SCRATCH/proj/sweeps/$SWEEP_ID
  [ -f "$SWEEP_DIR/sweep.json" ]
}

@test "--resume-sweep while the sweep's tasks are queued: queued points are taken, not submitted again" {
  a_sweep 4
  [ "$(cat "$SWEEP_DIR/jobs.tsv")" = $'4242\t0' ]
  # Point 0 ran and failed; 1 and 3 still wait in the queue; 2 ran and finished.
  printf '%s\n' '{"event":"start","point":0,"run_id":"r0","params":{},"job":"4242_0"}' \
    '{"event":"end","point":0,"run_id":"r0","state":"failed"}' \
    '{"event":"start","point":2,"run_id":"r2","params":{},"job":"4242_2"}' \
    '{"event":"end","point":2,"run_id":"r2","state":"finished"}' >>"$SWEEP_DIR/ledger.jsonl"
  printf '#!/bin/sh\nprintf "4242_1\\n4242_3\\n"\n' >"$BATS_TEST_TMPDIR/slurm/squeue"
  run --separate-stderr submitter --resume-sweep "$SWEEP_ID"
  echo "$output$stderr"
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 2 ]
  grep -qx '#SBATCH --array="0"' "$SBATCH_STUB_LOG.script.2"
  # The resume's own job is noted too: its point 0 is queued now.
  [ "$(cat "$SWEEP_DIR/jobs.tsv")" = $'4242\t0\n4243\t0' ]
  printf '#!/bin/sh\nprintf "4242_1\\n4242_3\\n4243_0\\n"\n' >"$BATS_TEST_TMPDIR/slurm/squeue"
  run --separate-stderr submitter --resume-sweep "$SWEEP_ID"
  [ "$status" -eq 0 ]
  [[ $output == "Nothing to resubmit"* ]]
  [ "$(sbatch_calls)" -eq 2 ]
  # squeue cannot be asked: no guess, nothing submitted.
  printf '#!/bin/sh\necho "squeue: error: no controller" >&2\nexit 1\n' >"$BATS_TEST_TMPDIR/slurm/squeue"
  run --separate-stderr submitter --resume-sweep "$SWEEP_ID"
  [ "$status" -ne 0 ]
  [[ $stderr == *"squeue could not be asked which points of the sweep are still queued"* ]]
  [ "$(sbatch_calls)" -eq 2 ]
}

@test "two --resume-sweep of one sweep at once: exactly one submits; the other is refused, naming it" {
  a_sweep 3
  gated_sbatch
  GATED=1 submitter --resume-sweep "$SWEEP_ID" >"$BATS_TEST_TMPDIR/first.out" 2>&1 &
  local first=$!
  wait_for "$GATE.reached"
  run --separate-stderr submitter --resume-sweep "$SWEEP_ID"
  echo "$stderr"
  [ "$status" -eq 1 ]
  [[ $stderr == *"a resume of sweep $SWEEP_ID is being submitted right now by another job_submitter.sh (job_submitter.sh --resume-sweep $SWEEP_ID: pid "*"nothing was submitted"* ]]
  touch "$GATE"
  wait "$first"
  [ "$(sbatch_calls)" -eq 2 ]
}

@test "a ledger record is appended under the ledger's lock: while another holds it, nothing of it lands" {
  mkdir -p "$(dirname "$LEDGER")"
  : >"$LEDGER"
  # Another process holds the ledger's lock until told to let go.
  flock -x "$LEDGER" -c "touch '$GATE.held'; while [ ! -e '$GATE' ]; do sleep 0.05; done" &
  local holder=$!
  wait_for "$GATE.held"
  # A submission of many arrays: a record of many lines (MaxArraySize 2: three arrays).
  HPC_MAX_ARRAY_SIZE=2 submitter -e big >"$BATS_TEST_TMPDIR/out" 2>&1 &
  local pid=$!
  # Every sbatch call has answered; the submitter now waits for the lock.
  local i
  for ((i = 0; i < 600; i++)); do
    [ "$(sbatch_calls)" -eq 3 ] && break
    sleep 0.05
  done
  [ "$(sbatch_calls)" -eq 3 ]
  sleep 0.5 # (not an assertion on time: a chance for a writer that ignores the lock to write)
  [ ! -s "$LEDGER" ]
  kill -0 "$pid"
  touch "$GATE"
  wait "$holder"
  wait "$pid"
  cat "$BATS_TEST_TMPDIR/out"
  [ "$(wc -l <"$LEDGER")" -eq 3 ]
  [ "$(cut -f2 "$LEDGER" | tr '\n' ' ')" = "4242 4243 4244 " ]
}
