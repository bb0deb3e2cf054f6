#!/usr/bin/env bats
# Job side of staging, on one node without Slurm: the job's own $SLURM_TMPDIR, the results
# copied back (at the end, periodically, failures reported and failing the job), the
# free-space check of the extraction. Multi-node behaviour: tests/integration/staging.bats.
# shellcheck disable=SC2016 # the job code in single quotes is expanded by the job shell
# shellcheck disable=SC2030,SC2031 # each @test runs in a subshell of its own: its exports are its own

load ../helpers/common

setup() {
  hermetic_env
  job_side_env
  export SLURM_JOB_NUM_NODES=1 SLURM_JOB_USER=alice
  export HPC_PROVIDES_TMPDIR=no HPC_LOCAL_SCRATCH=$BATS_TEST_TMPDIR/local/%n/%u
  export HPC_LAUNCHER=none
  OWN=$BATS_TEST_TMPDIR/local/nodeA/alice/hpc_job_4242_nodeA
  mkdir -p "${OWN%/*}" # the profile's HPC_LOCAL_SCRATCH exists on the node
  DEST=$scratch_dir/e/results
}

# job BODY: a batch shell that sources the runtime, takes the first steps, then runs BODY.
job() {
  run_job_side 'hpc_job_begin; hpc_prepare_tmpdir; hpc_stage_data' "$1"
}

@test "without SLURM_TMPDIR the job makes hpc_job_<id> (mode 700), copies results back, removes it" {
  job 'stat -c "%a %U" "$SLURM_TMPDIR"; echo "$SLURM_TMPDIR"; echo r >"$HPC_RESULTS_DIR/r.txt"; exit 0'
  [ "$status" -eq 0 ]
  [[ $output == *"700 $(id -un)"* ]]
  [[ $output == *"$OWN"* ]]
  [ "$(cat "$DEST/r.txt")" = r ]
  [ ! -e "$OWN" ]
  [[ $output == *"local scratch: removed the job's folder on 1 node(s)"* ]]
}

@test "a copy-back failure is in the log and fails a job that succeeded (exit 74)" {
  mkdir -p "$scratch_dir/e"
  echo 'not a folder' >"$DEST"
  job 'echo r >"$HPC_RESULTS_DIR/r.txt"; exit 0'
  [ "$status" -eq 74 ]
  [[ $stderr == *"ERROR: results: copying $OWN/results to $DEST failed"* ]]
  [[ $stderr == *"the program succeeded, but its results did not all come back"* ]]
  [[ $stderr == *"results of attempt(s) 1 did not come back to $DEST: they are in $scratch_dir/e/.hpc_results_kept"* ]]
  [ "$(cat "$scratch_dir/e/.hpc_results_kept/attempt_1/r.txt")" = r ]
  [ ! -e "$OWN" ]
}

@test "a failing program keeps its own exit code, results still come back" {
  job 'echo partial >"$HPC_RESULTS_DIR/p.txt"; exit 3'
  [ "$status" -eq 3 ]
  [ "$(cat "$DEST/p.txt")" = partial ]
  [ ! -e "$OWN" ]
}

@test "an array task copies to its own subfolder" {
  # An array's batch script says HPC_TASK_SUBDIRS=yes (hpc_files/lib/plan.sh).
  printf 'true\ntrue\n' >"$HPC_COMMANDS_FILE"
  HPC_TASK_SUBDIRS=yes SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=2 job 'echo t1 >"$HPC_RESULTS_DIR/t.txt"'
  [ "$status" -eq 0 ]
  [ "$(cat "$DEST/task_1/t.txt")" = t1 ]
}

@test "an empty results folder copies nothing; --results-dir none has no results folder" {
  job 'true'
  [ "$status" -eq 0 ]
  [ ! -e "$DEST" ]
  HPC_RESULTS_FOLDER=none job 'echo "dir=${HPC_RESULTS_DIR:-unset}"'
  [[ $output == *"dir=unset"* ]]
  HPC_RESULTS_FOLDER=out/deep job 'echo x >"$HPC_RESULTS_DIR/x"; echo "dir=$HPC_RESULTS_DIR"'
  [[ $output == *"dir=$OWN/out/deep"* ]]
  [ "$(cat "$DEST/x")" = x ]
}

@test "--sync-every copies the results while the program still runs" {
  HPC_SYNC_EVERY_S=1 job 'echo early >"$HPC_RESULTS_DIR/early.txt"
    for i in $(seq 50); do [ -e "$scratch_dir/e/results/early.txt" ] && break; sleep 0.1; done
    [ -e "$scratch_dir/e/results/early.txt" ] && echo "seen while running"'
  [ "$status" -eq 0 ]
  [[ $output == *"seen while running"* ]]
}

@test "a folder left by an earlier run of the job id is started afresh; a link there is left alone" {
  mkdir -p "$OWN/stale_xyz"
  job 'ls -A "$SLURM_TMPDIR"'
  [ "$status" -eq 0 ]
  [[ $stderr == *"left from an earlier run"* ]]
  [[ $output != *stale_xyz* ]]
  mkdir -p "$BATS_TEST_TMPDIR/elsewhere"
  ln -s "$BATS_TEST_TMPDIR/elsewhere" "$OWN"
  job 'echo "reached $SLURM_TMPDIR"'
  [ "$status" -eq 0 ]
  [[ $stderr == *"$OWN is taken (it is a symbolic link; not this job's, left alone): the job uses $OWN."* ]]
  [[ $output == *"reached $OWN."* ]]
  [ -L "$OWN" ]
  [ -d "$BATS_TEST_TMPDIR/elsewhere" ]
  [ -z "$(ls -A "$BATS_TEST_TMPDIR/elsewhere")" ]
}

@test "Slurm's SLURM_TMPDIR is used when the profile says it is provided, and not removed" {
  mkdir -p "$BATS_TEST_TMPDIR/slurm_tmp"
  HPC_PROVIDES_TMPDIR=yes SLURM_TMPDIR=$BATS_TEST_TMPDIR/slurm_tmp job 'echo "tmp=$SLURM_TMPDIR"; echo r >"$HPC_RESULTS_DIR/r"'
  [ "$status" -eq 0 ]
  [[ $output == *"tmp=$BATS_TEST_TMPDIR/slurm_tmp"* ]]
  [ -d "$BATS_TEST_TMPDIR/slurm_tmp/results" ]
  [ -z "$(ls -A "${OWN%/*}")" ]
  # Provided in the profile but missing in the job: the job makes its own, and says so.
  HPC_PROVIDES_TMPDIR=yes job 'echo "tmp=$SLURM_TMPDIR"'
  [[ $output == *"WARNING: the cluster profile says Slurm sets SLURM_TMPDIR"* ]]
  [[ $output == *"tmp=$OWN"* ]]
}

@test "data: extracted into \$SLURM_TMPDIR with its relative paths; too little disk fails at once" {
  mkdir -p "$BATS_TEST_TMPDIR/src/ds/sub"
  echo 1 >"$BATS_TEST_TMPDIR/src/ds/sub/f"
  tar -cf - -C "$BATS_TEST_TMPDIR/src" ./ds | zstd -q -c >"$BATS_TEST_TMPDIR/a.tar.zst"
  HPC_DATA_ARCHIVE=$BATS_TEST_TMPDIR/a.tar.zst HPC_DATA_BYTES=8192 job 'cat "$SLURM_TMPDIR/ds/sub/f"'
  [ "$status" -eq 0 ]
  grep -qx 1 <<<"$output"
  [[ $output == *"data: a.tar.zst (8.0 KiB) extracted into \$SLURM_TMPDIR on 1 node(s)"* ]]
  HPC_DATA_ARCHIVE=$BATS_TEST_TMPDIR/a.tar.zst HPC_DATA_BYTES=$((1 << 59)) job 'echo started'
  [ "$status" -ne 0 ]
  [[ $stderr == *"not enough local disk for the --data: it needs 512.0 PiB, $OWN has"*"free"* ]]
  [[ $output != *started* ]]
  [ ! -e "$OWN" ]
  HPC_DATA_ARCHIVE=$BATS_TEST_TMPDIR/gone.tar.zst job 'echo started'
  [ "$status" -ne 0 ]
  [[ $stderr == *"the --data archive $BATS_TEST_TMPDIR/gone.tar.zst is missing"* ]]
}

@test "only hpc_job_<id> folders are ever removed" {
  mkdir -p "$BATS_TEST_TMPDIR/keep"
  run bash -c 'source "$1/virtual_env_hpc_files/node_tmpdir.sh"; hpc_node_remove_tmpdir "$2"' _ "$REPO_ROOT" "$BATS_TEST_TMPDIR/keep"
  [ "$status" -eq 1 ]
  [[ $output == *"refusing to remove"* ]]
  [ -d "$BATS_TEST_TMPDIR/keep" ]
}

@test "hostile HPC_DATA_BYTES or HPC_DATA_ENTRIES (from a tampered .hpc_staging) never run: the job stops" {
  load ../helpers/hostile_state
  PWNED=$BATS_TEST_TMPDIR/pwned
  hostile_state_values
  mkdir -p "$BATS_TEST_TMPDIR/src/ds"
  echo 1 >"$BATS_TEST_TMPDIR/src/ds/f"
  tar -cf - -C "$BATS_TEST_TMPDIR/src" ./ds | zstd -q -c >"$BATS_TEST_TMPDIR/a.tar.zst"
  local value
  for value in "${HOSTILE_STATE[@]}"; do
    [[ -n $value ]] || continue # empty means "not given": 0
    HPC_DATA_ARCHIVE=$BATS_TEST_TMPDIR/a.tar.zst HPC_DATA_BYTES=$value job 'echo started'
    [ "$status" -ne 0 ] && [[ $output != *started* ]] || { echo "bytes '$value': $status $output"; return 1; }
    [[ $stderr == *"is not a number"* ]]
    [ ! -e "$PWNED" ]
    HPC_DATA_ARCHIVE=$BATS_TEST_TMPDIR/a.tar.zst HPC_DATA_ENTRIES=$value job 'echo started'
    [ "$status" -ne 0 ]
    [[ $output != *started* ]]
    [ ! -e "$PWNED" ]
    # The per-node extraction checks its argument too (it runs as its own srun task).
    run bash "$REPO_ROOT/virtual_env_hpc_files/node_tmpdir.sh" extract "$BATS_TEST_TMPDIR/a.tar.zst" "$value"
    [ "$status" -ne 0 ]
    [ ! -e "$PWNED" ]
  done
}

@test "human_bytes_to never evaluates what it is given" {
  load ../helpers/hostile_state
  PWNED=$BATS_TEST_TMPDIR/pwned
  hostile_state_values
  local value
  for value in "${HOSTILE_STATE[@]}"; do
    run bash -c 'source "$1/hpc_files/lib/hpc_lib.sh"; human_bytes_to h "$2"; echo "$h"' _ "$REPO_ROOT" "$value"
    [ "$status" -eq 0 ]
    [ "$output" = "? B" ]
    [ ! -e "$PWNED" ]
  done
  run bash -c 'source "$1/hpc_files/lib/hpc_lib.sh"; human_bytes_to h 1536; echo "$h"' _ "$REPO_ROOT"
  [ "$output" = "1.5 KiB" ]
}

@test "another user's leftover hpc_job folder is never removed: the job runs in a folder of an unguessable name beside it, and says whose it is (issue 23)" {
  mkdir -m 755 "$OWN"
  echo theirs >"$OWN/their_file"
  chown -R nobody "$OWN"
  job 'echo "reached $SLURM_TMPDIR"; stat -c "mode=%a" "$SLURM_TMPDIR"; echo r >"$HPC_RESULTS_DIR/r.txt"'
  [ "$status" -eq 0 ]
  [[ $stderr == *"$OWN is taken (it exists and belongs to nobody; not this job's, left alone): the job uses $OWN."* ]]
  [[ $output =~ reached\ $OWN\.[A-Za-z0-9]{6}$'\n' ]]
  [[ $output == *"mode=700"* ]]
  [[ $output == *"local scratch: removed the job's folder on 1 node(s)"* ]]
  [ "$(cat "$DEST/r.txt")" = r ]
  [ "$(cat "$OWN/their_file")" = theirs ]
  [ "$(stat -c %U "$OWN")" = nobody ]
  [ -z "$(find "${OWN%/*}" -maxdepth 1 -name "${OWN##*/}.*")" ] # its own folder is gone
}

@test "a planted symbolic link or file at the job's folder is left as it is, and so is its target" {
  mkdir -p "$BATS_TEST_TMPDIR/elsewhere"
  echo keep >"$BATS_TEST_TMPDIR/elsewhere/f"
  ln -s "$BATS_TEST_TMPDIR/elsewhere" "$OWN"
  job 'echo "reached $SLURM_TMPDIR"; echo mine >"$SLURM_TMPDIR/f"'
  [ "$status" -eq 0 ]
  [[ $stderr == *"$OWN is taken (it is a symbolic link"* ]]
  [ -L "$OWN" ]
  [ "$(cat "$BATS_TEST_TMPDIR/elsewhere/f")" = keep ]
  rm "$OWN"
  echo file >"$OWN"
  job 'echo reached'
  [ "$status" -eq 0 ]
  [[ $stderr == *"$OWN is taken (it exists and is not a folder"* ]]
  [ "$(cat "$OWN")" = file ]
}

@test "a local scratch folder (HPC_LOCAL_SCRATCH) that does not exist on the node is refused, not made" {
  export HPC_LOCAL_SCRATCH=$BATS_TEST_TMPDIR/local_scratch/%u
  job 'echo reached'
  [ "$status" -ne 0 ]
  [[ $output != *reached* ]]
  [[ $stderr == *"the local scratch folder $BATS_TEST_TMPDIR/local_scratch/alice does not exist (or is not a folder) on this node (HPC_LOCAL_SCRATCH='$BATS_TEST_TMPDIR/local_scratch/%u' in the cluster profile)"* ]]
  [ ! -e "$BATS_TEST_TMPDIR/local_scratch" ]
}

@test "the job's own folder is named per node: nodes that share one scratch path never share a folder" {
  export HPC_LOCAL_SCRATCH=$BATS_TEST_TMPDIR/shared
  mkdir -p "$HPC_LOCAL_SCRATCH"
  job 'echo "tmp=$SLURM_TMPDIR"'
  [ "$status" -eq 0 ]
  [[ $output == *"tmp=$BATS_TEST_TMPDIR/shared/hpc_job_4242_nodeA"* ]]
  SLURMD_NODENAME=nodeB job 'echo "tmp=$SLURM_TMPDIR"'
  [[ $output == *"tmp=$BATS_TEST_TMPDIR/shared/hpc_job_4242_nodeB"* ]]
  # A node name that cannot name a folder is refused.
  SLURMD_NODENAME='../x' job 'echo reached'
  [ "$status" -ne 0 ]
  [[ $output != *reached* ]]
  [ -z "$(ls -A "$HPC_LOCAL_SCRATCH")" ]
}

@test "HPC_PROVIDES_TMPDIR=auto (the default): Slurm's SLURM_TMPDIR when the job has one, else the job's own" {
  unset HPC_PROVIDES_TMPDIR
  mkdir -p "$BATS_TEST_TMPDIR/slurm_tmp"
  SLURM_TMPDIR=$BATS_TEST_TMPDIR/slurm_tmp job 'echo "tmp=$SLURM_TMPDIR"'
  [ "$status" -eq 0 ]
  [[ $output == *"tmp=$BATS_TEST_TMPDIR/slurm_tmp"* ]]
  [[ $output != *WARNING* ]]
  [ -z "$(ls -A "${OWN%/*}")" ]
  HPC_PROVIDES_TMPDIR=auto job 'echo "tmp=$SLURM_TMPDIR"'
  [ "$status" -eq 0 ]
  [[ $output == *"tmp=$OWN"* ]]
  [[ $output != *WARNING* ]]
  [ ! -e "$OWN" ]
  # no: the job's own even where Slurm has one.
  HPC_PROVIDES_TMPDIR=no SLURM_TMPDIR=$BATS_TEST_TMPDIR/slurm_tmp job 'echo "tmp=$SLURM_TMPDIR"'
  [[ $output == *"tmp=$OWN"* ]]
}

@test "a link in the results to a folder it is in (\$HPC_RESULTS_DIR, \$SLURM_TMPDIR) or a loop of links is copied as a link, not followed: the copy ends, the job ends 0, the rest comes back (second review)" {
  job 'cd "$HPC_RESULTS_DIR"
    echo r >r.txt && mkdir -p sub && echo s >sub/s.txt
    ln -s "$HPC_RESULTS_DIR" a && ln -s "$HPC_RESULTS_DIR" b
    ln -s "$SLURM_TMPDIR" tmp
    mkdir -p "$SLURM_TMPDIR/loop" && ln -s "$SLURM_TMPDIR/loop" "$SLURM_TMPDIR/loop/self" && ln -s "$SLURM_TMPDIR/loop" loop
    mkdir -p "$SLURM_TMPDIR/data" && echo d >"$SLURM_TMPDIR/data/d.txt" && ln -s "$SLURM_TMPDIR/data" data'
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [ "$(cat "$DEST/r.txt")" = r ]
  [ "$(cat "$DEST/sub/s.txt")" = s ]
  [ -L "$DEST/a" ]
  [ -L "$DEST/b" ]
  [ -L "$DEST/tmp" ]
  [ -L "$DEST/loop" ]
  [ "$(cat "$DEST/data/d.txt")" = d ] # a folder link without a loop still comes back as its content
  [ ! -L "$DEST/data" ]
  [[ $output == *"results: a is a link to "*"(a loop): copied as a link, not followed"* ]]
  [[ $output == *"results: loop is a link to "*"(a loop): copied as a link, not followed"* ]]
  [ "$(find "$DEST" | wc -l)" -lt 20 ]
}

@test "results come back whole and only the user's: links into \$SLURM_TMPDIR as content, others as links (said), sparse stays sparse, no open modes, no other user's files (issue 23)" {
  job 'cd "$HPC_RESULTS_DIR"
    mkdir -p "$SLURM_TMPDIR/work/ckpt" && echo weights >"$SLURM_TMPDIR/work/ckpt/w.bin" && echo best >"$SLURM_TMPDIR/work/best.txt"
    ln -s "$SLURM_TMPDIR/work/best.txt" best.txt
    ln -s ../work/ckpt ckpt
    echo data >own.txt && ln -s own.txt latest.txt && ln -s "$HPC_RESULTS_DIR/own.txt" abs.txt
    ln -s /etc/hostname host
    truncate -s 2G sparse.bin && printf x >>sparse.bin
    mkdir open && chmod 777 open && echo o >open/f && chmod 666 open/f
    mkdir theirs && echo planted >theirs/p && echo planted >planted.txt
    chown -R nobody theirs planted.txt'
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [ -f "$DEST/best.txt" ]
  [ ! -L "$DEST/best.txt" ]
  [ "$(cat "$DEST/best.txt")" = best ]
  [ -d "$DEST/ckpt" ]
  [ ! -L "$DEST/ckpt" ]
  [ "$(cat "$DEST/ckpt/w.bin")" = weights ]
  [ "$(readlink "$DEST/latest.txt")" = own.txt ]
  [ -f "$DEST/abs.txt" ]
  [ ! -L "$DEST/abs.txt" ] # an absolute path on the node would dangle
  [ "$(readlink "$DEST/host")" = /etc/hostname ]
  [[ $output == *"results: host is a link to /etc/hostname, outside the job's node-local folders: copied as a link"* ]]
  [[ $output != *"latest.txt is a link"* ]]
  [ "$(stat -c %s "$DEST/sparse.bin")" -eq $((2 * 1024 * 1024 * 1024 + 1)) ]
  [ "$(du -k "$DEST/sparse.bin" | cut -f1)" -lt 1024 ]
  (($(stat -c '0%a' "$DEST/open") & 8#022)) && false
  (($(stat -c '0%a' "$DEST/open/f") & 8#022)) && false
  [ "$(cat "$DEST/open/f")" = o ]
  [ ! -e "$DEST/theirs" ]
  [ ! -e "$DEST/planted.txt" ]
  [[ $output == *"results: not copied: theirs (it belongs to nobody, not to you)"* ]]
  [[ $output == *"results: not copied: planted.txt (it belongs to nobody, not to you)"* ]]
  [ -z "$(find "$DEST" ! -user "$(id -un)")" ]
}

@test "a copy cut off by its deadline (SIGTERM budget) lists in the log what did not come back (issue 23)" {
  # The deadline already passed: nothing can be copied, everything is listed.
  job 'echo a >"$HPC_RESULTS_DIR/a.txt"; mkdir "$HPC_RESULTS_DIR/sub"; echo b >"$HPC_RESULTS_DIR/sub/b.txt"
    HPC_RESULTS_DEADLINE_US=$((${EPOCHREALTIME/[.,]/} - 1)); exit 0'
  echo "$stderr"
  [ "$status" -eq 74 ]
  [[ $stderr == *"results: NOT all copied back to $DEST: 2 file(s) did not come back: no time was left before Slurm's kill to copy them"* ]]
  [[ $stderr == *"results: not copied: a.txt"* && $stderr == *"results: not copied: sub/b.txt"* ]]
  [ "$(sort "$DEST/.hpc_not_copied" | tr '\n' ' ')" = "a.txt sub/b.txt " ]
}

# no_rsync_path: PATH as now, less rsync (the tar copy-back).
no_rsync_path() {
  local bin=$BATS_TEST_TMPDIR/norsync tool
  mkdir -p "$bin"
  for tool in /usr/local/bin/* /usr/bin/* /bin/*; do
    [[ ${tool##*/} != rsync && ! -e $bin/${tool##*/} ]] || continue
    ln -s "$tool" "$bin/${tool##*/}"
  done
  printf '%s' "$bin"
}

@test "results keep the modes the program gave them: a copy removes bits (umask), never adds them; a later chmod reaches the copy too (issue 32)" {
  local body='umask 022; cd "$HPC_RESULTS_DIR"
    echo s >secret.txt && chmod 600 secret.txt
    mkdir private && chmod 700 private && echo p >private/p.txt && chmod 600 private/p.txt
    echo g >group.txt && chmod 640 group.txt
    echo r >ro.txt && chmod 444 ro.txt
    echo w >later.txt && chmod 644 later.txt
    mkdir ro_dir && echo in >ro_dir/in.txt && chmod 555 ro_dir
    hpc_results_sync >/dev/null
    chmod 600 later.txt && chmod 640 ro_dir/in.txt 2>/dev/null; exit 0'
  local pathes=("$PATH" "$(no_rsync_path)") p
  for p in "${pathes[@]}"; do
    rm -rf -- "$DEST"
    PATH=$p job "$body"
    echo "$output"; echo "$stderr"
    [ "$status" -eq 0 ]
    [ "$(stat -c %a "$DEST/secret.txt")" = 600 ]
    [ "$(stat -c %a "$DEST/private")" = 700 ]
    [ "$(stat -c %a "$DEST/private/p.txt")" = 600 ]
    [ "$(stat -c %a "$DEST/group.txt")" = 640 ]
    [ "$(stat -c %a "$DEST/ro.txt")" = 444 ]
    [ "$(stat -c %a "$DEST/later.txt")" = 600 ]
    [ "$(cat "$DEST/ro_dir/in.txt")" = in ]
    (($(stat -c '0%a' "$DEST/ro_dir") & 8#022)) && false
    chmod -R u+w "$DEST"
  done
}

@test "results that cannot come back at a requeue are kept on \$SCRATCH; the next attempt brings them back; the job never ends 0 while some are missing (issue 32)" {
  local kept=$scratch_dir/e/.hpc_results_kept
  mkdir -p "$scratch_dir/e"
  echo 'not a folder' >"$DEST" # attempt 1's copy fails
  job 'echo one >"$HPC_RESULTS_DIR/one.txt"; mkdir "$HPC_RESULTS_DIR/sub"; echo s >"$HPC_RESULTS_DIR/sub/s.txt"; chmod 600 "$HPC_RESULTS_DIR/one.txt"
    HPC_ATTEMPT_OUTCOME=warned-requeued HPC_REQUEUED=1; exit 0'
  echo "$output"; echo "$stderr"
  [[ $stderr == *"results: copying $OWN/results to $DEST failed"* ]]
  [[ $stderr == *"results: attempt 1's results are kept in $kept/attempt_1: the next attempt copies them to $DEST"* ]]
  [[ $stderr != *"the job fails with exit code 74"* ]] # it is requeued
  [ "$(cat "$kept/attempt_1/one.txt")" = one ]
  [ "$(cat "$kept/attempt_1/sub/s.txt")" = s ]
  [ "$(stat -c %a "$kept/attempt_1/one.txt")" = 600 ]
  # Attempt 2: the results folder still cannot be written: the job fails (74) and says where.
  SLURM_RESTART_COUNT=1 job 'echo two >"$HPC_RESULTS_DIR/two.txt"; exit 0'
  echo "$output"; echo "$stderr"
  [ "$status" -eq 74 ]
  [[ $stderr == *"results of attempt(s) 1 2 did not come back to $DEST: they are in $kept"*"the job fails with exit code 74"* ]]
  [ "$(cat "$kept/attempt_2/two.txt")" = two ]
  [ -e "$kept/attempt_1/one.txt" ]
  # The folder is fixed, and the run is rerun (a new job): both attempts' results come back.
  rm -f "$DEST"
  SLURM_JOB_ID=4243 job 'echo three >"$HPC_RESULTS_DIR/three.txt"; echo new >"$HPC_RESULTS_DIR/one.txt"; exit 0'
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"results: attempt 1's results kept in $kept/attempt_1 are back in $DEST"* ]]
  [ "$(cat "$DEST/one.txt")" = new ]
  [ "$(cat "$DEST/two.txt")" = two ]
  [ "$(cat "$DEST/three.txt")" = three ]
  [ "$(cat "$DEST/sub/s.txt")" = s ]
  [ ! -e "$kept" ]
}

@test "an attempt whose own results come back, but whose earlier attempt's kept results do not, does not end 0 (issue 32)" {
  local kept=$scratch_dir/e/.hpc_results_kept
  mkdir -p "$kept/attempt_1" "$DEST"
  head -c 300000 /dev/urandom >"$kept/attempt_1/big.bin"
  mount -t tmpfs -o size=64k hpc_results_test "$DEST" # a results folder that is nearly full
  MOUNTED=$DEST
  SLURM_RESTART_COUNT=1 job 'echo two >"$HPC_RESULTS_DIR/two.txt"; exit 0'
  echo "$output"; echo "$stderr"
  [ "$status" -eq 74 ]
  [ "$(cat "$DEST/two.txt")" = two ]
  [ "$(stat -c %s "$kept/attempt_1/big.bin")" = 300000 ]
  [[ $stderr == *"results of attempt(s) 1 did not come back to $DEST: they are in $kept"* ]]
}

teardown() {
  [[ -z ${MOUNTED:-} ]] || umount "$MOUNTED"
}

@test "a daemon the program starts with setsid (out of its process group and session) ends with the attempt, and the log says so (issue 32)" {
  local mark=hpc_escapee_$RANDOM$RANDOM
  HPC_LAUNCHER=none
  printf '%s\n' "setsid bash -c 'exec -a $mark sleep 600' </dev/null >/dev/null 2>&1 & sleep 0.5; echo started" >"$HPC_COMMANDS_FILE"
  run_job_side 'hpc_job_begin; hpc_prepare_tmpdir' 'hpc_run_command'
  echo "$output"; echo "$stderr"
  local -a left
  mapfile -t left < <(pgrep -f "^$mark")
  ((${#left[@]} == 0)) || { kill "${left[@]}"; echo "the daemon outlived the attempt"; return 1; }
  [[ $output$stderr == *"processes the program started outside its process group still ran when it ended: "*"($mark"*"): ended now"* ]]
}

@test "a long command is not copied whole into the log: its start, its length and where the whole line is (issue 32)" {
  local long
  long=$(head -c 6000 /dev/zero | tr '\0' x)
  printf 'echo "$HOME" %s >/dev/null\n' "$long" >"$HPC_COMMANDS_FILE"
  run_job_side 'hpc_job_begin' 'hpc_prepare_tmpdir; hpc_run_command'
  echo "${output:0:3000}"
  [ "$status" -eq 0 ]
  [[ $output == *"command: echo \"\$HOME\" xxx"*"... (6024 bytes in all: the whole command is line 1 of $HPC_COMMANDS_FILE)"* ]]
  local n
  n=$(grep -c x"$(head -c 2000 /dev/zero | tr '\0' x)" <<<"$output") || true
  [ "$n" -eq 0 ] # no log line holds 2,000 of them
}

@test "a results folder that leads to another user's folder gets nothing: the results are kept, the job says whose it is and fails 74 (issue 32)" {
  mkdir -p "$scratch_dir/e" "$BATS_TEST_TMPDIR/theirs"
  chown daemon "$BATS_TEST_TMPDIR/theirs" # (not nobody: an NFSv4 mount shows unmapped ids so)
  ln -s "$BATS_TEST_TMPDIR/theirs" "$DEST"
  job 'echo secret >"$HPC_RESULTS_DIR/s.txt"; exit 0'
  echo "$output"; echo "$stderr"
  [ "$status" -eq 74 ]
  [[ $stderr == *"results: $DEST belongs to daemon, not to you: nothing is copied there"* ]]
  [ -z "$(ls -A "$BATS_TEST_TMPDIR/theirs")" ]
  [ "$(cat "$scratch_dir/e/.hpc_results_kept/attempt_1/s.txt")" = secret ]
}

@test "another node's results that cannot come back are kept too, under attempt_N/node_K, and a later attempt brings them back (issue 32)" {
  local node_tmp=$BATS_TEST_TMPDIR/node1tmp kept=$scratch_dir/e/.hpc_results_kept
  mkdir -p "$node_tmp" "$scratch_dir/e"
  echo 'not a folder' >"$DEST"
  run --separate-stderr env SLURM_TMPDIR="$node_tmp" SLURM_NODEID=1 HPC_RESULTS_DEST="$DEST" \
    HPC_RESULTS_DIR=x SLURM_RESTART_COUNT=0 bash -c 'source "$1/virtual_env_hpc_files/node_results.sh"
      hpc_node_results_setup && echo n1 >"$HPC_RESULTS_DIR/n1.txt" && chmod 600 "$HPC_RESULTS_DIR/n1.txt" && hpc_node_results_copy' _ "$REPO_ROOT"
  echo "$output"; echo "$stderr"
  [ "$status" -ne 0 ]
  [[ $stderr == *"results of node"*"are kept in $kept/attempt_1/node_1"* ]]
  [ "$(stat -c '%a' "$kept/attempt_1/node_1/n1.txt")" = 600 ]
  # The next attempt, with the folder fixed: node 1's results come back to results/node_1.
  rm -f "$DEST"
  SLURM_RESTART_COUNT=1 job 'exit 0'
  echo "$output"; echo "$stderr"
  [ "$status" -eq 0 ]
  [ "$(cat "$DEST/node_1/n1.txt")" = n1 ]
  [ ! -e "$kept" ]
}

# results_lost_job BODY: a job whose results can neither come back nor be kept (its whole
# experiment folder, results and keeping place alike, a 64 KiB disk; 300 KB of results),
# then BODY, with an scontrol that records a requeue.
results_lost_job() {
  local bin=$BATS_TEST_TMPDIR/stub
  mkdir -p "$bin" "$scratch_dir/e"
  printf '#!/bin/bash\n[[ $1 != requeue ]] || : >"%s/requeued"\nexit 0\n' "$BATS_TEST_TMPDIR" >"$bin/scontrol"
  printf '#!/bin/bash\necho "RUNNING N/A 0"\n' >"$bin/squeue"
  chmod +x "$bin"/*
  mount -t tmpfs -o size=64k hpc_results_test "$scratch_dir/e"
  MOUNTED=$scratch_dir/e
  PATH=$bin:$PATH job 'head -c 300000 /dev/urandom >"$HPC_RESULTS_DIR/big.bin"; '"$1"
  echo "$output"; echo "$stderr"
}

@test "a requeue after a warning whose results could be neither copied back nor kept does not happen: exit 74, how to go on (issue 32)" {
  results_lost_job 'HPC_SIGNALLED=walltime; hpc_requeue_now 0 0'
  [ "$status" -eq 74 ]
  [ ! -e "$BATS_TEST_TMPDIR/requeued" ]
  [[ $output$stderr == *"not requeued: this attempt's results did not come back and could not be kept"* ]]
  [[ $output$stderr != *"are back in"* ]] # (a part copy in the keeping place is none)
  [ ! -e "$scratch_dir/e/.hpc_results_kept/attempt_1" ]
}

@test "a requeue away from a lost node whose results could be neither copied back nor kept does not happen either: exit 74 (issue 32)" {
  results_lost_job 'hpc_requeue_for_node nodeB node-failure ""'
  [ "$status" -eq 74 ]
  [ ! -e "$BATS_TEST_TMPDIR/requeued" ]
  [[ $output$stderr == *"not requeued: this attempt's results did not come back and could not be kept"* ]]
  [[ $output$stderr != *"are back in"* ]] # (a part copy in the keeping place is none)
  [ ! -e "$scratch_dir/e/.hpc_results_kept/attempt_1" ]
}

@test "another node's results that can be neither copied back nor kept leave no part copy a later attempt would take for them (issue 32)" {
  local node_tmp=$BATS_TEST_TMPDIR/node1tmp kept=$scratch_dir/e/.hpc_results_kept
  mkdir -p "$node_tmp" "$scratch_dir/e"
  mount -t tmpfs -o size=64k hpc_results_test "$scratch_dir/e"
  MOUNTED=$scratch_dir/e
  run --separate-stderr env SLURM_TMPDIR="$node_tmp" SLURM_NODEID=1 HPC_RESULTS_DEST="$DEST" \
    HPC_RESULTS_DIR=x SLURM_RESTART_COUNT=0 bash -c 'source "$1/virtual_env_hpc_files/node_results.sh"
      hpc_node_results_setup && head -c 300000 /dev/urandom >"$HPC_RESULTS_DIR/big.bin" && hpc_node_results_copy' _ "$REPO_ROOT"
  echo "$output"; echo "$stderr"
  [ "$status" -ne 0 ]
  [[ $stderr == *"could not be kept in $kept/attempt_1/node_1 either"* ]]
  [ ! -e "$kept/attempt_1/node_1" ]
}

@test "keepers that do not end on SIGINT get SIGTERM from 20 s on, to their step and their srun, and the log says which ended them" {
  local bin=$BATS_TEST_TMPDIR/stub
  mkdir -p "$bin"
  printf '#!/bin/bash\necho "$*" >>"%s/scancel.log"\n' "$BATS_TEST_TMPDIR" >"$bin/scancel"
  chmod +x "$bin/scancel"
  # The keepers' srun: one that SIGINT does not end (as seen on 26.05), SIGTERM does.
  PATH=$bin:$PATH run_job_side true 'exec {HPC_KEEPER_FD}< <(trap "" INT; exec sleep 60)
    HPC_KEEPER_PID=$! HPC_KEEPER_STEP=5 HPC_KEEPER_TIMEOUT=30
    _hpc_stop_keepers; echo "rc=$?"'
  echo "$output"; echo "$stderr"
  [[ $output == *"rc=2"* ]]
  [[ $output == *"the per-node folder keepers ended on SIGTERM after 2"[0-9]" s (neither SIGINT nor their stop file ended them)"* ]]
  [ "$(sed -n 1p "$BATS_TEST_TMPDIR/scancel.log")" = "--signal=INT 4242.5" ]
  grep -qx -- "--signal=TERM 4242.5" "$BATS_TEST_TMPDIR/scancel.log"
}

@test "keepers ended only by SIGTERM: the log does not claim every node's folder removed (a killed keeper's stays), and the job does not fail for it" {
  local bin=$BATS_TEST_TMPDIR/stub own=$BATS_TEST_TMPDIR/hpc_job_4242_nodeA
  mkdir -p "$bin" "$own"
  printf '#!/bin/bash\nexit 0\n' >"$bin/scancel"
  chmod +x "$bin/scancel"
  PATH=$bin:$PATH run_job_side true 'exec {HPC_KEEPER_FD}< <(trap "" INT; exec sleep 60)
    HPC_KEEPER_PID=$! HPC_KEEPER_STEP=5 HPC_KEEPER_TIMEOUT=30 HPC_OWN_TMPDIR='"$own"' SLURM_JOB_NUM_NODES=2
    hpc_tmpdir_cleanup; echo "rc=$?"'
  echo "$output"; echo "$stderr"
  [[ $output == *"rc=0"* ]]
  [ ! -e "$own" ]
  [[ $output == *"local scratch: removed the job's folder on this node; on the other nodes only what their keepers removed before srun ended them"* ]]
  [[ $output != *"removed the job's folder on 2 node(s)"* ]]
}

# start_keeper STOP [SIGNALS]: a keeper of job 4242 on nodeB (not the batch node), its
# folder under $BATS_TEST_TMPDIR/scratch, told to stop by the file STOP; SIGNALS (e.g.
# "INT TERM"): ignored from its start. Waits for its first line (keeper.out); its pid in
# KEEPER.
start_keeper() {
  local scratch=$BATS_TEST_TMPDIR/scratch i
  mkdir -p "$scratch" "${1%/*}"
  chmod 700 "$scratch"
  # shellcheck disable=SC2086 # SIGNALS: one word each
  ( [[ -z ${2:-} ]] || trap '' $2
    exec env SLURMD_NODENAME=nodeB SLURM_JOB_ID=4242 HPC_TMPDIR_PATTERN="$scratch/hpc_job_4242_%n" \
      bash "$REPO_ROOT/virtual_env_hpc_files/node_tmpdir.sh" keep nodeA 1 "$1" >"$BATS_TEST_TMPDIR/keeper.out" 2>&1 ) &
  KEEPER=$!
  for ((i = 0; i < 100; i++)); do
    [[ ! -s $BATS_TEST_TMPDIR/keeper.out ]] || break
    sleep 0.1
  done
}

# keeper_ended: the keeper ended within 6 s (else it is killed and this fails), cleanly,
# and removed its folder.
keeper_ended() {
  local i
  for ((i = 0; i < 60; i++)); do
    kill -0 "$KEEPER" 2>/dev/null || break
    sleep 0.1
  done
  ! kill -0 "$KEEPER" 2>/dev/null || { kill -KILL "$KEEPER"; false; }
  wait "$KEEPER"
  [ ! -e "$BATS_TEST_TMPDIR/scratch/hpc_job_4242_nodeB" ]
}

@test "a keeper that no signal reaches (CI on 26.05 under load) ends on its stop file: its folder is removed, its exit is clean" {
  local scratch=$BATS_TEST_TMPDIR/scratch stop=$BATS_TEST_TMPDIR/home/keepers.stop.4242.0
  start_keeper "$stop" "INT TERM"
  cat "$BATS_TEST_TMPDIR/keeper.out"
  [ "$(cat "$BATS_TEST_TMPDIR/keeper.out")" = "ready nodeB ? $scratch/hpc_job_4242_nodeB" ]
  [ -d "$scratch/hpc_job_4242_nodeB" ]
  kill -INT "$KEEPER"; kill -TERM "$KEEPER"
  sleep 3
  kill -0 "$KEEPER" # no signal ended it
  : >"$stop"
  keeper_ended
}

@test "a stop file another user made (a group-writable project) does not end a keeper: only the job's own does" {
  local scratch=$BATS_TEST_TMPDIR/scratch stop=$BATS_TEST_TMPDIR/home/keepers.stop.4242.0
  start_keeper "$stop"
  [[ $(cat "$BATS_TEST_TMPDIR/keeper.out") == "ready nodeB "* ]]
  : >"$stop"
  chown nobody "$stop"
  sleep 5
  kill -0 "$KEEPER" # another user's file ended nothing
  [ -d "$scratch/hpc_job_4242_nodeB" ]
  rm -f "$stop" && : >"$stop" # the job's own
  keeper_ended
}

@test "the batch shell names the keepers' stop file (the job's home, per job and attempt), clears an old one (and those earlier attempts killed before their end left) before they start, writes it when they are to stop" {
  local bin=$BATS_TEST_TMPDIR/stub home=$BATS_TEST_TMPDIR/home
  mkdir -p "$bin" "$home"
  printf '#!/bin/bash\nexit 0\n' >"$bin/scancel"
  # srun: record the keepers' argv, answer "ready" for 2 nodes, then run until the stop
  # file shows (30 s at most).
  cat >"$bin/srun" <<EOF
#!/bin/bash
printf '%s\n' "\$@" >"$BATS_TEST_TMPDIR/srun.argv"
for n in nodeA nodeB; do echo "ready \$n 7 "; done
stop=\${@: -1} i=0
while [[ ! -e \$stop ]] && ((i++ < 300)); do sleep 0.1; done
EOF
  chmod +x "$bin/scancel" "$bin/srun"
  : >"$home/keepers.stop.4242.3" # left by an earlier attempt of this job
  # ... and by attempts whose batch shell was killed before its exit hook; another job's stays
  : >"$home/keepers.stop.4242.1"
  : >"$home/keepers.stop.4242.2"
  : >"$home/keepers.stop.42421.0"
  PATH=$bin:$PATH run_job_side true 'HPC_HOME='"$home"' SLURM_RESTART_COUNT=3 SLURMD_NODENAME=nodeA HPC_TMPDIR_PATTERN=/x/hpc_job_4242_%n
    _hpc_start_keepers 2 && [[ ! -e $HPC_HOME/keepers.stop.4242.3 ]] && echo cleared
    _hpc_stop_keepers; echo "rc=$?"'
  echo "$output"; echo "$stderr"
  [[ $output == *cleared*"rc=0"* ]]
  [ "$(tail -n 1 "$BATS_TEST_TMPDIR/srun.argv")" = "$home/keepers.stop.4242.3" ]
  [ ! -e "$home/keepers.stop.4242.3" ] # removed once they ended
  [ ! -e "$home/keepers.stop.4242.1" ]
  [ ! -e "$home/keepers.stop.4242.2" ]
  [ -e "$home/keepers.stop.42421.0" ]
}
