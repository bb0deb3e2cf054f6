#!/usr/bin/env bats
# The job side of the wall-time warning, on one node without Slurm: run_line.sh starts a
# program with the default signal dispositions (so bash can trap SIGUSR1), proc_tree.sh
# passes the warning to the processes that handle it, and the verdict after a warning
# requeues only an attempt that made progress. On the cluster: requeue_programs.bats.
# shellcheck disable=SC2016,SC2030,SC2031 # job code in single quotes runs in the job shell; each test is a subshell

load ../helpers/common

setup() {
  hermetic_env
  job_side_env
  RT=$REPO_ROOT/virtual_env_hpc_files
}

# wait_file FILE: until FILE exists (10 s at most).
wait_file() {
  local i
  for ((i = 0; i < 100; i++)); do
    [[ -e $1 ]] && return 0
    sleep 0.1
  done
  echo "no $1" >&2
  return 1
}

@test "run_line: a bash line traps SIGUSR1 even when every caller ignored it (the issue's check)" {
  run bash -c '(trap "" USR1 TERM INT; bash "$1" "trap \"echo fired\" USR1; kill -USR1 \$\$; echo after")' _ "$RT/run_line.sh"
  [ "$status" -eq 0 ]
  [ "$output" = $'fired\nafter' ]
  # The bug it replaces: the same line started after `trap '' USR1` never fires.
  run bash -c '(trap "" USR1; bash -c "trap \"echo fired\" USR1; kill -USR1 \$\$; echo after")'
  [ "$output" = after ]
}

@test "run_line: the program starts with USR1, TERM and INT at their defaults, also as a background job" {
  run bash -c '(trap "" USR1 TERM; bash "$1" "grep -E \"^Sig(Ign|Cgt)\" /proc/self/status") &
    wait' _ "$RT/run_line.sh"
  [ "$status" -eq 0 ]
  local ign
  ign=$(sed -n 's/^SigIgn:[[:space:]]*//p' <<<"$output")
  (( (16#$ign & (1 << 9 | 1 << 14 | 1 << 1)) == 0 )) # USR1 (10), TERM (15), INT (2)
}

@test "run_line -- COMMAND ARGS runs the command as given, argv intact, with its exit code" {
  run bash "$RT/run_line.sh" -- printf '<%s>' 'a b' '$x' ';' ''
  [ "$status" -eq 0 ]
  [ "$output" = '<a b><$x><;><>' ]
  run bash "$RT/run_line.sh" 'exit 7'
  [ "$status" -eq 7 ]
  run --separate-stderr bash "$RT/run_line.sh"
  [ "$status" -eq 2 ] && [[ $stderr == usage:* ]]
}

@test "proc_tree: SIGUSR1 to a bash trap, SIGTERM to a TERM-only trap, nothing to a program with no handler" {
  local d=$BATS_TEST_TMPDIR
  bash -c 'trap "echo usr1 >\"$1/got1\"; exit 0" USR1; touch "$1/ready1"; while :; do sleep 0.1; done' _ "$d" &
  local p1=$!
  bash -c 'trap "echo term >\"$1/got2\"; exit 0" TERM; touch "$1/ready2"; while :; do sleep 0.1; done' _ "$d" &
  local p2=$!
  python3 -c 'import time,sys; open(sys.argv[1]+"/ready3","w"); time.sleep(3)' "$d" &
  local p3=$!
  wait_file "$d/ready1" && wait_file "$d/ready2" && wait_file "$d/ready3"
  run bash "$RT/proc_tree.sh" warn "$p1"
  [ "$status" -eq 0 ]
  [[ $output == "SIGUSR1 to $p1 (bash)" ]]
  run bash "$RT/proc_tree.sh" warn "$p2"
  [ "$status" -eq 0 ]
  [[ $output == "SIGTERM to $p2 (bash)" ]]
  run bash "$RT/proc_tree.sh" warn "$p3"
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  wait "$p1" && wait "$p2"
  [ "$(cat "$d/got1")" = usr1 ]
  [ "$(cat "$d/got2")" = term ]
  kill -0 "$p3" # untouched
  wait "$p3"
}

@test "proc_tree: Node.js gets no warning: SIGUSR1 would open its inspector (a debugger anyone on the node can use), and it catches SIGTERM itself, program handler or not (second review)" {
  local d=$BATS_TEST_TMPDIR
  command -v node >/dev/null || { echo "node is missing: run tests/setup/install_deps.sh" >&2; return 1; }
  node -e 'require("fs").writeFileSync(process.argv[1] + "/ready1", ""); setTimeout(() => {}, 4000)' "$d" 2>"$d/node1.err" &
  local p1=$!
  node -e 'process.on("SIGTERM", () => { require("fs").writeFileSync(process.argv[1] + "/got2", "term"); process.exit(0) }); require("fs").writeFileSync(process.argv[1] + "/ready2", ""); setTimeout(() => {}, 20000)' "$d" 2>"$d/node2.err" &
  local p2=$!
  wait_file "$d/ready1"
  wait_file "$d/ready2"
  run bash "$RT/proc_tree.sh" warn "$p1"
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  run bash "$RT/proc_tree.sh" warn "$p2"
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  wait "$p1" # ran to its end, untouched
  kill -0 "$p2"
  kill -s TERM "$p2" # the stop at the end of the grace period: its handler saves
  wait "$p2"
  [ "$(cat "$d/got2")" = term ]
  cat "$d/node1.err" "$d/node2.err"
  ! grep -q "Debugger listening" "$d/node1.err" "$d/node2.err" || false
}

@test "proc_tree: a process gone while its status is read does not garble the next name (CI named a program 'CapInh:')" {
  # bash's read keeps what it read ahead in one buffer for every file and puts it back with
  # lseek; on /proc/PID/status of a process that just ended, that lseek fails (ESRCH) and
  # the next read of another file got the rest of the status. strace makes every lseek fail.
  command -v strace >/dev/null || { echo "strace is missing: bash tests/setup/install_deps.sh installs it" >&2; return 1; }
  local d=$BATS_TEST_TMPDIR
  bash -c 'trap "echo term >\"$1/got\"; exit 0" TERM; touch "$1/ready"; while :; do sleep 0.1; done' _ "$d" &
  local p=$!
  wait_file "$d/ready"
  run strace -f -qq -o /dev/null -e trace=lseek -e inject=lseek:error=ESRCH bash "$RT/proc_tree.sh" warn "$p"
  [ "$status" -eq 0 ]
  [[ $output == "SIGTERM to $p (bash)" ]]
  wait "$p"
  [ "$(cat "$d/got")" = term ]
}

@test "proc_tree: a child that handles SIGUSR1 gets it, not its TERM-handling launcher (torchrun-like)" {
  local d=$BATS_TEST_TMPDIR
  bash -c 'trap "kill \$!; exit 0" TERM
    python3 -c "import signal,sys,time
signal.signal(signal.SIGUSR1, lambda *a: (open(sys.argv[1]+\"/worker\",\"w\").write(\"usr1\"), sys.exit(0)))
open(sys.argv[1]+\"/ready\",\"w\")
time.sleep(20)" "$1" & wait' _ "$d" &
  local launcher=$!
  wait_file "$d/ready"
  run bash "$RT/proc_tree.sh" warn "$launcher"
  [ "$status" -eq 0 ]
  [[ $output == "SIGUSR1 to "*"(python3)" ]]
  wait "$launcher"
  [ "$(cat "$d/worker")" = usr1 ]
}

@test "proc_tree: torchrun is looked through: a worker with no handler gets nothing (it may finish in the grace period)" {
  local d=$BATS_TEST_TMPDIR
  mkdir -p "$d/bin"
  # A TERM-handling launcher named torchrun, with a worker that handles nothing.
  printf '#!/bin/bash\ntrap "echo term >%q/launcher; kill \\$!; exit 0" TERM\nsleep 20 & wait\n' "$d" >"$d/bin/torchrun"
  chmod +x "$d/bin/torchrun"
  "$d/bin/torchrun" &
  local launcher=$!
  sleep 0.5
  run bash "$RT/proc_tree.sh" warn "$launcher"
  [ "$status" -eq 1 ]
  [ ! -e "$d/launcher" ]
  kill "$launcher"
}

@test "proc_tree: a container runtime in between is looked through, not signalled" {
  local d=$BATS_TEST_TMPDIR
  mkdir -p "$d/bin"
  # A runtime that, like Singularity, handles every signal and passes it on.
  printf '#!/bin/bash\ntrap "kill -USR1 \\$c" USR1\ntrap "kill -TERM \\$c" TERM\n"$@" & c=$!\nwhile kill -0 $c 2>/dev/null; do wait $c; done\n' >"$d/bin/singularity"
  chmod +x "$d/bin/singularity"
  "$d/bin/singularity" bash -c 'trap "echo usr1 >\"$1/got\"; exit 0" USR1; touch "$1/ready"; while :; do sleep 0.1; done' _ "$d" &
  local rt=$!
  wait_file "$d/ready"
  run bash "$RT/proc_tree.sh" warn "$rt"
  [ "$status" -eq 0 ]
  [[ $output == "SIGUSR1 to "*"(bash)" && $output != *" $rt "* ]]
  wait "$rt"
  [ "$(cat "$d/got")" = usr1 ]
}

# warn_loop ROOT SECONDS: hpc_proc_warn_loop as task_wrapper.sh runs it, lines on stdout.
warn_loop() {
  bash -c 'source "$1/proc_tree.sh"; say() { printf "%s\n" "$*"; }; hpc_proc_warn_loop "$2" "$3" say' _ "$RT" "$1" "$2"
}

@test "proc_tree loop: a handler installed late still gets the warning; the line before names what it saw" {
  local d=$BATS_TEST_TMPDIR
  python3 -c 'import signal,sys,time
open(sys.argv[1]+"/ready","w"); time.sleep(1.2)
signal.signal(signal.SIGUSR1, lambda *a: (open(sys.argv[1]+"/got","w").write("usr1"), sys.exit(0)))
time.sleep(20)' "$d" &
  local p=$!
  wait_file "$d/ready"
  run warn_loop "$p" 10
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "no process of the program handles SIGUSR1 or SIGTERM (yet; seen: $p (python3)): it gets no signal until the grace period ends" ]
  [ "${lines[1]}" = "warning passed on as SIGUSR1 to $p (python3)" ]
  wait "$p"
  [ "$(cat "$d/got")" = usr1 ]
}

@test "proc_tree loop: a program that ends without handling the warning: one line says so (a DDP rank whose warning came late)" {
  local d=$BATS_TEST_TMPDIR
  # Its handler put back to the default just before it ends, as Lightning does at the
  # end of fit: the warning that comes then finds nothing to take it.
  python3 -c 'import signal,sys,time
signal.signal(signal.SIGUSR1, signal.SIG_DFL); open(sys.argv[1]+"/ready","w"); time.sleep(1.5)' "$d" &
  local p=$!
  wait_file "$d/ready"
  run warn_loop "$p" 10
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 2 ]
  [[ ${lines[0]} == "no process of the program handles SIGUSR1 or SIGTERM (yet; seen: $p (python3))"* ]]
  [ "${lines[1]}" = "the program ended before any of its processes handled the warning" ]
  wait "$p"
}

@test "verdict: finished when it exits 0 without taking the warning; requeue only after progress" {
  # shellcheck source=virtual_env_hpc_files/requeue.sh
  source "$RT/requeue.sh"
  local v
  # REQUEUE RC STOPPED WROTE RESTARTS MAX TOOK OVER
  hpc_requeue_verdict_to v yes 0 0 0 0 10 0 0 && [ "$v" = finished ]  # exit 0, never took it
  hpc_requeue_verdict_to v yes 0 0 1 0 10 0 0 && [ "$v" = finished ]  # ... even having saved
  hpc_requeue_verdict_to v no 0 0 0 0 10 0 0 && [ "$v" = finished ]
  hpc_requeue_verdict_to v yes 0 0 1 10 10 0 0 && [ "$v" = finished ] # ... at the limit too
  hpc_requeue_verdict_to v yes 0 0 1 0 10 1 0 && [ "$v" = requeue ]   # took it, saved: a pause
  hpc_requeue_verdict_to v yes 0 0 0 0 10 1 0 && [ "$v" = no-progress ] # took it, saved nothing
  hpc_requeue_verdict_to v yes 143 1 1 0 10 0 0 && [ "$v" = requeue ]  # stopped, but saved
  hpc_requeue_verdict_to v yes 3 0 1 2 10 0 0 && [ "$v" = failed ]     # failed by itself
  hpc_requeue_verdict_to v yes 3 0 0 0 10 0 0 && [ "$v" = failed ]
  hpc_requeue_verdict_to v yes 3 0 1 2 10 1 0 && [ "$v" = requeue ]    # took it, saved, exit 3
  hpc_requeue_verdict_to v yes 143 1 0 0 10 0 0 && [ "$v" = no-progress ] # stopped, nothing saved
  hpc_requeue_verdict_to v yes 0 1 0 0 10 0 0 && [ "$v" = no-progress ] # exited 0 only once stopped
  hpc_requeue_verdict_to v yes 3 0 0 0 10 1 0 && [ "$v" = no-progress ] # failed, nothing saved
  hpc_requeue_verdict_to v yes 0 0 1 1 10 1 1 && [ "$v" = started-over ] # rewrote an old one
  hpc_requeue_verdict_to v yes 0 0 1 10 10 1 0 && [ "$v" = limit ]
  hpc_requeue_verdict_to v yes 143 1 0 10 10 1 0 && [ "$v" = no-progress ]
  hpc_requeue_verdict_to v no 0 0 1 0 10 1 0 && [ "$v" = off ]
  # Older callers (no TOOK): taken, as before.
  hpc_requeue_verdict_to v yes 0 0 1 0 10 && [ "$v" = requeue ]
}

@test "a checkpoint counts when written during this attempt: not before it, not empty, not a .tmp" {
  run_job_side hpc_job_begin '
    sleep 0.05; printf x >"$HPC_CHECKPOINT_DIR/old" && touch -d "1 hour ago" "$HPC_CHECKPOINT_DIR/old"
    hpc_checkpoint_written && echo "old counts"
    : >"$HPC_CHECKPOINT_DIR/empty"; printf x >"$HPC_CHECKPOINT_DIR/a.tmp"
    hpc_checkpoint_written && echo "tmp counts"
    mkdir -p "$HPC_CHECKPOINT_DIR/sub" && printf x >"$HPC_CHECKPOINT_DIR/sub/model.pt"
    hpc_checkpoint_written && echo "new counts"
    ls -d "$HPC_EXP_DIR/.hpc_attempt/4242"'
  [ "$status" -eq 0 ]
  [[ $output == *"new counts"* && $output != *"old counts"* && $output != *"tmp counts"* ]]
  [ ! -e "$scratch_dir/e/.hpc_attempt" ] # removed at the end of the job
}

@test "a file the attempt only appended to, or left as it was, is no checkpoint; one rewritten with other bytes, or a new one, is" {
  mkdir -p "$scratch_dir/e/checkpoints/sub"
  printf 'attempt 1\n' >"$scratch_dir/e/checkpoints/pids.log"
  printf AAAA >"$scratch_dir/e/checkpoints/sub/ck.pt"
  touch -d '1 minute ago' "$scratch_dir/e/checkpoints/pids.log" "$scratch_dir/e/checkpoints/sub/ck.pt"
  run_job_side hpc_job_begin '
    sleep 0.05; ck=$HPC_CHECKPOINT_DIR
    printf "attempt 2\n" >>"$ck/pids.log"
    hpc_checkpoint_written && echo "appended counts"
    echo "passed over: ${HPC_CKPT_APPENDED[*]}"
    printf AAAA >"$ck/sub/ck.pt"
    hpc_checkpoint_written && echo "same bytes count"
    printf "attempt 2 rewritten\n" >"$ck/pids.log" # not appended: rewritten
    hpc_checkpoint_written && echo "rewritten log counts"
    printf "attempt 1\nattempt 2\n" >"$ck/pids.log"
    printf BBBB >"$ck/sub/ck.pt"
    hpc_checkpoint_written && echo "other bytes count"
    printf AAAA >"$ck/sub/ck.pt"
    printf x >"$ck/new.pt"
    hpc_checkpoint_written && echo "new counts"'
  [ "$status" -eq 0 ]
  echo "$output"
  [[ $output != *"appended counts"* && $output != *"same bytes count"* ]]
  [[ $output == *"passed over: pids.log"* ]]
  [[ $output == *"rewritten log counts"* && $output == *"other bytes count"* && $output == *"new counts"* ]]
}

@test "the DataLoader case: a program that finished, appends to its log in the checkpoint folder and hangs at exit is stopped and not requeued (124), saying why" {
  mkdir -p "$scratch_dir/e/checkpoints"
  printf 400 >"$scratch_dir/e/checkpoints/ckpt.pt"
  printf '1 111\n2 222\n' >"$scratch_dir/e/checkpoints/pids.log"
  touch -d '1 minute ago' "$scratch_dir/e/checkpoints/ckpt.pt" "$scratch_dir/e/checkpoints/pids.log"
  export SLURM_RESTART_COUNT=2 HPC_KILL_AFTER=1
  # Resumed at 400 of 400: nothing to do; it appends its pids, says it finished, then hangs
  # (its handler runs but cannot end it, and it ignores SIGTERM, as Python joining
  # DataLoader workers that ignore SIGTERM does).
  warned_job 'echo "3 $$" >>"$HPC_CHECKPOINT_DIR/pids.log"; echo "finished 400"; exec python3 -c "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGUSR1, lambda *a: None); open(os.environ[\"READY\"], \"w\").close(); time.sleep(120)"'
  echo "$output"
  [ "$status" -eq 124 ]
  [[ $output == *"finished 400"* ]]
  [[ $output == *"the program ignored SIGTERM for 1 s: killing it (SIGKILL)"* ]]
  [[ $output == *"only appended to: pids.log (a file whose content at the attempt's start is still there, unchanged, is a log, not a checkpoint)"* ]]
  [[ $output == *"hung at exit (DataLoader workers that ignore SIGTERM) ends here too"* ]]
  [[ $output == *"no checkpoint was written after the warning: not requeued"* ]]
  [[ $output != *requeueing* ]]
  [ "$(head -n 2 "$scratch_dir/e/checkpoints/pids.log")" = $'1 111\n2 222' ]
  [ "$(wc -l <"$scratch_dir/e/checkpoints/pids.log")" -eq 3 ]
}

@test "a resuming attempt names the entry holding its newest checkpoint (HPC_RESUME_FROM, for --resume_from_checkpoint); a first attempt has none" {
  mkdir -p "$scratch_dir/e/checkpoints/checkpoint-4" "$scratch_dir/e/checkpoints/checkpoint-8"
  printf 'run=e-1/0\njob=4242\n' >"$scratch_dir/e/checkpoints/.hpc_run"
  printf 4 >"$scratch_dir/e/checkpoints/checkpoint-4/trainer_state.json"
  printf 8 >"$scratch_dir/e/checkpoints/checkpoint-8/trainer_state.json"
  touch -d '2 minutes ago' "$scratch_dir/e/checkpoints/checkpoint-4/trainer_state.json"
  export HPC_SUBMISSION_ID=e-1 HPC_LAUNCHER=none HPC_REQUEUE=no HPC_PREEMPT_WATCH=no
  printf '%s\n' 'echo "from=${HPC_RESUME_FROM-unset}" ${HPC_RESUME_FROM:+--resume_from_checkpoint "$HPC_RESUME_FROM"}' >"$HPC_COMMANDS_FILE"
  run_job_side hpc_job_begin 'hpc_run_command'
  [ "$status" -eq 0 ]
  [[ $output == *"from=$scratch_dir/e/checkpoints/checkpoint-8 --resume_from_checkpoint $scratch_dir/e/checkpoints/checkpoint-8"* ]]
  [[ $output == *"HPC_RESUMING=1 HPC_INIT_FROM=resume HPC_RESUME_FROM=$scratch_dir/e/checkpoints/checkpoint-8"* ]]
  rm -rf "$scratch_dir/e"
  run_job_side hpc_job_begin 'hpc_run_command'
  [ "$status" -eq 0 ]
  [[ $output == *"from=unset"$'\n'* || $output == *"from=unset" ]]
}

@test "a Trainer checkpoint cut short by the attempt's end (checkpoint-N/ without trainer_state.json) is not HPC_RESUME_FROM: the newest whole one is, and the log says so" {
  # CI 22.05: the program, stopped mid-save, left checkpoint-80/ with its weights only;
  # --resume_from_checkpoint of it failed (FileNotFoundError: trainer_state.json).
  local ck=$scratch_dir/e/checkpoints
  mkdir -p "$ck/checkpoint-70" "$ck/checkpoint-80"
  printf 'run=e-1/0\njob=4242\n' >"$ck/.hpc_run"
  printf w >"$ck/checkpoint-70/model.safetensors"
  printf 70 >"$ck/checkpoint-70/trainer_state.json"
  touch -d '2 minutes ago' "$ck/checkpoint-70/model.safetensors" "$ck/checkpoint-70/trainer_state.json"
  printf w >"$ck/checkpoint-80/model.safetensors"
  export HPC_SUBMISSION_ID=e-1 HPC_LAUNCHER=none HPC_REQUEUE=no HPC_PREEMPT_WATCH=no
  printf '%s\n' 'echo "from=${HPC_RESUME_FROM-unset}"' >"$HPC_COMMANDS_FILE"
  run_job_side hpc_job_begin 'hpc_run_command'
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"from=$ck/checkpoint-70"$'\n'* ]]
  [[ $output == *"$ck/checkpoint-80 has no trainer_state.json (cut short): not resumed from"* ]]
  # Whole again: the newest.
  printf 80 >"$ck/checkpoint-80/trainer_state.json"
  run_job_side hpc_job_begin 'hpc_run_command'
  [[ $output == *"from=$ck/checkpoint-80"$'\n'* ]]
}

# warned_job LINE: a job on one node (launcher none) whose batch shell gets the warning
# 1 s after the program starts, with a 6 s grace period (no margin: the program gets 6 s).
warned_job() {
  local prelude=${2:-}
  printf '%s\n' "$1" >"$HPC_COMMANDS_FILE"
  export source_dir=$BATS_TEST_TMPDIR HPC_LAUNCHER=none HPC_SIGNAL_GRACE=6 HPC_REQUEUE_MARGIN=0
  export HPC_MAX_RESTARTS=10 HPC_REQUEUE=yes HPC_PREEMPT_WATCH=no
  # A line that touches "$READY" (once its trap is set) is warned then, not after a fixed
  # second that a loaded machine may not give it (seen on CI).
  export READY=$BATS_TEST_TMPDIR/ready
  local when='sleep 1'
  # shellcheck disable=SC2016 # expanded in the job-side shell
  [[ $1 != *'$READY'* ]] || when='for _ in $(seq 600); do [ -e "$READY" ] && break; sleep 0.05; done'
  run_job_side hpc_job_begin "$prelude($when; kill -USR1 \$\$) & hpc_run_command; exit \$?"
}

# A watchdog that passes the warning on, then is descheduled before it marks the program as
# warned (a loaded node): the batch shell must not judge the program before it has.
SLOW_MARK='eval "orig_$(declare -f hpc_proc_warn_to)"; hpc_proc_warn_to() { orig_hpc_proc_warn_to "$@"; local r=$?; sleep 1.5; return $r; }; '

@test "a program that takes the warning, saves and exits at once is judged as warned even when the watchdog marks it late: requeued, not finished" {
  warned_job 'trap "echo saved >\"\$HPC_CHECKPOINT_DIR/ck\"; exit 0" USR1; touch "$READY"; while :; do sleep 0.1; done' "$SLOW_MARK"
  echo "$output"
  [ "$(cat "$scratch_dir/e/checkpoints/ck")" = saved ]
  [[ $output != *"without taking the"* ]]
  [[ $output == *"requeueing job 4242: restart 1 of at most 10"* ]]
}

@test "a packed line that takes the warning, saves and exits at once is judged as warned even when its watchdog marks it late: it resumes, not done" {
  printf '%s\n' 'trap "echo saved >\"\$HPC_CHECKPOINT_DIR/ck\"; exit 0" USR1; touch "$READY"; while :; do sleep 0.1; done' >"$HPC_COMMANDS_FILE"
  export source_dir=$BATS_TEST_TMPDIR HPC_LAUNCHER=none HPC_SIGNAL_GRACE=6 HPC_REQUEUE_MARGIN=0
  export HPC_MAX_RESTARTS=10 HPC_REQUEUE=yes HPC_PREEMPT_WATCH=no READY=$BATS_TEST_TMPDIR/ready
  export HPC_PACK=1 HPC_PACK_LINES=1 HPC_PACK_TOTAL=1 HPC_TASK_INDEX=0
  run_job_side 'hpc_job_begin' "$SLOW_MARK"'(for _ in $(seq 600); do [ -e "$READY" ] && break; sleep 0.05; done; kill -USR1 $$) & hpc_run_command; exit $?'
  echo "$output"
  [ "$(cat "$scratch_dir/e/checkpoints/task_0/ck")" = saved ]
  [[ $output != *"without taking the warning"* ]]
  [[ $output == *"line 0 ended with exit code 0 after "*" s (requeue)"* ]]
}

@test "a warned program with no handler runs to the end of the grace period, is stopped, and is not requeued (124)" {
  warned_job 'python3 -c "import time; [time.sleep(0.1) for _ in range(300)]"; echo survived-term'
  [ "$status" -eq 124 ]
  [[ $output == *"no process of the program handles SIGUSR1 or SIGTERM (yet; seen: "[0-9]*" (python3)): it gets no signal"* ]]
  [[ $output == *"still running 6 s after the warning: stopping it (SIGTERM)"* ]]
  [[ $output == *"no checkpoint was written after the warning: not requeued"* ]]
  [[ $output == *"attempt 1, 0 restart(s) so far"* ]]
  [[ $output != *requeueing* ]]
}

@test "a warned program with no handler that exits 0 within the grace period has finished: exit 0, one attempt" {
  warned_job 'sleep 2; echo "training finished"'
  [ "$status" -eq 0 ]
  [[ $output == *"training finished"* ]]
  [[ $output == *"the program ended before any of its processes handled the warning"* ]]
  [[ $output == *"exited 0 without taking the walltime warning: it had finished; the job is complete, not requeued"* ]]
  [[ $output != *requeueing* ]]
  grep -q ' outcome=finished exit=0$' "$BATS_TEST_TMPDIR/commands.attempts/0"
  [ "$(wc -l <"$BATS_TEST_TMPDIR/commands.attempts/0")" -eq 2 ] # running, then finished
}

@test "a warned bash program that traps USR1 and exits 0 without saving is not requeued (124)" {
  warned_job 'trap "exit 0" USR1; touch "$READY"; while :; do sleep 0.1; done'
  [ "$status" -eq 124 ]
  [[ $output == *"took the warning and exited 0, but nothing in"* ]]
  [[ $output != *requeueing* ]]
  grep -q ' outcome=no-progress exit=124$' "$BATS_TEST_TMPDIR/commands.attempts/0"
}

@test "an attempt that writes again an older checkpoint of an earlier attempt started over: said, not requeued" {
  mkdir -p "$scratch_dir/e/checkpoints"
  printf 1 >"$scratch_dir/e/checkpoints/step-1.pt" && touch -d '2 minutes ago' "$scratch_dir/e/checkpoints/step-1.pt"
  printf 2 >"$scratch_dir/e/checkpoints/step-2.pt" && touch -d '1 minute ago' "$scratch_dir/e/checkpoints/step-2.pt"
  export SLURM_RESTART_COUNT=1
  warned_job 'trap "printf x >\"\$HPC_CHECKPOINT_DIR/step-1.pt\"; exit 0" USR1; touch "$READY"; while :; do sleep 0.1; done'
  [ "$status" -eq 124 ]
  [[ $output == *"resuming: "*"holds this run's checkpoints (newest: step-2.pt)"* ]]
  [[ $output == *"started over instead of resuming: it wrote $scratch_dir/e/checkpoints/step-1.pt again"* ]]
  [[ $output != *requeueing* ]]
}

@test "an attempt that writes the newest checkpoint again, or a new one, resumed: requeued, and the log says from where" {
  mkdir -p "$scratch_dir/e/checkpoints"
  printf 1 >"$scratch_dir/e/checkpoints/step-1.pt" && touch -d '2 minutes ago' "$scratch_dir/e/checkpoints/step-1.pt"
  # An older log that every attempt appends to is no rewrite (requeue.bats's progress.log).
  printf '1 1\n' >"$scratch_dir/e/checkpoints/progress.log" && touch -d '3 minutes ago' "$scratch_dir/e/checkpoints/progress.log"
  printf 2 >"$scratch_dir/e/checkpoints/last.pt" && touch -d '1 minute ago' "$scratch_dir/e/checkpoints/last.pt"
  export SLURM_RESTART_COUNT=1
  warned_job 'echo "2 1" >>"$HPC_CHECKPOINT_DIR/progress.log"; trap "printf x >\"\$HPC_CHECKPOINT_DIR/last.pt\"; printf y >\"\$HPC_CHECKPOINT_DIR/step-3.pt\"; exit 0" USR1; touch "$READY"; while :; do sleep 0.1; done'
  [[ $output == *"requeueing job 4242: restart 2 of at most 10; the next attempt resumes from $scratch_dir/e/checkpoints"* ]]
  [[ $output != *"started over"* ]]
}

@test "a warned bash program that traps USR1 and saves goes on to the requeue" {
  # No Slurm here: the requeue itself fails, which the job reports (exit 1).
  warned_job 'trap "echo saved >\"\$HPC_CHECKPOINT_DIR/ck\"; exit 0" USR1; touch "$READY"; while :; do sleep 0.1; done'
  [[ $output == *"warning passed on as SIGUSR1 to"*"(bash)"* ]]
  [ "$(cat "$scratch_dir/e/checkpoints/ck")" = saved ]
  [[ $output == *"requeueing job 4242: restart 1 of at most 10"* ]]
  [[ $output != *"not requeued"* ]]
}

@test "scontrol requeue killed by Slurm's own SIGTERM (the requeue it asked for ends the batch step) is a requeue, not a failure: no finished marker" {
  # CI 24.11: scontrol was still in the batch step when Slurm ended the step for the
  # requeue; it died of SIGTERM (143), the job logged "scontrol requeue failed" and left
  # its finished marker, and attempt 2 then ended at once: the run never resumed.
  local bin=$BATS_TEST_TMPDIR/stub
  mkdir -p "$bin"
  cat >"$bin/scontrol" <<'STUB'
#!/bin/bash
if [[ ${1:-} == requeue ]]; then
  echo 1 >"$STUB_DIR/requeued"
  # Slurm's SIGKILL after KillWait, to every process of the step (the job's `sleep 300`
  # too: left alive, it would hold the test's output open for 300 s).
  (sleep 2; pkill -KILL -P "$PPID"; kill -KILL "$PPID") >/dev/null 2>&1 &
  kill -TERM "$PPID" "$$"
  sleep 5
fi
exit 0
STUB
  cat >"$bin/squeue" <<'STUB'
#!/bin/bash
[[ -e $STUB_DIR/requeued ]] && echo "COMPLETING N/A 1" || echo "RUNNING N/A 0"
STUB
  printf '#!/bin/bash\necho "slurm 24.11.5"\n' >"$bin/srun"
  chmod +x "$bin"/*
  export PATH=$bin:$PATH STUB_DIR=$BATS_TEST_TMPDIR
  warned_job 'trap "echo saved >\"\$HPC_CHECKPOINT_DIR/ck\"; exit 0" USR1; touch "$READY"; while :; do sleep 0.1; done'
  echo "$output"
  [ -e "$BATS_TEST_TMPDIR/requeued" ]
  [[ $output == *"requeueing job 4242: restart 1 of at most 10"* ]]
  [[ $output != *"scontrol requeue 4242 failed"* ]]
  [ ! -e "$scratch_dir/hpc_outputs/jobs/.hpc_finished.4242" ]
}

@test "a warned program that ignores SIGTERM too is killed: the log says so in the toolkit's words, with no shell noise (Killed, line N:)" {
  export HPC_KILL_AFTER=1
  warned_job 'python3 -c "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); [time.sleep(0.1) for _ in range(600)]"'
  echo "$output"
  echo "$stderr"
  [[ $output == *"ignored SIGTERM for 1 s: killing it (SIGKILL)"* ]]
  [[ "$output$stderr" != *Killed* ]]
  [[ ! "$output$stderr" =~ line\ [0-9]+: ]]
}

@test "the toolkit's lines start a line of their own when a progress bar (\\r, no newline) left the log mid-line: grep '^\\[hpc' finds them all" {
  # (The program's writes come a second apart from the toolkit's: two writers at the same
  # instant can still interleave, whatever either of them checks first.)
  printf '%s\n' 'printf "progress 50%%\r"; trap "sleep 1; printf \"progress 60%%\r\"; sleep 1; exit 0" USR1; while :; do sleep 0.1 & wait $!; done' >"$HPC_COMMANDS_FILE"
  export source_dir=$BATS_TEST_TMPDIR HPC_LAUNCHER=none HPC_SIGNAL_GRACE=6 HPC_REQUEUE_MARGIN=0
  export HPC_MAX_RESTARTS=10 HPC_REQUEUE=no HPC_PREEMPT_WATCH=no
  local log=$BATS_TEST_TMPDIR/job.log
  # The job's log is a file, as Slurm's --output makes it (the program writes to it too).
  bash -c 'source "$1/virtual_env_hpc_files/job_runtime.sh" || exit 9
    hpc_job_begin; (sleep 1; kill -USR1 $$) & hpc_run_command' _ "$REPO_ROOT" >"$log" 2>&1 || true
  cat -A "$log"
  grep -q $'progress 50%\r' "$log"
  grep -q '^\[hpc .*warning passed on as SIGUSR1' "$log"
  grep -q '^\[hpc .*command ended with exit code 0' "$log"
  [ "$(grep -o '\[hpc ' "$log" | wc -l)" -eq "$(grep -c '^\[hpc ' "$log")" ]
  # No empty line where the log already was at a line's start.
  [ "$(grep -c '^$' "$log")" -eq 0 ]
}

# A program that starts a daemon outside its process group (setsid) and takes the warning
# without saving: the daemon writes into $HPC_CHECKPOINT_DIR every 20 ms once the program
# has ended. SLOW_JUDGE: the batch shell is slow to judge the attempt (a loaded node).
DAEMON_LINE='p=$$; setsid bash -c "while kill -0 $p 2>/dev/null; do sleep 0.02; done; while :; do date +%N >\"\$HPC_CHECKPOINT_DIR/daemon.txt\"; sleep 0.02; done" </dev/null >/dev/null 2>&1 & trap "exit 0" USR1; touch "$READY"; while :; do sleep 0.1; done'
SLOW_JUDGE='eval "orig_$(declare -f hpc_watchdog_end)"; hpc_watchdog_end() { orig_hpc_watchdog_end "$@"; sleep 0.5; }; '

# daemon_gone FILE: nothing writes FILE any more (the daemon is not left running).
daemon_gone() {
  [[ -e $1 ]] || return 0
  local before
  before=$(stat -c %Y.%y "$1")
  sleep 0.3
  [ "$(stat -c %Y.%y "$1")" = "$before" ] || { echo "the daemon still writes $1"; return 1; }
}

@test "writes of a daemon the program started outside its group, after the program ended, are no progress: it is ended first, not requeued (124) (issue 32)" {
  warned_job "$DAEMON_LINE" "$SLOW_JUDGE"
  echo "$output"
  [ "$status" -eq 124 ]
  [[ $output == *"processes the program started outside its process group still ran when it ended: "*"): ended now"* ]]
  [[ $output == *"took the warning and exited 0, but nothing in"* ]]
  [[ $output != *requeueing* ]]
  daemon_gone "$scratch_dir/e/checkpoints/daemon.txt"
}

@test "a packed line's daemon started outside its group is ended when the line ends, and its writes after that are no progress (issue 32)" {
  printf '%s\n' "$DAEMON_LINE" >"$HPC_COMMANDS_FILE"
  export source_dir=$BATS_TEST_TMPDIR HPC_LAUNCHER=none HPC_SIGNAL_GRACE=6 HPC_REQUEUE_MARGIN=0
  export HPC_MAX_RESTARTS=10 HPC_REQUEUE=yes HPC_PREEMPT_WATCH=no READY=$BATS_TEST_TMPDIR/ready
  export HPC_PACK=1 HPC_PACK_LINES=1 HPC_PACK_TOTAL=1 HPC_TASK_INDEX=0
  run_job_side 'hpc_job_begin' "$SLOW_JUDGE"'(for _ in $(seq 600); do [ -e "$READY" ] && break; sleep 0.05; done; kill -USR1 $$) & hpc_run_command; exit $?'
  echo "$output"
  [[ $output == *"line 0: processes the program started outside its process group still ran when it ended: "*"): ended now"* ]]
  [[ $output == *"line 0 ended with exit code 124 after "*" s (failed)"* ]]
  daemon_gone "$scratch_dir/e/checkpoints/task_0/daemon.txt"
}

# packed_stall LINE0 LINE1: a packed job of two lines, two at once, with a 2 s stall watch.
packed_stall() {
  printf '%s\n' "$1" "$2" >"$HPC_COMMANDS_FILE"
  export source_dir=$BATS_TEST_TMPDIR HPC_LAUNCHER=none HPC_SIGNAL_GRACE=6 HPC_REQUEUE_MARGIN=0
  export HPC_MAX_RESTARTS=10 HPC_REQUEUE=yes HPC_PREEMPT_WATCH=no HPC_KILL_AFTER=1
  export HPC_STALL_TIMEOUT_S=2 HPC_STALL_TIMEOUT=2s
  export HPC_PACK=2 HPC_PACK_LINES=2 HPC_PACK_TOTAL=2 HPC_TASK_INDEX=0
  run_job_side 'hpc_job_begin' 'hpc_run_command; exit $?'
  echo "$output"
}

@test "a packed line that stalls after a checkpoint is shown, stopped and resumed at the requeue; the other line goes on (issue 33)" {
  packed_stall 'echo step-3 >"$HPC_CHECKPOINT_DIR/ckpt"; echo saved; sleep 60' \
    'for i in 1 2 3 4 5 6; do echo "tick $i"; sleep 1; done'
  [[ $output == *"stalled: no progress for 2s on line 0 on "* ]]
  [[ $output =~ \ [0-9]+\ [0-9]+\ S\ [^\ ]+:\ sleep\ 60 ]]
  [[ $output == *"line 0: stalled, and it wrote a checkpoint during this attempt: it resumes when the job is requeued"* ]]
  [[ $output == *"line 1 ended with exit code 0 after "*" s (done)"* ]]
  [[ $output == *"line 0 ended with exit code 143 after "*" s (requeue)"* ]]
  [[ $output == *"pack: line(s) 0 not finished: the job is requeued and reruns only them"* ]]
  [[ $output == *"requeueing job 4242"* ]]
  [[ $output != *"no progress for 2s on line 1"* ]]
}

@test "a packed line that stalls without a checkpoint fails with 79; the other line completes (issue 33)" {
  packed_stall 'echo up; sleep 60' 'for i in 1 2 3 4 5 6; do echo "tick $i"; sleep 1; done'
  [ "$status" -eq 79 ]
  [[ $output == *"stalled: no progress for 2s on line 0 on "* ]]
  [[ $output == *"line 0: stalled, and nothing in "*" was written during this attempt: not resumed (exit 79)"* ]]
  [[ $output == *"line 0 ended with exit code 79 after "*" s (failed)"* ]]
  [[ $output == *"line 1 ended with exit code 0 after "*" s (done)"* ]]
  [[ $output != *requeueing* ]]
}

@test "the end of a program whose attempt folder a cancel has removed already writes nothing on stderr (CI: 'ended: No such file or directory' in a cancelled job's log)" {
  run --separate-stderr bash -c 'source "$1/virtual_env_hpc_files/job_runtime.sh" || exit 9
    HPC_ATTEMPT_DIR=$2/gone HPC_PROGRAM_TOKEN=abc.1
    hpc_program_ended; hpc_program_ended 3
    HPC_PACK_STALL_WATCH=([3]=999999999); _hpc_pack_stall_watch_end 3
    HPC_STALL_WATCH_PID=999999999 HPC_STALL_WATCH_STEP=""; hpc_stop_stall_watch
    echo done' _ "$REPO_ROOT" "$BATS_TEST_TMPDIR"
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [ "$output" = "done" ]
  [ -z "$stderr" ]
}

@test "another job that the program submitted (its batch shell started with the program's token from sbatch) is not ended with the program; the program's own daemon is (CI: a packed line's child jobs killed)" {
  local tok=t$RANDOM$RANDOM child own
  env HPC_PROGRAM_TOKEN="$tok.2" SLURM_JOB_ID=999 bash -c "exec -a hpc_child_job_$tok sleep 30" &
  child=$!
  env HPC_PROGRAM_TOKEN="$tok.2" SLURM_JOB_ID=4242 bash -c "exec -a hpc_own_daemon_$tok sleep 30" &
  own=$!
  sleep 0.3
  run bash -c 'source "$1/virtual_env_hpc_files/job_runtime.sh" || exit 9
    HPC_PROGRAM_TOKEN=$2 SLURM_JOB_ID=4242; hpc_escapees_to p; echo "found: ${p[*]}"
    HPC_PROGRAM_TOKEN=$2.2; hpc_escapees_to p; echo "line 2: ${p[*]}"' _ "$REPO_ROOT" "$tok"
  kill "$child" "$own"
  echo "$output (own $own, child $child)"
  [[ "$output " == *"found: "*"$own "* && "$output " == *"line 2: "*"$own "* ]]
  [[ $output != *"$child"* ]]
}

@test "a submission from inside a job passes no HPC_PROGRAM_TOKEN to sbatch" {
  run bash -c 'source "$1/hpc_files/lib/hpc_lib.sh"; export HPC_PROGRAM_TOKEN=abc.2 SLURM_JOB_ID=7; hpc_forget_enclosing_job; env | grep -c "^HPC_PROGRAM_TOKEN=\|^SLURM_JOB_ID=" || true' _ "$REPO_ROOT"
  [ "$output" = 0 ]
}

@test "a requeue from outside that squeue does not show at once (seen on 26.05 under load) is still told from a cancel: asked again, no finished marker" {
  local bin=$BATS_TEST_TMPDIR/stub
  mkdir -p "$bin"
  # squeue: nothing the first time it is asked after the SIGTERM, then the requeued job.
  cat >"$bin/squeue" <<'STUB'
#!/bin/bash
[[ -e $STUB_DIR/termed ]] || { echo "RUNNING N/A 0"; exit 0; }
n=$(cat "$STUB_DIR/asked" 2>/dev/null || echo 0)
echo $((n + 1)) >"$STUB_DIR/asked"
((n == 0)) || echo "COMPLETING N/A 1"
STUB
  printf '#!/bin/bash\necho "slurm 24.11.5"\n' >"$bin/srun"
  printf '#!/bin/bash\nexit 0\n' >"$bin/sinfo"
  chmod +x "$bin"/*
  export PATH=$bin:$PATH STUB_DIR=$BATS_TEST_TMPDIR HPC_LAUNCHER=none source_dir=$BATS_TEST_TMPDIR
  printf '%s\n' 'touch "$READY"; sleep 30' >"$HPC_COMMANDS_FILE"
  export READY=$BATS_TEST_TMPDIR/ready
  run_job_side hpc_job_begin '(for _ in $(seq 600); do [ -e "$READY" ] && break; sleep 0.05; done; touch "$STUB_DIR/termed"; kill -TERM $$) & hpc_run_command; exit $?'
  echo "$output"
  [[ $output == *"the job was requeued from outside (scontrol requeue; restart 1)"* ]]
  [ ! -e "$scratch_dir/hpc_outputs/jobs/.hpc_finished.4242" ]
  ! compgen -G "$scratch_dir/hpc_outputs/jobs/.hpc_finished.*" >/dev/null || false
}

# term_job_with_squeue ANSWERS...: a job whose program is stopped by a SIGTERM to the batch
# shell, on a Slurm 24.11 whose squeue answers, once the SIGTERM is sent, with each ANSWER
# in turn ("-" for nothing, as when it misses the job for a moment), then the last again.
term_job_with_squeue() {
  local bin=$BATS_TEST_TMPDIR/stub
  mkdir -p "$bin"
  printf '%s\n' "$@" >"$BATS_TEST_TMPDIR/answers"
  cat >"$bin/squeue" <<'STUB'
#!/bin/bash
[[ -e $STUB_DIR/termed ]] || { echo "RUNNING N/A 0"; exit 0; }
n=$(cat "$STUB_DIR/asked" 2>/dev/null || echo 0)
echo $((n + 1)) >"$STUB_DIR/asked"
mapfile -t answers <"$STUB_DIR/answers"
((n < ${#answers[@]})) || n=$((${#answers[@]} - 1))
[[ ${answers[n]} == - ]] || echo "${answers[n]}"
STUB
  printf '#!/bin/bash\necho "slurm 24.11.5"\n' >"$bin/srun"
  printf '#!/bin/bash\nexit 0\n' >"$bin/sinfo"
  chmod +x "$bin"/*
  mkdir -p "$BATS_TEST_TMPDIR/project"
  export PATH=$bin:$PATH STUB_DIR=$BATS_TEST_TMPDIR HPC_LAUNCHER=none source_dir=$BATS_TEST_TMPDIR/project HPC_TASK_INDEX=0
  printf '%s\n' 'touch "$READY"; sleep 30' >"$HPC_COMMANDS_FILE"
  export READY=$BATS_TEST_TMPDIR/ready
  run_job_side hpc_job_begin '(for _ in $(seq 600); do [ -e "$READY" ] && break; sleep 0.05; done; touch "$STUB_DIR/termed"; kill -TERM $$) & hpc_run_command; exit $?'
  echo "$output"
  echo "$stderr"
}

@test "a requeue from outside that squeue misses through every question at the SIGTERM (CI 26.05 under load) is asked again at the end: recorded as requeued, no finished marker" {
  # CI 26.05: squeue missed the job three times in a row; the attempt was taken for a cancel,
  # left its finished marker, and attempt 2 then ended at once as "already finished".
  term_job_with_squeue - - - - "COMPLETING N/A 1"
  [[ $output == *"the job was requeued from outside"*"restart 1"* ]]
  [[ $output != *"no requeue"* ]]
  ! compgen -G "$scratch_dir/hpc_outputs/jobs/.hpc_finished.*" >/dev/null || false
  # hpc status reads the attempt as requeued, not cancelled.
  grep -rh 'outcome=' "$BATS_TEST_TMPDIR"/commands*
  grep -rq 'outcome=requeued exit=' "$BATS_TEST_TMPDIR"/commands*
}

@test "a SIGTERM that squeue never explains leaves no finished marker (a requeued job must not end at its next attempt), and says so" {
  term_job_with_squeue -
  [[ $output == *"Slurm did not say whether it requeued the job"* ]]
  ! compgen -G "$scratch_dir/hpc_outputs/jobs/.hpc_finished.*" >/dev/null || false
}

@test "a cancel squeue shows (COMPLETING, the same restart count) leaves the finished marker" {
  term_job_with_squeue "COMPLETING N/A 0"
  [[ $output == *"received SIGTERM (job COMPLETING): stopping the program, no requeue"* ]]
  compgen -G "$scratch_dir/hpc_outputs/jobs/.hpc_finished.*"
}
