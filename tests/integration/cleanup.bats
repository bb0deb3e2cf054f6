#!/usr/bin/env bats
# The local-scratch cleanup (plai_cleanups/submit_cleanup.sh) on the real local cluster,
# partition notmpdir: leftovers go on every node, folders of running jobs stay, nothing
# else is touched, --dry-run removes nothing, --every keeps exactly one next run.
#
# Tests that remove things use the local-lab profile with its local scratch moved into
# the test's own folder (LAB/nodeK), so that they never race other tests' folders in the
# shared localscratch_lab/; the --dry-run test uses the local-lab profile as it is.

load ../helpers/cluster

SCHEDULE=hpc_cleanup_every.notmpdir

setup() {
  hermetic_env
  user_folders # the cleanup is the researcher's: as the normal user
  cluster_env
  make_project proj # the toolkit's copy the researcher runs (plai_cleanups/, profiles)
  LAB=$BATS_TEST_TMPDIR/lab
  mkdir -p "$LAB"
  local n
  for n in 1 2 3 4; do
    mkdir -m 1777 "$LAB/node$n"
  done
  PROFILE=$BATS_TEST_TMPDIR/lab.conf
  printf 'source %q\nHPC_LOCAL_SCRATCH=%q\n' "$PROJECT/hpc_files/clusters/local-lab.conf" \
    "$LAB/%n" >"$PROFILE"
  LOG=$SCRATCH/hpc_outputs/cleanup/notmpdir.log
  SLEEPERS=() REAL_LEFTOVERS=()
}

teardown() {
  ((${#SLEEPERS[@]} == 0)) || scancel "${SLEEPERS[@]}" || true
  scancel --user="$HPC_TEST_USER" --name="$SCHEDULE" || true
  ((${#REAL_LEFTOVERS[@]} == 0)) || rm -rf -- "${REAL_LEFTOVERS[@]}"
}

# cleanup_now ARGS...: submit_cleanup.sh with the test profile; waits for every node job
# it submitted (NODE_JOBS) to finish. Fails when it fails.
cleanup_now() {
  run --separate-stderr researcher bash "$PROJECT/plai_cleanups/submit_cleanup.sh" --cluster "$PROFILE" "$@"
  if [ "$status" -ne 0 ]; then
    echo "submit_cleanup.sh failed ($status): $stderr" >&2
    return 1
  fi
  wait_node_jobs "$output"
}

# wait_node_jobs TEXT: wait for the node jobs named in TEXT ("  nodeK   job ID" lines).
wait_node_jobs() {
  mapfile -t NODE_JOBS < <(sed -n 's/^  node[0-9]* *job \([0-9]*\)$/\1/p' <<<"$1")
  ((${#NODE_JOBS[@]})) || { echo "no node jobs in: $1" >&2; return 1; }
  local id
  for id in "${NODE_JOBS[@]}"; do
    wait_job "$id"
    [ "$(job_state "$id")" = COMPLETED ] || { echo "cleanup job $id: $(job_state "$id")" >&2; return 1; }
  done
}

# leftover NODE NAME KB: a folder left on NODE's local scratch, with KB kibibytes inside.
leftover() {
  mkdir -p "$LAB/$1/$2/ckpt"
  head -c "$(($3 * 1024))" /dev/urandom >"$LAB/$1/$2/ckpt/data"
}

# sleeper NODE [SBATCH_ARGS...]: a job pinned to NODE that makes its own folder
# LAB/NODE/hpc_job_$SLURM_JOB_ID (as the toolkit's jobs do) and sleeps; prints its id.
sleeper() {
  local node=$1
  shift
  sbatch --parsable -p notmpdir --nodelist="$node" -t 5 -o /dev/null "$@" \
    --wrap "mkdir $LAB/$node/hpc_job_\$SLURM_JOB_ID && exec sleep 300"
}

# until_true TIMEOUT_S CMD...: poll CMD every 0.2 s.
until_true() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < end)) || { echo "timed out waiting for: $*" >&2; return 1; }
    sleep 0.2
  done
}

# folders_on NODE: how many hpc_job_* entries NODE's scratch holds.
folders_on() {
  find "$LAB/$1" -mindepth 1 -maxdepth 1 -name 'hpc_job_*' | wc -l
}

# running_is ID N: N of job ID's records (array tasks) are RUNNING.
running_is() {
  [ "$(squeue -h -j "$1" -t RUNNING -o %A | wc -l)" -eq "$2" ]
}

# folders_are NODE N: NODE's scratch holds N hpc_job_* entries.
folders_are() {
  [ "$(folders_on "$1")" -eq "$2" ]
}

# schedule_lines: "ID|STATE|REASON|BEGIN" of each scheduled run of this user.
schedule_lines() {
  squeue -h -u "$HPC_TEST_USER" -n "$SCHEDULE" -o '%A|%T|%r|%S'
}

# begins_in LINE SECONDS: the schedule line's begin time is SECONDS from now (+-2 min).
begins_in() {
  local begin
  begin=$(date -d "${1##*|}" +%s)
  ((begin - EPOCHSECONDS > $2 - 120 && begin - EPOCHSECONDS <= $2 + 5))
}

@test "leftovers on all 4 nodes are removed; the log says what each node freed" {
  local n bytes=()
  for n in 1 2 3 4; do
    leftover "node$n" "hpc_job_399999990$n" $((n * 8))
    leftover "node$n" "hpc_job_399999980$n" 4
    bytes[n]=$(du -scxB1 "$LAB/node$n"/hpc_job_* | tail -1 | cut -f1)
  done
  cleanup_now
  [ "${#NODE_JOBS[@]}" -eq 4 ]
  for n in 1 2 3 4; do
    [ "$(folders_on "node$n")" -eq 0 ]
    grep -qxF "node$n: removed 2 leftover folders, ${bytes[n]} bytes freed" "$LOG"
    grep -qF "  removed $LAB/node$n/hpc_job_399999990$n (" "$LOG"
  done
  [ "$(grep -c "^== .* (job [0-9]*, user $HPC_TEST_USER): " "$LOG")" -eq 4 ]
}

@test "folders of running jobs stay (a job, array tasks, an array's waiting last task); they go once the jobs end" {
  local job array tasks=()
  job=$(sleeper node2)
  array=$(sleeper node3 --array=0-2%2)
  SLEEPERS=("$job" "$array")
  leftover node2 hpc_job_3999999992 4
  # The array's last task waits (%2) and will run under the array's own id.
  mkdir "$LAB/node3/hpc_job_$array"
  until_true 120 test -d "$LAB/node2/hpc_job_$job"
  until_true 120 running_is "$array" 2
  until_true 30 folders_are node3 3
  mapfile -t tasks < <(squeue -h -j "$array" -t RUNNING -o %A)
  [[ ${tasks[0]} != "$array" && ${tasks[1]} != "$array" ]]

  cleanup_now
  [ -d "$LAB/node2/hpc_job_$job" ]
  [ ! -e "$LAB/node2/hpc_job_3999999992" ]
  [ -d "$LAB/node3/hpc_job_${tasks[0]}" ]
  [ -d "$LAB/node3/hpc_job_${tasks[1]}" ]
  [ -d "$LAB/node3/hpc_job_$array" ]
  grep -qxF "  kept $LAB/node2/hpc_job_$job: job $job is still in the queue" "$LOG"
  grep -qxF "  kept $LAB/node3/hpc_job_${tasks[0]}: job ${tasks[0]} is still in the queue" "$LOG"
  grep -q '^node2: removed 1 leftover folder, [0-9]* bytes freed$' "$LOG"
  grep -qx 'node3: removed 0 leftover folders, 0 bytes freed' "$LOG"

  # Killed, their folders are leftovers like any other.
  scancel "$job" "$array"
  wait_job "$job"
  wait_job "$array"
  SLEEPERS=()
  cleanup_now
  [ "$(folders_on node2)" -eq 0 ]
  [ "$(folders_on node3)" -eq 0 ]
}

@test "links go as links, other users' folders, folders holding their files and other names stay" {
  local outside=$BATS_TEST_TMPDIR/outside
  mkdir -p "$outside/dir"
  echo precious >"$outside/dir/file"
  ln -s "$outside/dir" "$LAB/node1/hpc_job_3999999901"
  leftover node1 hpc_job_3999999902 1
  ln -s "$outside/dir" "$LAB/node1/hpc_job_3999999902/ckpt/link"
  leftover node4 hpc_job_3999999903 1
  chown -R nobody "$LAB/node4/hpc_job_3999999903"
  leftover node4 hpc_job_3999999904 1
  echo theirs >"$LAB/node4/hpc_job_3999999904/ckpt/theirs"
  chown nobody "$LAB/node4/hpc_job_3999999904/ckpt/theirs"
  local name
  for name in keep hpc_job_ hpc_job_0123 hpc_job_12x hpc_job_3999999905.bak job_3999999906; do
    leftover node4 "$name" 1
  done
  local before
  hand_over # what the test made is the researcher's from here (as cleanup_now does)
  before=$(find "$LAB/node4" "$outside" -printf '%p %U %s\n' | sort)

  cleanup_now
  [ ! -L "$LAB/node1/hpc_job_3999999901" ]
  [ ! -e "$LAB/node1/hpc_job_3999999902" ]
  [ "$(cat "$outside/dir/file")" = precious ]
  [ "$(find "$LAB/node4" "$outside" -printf '%p %U %s\n' | sort)" = "$before" ]
  [ "$(stat -c %U "$LAB/node4/hpc_job_3999999903/ckpt/data")" = nobody ]
  grep -qF "  kept $LAB/node4/hpc_job_3999999904: it holds files of other users" "$LOG"
  grep -qx "node4: removed 0 leftover folders, 0 bytes freed; other users' entries left alone: 1" "$LOG"
  run ! grep -q hpc_job_3999999903 "$LOG"
}

@test "--dry-run with the local-lab profile lists what would go in localscratch_lab and removes nothing" {
  local real=${HPC_LOCAL_CLUSTER_DIR:-/tmp/hpc_local_cluster}/localscratch_lab n
  local id=$((3000000000 + RANDOM))
  for n in 1 2 3 4; do
    mkdir "$real/node$n/hpc_job_$id"
    REAL_LEFTOVERS+=("$real/node$n/hpc_job_$id")
    echo data >"$real/node$n/hpc_job_$id/file"
    chown -R "$HPC_TEST_USER:" "$real/node$n/hpc_job_$id" # the researcher's own leftovers
  done
  run --separate-stderr researcher bash "$PROJECT/plai_cleanups/submit_cleanup.sh" --cluster local-lab --dry-run
  [ "$status" -eq 0 ]
  [[ ${lines[0]} == "Dry-run cleanup (nothing is removed) of $HPC_TEST_USER on 4 nodes of partition notmpdir:" ]]
  wait_node_jobs "$output"
  for n in 1 2 3 4; do
    [ "$(cat "$real/node$n/hpc_job_$id/file")" = data ]
    grep -qF "  would remove $real/node$n/hpc_job_$id (" "$LOG"
    grep -q "^node$n: dry run: would remove [0-9]* leftover folders\?, [0-9]* bytes; nothing removed" "$LOG"
  done
}

@test "--every keeps exactly one next run: a second is refused, --replace swaps it, and it runs again" {
  cleanup_now --every 1d
  local lines_now first second third
  mapfile -t lines_now < <(schedule_lines)
  [ "${#lines_now[@]}" -eq 1 ]
  [[ ${lines_now[0]} == *"|PENDING|BeginTime|"* ]]
  begins_in "${lines_now[0]}" 86400
  first=${lines_now[0]%%|*}

  run --separate-stderr researcher bash "$PROJECT/plai_cleanups/submit_cleanup.sh" --cluster "$PROFILE" --every 1d
  [ "$status" -eq 1 ]
  [[ $stderr == *"already scheduled (job $first): nothing submitted"* ]]
  [ "$(schedule_lines)" = "${lines_now[0]}" ]

  cleanup_now --every 12h --replace
  mapfile -t lines_now < <(schedule_lines)
  [ "${#lines_now[@]}" -eq 1 ]
  second=${lines_now[0]%%|*}
  [ "$second" != "$first" ]
  begins_in "${lines_now[0]}" 43200

  # Its time comes: it cleans every node and schedules the one after.
  leftover node3 hpc_job_3999999933 4
  scontrol update "jobid=$second" StartTime=now
  wait_job "$second"
  [ "$(job_state "$second")" = COMPLETED ]
  wait_node_jobs "$(sed -n "/^== .* scheduled run (job $second)\$/,\$p" "$LOG")"
  [ "${#NODE_JOBS[@]}" -eq 4 ]
  [ "$(folders_on node3)" -eq 0 ]
  mapfile -t lines_now < <(schedule_lines)
  [ "${#lines_now[@]}" -eq 1 ]
  third=${lines_now[0]%%|*}
  [ "$third" != "$second" ]
  [[ ${lines_now[0]} == *"|PENDING|BeginTime|"* ]]
  begins_in "${lines_now[0]}" 43200
}

@test "per-node folder names: this node's hpc_job_<id>_<node> goes; one named for another node sharing the disk stays" {
  leftover node1 hpc_job_3999999911_node1 4
  leftover node1 hpc_job_3999999912_node2 4
  leftover node1 hpc_job_3999999913_node1.bak 4
  cleanup_now
  grep -qF "  removed $LAB/node1/hpc_job_3999999911_node1 (" "$LOG"
  [ ! -e "$LAB/node1/hpc_job_3999999911_node1" ]
  [ -d "$LAB/node1/hpc_job_3999999912_node2" ]
  [ -d "$LAB/node1/hpc_job_3999999913_node1.bak" ]
}
