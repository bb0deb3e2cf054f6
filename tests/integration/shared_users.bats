#!/usr/bin/env bats
# A researcher among other users on the real cluster (issue 23): the toolkit runs as the
# test user (hpcalice, tests/helpers/users.bash); the other user (hpcbob) owns folders on
# the nodes ahead of the jobs. Root only sets the scene. The project, its venv (Debian's
# /usr/bin/python3: root's pyenv python is not runnable by others) and $SCRATCH live in a
# per-test folder under /var/tmp that the test user owns.
# shellcheck disable=SC2016 # the commands in single quotes are the job's

load ../helpers/cluster
load ../helpers/users

setup() {
  ensure_test_users
  hermetic_env
  cluster_env
  AREA=$(mktemp -d /var/tmp/hpc_shared_it.XXXXXX)
  chmod 755 "$AREA"
  export SCRATCH=$AREA/scratch HOME=$AREA/home
  PROJECT=$AREA/proj
  mkdir -p "$SCRATCH" "$HOME" "$PROJECT"
  bash "$REPO_ROOT/hpc_files/install_into_project.sh" "$PROJECT" >/dev/null
  chown -R "$HPC_TEST_USER" "$SCRATCH" "$HOME" "$PROJECT"
  as_user /usr/bin/python3 -m venv --without-pip "$PROJECT/.venv"
}

teardown() {
  [[ -z ${JOB_ID:-} ]] || scancel "$JOB_ID" 2>/dev/null || true
  [[ -n ${KEEP_AREA:-} ]] || rm -rf -- "$AREA"
}

# submitter ARGS...: job_submitter.sh from the project, as the test user (replaces
# common.bash's, so that submit and refused act as the researcher).
# SUBMIT_ENV: more NAME=VALUE for the submission's environment.
submitter() {
  (cd "$PROJECT" && as_user env HOME="$HOME" SCRATCH="$SCRATCH" PATH="$PATH" \
    SLURM_CONF="$SLURM_CONF" "${SUBMIT_ENV[@]}" bash hpc_files/job_submitter.sh "$@")
}
SUBMIT_ENV=()

# lab_profile NAME SCRATCH_TEMPLATE: a copy of the local-lab profile (no SLURM_TMPDIR: the
# job makes its own folders) whose HPC_LOCAL_SCRATCH is SCRATCH_TEMPLATE; prints its path.
lab_profile() {
  local conf=$AREA/$1.conf
  { cat "$REPO_ROOT/hpc_files/clusters/local-lab.conf"; printf 'HPC_LOCAL_SCRATCH=%q\n' "$2"; } >"$conf"
  chmod 644 "$conf"
  printf '%s\n' "$conf"
}

commands() {
  printf '%s\n' "$@" | as_user tee "$PROJECT/experiment_configurations.txt" >/dev/null
}

@test "a packed line that runs 'kill -9 0' fails on its own; the job log holds no source of the toolkit" {
  commands 'echo first' 'kill -9 0' 'echo third'
  submit --exp-name k9 --time 5 --pack 3 --cpus 3
  wait_job "$JOB_ID" 120
  local log
  log=$(job_log "$JOB_ID" k9 0)
  cat "$log"
  grep -q 'line 1 ended with exit code 137' "$log"
  grep -q 'line 0 ended with exit code 0' "$log"
  ! grep -qE 'Killed|exec setsid|trap .:. USR1|hpc_run_line_argv_to' "$log" || false
}

@test "a local scratch parent another user owns (labcluster's /local/scratch/%u form), or that others can write: nothing is made there, the job runs in a private folder in /tmp and says what to fix (issue 23, 32)" {
  commands 'echo "the program started in $SLURM_TMPDIR"' 'echo "the program started in $SLURM_TMPDIR"'
  mkdir -m 1777 "$AREA/local" && chmod 1777 "$AREA/local" # like /local/scratch
  as_other mkdir -m 777 "$AREA/local/$HPC_TEST_USER" # made by someone else, open to all
  submit --cluster "$(lab_profile lab "$AREA/local/%u")" --exp-name foreign --time 5
  wait_job "$JOB_ID" 120
  local log tmp
  log=$(job_log "$JOB_ID" foreign 0)
  cat "$log"
  [ "$(job_states "$JOB_ID" | cut -d'|' -f2 | sort -u)" = COMPLETED ]
  grep -q "WARNING: the local scratch folder $AREA/local/$HPC_TEST_USER is not safe for the job's files: $AREA/local/$HPC_TEST_USER belongs to $HPC_OTHER_USER, not to you or root.*set HPC_LOCAL_SCRATCH in the cluster profile.*the job uses the private folder /tmp/hpc_job_[0-9]*_node[0-9]\.[A-Za-z0-9]\{6\} instead" "$log"
  tmp=$(sed -n 's/^the program started in //p' "$log")
  [[ $tmp == /tmp/hpc_job_* ]]
  [ ! -e "$tmp" ] # removed at the end
  [ -z "$(ls -A "$AREA/local/$HPC_TEST_USER")" ]
  # A folder of root that every user can write (not sticky): not used either.
  mkdir -m 777 "$AREA/open" && chmod 777 "$AREA/open"
  submit --cluster "$(lab_profile open "$AREA/open")" --exp-name open --time 5
  wait_job "$JOB_ID" 120
  log=$(job_log "$JOB_ID" open 0)
  cat "$log"
  [ "$(job_states "$JOB_ID" | cut -d'|' -f2 | sort -u)" = COMPLETED ]
  grep -q "$AREA/open can be written by other users (mode 0777, not sticky).*chmod go-w '$AREA/open'" "$log"
  [ -z "$(ls -A "$AREA/open")" ]
}

@test "another user's folders made ahead under the next job's names (a sticky shared scratch): the 2-node job runs in folders of unguessable names, theirs stay untouched, ours are removed" {
  mkdir -m 1777 "$AREA/shared" && chmod 1777 "$AREA/shared"
  as_user tee "$PROJECT/report.sh" >/dev/null <<'EOF2'
echo "node=$SLURMD_NODENAME tmp=$SLURM_TMPDIR" >"$HPC_CHECKPOINT_DIR/rank_${SLURM_PROCID:-0}.txt"
touch "$SLURM_TMPDIR/mine" && ls -A "$SLURM_TMPDIR" >>"$HPC_CHECKPOINT_DIR/rank_${SLURM_PROCID:-0}.txt"
EOF2
  commands 'bash report.sh'
  submit --cluster "$(lab_profile shared "$AREA/shared")" --exp-name taken --which-distributed script \
    --num-nodes 2 --time 5 --sbatch-option=--hold
  local n r
  for n in node1 node2 node3 node4; do
    as_other mkdir -m 755 "$AREA/shared/hpc_job_${JOB_ID}_$n"
  done
  scontrol release "$JOB_ID"
  wait_job "$JOB_ID" 180
  local log
  log=$(job_log "$JOB_ID" taken)
  cat "$log"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -q "local scratch: $AREA/shared/hpc_job_${JOB_ID}_node[0-9] is taken (it exists and belongs to $HPC_OTHER_USER; not this job's, left alone): the job uses $AREA/shared/hpc_job_${JOB_ID}_node[0-9]\." "$log"
  local nodes=()
  for r in 0 1; do
    cat "$SCRATCH/proj/taken/checkpoints/rank_$r.txt"
    nodes+=("$(sed -n 's/^node=\([^ ]*\) .*/\1/p' "$SCRATCH/proj/taken/checkpoints/rank_$r.txt")")
    grep -Eq "^node=${nodes[r]} tmp=$AREA/shared/hpc_job_${JOB_ID}_${nodes[r]}\.[A-Za-z0-9]{6}$" "$SCRATCH/proj/taken/checkpoints/rank_$r.txt"
  done
  [ "${nodes[0]}" != "${nodes[1]}" ]
  for n in node1 node2 node3 node4; do
    [ "$(stat -c %U "$AREA/shared/hpc_job_${JOB_ID}_$n")" = "$HPC_OTHER_USER" ]
    [ -z "$(ls -A "$AREA/shared/hpc_job_${JOB_ID}_$n")" ]
  done
  # Only theirs are left: ours are gone.
  [ -z "$(find "$AREA/shared" -mindepth 1 -maxdepth 1 -user "$HPC_TEST_USER")" ]
}

@test "a login node's pam_tmpdir TMPDIR (/tmp/user/tmp-95-96-97) is not taken for Slurm's per-job folder: each array task has its own" {
  # The path holds the ids the array's tasks will get (this cluster numbers jobs in order).
  # Another test file's job can take the next number first (CI runs files side by side):
  # then this one is cancelled and tried again, under a new experiment name.
  local next try login_tmp exp
  commands 'echo "tmp=$SLURM_TMPDIR"; echo 0 >"$HPC_RESULTS_DIR/task0"' \
    'echo "tmp=$SLURM_TMPDIR"; echo 1 >"$HPC_RESULTS_DIR/task1"' \
    'echo "tmp=$SLURM_TMPDIR"; echo 2 >"$HPC_RESULTS_DIR/task2"'
  for try in 1 2 3 4 5; do
    next=$(sbatch --parsable --hold -p tmpdir -o /dev/null --wrap true)
    scancel "$next"
    login_tmp=$AREA/tmp/user/tmp-$((next + 1))-$((next + 2))-$((next + 3)) exp=pam$try
    mkdir -p "$login_tmp" && chown -R "$HPC_TEST_USER" "$AREA/tmp"
    SUBMIT_ENV=(TMPDIR="$login_tmp")
    submit --cluster generic --partition notmpdir --exp-name "$exp" --time 5
    [ "$JOB_ID" -ne $((next + 1)) ] || break
    echo "try $try: job $JOB_ID, not $((next + 1)) (another test's job came between)" >&2
    scancel "$JOB_ID"
  done
  [ "$JOB_ID" -eq $((next + 1)) ]
  wait_job "$JOB_ID" 120
  local t
  for t in 0 1 2; do
    cat "$(job_log "$JOB_ID" "$exp" "$t")"
    ! grep -q "tmp=$login_tmp" "$(job_log "$JOB_ID" "$exp" "$t")" || false
    [ "$(ls "$SCRATCH/proj/$exp/results/task_$t")" = "task$t" ]
  done
  [ -z "$(ls -A "$login_tmp")" ]
}

@test "results come back whole: a link into \$SLURM_TMPDIR as its content, a sparse 2 GB file sparse, no open modes" {
  commands 'mkdir -p "$SLURM_TMPDIR/work" && echo best >"$SLURM_TMPDIR/work/best.ckpt" && ln -s "$SLURM_TMPDIR/work/best.ckpt" "$HPC_RESULTS_DIR/best.ckpt" && truncate -s 2G "$HPC_RESULTS_DIR/sparse.bin" && mkdir "$HPC_RESULTS_DIR/open" && chmod 777 "$HPC_RESULTS_DIR/open" && echo o >"$HPC_RESULTS_DIR/open/f"'
  submit --exp-name whole --time 5
  wait_job "$JOB_ID" 120
  cat "$(job_log "$JOB_ID" whole)"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  local dest=$SCRATCH/proj/whole/results
  [ -f "$dest/best.ckpt" ]
  [ ! -L "$dest/best.ckpt" ]
  [ "$(cat "$dest/best.ckpt")" = best ]
  [ "$(stat -c %s "$dest/sparse.bin")" -eq $((2 * 1024 * 1024 * 1024)) ]
  [ "$(du -k "$dest/sparse.bin" | cut -f1)" -lt 1024 ]
  (($(stat -c '0%a' "$dest/open") & 8#022)) && false
  [ -z "$(find "$dest" ! -user "$HPC_TEST_USER")" ]
}

@test "scancel during the copy-back: the copy starts at SIGTERM, stops before Slurm's kill, and the log lists what did not come back" {
  commands 'for i in 1 2 3 4; do head -c 3000000 /dev/urandom >"$HPC_RESULTS_DIR/f$i"; done; touch "$SCRATCH/ready"; sleep 300'
  SUBMIT_ENV=(HPC_RESULTS_BWLIMIT=2000)
  submit --exp-name cut --time 5
  local i
  for ((i = 0; i < 600; i++)); do [ -e "$SCRATCH/ready" ] && break; sleep 0.1; done
  [ -e "$SCRATCH/ready" ]
  scancel "$JOB_ID"
  wait_job "$JOB_ID" 120
  local log dest=$SCRATCH/proj/cut/results whole=0 f
  log=$(job_log "$JOB_ID" cut)
  cat "$log"
  [[ $(job_state "$JOB_ID") == CANCELLED* ]]
  grep -q "results: copying to $dest now, within the 5 s Slurm gives before its kill" "$log"
  # (the copy started at SIGTERM may use the whole budget: the last one then has none left)
  grep -Eq "results: NOT all copied back to $dest: [1-4] file\(s\) did not come back: (the copy ran out of the time left|no time was left) before Slurm's kill" "$log"
  for f in f1 f2 f3 f4; do
    if [ "$(stat -c %s "$dest/$f" 2>/dev/null)" = 3000000 ]; then
      whole=$((whole + 1))
    else
      grep -qx "\[hpc .*\] results: not copied: $f" "$log"
      grep -qx "$f" "$dest/.hpc_not_copied"
    fi
  done
  ((whole < 4))
}

# hpc_status_as_user: `hpc status` in the project, as the test user.
hpc_status_as_user() {
  cd "$PROJECT" && as_user env HOME="$HOME" SCRATCH="$SCRATCH" PYTHONPATH="$PROJECT/python" \
    "$TEST_VENV/bin/python3" -m hpc_toolkit status
}

@test "results that cannot come back at a requeue are kept, the log and hpc status say where, and the job ends FAILED 74, not COMPLETED (issue 32)" {
  # Attempt 1 writes big.bin (300 KB), saves a checkpoint on the warning and exits; attempt 2
  # writes a little and succeeds. big.bin cannot come back: a folder of root's is in its
  # place in the results folder. (The issue's 64 KiB tmpfs on EXP/results is in the unit
  # tests, staging_job.bats: a mount made here after the nodes' slurmd started in mount
  # namespaces of their own would not reach the job.)
  local exp=$SCRATCH/proj/full
  mkdir -p "$exp/results/big.bin/root"
  chown "$HPC_TEST_USER" "$exp" "$exp/results" "$SCRATCH/proj"
  commands 'if [ "$HPC_RESUMING" = 1 ]; then echo two >"$HPC_RESULTS_DIR/two.txt"; exit 0; fi; head -c 300000 /dev/urandom >"$HPC_RESULTS_DIR/big.bin"; chmod 600 "$HPC_RESULTS_DIR/big.bin"; trap "echo ck >\"\$HPC_CHECKPOINT_DIR/ck\"; exit 0" USR1; touch "$SCRATCH/ready"; while :; do sleep 1; done'
  submit --exp-name full --time 10
  wait_file "$SCRATCH/ready" 120
  scancel --batch --signal=USR1 "$JOB_ID"
  wait_job "$JOB_ID" 240
  local log kept=$exp/.hpc_results_kept
  log=$(job_log "$JOB_ID" full)
  cat "$log"
  [ "$(attempts "$JOB_ID")" = $'REQUEUED|0:0\nFAILED|74:0' ]
  grep -q "results: attempt 1's results are kept in $kept/attempt_1: the next attempt copies them to $exp/results" "$log"
  grep -q "results of attempt(s) 1 did not come back to $exp/results: they are in $kept" "$log"
  [ "$(stat -c '%s %a %U' "$kept/attempt_1/big.bin")" = "300000 600 $HPC_TEST_USER" ]
  [ "$(cat "$exp/results/two.txt")" = two ]
  run as_other cat "$kept/attempt_1/big.bin"
  [ "$status" -ne 0 ]
  run hpc_status_as_user
  echo "$output"
  [[ $output == *"results NOT copied back: attempt_1 kept in $kept"* ]]
}

@test "--venv-to-local where another user made the user's venv folder first, or owns a folder above it: the job runs its venv from a private folder, says so, and leaves theirs alone (issue 32)" {
  mkdir -p "$AREA/sticky" "$AREA/lab"
  chmod 1777 "$AREA/sticky" "$AREA/lab"
  as_other mkdir -m 777 "$AREA/sticky/$HPC_TEST_USER" # the victim's name, taken first
  as_other mkdir -m 755 "$AREA/lab/$HPC_TEST_USER"     # /local/scratch/<user> made by another user
  as_other mkdir -m 777 "$AREA/lab/$HPC_TEST_USER/hpc_venvs"
  local taken lab
  taken=$(venv_profile taken "$AREA/sticky/%u")
  lab=$(venv_profile lab "$AREA/lab/%u/hpc_venvs")
  commands 'python -c "import os, sys; print(\"PREFIX\", os.environ[\"SLURMD_NODENAME\"], sys.prefix)"'
  submit --cluster "$taken" --venv-to-local --exp-name taken --time 5
  local job1=$JOB_ID
  submit --cluster "$lab" --venv-to-local --exp-name lab --time 5 -N 2 -d script
  local job2=$JOB_ID log prefix
  wait_job "$job1" 180
  wait_job "$job2" 180
  local pair id exp bad
  for pair in "$job1 taken $AREA/sticky/$HPC_TEST_USER" "$job2 lab $AREA/lab/$HPC_TEST_USER"; do
    read -r id exp bad <<<"$pair"
    log=$(job_log "$id" "$exp")
    cat "$log"
    [ "$(job_state "$id")" = COMPLETED ]
    grep -q "WARNING: venv: .* is not safe for the node-local venv: $bad" "$log"
    grep -q "venv: the node-local copy goes to .*/hpc_venv_${HPC_TEST_USER}_${id}\.[0-9a-f]* instead" "$log"
    prefix=$(sed -n 's/^PREFIX node[0-9] //p' "$log" | sort -u)
    [[ $prefix == */hpc_venv_${HPC_TEST_USER}_${id}.*/venv-* ]]
  done
  [ "$(grep -c '^PREFIX ' "$log")" -eq 2 ] # both nodes of the 2-node job
  # Theirs untouched.
  [ -z "$(ls -A "$AREA/sticky/$HPC_TEST_USER")" ] && [ -z "$(ls -A "$AREA/lab/$HPC_TEST_USER/hpc_venvs")" ]
}

# venv_profile NAME TEMPLATE: the local profile with HPC_VENV_LOCAL_DIR=TEMPLATE; prints its path.
venv_profile() {
  local conf=$AREA/$1.conf
  printf 'source %q\nHPC_VENV_LOCAL_DIR=%q\n' "$REPO_ROOT/hpc_files/clusters/local.conf" "$2" >"$conf"
  chmod 644 "$conf"
  printf '%s\n' "$conf"
}

@test "a daemon the command starts with setsid ends with the job, and the log says so (issue 32)" {
  local mark=hpc_daemon_$RANDOM$RANDOM
  commands "setsid bash -c 'exec -a $mark sleep 600' </dev/null >/dev/null 2>&1 & sleep 1; echo started"
  submit --exp-name daemon --time 5
  wait_job "$JOB_ID" 120
  local log left=()
  log=$(job_log "$JOB_ID" daemon)
  cat "$log"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -q "processes the program started outside its process group still ran when it ended: [0-9]* ($mark): ended now" "$log"
  mapfile -t left < <(pgrep -u "$HPC_TEST_USER" -f "^$mark")
  ((${#left[@]} == 0)) || { kill "${left[@]}"; echo "the daemon outlived the job"; return 1; }
}

@test "a project folder in a shared scratch that another user made or can write: nothing is submitted or written, exit 2, and the message says which folder and what to do (second review)" {
  # A lab's shared sticky scratch; the other user made the project's folder there first
  # (mode 777), so they could swap the submission's home and its commands for their own.
  local shared=$AREA/shared
  mkdir -p "$shared" && chmod 1777 "$shared"
  echo 'echo ran-here' >"$PROJECT/experiment_configurations.txt"
  as_other mkdir -m 777 "$shared/proj"
  SCRATCH=$shared run --separate-stderr submitter -e mine --time 2
  [ "$status" -eq 2 ]
  [[ $stderr == *"not submitted: the submission's files would go in $shared/proj/hpc_outputs/jobs, but $shared/proj belongs to $HPC_OTHER_USER, not to you or root"* ]]
  [[ $stderr == *"set SCRATCH to a folder of your own"* ]]
  [ -z "$(ls -A "$shared/proj")" ]
  [ -z "$(squeue -h -u "$HPC_TEST_USER" -n mine -o %i)" ]
  # The test user's own folder there, but open to everyone (not sticky): refused too.
  rmdir "$shared/proj"
  as_user mkdir -m 777 "$shared/proj"
  SCRATCH=$shared run --separate-stderr submitter -e mine --time 2
  [ "$status" -eq 2 ]
  [[ $stderr == *"$shared/proj can be written by other users (mode 0777, not sticky)"* ]]
  [ -z "$(ls -A "$shared/proj")" ]
  # Made private, it submits.
  as_user chmod 755 "$shared/proj"
  SCRATCH=$shared submit -e mine --time 2
  wait_job "$JOB_ID"
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  grep -qx ran-here "$shared/proj/hpc_outputs/mine-$JOB_ID.out"
}
