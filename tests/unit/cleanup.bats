#!/usr/bin/env bats
# The local-scratch cleanup (plai_cleanups/) with recording stand-ins for sbatch, sinfo,
# squeue and scancel: option parsing and validation, the exact jobs submitted, the
# periodic schedule; and the per-node worker on real folders (it needs no Slurm but
# squeue). tests/integration/cleanup.bats runs it all on the real local cluster.

load ../helpers/common
load ../helpers/users

setup() {
  hermetic_env
  use_sbatch_stub
  export PATH=$REPO_ROOT/tests/helpers/stubs/cleanup:$PATH
  export CLEANUP_STUB_LOG=$BATS_TEST_TMPDIR/stubs.log
  : >"$CLEANUP_STUB_LOG"
  # The local-lab profile's scratch path follows this variable.
  export HPC_LOCAL_CLUSTER_DIR=/lab/cluster
  LAB_TEMPLATE=/lab/cluster/localscratch_lab/%n
  LAB_VENVS=/lab/cluster/localvenvs/%u
  LOG=$SCRATCH/hpc_outputs/cleanup/notmpdir.log
}

teardown() {
  if [[ -n ${MOUNTED:-} ]] && mountpoint -q "$MOUNTED"; then
    umount "$MOUNTED"
  fi
}

cleanup() {
  bash "$REPO_ROOT/plai_cleanups/submit_cleanup.sh" "$@"
}

# sbatch_call N: the words of the Nth sbatch call, one per line.
sbatch_call() {
  awk -v n="$1" 'BEGIN { c = 1 } $0 == "--" { c++; next } c == n' "$SBATCH_STUB_LOG"
}

# called N WORD: the Nth sbatch call had exactly this word.
called() {
  sbatch_call "$1" | grep -qxF -- "$2"
}

# not CMD...: succeeds when CMD fails (a bare `! cmd` does not fail a bats test).
not() {
  if "$@"; then
    return 1
  fi
}

# cancelled_nothing: scancel was not called.
cancelled_nothing() {
  not grep -q '^scancel' "$CLEANUP_STUB_LOG"
}

# the_wrap N: the command line given to --wrap in the Nth sbatch call.
the_wrap() {
  sbatch_call "$1" | sed -n 's/^--wrap=//p'
}

# refused STATUS MESSAGE ARGS...: the cleanup exits STATUS, says MESSAGE on stderr, and
# submits, cancels and writes nothing.
refused() {
  local want=$1 message=$2 before
  shift 2
  : >"$SBATCH_STUB_LOG"
  : >"$CLEANUP_STUB_LOG"
  before=$(find "$SCRATCH")
  run --separate-stderr cleanup "$@"
  [ "$status" -eq "$want" ] || { echo "exit $status: $stderr"; return 1; }
  [[ $stderr == *"$message"* ]] || { echo "stderr: $stderr"; return 1; }
  [ -z "$output" ]
  [ "$(sbatch_calls)" -eq 0 ]
  cancelled_nothing
  [ "$(find "$SCRATCH")" = "$before" ]
}

@test "--help prints the usage on stdout, submits nothing" {
  run --separate-stderr cleanup --help
  [ "$status" -eq 0 ]
  [[ ${lines[0]} == "Summary: remove your leftover per-job folders"* ]]
  [[ $output == *"--every INTERVAL"* && $output == *"--dry-run"* && $output == *"--replace"* ]]
  [ -z "$stderr" ]
  [ "$(sbatch_calls)" -eq 0 ]
}

@test "unknown options, stray words and missing values are usage errors (exit 2)" {
  refused 2 "unknown option: --nodes" --cluster local-lab --nodes 2
  refused 2 "unexpected argument: node1" --cluster local-lab node1
  refused 2 "unexpected argument: " --cluster local-lab ""
  refused 2 "option --partition needs a value" --cluster local-lab --partition
  refused 2 "option --every needs a value" --cluster local-lab --every --dry-run
  refused 2 "option --dry-run takes no value" --cluster local-lab --dry-run=yes
}

@test "--every takes Nd, Nh or Nm from 10 minutes to 366 days, and nothing else" {
  local bad
  refused 2 "option --every was given an empty value" --cluster local-lab --every=
  for bad in 1x 1 d 1.5h -1d 0d 5m 9m 367d 1d2h ' 1d' 1D; do
    refused 2 "--every '$bad'" --cluster local-lab "--every=$bad"
  done
  refused 2 "at least 10m" --cluster local-lab --every 5m
}

@test "--every with --dry-run, and --replace without --every, are refused" {
  refused 2 "--dry-run cannot be periodic" --cluster local-lab --every 1d --dry-run
  refused 2 "--replace only goes with --every" --cluster local-lab --replace
}

@test "partition and account names that could smuggle options or paths are refused" {
  refused 2 "--partition 'a;b' is not a partition name" --cluster local-lab -p 'a;b'
  refused 2 "give one partition" --cluster local-lab -p 'tmpdir,notmpdir'
  refused 2 "--account '../x' is not an account name" --cluster local-lab -A ../x
}

@test "an unknown profile names the ones there are" {
  refused 2 "cluster profile 'nope' not found" --cluster nope
  run --separate-stderr cleanup --cluster nope
  [[ $stderr == *"Available:"*"local-lab"* ]]
}

@test "a profile's HPC_LOCAL_SCRATCH must be an absolute path using only %n and %u" {
  local conf=$BATS_TEST_TMPDIR/bad.conf value
  for value in 'scratch/%u' '/local/%j' '/local/../etc' '/local/./x' '/' '//'; do
    printf 'HPC_LOCAL_SCRATCH=%q\n' "$value" >"$conf"
    refused 2 "HPC_LOCAL_SCRATCH" --cluster "$conf"
  done
  printf 'HPC_LOCAL_SCRATCH=%q\n' '/local/%j' >"$conf"
  refused 2 "uses a % other than %n (node name) and %u (user)" --cluster "$conf"
}

@test "the log needs SCRATCH or --log-dir, and a folder Slurm can name" {
  run --separate-stderr env -u SCRATCH bash "$REPO_ROOT/plai_cleanups/submit_cleanup.sh" --cluster local-lab
  [ "$status" -eq 2 ]
  [[ $stderr == *"SCRATCH is not set"*"or give --log-dir DIR"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
  refused 2 "holds a % or" --cluster local-lab --log-dir "$BATS_TEST_TMPDIR/100%"
}

@test "without Slurm on PATH it says where to run it" {
  no_sbatch_on_path
  run --separate-stderr cleanup --cluster local-lab
  [ "$status" -eq 1 ]
  [[ $stderr == *"not found on PATH: run this on a Slurm login node"* ]]
}

@test "one job per node that sinfo lists, pinned there, running the worker with the profile's path" {
  SINFO_STUB_NODES=$'node1 idle\nnode2 mix\nnode3 alloc\nnode4 idle\n' run --separate-stderr cleanup --cluster local-lab
  [ "$status" -eq 0 ]
  grep -qxF 'sinfo -N -h -p notmpdir -o %N %t' "$CLEANUP_STUB_LOG"
  [ "$(sbatch_calls)" -eq 4 ]
  local n
  for n in 1 2 3 4; do
    called "$n" --parsable
    called "$n" "--job-name=hpc_cleanup.notmpdir.node$n"
    called "$n" --partition=notmpdir
    called "$n" "--nodelist=node$n"
    called "$n" --nodes=1
    called "$n" --cpus-per-task=1
    called "$n" "--output=$LOG"
    called "$n" "--error=$LOG"
    called "$n" --open-mode=append
    [ "$(sbatch_call "$n" | tail -4)" = "$REPO_ROOT/plai_cleanups/cleanup_node.sh"$'\n--venvs\n'"$LAB_VENVS"$'\n'"$LAB_TEMPLATE" ]
    not called "$n" --dry-run
    [[ ${lines[n]} == "  node$n"*"job $((4241 + n))" ]]
  done
  [ -d "$SCRATCH/hpc_outputs/cleanup" ]
  [[ $output == *"log:           $LOG"* ]]
  [[ $output != *"next run"* ]]
}

@test "--dry-run: the same jobs, each told to remove nothing" {
  run --separate-stderr cleanup --cluster local-lab --dry-run
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 2 ]
  [ "$(sbatch_call 1 | tail -4)" = $'--dry-run\n--venvs\n'"$LAB_VENVS"$'\n'"$LAB_TEMPLATE" ]
  [ "$(sbatch_call 2 | tail -4)" = $'--dry-run\n--venvs\n'"$LAB_VENVS"$'\n'"$LAB_TEMPLATE" ]
  [[ ${lines[0]} == "Dry-run cleanup (nothing is removed) of "* ]]
}

@test "the profile comes from HPC_CLUSTER too, and --partition and --account win over it" {
  export HPC_CLUSTER=local-lab
  cd "$BATS_TEST_TMPDIR"
  run --separate-stderr cleanup -p tmpdir -A def-lab --log-dir logs
  [ "$status" -eq 0 ]
  called 1 --partition=tmpdir
  called 1 --account=def-lab
  called 1 "--output=$PWD/logs/tmpdir.log"
  [ "$(sbatch_call 1 | tail -1)" = "$LAB_TEMPLATE" ]
}

@test "without a partition in the profile, the cluster's default partition is cleaned" {
  run --separate-stderr cleanup --cluster generic
  [ "$status" -eq 0 ]
  called 1 --partition=tmpdir
  [ "$(sbatch_call 1 | tail -1)" = /tmp ]
  SINFO_STUB_PARTITIONS=$'a\nb\n' refused 1 "no default partition: give --partition" --cluster generic
}

@test "nodes that are down, drained or not responding are skipped with a warning" {
  SINFO_STUB_NODES=$'node1 down*\nnode2 idle\nnode3 drain\nnode4 idle*\nnode2 idle\n' run --separate-stderr cleanup --cluster local-lab
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 1 ]
  called 1 --nodelist=node2
  [[ $stderr == *"skipping node1: its state is 'down*'"* ]]
  [[ $stderr == *"skipping node3"* && $stderr == *"skipping node4"* ]]
  SINFO_STUB_NODES=$'node1 down\n' refused 1 "no node of partition 'notmpdir' takes jobs now" --cluster local-lab
}

@test "an unknown partition, or sinfo failing, submits nothing" {
  SINFO_STUB_NODES="" refused 1 "partition 'nosuch' not found" --cluster local-lab -p nosuch
  SINFO_STUB_FAIL="cannot reach slurmctld" refused 1 "sinfo failed" --cluster local-lab
}

@test "a node whose cleanup is still queued is not given a second one" {
  SQUEUE_STUB_JOBS="77 hpc_cleanup.notmpdir.node2" run --separate-stderr cleanup --cluster local-lab
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 1 ]
  called 1 --nodelist=node1
  [[ $output == *"node2"*"job 77 already queued there: not submitted again"* ]]
}

@test "sbatch refusing the job: clear error, non-zero exit" {
  SBATCH_STUB_FAIL="Invalid account" run --separate-stderr cleanup --cluster local-lab
  [ "$status" -eq 1 ]
  [[ $stderr == *"Invalid account"* ]]
  [[ $stderr == *"the cleanup of node1 was not submitted"* ]]
}

@test "--every 1d: first the job that runs it again not before a day from now, then this round" {
  run --separate-stderr cleanup --cluster local-lab --every 1d
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 3 ]
  called 1 --job-name=hpc_cleanup_every.notmpdir
  called 1 --begin=now+86400
  called 1 --partition=notmpdir
  called 1 "--output=$LOG"
  [[ $(sbatch_call 1) != *--nodelist* ]]
  called 2 --nodelist=node1
  called 3 --nodelist=node2
  grep -qxF 'squeue -h -u root -n hpc_cleanup_every.notmpdir -o %A' "$CLEANUP_STUB_LOG"
  [[ $output == *"next run:      job 4242, not before "*"(every 1d)"* ]]
  [[ $output == *"stop it:       scancel --user=root --name=hpc_cleanup_every.notmpdir"* ]]
  local -a words
  eval "words=($(the_wrap 1))"
  [ "${words[*]}" = "bash $REPO_ROOT/plai_cleanups/submit_cleanup.sh --cluster $REPO_ROOT/hpc_files/clusters/local-lab.conf --partition notmpdir --every 1d --log-dir $SCRATCH/hpc_outputs/cleanup" ]
}

@test "a second --every is refused while one is scheduled; nothing submitted" {
  local queue="4300 hpc_cleanup_every.notmpdir"
  SQUEUE_STUB_JOBS=$queue refused 1 "already scheduled (job 4300): nothing submitted" --cluster local-lab --every 12h
  SQUEUE_STUB_JOBS=$queue run --separate-stderr cleanup --cluster local-lab --every 12h
  [[ $stderr == *"Add --replace to replace it, or stop it with: scancel 4300"* ]]
}

@test "--every --replace cancels the schedule there and makes the new one" {
  SQUEUE_STUB_JOBS="4300 hpc_cleanup_every.notmpdir" run --separate-stderr cleanup --cluster local-lab --every 30m --replace
  [ "$status" -eq 0 ]
  grep -qxF 'scancel 4300' "$CLEANUP_STUB_LOG"
  [[ $stderr == *"cancelled the earlier periodic cleanup (job 4300)"* ]]
  called 1 --begin=now+1800
}

@test "a schedule of another partition is no duplicate" {
  SQUEUE_STUB_JOBS="4300 hpc_cleanup_every.tmpdir" run --separate-stderr cleanup --cluster local-lab --every 1h
  [ "$status" -eq 0 ]
  called 1 --begin=now+3600
  cancelled_nothing
}

@test "the scheduled run, under hostile paths, runs this round and schedules exactly the next" {
  local logs=$BATS_TEST_TMPDIR/"logs a'b\"c \$HOME"
  run --separate-stderr cleanup --cluster local-lab --every 2h --log-dir "$logs"
  [ "$status" -eq 0 ]
  local wrap
  wrap=$(the_wrap 1)
  : >"$SBATCH_STUB_LOG"
  # Run it as Slurm would: sh, inside the scheduled job, which is itself in the queue.
  SLURM_JOB_ID=4242 SLURM_JOB_NAME=hpc_cleanup_every.notmpdir \
    SQUEUE_STUB_JOBS="4242 hpc_cleanup_every.notmpdir" run --separate-stderr sh -c "$wrap"
  [ "$status" -eq 0 ]
  [[ ${lines[0]} == "== "*" scheduled run (job 4242)" ]]
  [ "$(sbatch_calls)" -eq 3 ]
  called 1 --begin=now+7200
  [ "$(the_wrap 1)" = "$wrap" ]
  called 2 "--output=$logs/notmpdir.log"
  called 3 "--error=$logs/notmpdir.log"
  cancelled_nothing
}

@test "two schedules made at the same moment: the later one withdraws itself" {
  # check_schedule sees none; after sbatch, squeue shows an older one too.
  local fake=$BATS_TEST_TMPDIR/fakebin
  mkdir -p "$fake"
  cat >"$fake/squeue" <<'EOF'
#!/usr/bin/env bash
printf 'squeue %s\n' "$*" >>"$CLEANUP_STUB_LOG"
if [[ $* == *hpc_cleanup_every* ]] && grep -q begin "$SBATCH_STUB_LOG"; then
  printf '4100\n4242\n'
fi
EOF
  chmod +x "$fake/squeue"
  PATH=$fake:$PATH run --separate-stderr cleanup --cluster local-lab --every 1d
  [ "$status" -eq 1 ]
  grep -qxF 'scancel 4242' "$CLEANUP_STUB_LOG"
  [[ $stderr == *"scheduled at the same moment; job 4242 withdrawn"* ]]
  [ "$(sbatch_calls)" -eq 1 ]
}

@test "squeue failing before a schedule: nothing submitted" {
  SQUEUE_STUB_FAIL="timeout" refused 1 "squeue failed: nothing submitted" --cluster local-lab --every 1d
}

@test "HPC_CLEANUP_TIME and HPC_CLEANUP_MEM set each job's limits, and are checked" {
  HPC_CLEANUP_TIME=5 HPC_CLEANUP_MEM=1g run --separate-stderr cleanup --cluster local-lab
  [ "$status" -eq 0 ]
  called 1 --time=5
  called 1 --mem=1G
  HPC_CLEANUP_TIME=soon refused 2 "HPC_CLEANUP_TIME 'soon'" --cluster local-lab
  HPC_CLEANUP_MEM=lots refused 2 "HPC_CLEANUP_MEM 'lots'" --cluster local-lab
}

# --- the worker (cleanup_node.sh) on real folders ----------------------------------------

# lab_setup: node1's scratch folder (sticky, world-writable like the real ones).
lab_setup() {
  LAB=$BATS_TEST_TMPDIR/lab
  mkdir -p "$LAB"
  mkdir -m 1777 "$LAB/node1"
  OUTSIDE=$BATS_TEST_TMPDIR/outside
  mkdir -p "$OUTSIDE/dir"
  echo precious >"$OUTSIDE/dir/file"
  echo precious >"$OUTSIDE/file"
}

# worker ARGS...: the worker as the cleanup job 500 on node1 would run it; the queue is
# $QUEUE ("ID NAME" lines; default: only this job).
worker() {
  SLURMD_NODENAME=node1 SLURM_JOB_ID=500 SQUEUE_STUB_JOBS=${QUEUE-500 hpc_cleanup.notmpdir.node1} \
    bash "$REPO_ROOT/plai_cleanups/cleanup_node.sh" "$@"
}

# leftover NAME KB: a folder of this user with a file of KB kibibytes inside.
leftover() {
  mkdir -p "$LAB/node1/$1/sub"
  head -c "$(($2 * 1024))" /dev/zero >"$LAB/node1/$1/sub/data"
}

@test "worker: leftovers go, folders of queued jobs stay, the report counts folders and bytes" {
  lab_setup
  leftover hpc_job_11 8
  leftover hpc_job_12 16
  leftover hpc_job_13 4
  local bytes
  bytes=$(($(du -sxB1 "$LAB/node1/hpc_job_11" | cut -f1) + $(du -sxB1 "$LAB/node1/hpc_job_12" | cut -f1)))
  QUEUE=$'500 x\n13 train' run --separate-stderr worker "$LAB/%n"
  [ "$status" -eq 0 ]
  [ ! -e "$LAB/node1/hpc_job_11" ]
  [ ! -e "$LAB/node1/hpc_job_12" ]
  [ -f "$LAB/node1/hpc_job_13/sub/data" ]
  [[ ${lines[0]} == "== "*" node1 (job 500, user root): $LAB/node1" ]]
  [[ $output == *"  removed $LAB/node1/hpc_job_11 ("*" bytes)"* ]]
  [[ $output == *"  kept $LAB/node1/hpc_job_13: job 13 is still in the queue"* ]]
  [ "${lines[-1]}" = "node1: removed 2 leftover folders, $bytes bytes freed" ]
  grep -qxF 'squeue -h -u root -o %A' "$CLEANUP_STUB_LOG"
}

@test "worker: --dry-run lists what would go and removes nothing" {
  lab_setup
  leftover hpc_job_11 8
  local before
  before=$(find "$LAB" "$OUTSIDE" -printf '%p %s %U\n' | sort)
  run --separate-stderr worker --dry-run "$LAB/%n"
  [ "$status" -eq 0 ]
  [[ $output == *"  would remove $LAB/node1/hpc_job_11 ("*" bytes)"* ]]
  [[ ${lines[-1]} == "node1: dry run: would remove 1 leftover folder, "*" bytes; nothing removed" ]]
  [ "$(find "$LAB" "$OUTSIDE" -printf '%p %s %U\n' | sort)" = "$before" ]
}

@test "worker: links are removed as links, their targets stay" {
  lab_setup
  ln -s "$OUTSIDE/dir" "$LAB/node1/hpc_job_21"
  leftover hpc_job_22 1
  ln -s "$OUTSIDE/dir" "$LAB/node1/hpc_job_22/to_dir"
  ln -s "$OUTSIDE/file" "$LAB/node1/hpc_job_22/sub/to_file"
  run --separate-stderr worker "$LAB/%n"
  [ "$status" -eq 0 ]
  [ ! -L "$LAB/node1/hpc_job_21" ]
  [ ! -e "$LAB/node1/hpc_job_22" ]
  [ "$(cat "$OUTSIDE/dir/file")" = precious ]
  [ "$(cat "$OUTSIDE/file")" = precious ]
  [[ $output == *"removed $LAB/node1/hpc_job_21 (0 bytes)"* ]]
}

@test "worker: other users' folders, folders holding their files, and other names stay" {
  lab_setup
  leftover hpc_job_31 1
  chown -R nobody "$LAB/node1/hpc_job_31"
  leftover hpc_job_32 1
  echo theirs >"$LAB/node1/hpc_job_32/sub/theirs"
  chown nobody "$LAB/node1/hpc_job_32/sub/theirs"
  local name
  for name in hpc_job_ hpc_job_007 hpc_job_12x hpc_job_12.bak job_33 hpc_job_12345678901 keep; do
    leftover "$name" 1
  done
  echo file >"$LAB/node1/hpc_job_34"
  leftover hpc_job_35 1
  local before
  before=$(find "$LAB" -path "$LAB/node1/hpc_job_35" -prune -o -printf '%p %s %U\n' | sort)
  run --separate-stderr worker "$LAB/%n"
  [ "$status" -eq 0 ]
  [ ! -e "$LAB/node1/hpc_job_35" ]
  [ "$(find "$LAB" -printf '%p %s %U\n' | sort)" = "$before" ]
  # Root could remove them: only the owner check keeps them.
  [ "$(stat -c %U "$LAB/node1/hpc_job_31")" = nobody ]
  [[ $output != *hpc_job_31* ]]
  [[ $output == *"kept $LAB/node1/hpc_job_32: it holds files of other users"* ]]
  [[ $output == *"kept $LAB/node1/hpc_job_34: not a folder (regular file)"* ]]
  [[ ${lines[-1]} == "node1: removed 1 leftover folder, "*"; other users' entries left alone: 1" ]]
}

@test "worker: never crosses into another filesystem" {
  lab_setup
  leftover hpc_job_41 1
  mkdir -p "$LAB/node1/hpc_job_42"
  MOUNTED=$LAB/node1/hpc_job_42
  mount -t tmpfs -o size=1m hpc_cleanup_test "$MOUNTED"
  echo other-fs >"$MOUNTED/file"
  run --separate-stderr worker "$LAB/%n"
  [ "$status" -eq 0 ]
  [ ! -e "$LAB/node1/hpc_job_41" ]
  [ "$(cat "$MOUNTED/file")" = other-fs ]
  [[ $output == *"kept $MOUNTED: it is on another filesystem than $LAB/node1"* ]]
  umount "$MOUNTED"
  leftover hpc_job_43 1
  MOUNTED=$LAB/node1/hpc_job_43/mnt
  mkdir "$MOUNTED"
  mount -t tmpfs -o size=1m hpc_cleanup_test "$MOUNTED"
  echo other-fs >"$MOUNTED/file"
  run --separate-stderr worker "$LAB/%n"
  [ "$status" -eq 1 ]
  [ "$(cat "$MOUNTED/file")" = other-fs ]
  [[ $output == *"failed $LAB/node1/hpc_job_43:"* ]]
  [[ ${lines[-1]} == *"FAILED to remove 1 folder (see above)" ]]
}

@test "worker: a queue it cannot trust removes nothing" {
  lab_setup
  leftover hpc_job_51 1
  SQUEUE_STUB_FAIL="timeout" run --separate-stderr worker "$LAB/%n"
  [ "$status" -eq 1 ]
  [[ $stderr == *"squeue failed: nothing removed"* ]]
  QUEUE="7 other" run --separate-stderr worker "$LAB/%n"
  [ "$status" -eq 1 ]
  [[ $stderr == *"did not list this cleanup job (500) itself"* ]]
  [ -d "$LAB/node1/hpc_job_51" ]
}

@test "worker: %u is the user, a missing scratch folder is nothing to do, bad paths are refused" {
  lab_setup
  mkdir -p "$LAB/root/node1"
  leftover hpc_job_61 1
  mv "$LAB/node1/hpc_job_61" "$LAB/root/node1/"
  run --separate-stderr worker "$LAB/%u/%n"
  [ "$status" -eq 0 ]
  [ ! -e "$LAB/root/node1/hpc_job_61" ]
  run --separate-stderr worker "$LAB/none/%n"
  [ "$status" -eq 0 ]
  [[ $output == *"no local scratch folder $LAB/none/node1 on this node: nothing to do"* ]]
  run --separate-stderr worker "relative/%n"
  [ "$status" -eq 1 ]
  run --separate-stderr worker "$LAB/../%n"
  [ "$status" -eq 1 ]
  [[ $stderr == *"holds a . or .. part"* ]]
  SLURMD_NODENAME="" run --separate-stderr bash "$REPO_ROOT/plai_cleanups/cleanup_node.sh" "$LAB/%n"
  [ "$status" -eq 1 ]
  [[ $stderr == *"this runs as a Slurm job"* ]]
}

# venv_copy NAME JOB...: a node-local venv copy (--venv-to-local) as a job leaves it: the
# folder, its lock file and one marker per job that used it.
venv_copy() {
  local name=$1
  shift
  mkdir -p "$LAB/venvs/$name/bin" "$LAB/venvs/$name.jobs"
  echo x >"$LAB/venvs/$name/bin/python"
  : >"$LAB/venvs/$name.lock"
  local job
  for job; do : >"$LAB/venvs/$name.jobs/$job"; done
}

@test "worker --venvs: venv copies no queued job used go (with their job lists), the others and the lock files stay" {
  lab_setup
  mkdir -m 700 "$LAB/venvs"
  local old=venv-0123456789abcdef-0000000000000001 used=venv-0123456789abcdef-0000000000000002
  venv_copy "$old" 31 32
  venv_copy "$used" 33 34
  mkdir -p "$LAB/venvs/$old.tmp.999/bin" # an unpack cut short
  mkdir -p "$LAB/venvs/not-a-copy"
  QUEUE=$'500 x\n34 train' run --separate-stderr worker --venvs "$LAB/venvs" "$LAB/%n"
  [ "$status" -eq 0 ]
  [ ! -e "$LAB/venvs/$old" ]
  [ ! -e "$LAB/venvs/$old.jobs" ]
  [ ! -e "$LAB/venvs/$old.tmp.999" ]
  [ -f "$LAB/venvs/$old.lock" ]
  [ -f "$LAB/venvs/$used/bin/python" ]
  [ -f "$LAB/venvs/$used.jobs/34" ]
  [ -d "$LAB/venvs/not-a-copy" ]
  [[ $output == *"  removed $LAB/venvs/$old ("*" bytes)"* ]]
  [[ $output == *"  kept $LAB/venvs/$used: job 34, which uses it, is still in the queue"* ]]
}

@test "worker --venvs: a copy whose lock a job holds (unpacking it now) stays; --dry-run removes nothing" {
  lab_setup
  mkdir -m 700 "$LAB/venvs"
  local name=venv-0123456789abcdef-0000000000000003
  venv_copy "$name" 41
  run --separate-stderr worker --dry-run --venvs "$LAB/venvs" "$LAB/%n"
  [ "$status" -eq 0 ]
  [[ $output == *"  would remove $LAB/venvs/$name ("* ]]
  [ -f "$LAB/venvs/$name/bin/python" ]
  flock "$LAB/venvs/$name.lock" sleep 5 &
  local holder=$!
  sleep 0.5
  run --separate-stderr worker --venvs "$LAB/venvs" "$LAB/%n"
  kill "$holder" 2>/dev/null || true
  wait "$holder" 2>/dev/null || true
  [ "$status" -eq 0 ]
  [[ $output == *"  kept $LAB/venvs/$name: a job is unpacking or checking it now"* ]]
  [ -f "$LAB/venvs/$name/bin/python" ]
}

@test "worker --venvs: another user's venv folder is not looked into; a missing one is nothing to do" {
  lab_setup
  ensure_test_users
  mkdir -m 700 "$LAB/venvs"
  local name=venv-0123456789abcdef-0000000000000004
  venv_copy "$name" 51
  chown -R "$HPC_TEST_USER" "$LAB/venvs"
  run --separate-stderr worker --venvs "$LAB/venvs" "$LAB/%n"
  [ "$status" -eq 0 ]
  [ -f "$LAB/venvs/$name/bin/python" ]
  # Said, not skipped silently (issue 32).
  [[ $output == *"node-local venvs: $LAB/venvs is not your folder (it belongs to $HPC_TEST_USER): left alone"* ]]
  run --separate-stderr worker --venvs "$LAB/none" "$LAB/%n"
  [ "$status" -eq 0 ]
}

@test "worker: a job folder made under an unguessable name (hpc_job_<id>_<node>.XXXXXX, issue 23) is known as the toolkit's; its job still queued keeps it, other names stay" {
  lab_setup
  leftover hpc_job_21_node1.Ab3xYz 4
  leftover hpc_job_22_node1.Qw9rT1 4
  leftover hpc_job_23_node2.Zz1234 4 # another node's, on a shared disk
  leftover hpc_job_24_node1.toolong7 4
  leftover hpc_job_25_node1.x 4
  QUEUE=$'500 x\n22 train' run --separate-stderr worker "$LAB/%n"
  echo "$output"
  [ "$status" -eq 0 ]
  [ ! -e "$LAB/node1/hpc_job_21_node1.Ab3xYz" ]
  [[ $output == *"  removed $LAB/node1/hpc_job_21_node1.Ab3xYz ("*" bytes)"* ]]
  [[ $output == *"  kept $LAB/node1/hpc_job_22_node1.Qw9rT1: job 22 is still in the queue"* ]]
  [ -d "$LAB/node1/hpc_job_22_node1.Qw9rT1" ]
  [ -d "$LAB/node1/hpc_job_23_node2.Zz1234" ]
  [ -d "$LAB/node1/hpc_job_24_node1.toolong7" ]
  [ -d "$LAB/node1/hpc_job_25_node1.x" ]
  [[ ${lines[-1]} == "node1: removed 1 leftover folder, "*" bytes freed" ]]
}
