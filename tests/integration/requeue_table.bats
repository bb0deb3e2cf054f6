#!/usr/bin/env bats
# The requeue table, on the real local cluster: every kind of program against the
# wall-time warning (taken or not, progress or none, exit 0 or not), with the launchers
# none, script, torchrun and lightning and a packed line. One row per array task; all
# arrays run at once and each task is warned (scancel --batch --signal=USR1) 1.5 s after
# it is ready.
# The program: tests/helpers/programs/table_prog.py. hpc status shows each task's attempts.
#   row  program                                   expected
#   n0   no handler, finishes in the window, exit 0 COMPLETED 0, 1 attempt (finished)
#   n1   no handler, fails by itself (exit 3)       FAILED 3, 1 attempt
#   n2   handler, saves, exit 0                     REQUEUED then COMPLETED, resumed
#   n3   handler, saves nothing, exit 0             FAILED 124, 1 attempt
#   n4   handler, saves, exit 1                     REQUEUED then COMPLETED, resumed
#   n5   no handler, saves every 5 steps, stopped   REQUEUED then COMPLETED, resumed
#   n6   handler, saves, never resumes; warned again on attempt 2: started over, FAILED 124
#   n7   no handler, saves nothing, stopped          FAILED 124, 1 attempt
#   s0/s1, t0/t1  the same as n0/n2 under -d script and -d torchrun
#   l0   Lightning, warned after fit (writing its outputs, no handler): COMPLETED, 1 attempt
#   l1   Lightning, warned during fit: the hook saves and stops; REQUEUED then COMPLETED,
#        resumed (tests/helpers/programs/table_lightning.py)
#   p    --pack 2: a line that finishes in the window and one that saves: the job requeues
#        once and reruns only the second
# shellcheck disable=SC2016 # command lines in single quotes are expanded in the job

load ../helpers/cluster

setup() {
  integration_setup proj
  cp "$REPO_ROOT"/tests/helpers/programs/* "$PROJECT/"
}

# warn_when_ready EXP TASK ATTEMPT TARGET [DELAY]: in the background: once line TASK of
# EXP runs attempt ATTEMPT, the wall-time warning to TARGET's batch shell.
warn_when_ready() {
  (
    wait_file "$SCRATCH/proj/$1/marks/ready_$2_$3_0" 300 || exit 1
    sleep "${5:-1.5}"
    scancel --batch --signal=USR1 "$4"
  ) 3>&- &
}

# row NAME ID EXPECTED_ATTEMPTS: the row's sacct attempts as expected (its log shown).
row() {
  local got
  got=$(attempts "$2")
  if [[ $got != "$3" ]]; then
    echo "row $1 ($2): sacct says '${got//$'\n'/, }', expected '${3//$'\n'/, }'" >&2
    return 1
  fi
}

@test "the requeue table: warning taken or not, progress or none, exit 0 or not; none, script, torchrun, lightning, packed" {
  project_venv # torch
  local f=$PROJECT/experiment_configurations.txt n s t p i
  printf '%s\n' 'python3 table_prog.py finish 60' 'python3 table_prog.py fail 60' \
    'python3 table_prog.py save 60' 'python3 table_prog.py nosave 400' \
    'python3 table_prog.py savefail 60' 'python3 table_prog.py periodic 150' \
    'python3 table_prog.py overwrite 400' 'python3 table_prog.py finish 400' >"$f"
  submit --exp-name tn --time 10 --signal-grace 20
  n=$JOB_ID
  printf '%s\n' 'python3 table_prog.py finish 60' 'python3 table_prog.py save 60' >"$f"
  submit --exp-name ts --time 10 --signal-grace 20 --which-distributed script
  s=$JOB_ID
  # (torchrun itself takes a few seconds to end after its worker: a shorter row, a longer grace)
  printf '%s\n' 'python table_prog.py finish 40' 'python table_prog.py save 60' >"$f"
  submit --exp-name tt --time 10 --signal-grace 30 --which-distributed torchrun
  t=$JOB_ID
  printf '%s\n' 'python3 table_prog.py finish 60' 'python3 table_prog.py save 60' >"$f"
  submit --exp-name tp --time 10 --signal-grace 20 --pack 2 --cpus 2
  p=$JOB_ID
  printf '%s\n' 'python table_lightning.py after 20' 'python table_lightning.py pause 150' >"$f"
  submit --exp-name tl --time 10 --signal-grace 30 --which-distributed lightning
  l=$JOB_ID
  for i in 0 1 2 3 4 5 6 7; do warn_when_ready tn "$i" 1 "${n}_$i"; done
  warn_when_ready tn 6 2 "${n}_6" 2.5 # attempt 2 of the one that starts over
  for i in 0 1; do
    warn_when_ready ts "$i" 1 "${s}_$i"
    warn_when_ready tt "$i" 1 "${t}_$i"
  done
  warn_when_ready tp 1 1 "$p" # (both lines run: line 1 is the later one's mark)
  for i in 0 1; do warn_when_ready tl "$i" 1 "${l}_$i"; done
  wait_job "$n" 400 8
  wait_job "$s" 300 2
  wait_job "$t" 300 2
  wait_job "$p" 300 1
  wait_job "$l" 400 2
  for i in 0 1 2 3 4 5 6 7; do echo "== tn $i" && cat "$(job_log "$n" tn "$i")"; done
  for i in 0 1; do echo "== ts $i" && cat "$(job_log "$s" ts "$i")" && echo "== tt $i" && cat "$(job_log "$t" tt "$i")"; done
  echo "== tp" && cat "$(job_log "$p" tp 0)"
  for i in 0 1; do echo "== tl $i" && cat "$(job_log "$l" tl "$i")"; done
  local ck=$SCRATCH/proj/tn/checkpoints log
  # n0: finished in the window: complete, one attempt, no requeue.
  row n0 "${n}_0" 'COMPLETED|0:0'
  log=$(job_log "$n" tn 0)
  grep -q 'the program ended before any of its processes handled the warning' "$log"
  grep -q 'the program exited 0 without taking the walltime warning: it had finished; the job is complete, not requeued' "$log"
  ! grep -q 'requeueing' "$log" || false
  [ "$(cat "$ck/task_0/done_0_0")" = "60 1 -1" ]
  # n1: its own failure: its own code, one attempt.
  row n1 "${n}_1" 'FAILED|3:0'
  grep -q 'the program failed by itself (exit code 3) without taking the walltime warning: not requeued' "$(job_log "$n" tn 1)"
  # n2, n4: a pause: requeued once, resumed where it saved (HPC_RESUMING=1).
  row n2 "${n}_2" $'REQUEUED|0:0\nCOMPLETED|0:0'
  row n4 "${n}_4" $'REQUEUED|0:0\nCOMPLETED|0:0'
  for i in 2 4; do
    log=$(job_log "$n" tn "$i")
    grep -q "the next attempt resumes from $ck/task_$i" "$log"
    grep -q "resuming: $ck/task_$i holds this run's checkpoints (newest: ckpt.json)" "$log"
    grep -q "attempt 2 mode [a-z]* starts at step [1-9][0-9]* (HPC_RESUMING=1)" "$log"
    read -r steps att from <"$ck/task_$i/done_${i}_0"
    [ "$steps $att" = "60 2" ]
    ((from > 0))
  done
  # n3, n7: warned with no progress: no loop.
  row n3 "${n}_3" 'FAILED|124:0'
  grep -q 'the program took the warning and exited 0, but nothing in' "$(job_log "$n" tn 3)"
  row n7 "${n}_7" 'FAILED|124:0'
  grep -q 'no checkpoint was written after the warning: not requeued' "$(job_log "$n" tn 7)"
  # n5: no handler, periodic checkpoints: stopped at the end of the window, resumed.
  row n5 "${n}_5" $'REQUEUED|0:0\nCOMPLETED|0:0'
  read -r steps att from <"$ck/task_5/done_5_0"
  [ "$steps $att" = "150 2" ]
  ((from > 0))
  # n6: starts over instead of resuming: seen on attempt 2, not requeued again.
  row n6 "${n}_6" $'REQUEUED|0:0\nFAILED|124:0'
  log=$(job_log "$n" tn 6)
  # Which rule names it depends on the step the warning reached: a step file of attempt 1
  # written again with other content is "started over"; all of them written again with the
  # same content count as "only appended to" (issue 35's rule). Either way: no new work.
  grep -Eq "this attempt started over instead of resuming: it wrote $ck/task_6/step-[0-9]*.json again|only appended to: .*step-[0-9]+[.]json" "$log"
  [ "$(grep -c 'requeueing job' "$log")" -eq 1 ]
  # script and torchrun: the same two rows.
  row s0 "${s}_0" 'COMPLETED|0:0'
  row s1 "${s}_1" $'REQUEUED|0:0\nCOMPLETED|0:0'
  row t0 "${t}_0" 'COMPLETED|0:0'
  row t1 "${t}_1" $'REQUEUED|0:0\nCOMPLETED|0:0'
  grep -q 'exited 0 without taking the walltime warning' "$(job_log "$t" tt 0)"
  [ "$(cat "$SCRATCH/proj/tt/checkpoints/task_0/done_0_0")" = "40 1 -1" ]
  # Lightning (the toolkit's hook, nothing in the script): warned after fit, while writing
  # its outputs, it finishes in the window; warned during fit, the hook saves and stops,
  # and the next attempt resumes from hpc_ckpt_1.ckpt.
  row l0 "${l}_0" 'COMPLETED|0:0'
  grep -q 'the program exited 0 without taking the walltime warning: it had finished' "$(job_log "$l" tl 0)"
  [ "$(cat "$SCRATCH/proj/tl/checkpoints/task_0/done_0_0")" = "20 1 -1" ]
  row l1 "${l}_1" $'REQUEUED|0:0\nCOMPLETED|0:0'
  log=$(job_log "$l" tl 1)
  grep -q "resuming: $SCRATCH/proj/tl/checkpoints/task_1 holds this run's checkpoints" "$log"
  grep -q "\[hpc\] Lightning: resuming from $SCRATCH/proj/tl/checkpoints/task_1/hpc_ckpt_1.ckpt" "$log"
  read -r steps att from <"$SCRATCH/proj/tl/checkpoints/task_1/done_1_0"
  [ "$steps $att" = "150 2" ]
  ((from > 0))
  # packed: line 0 finished in the window, line 1 paused; the rerun ran only line 1.
  row p "$p" $'REQUEUED|0:0\nCOMPLETED|0:0'
  log=$(job_log "$p" tp 0)
  grep -q 'line 0: exited 0 without taking the warning: it had finished' "$log"
  [ "$(grep -c '^\[table\] task 0 .* starts at step' "$SCRATCH/proj/hpc_outputs/tp-$p-line0.out")" -eq 1 ]
  [ "$(cut -d' ' -f2 "$SCRATCH/proj/tp/checkpoints/task_1/done_1_0")" = 2 ]

  # hpc status: every task's attempts and how each ended, in the table and its JSON.
  run --separate-stderr hpc status "$n" --json
  [ "$status" -eq 0 ]
  python3 - "$output" <<'EOF'
import json, sys
tasks = {t["task"]: t for t in json.loads(sys.argv[1])["submissions"][0]["tasks"]}
want = {0: ["finished"], 1: ["failed"], 2: ["warned-requeued", "finished"],
        3: ["no-progress"], 4: ["warned-requeued", "finished"],
        5: ["warned-requeued", "finished"], 6: ["warned-requeued", "started-over"],
        7: ["no-progress"]}
# Task 6's second attempt: "started-over" or, where the log says "only appended to"
# (the step the warning reached decides, as above), "no-progress". Either: not requeued.
also = {6: ["warned-requeued", "no-progress"]}
for i, outcomes in want.items():
    got = [a["outcome"] for a in tasks[i]["attempt_list"]]
    assert got in (outcomes, also.get(i)) and tasks[i]["attempts"] == len(got), (i, got, outcomes)
EOF
  run --separate-stderr hpc status "${n}_2"
  echo "$output"
  [[ $output == *"2: warned and requeued, finished"* ]]
}

@test "the wall-time warning before the command started (a long --preflight): the job fails with 124 and says why, never COMPLETED with nothing run (second review)" {
  printf 'echo PROGRAM RAN\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name early --time 5 --preflight 'touch "$SCRATCH/preflight_began"; sleep 15'
  wait_file "$SCRATCH/preflight_began" 120
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_job "$JOB_ID"
  local log
  log=$(job_log "$JOB_ID" early)
  cat "$log"
  [ "$(attempts "$JOB_ID")" = "FAILED|124:0" ]
  grep -q "the command never started: the wall-time warning came" "$log"
  ! grep -qx "PROGRAM RAN" "$log" || false
  ! grep -q "it had finished" "$log" || false
}

@test "a Lightning script under the default launcher (one process, script unchanged): warned during fit, the toolkit's requeue saves into \$HPC_CHECKPOINT_DIR and resumes it; Lightning's own auto-requeue (hpc_ckpt_N.ckpt in the project, shared by every run) is off (second review)" {
  project_venv # torch, lightning
  printf '%s\n' 'python table_lightning.py pause 150' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name tln --time 10 --signal-grace 30
  warn_when_ready tln 0 1 "$JOB_ID"
  wait_job "$JOB_ID" 600
  local log steps att from
  log=$(job_log "$JOB_ID" tln)
  cat "$log"
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  grep -q "\[hpc\] Lightning: its SLURM auto-requeue is off" "$log"
  grep -q "\[hpc\] Lightning: resuming from $SCRATCH/proj/tln/checkpoints/hpc_ckpt_1.ckpt" "$log"
  read -r steps att from <"$SCRATCH/proj/tln/checkpoints/done_0_0"
  [ "$steps $att" = "150 2" ]
  ((from > 0))
  [ -z "$(find "$PROJECT" -name 'hpc_ckpt_*')" ] # nothing of Lightning's own in the project
}

@test "a requeued attempt finds its results folder as the earlier attempt left it: a log it appends to across attempts comes back whole (second review)" {
  cat >"$PROJECT/appender.sh" <<'EOF2'
ck=$HPC_CHECKPOINT_DIR/step s=0
[ -s "$ck" ] && s=$(cat "$ck")
trap 'echo "$s" >"$ck"; exit 0' USR1
while [ "$s" -lt 30 ]; do
  s=$((s + 1))
  echo "step $s attempt $HPC_RESTART_COUNT" >>"$HPC_RESULTS_DIR/train.log"
  [ "$s" -ne 5 ] || { mkdir -p "$HPC_EXP_DIR/marks" && touch "$HPC_EXP_DIR/marks/ready_$HPC_RESTART_COUNT"; }
  sleep 0.5
done
EOF2
  printf 'bash appender.sh\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name app --time 5
  wait_file "$SCRATCH/proj/app/marks/ready_0" 120
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_job "$JOB_ID" 300
  local log=$SCRATCH/proj/app/results/train.log
  cat "$(job_log "$JOB_ID" app)"
  cat "$log"
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nCOMPLETED|0:0' ]
  grep -q "results: attempt 2 starts with the earlier attempts' results" "$(job_log "$JOB_ID" app)"
  # Every step once, in order: attempt 1's lines first, then attempt 2's.
  [ "$(cut -d' ' -f2 "$log" | tr '\n' ' ')" = "$(seq 1 30 | tr '\n' ' ')" ]
  [ "$(head -1 "$log")" = "step 1 attempt 0" ]
  [ "$(tail -1 "$log")" = "step 30 attempt 1" ]
}
