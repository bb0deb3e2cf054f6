#!/usr/bin/env bats
# --data, submit side (recording sbatch): paths judged before anything is written, one
# archive built atomically and reused while its manifest is unchanged, concurrent
# submissions, hostile names; --results-dir and --sync-every in the batch script.
# shellcheck disable=SC2030,SC2031 # each @test runs in a subshell of its own: PATH is set per test

load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'echo hi'
  DATA=$SCRATCH/proj
  mkdir -p "$DATA/datasets/imgs/a" "$DATA/other"
  printf 'one' >"$DATA/datasets/imgs/a/1.bin"
  printf 'two!' >"$DATA/datasets/imgs/2.bin"
  printf 'x,y\n' >"$DATA/datasets/labels.csv"
}

# staged ARGS...: submit with ARGS; fails on a non-zero exit. Sets output/stderr.
staged() {
  run --separate-stderr submitter --exp-name s "$@"
  if [ "$status" -ne 0 ]; then
    echo "status $status: $stderr"
    return 1
  fi
}

# archive: the archive the last submitted job extracts (fails when it is not there).
archive() {
  local a
  a=$(sed -n "s/^export HPC_DATA_ARCHIVE='\(.*\)'$/\1/p" "$SBATCH_STUB_LOG.script.$(sbatch_calls)")
  if [ ! -f "$a" ]; then
    echo "archive '$a' of job $(sbatch_calls) missing; there: $(ls -A "$DATA/.hpc_staging")" >&2
    return 1
  fi
  printf '%s\n' "$a"
}

# archives: how many archives .hpc_staging holds.
archives() {
  find "$DATA/.hpc_staging" -maxdepth 1 -name '*.tar*' | wc -l
}

# listing DIR: what a staged tree holds (type, size, mode, path; contents), NUL-safe.
listing() {
  (cd "$1" && find datasets -printf '%y %s %m %p\0' | LC_ALL=C sort -z | sha256sum &&
    find datasets -type f -print0 | LC_ALL=C sort -z | xargs -0 cat | sha256sum)
}

# extracted_listing: the listing of the archive once extracted.
extracted_listing() {
  local dir=$BATS_TEST_TMPDIR/x$RANDOM
  mkdir -p "$dir"
  tar -xf "$(archive)" -C "$dir"
  listing "$dir"
}

# refused MESSAGE ARGS...: nothing submitted, nothing written, MESSAGE on stderr.
refused() {
  local message=$1
  shift
  run --separate-stderr submitter --exp-name s "$@"
  if [ "$status" -eq 0 ] || [[ $stderr != *"$message"* ]]; then
    echo "args: $* -> status $status, stderr: $stderr"
    return 1
  fi
  [ "$(sbatch_calls)" -eq 0 ]
  [ ! -e "$DATA/.hpc_staging" ] && [ ! -e "$DATA/hpc_outputs" ]
}

@test "--data builds one archive of the paths, relative, and the job script stages it" {
  staged --data datasets/imgs datasets/labels.csv
  [[ $stderr == *"data: building"* ]]
  local a
  a=$(archive)
  [[ $a == "$DATA/.hpc_staging/"*.tar.zst ]]
  [ "$(tar -tf "$a" | sort)" = "$(printf '%s\n' ./datasets/imgs/ ./datasets/imgs/2.bin ./datasets/imgs/a/ ./datasets/imgs/a/1.bin ./datasets/labels.csv | sort)" ]
  local script=$SBATCH_STUB_LOG.script.1
  grep -qx "export HPC_DATA_ARCHIVE='$a'" "$script"
  # Space needed once extracted: 3 files and 2 folders of 4 KiB blocks.
  grep -qx "export HPC_DATA_BYTES='20480'" "$script"
  grep -q '^hpc_prepare_tmpdir ' "$script"
  grep -q '^hpc_stage_data ' "$script"
  # Nothing half-written is left, and the state names the archive.
  [ -z "$(find "$DATA/.hpc_staging" -name '*.tmp.*')" ]
  [ "$(cut -d' ' -f2 "$DATA"/.hpc_staging/*.state)" = "${a##*/}" ]
}

@test "an unchanged dataset reuses the archive; a changed, touched, added or removed file rebuilds it" {
  staged --data datasets
  local a inode
  a=$(archive)
  inode=$(stat -c %i "$a")
  staged --data datasets
  [[ $stderr == *"is up to date"*"reused (decided in "*" ms)"* ]]
  [[ $stderr != *building* ]]
  [ "$(stat -c %i "$a")" = "$inode" ]

  printf 'TWO!' >"$DATA/datasets/imgs/2.bin" # same size, new content and time
  staged --data datasets
  [[ $stderr == *"data: building"* ]]
  [ "$(extracted_listing)" = "$(listing "$DATA")" ]

  touch -d '2001-01-01 00:00:01' "$DATA/datasets/labels.csv"
  staged --data datasets
  [[ $stderr == *"data: building"* ]]

  printf 'new' >"$DATA/datasets/imgs/a/3.bin"
  staged --data datasets
  [[ $stderr == *"data: building"* ]]
  [ "$(extracted_listing)" = "$(listing "$DATA")" ]

  rm "$DATA/datasets/imgs/a/1.bin"
  staged --data datasets
  [[ $stderr == *"data: building"* ]]
  [ "$(extracted_listing)" = "$(listing "$DATA")" ]
  staged --data datasets
  [[ $stderr == *reused* ]]
  # Every content has its own archive: none was replaced under a job that may wait.
  [ "$(archives)" -eq 5 ]
}

@test "the same paths in another order or spelling share one archive; another set has its own" {
  staged --data datasets/labels.csv datasets/imgs
  staged --data ./datasets//imgs/ "$DATA/datasets/labels.csv" datasets/imgs
  [[ $stderr == *reused* ]]
  [ "$(find "$DATA/.hpc_staging" -name '*.tar.zst' | wc -l)" -eq 1 ]
  staged --data datasets/imgs
  [[ $stderr == *building* ]]
  [ "$(find "$DATA/.hpc_staging" -name '*.tar.zst' | wc -l)" -eq 2 ]
}

@test "an absolute path through the real folder behind a linked \$SCRATCH is accepted" {
  mv "$SCRATCH" "$BATS_TEST_TMPDIR/real_scratch"
  ln -s "$BATS_TEST_TMPDIR/real_scratch" "$SCRATCH"
  staged --data "$BATS_TEST_TMPDIR/real_scratch/proj/datasets/labels.csv"
  tar -tf "$(archive)" | grep -qx ./datasets/labels.csv
}

@test "paths outside \$SCRATCH/<project>, with .., or missing are refused before submission" {
  refused "--data '/etc/hosts' is outside $SCRATCH/proj" --data /etc/hosts
  refused "--data '$SCRATCH/other' is outside" --data "$SCRATCH/other"
  refused "--data 'datasets/../other' holds '..'" --data datasets/../other
  refused "--data '../proj2' holds '..'" --data ../proj2
  refused "names $SCRATCH/proj itself" --data .
  refused "--data 'datasets/nope' not found: $SCRATCH/proj/datasets/nope does not exist" --data datasets/imgs datasets/nope
  refused "toolkit's own folder" --data .hpc_staging
  refused "--data 'datasets/imgs' is inside 'datasets': give only 'datasets'" --data datasets datasets/imgs
  refused "--data 'datasets/imgs' is inside 'datasets': give only 'datasets'" --data datasets/imgs datasets
  refused "a path holds a newline" --data $'datasets/a\nb'
  refused "--data needs at least one path" --data
}

@test "symbolic links that lead out of \$SCRATCH/<project> are refused, wherever they are" {
  mkdir -p "$BATS_TEST_TMPDIR/outside/sub"
  echo secret >"$BATS_TEST_TMPDIR/outside/sub/f"
  ln -s "$BATS_TEST_TMPDIR/outside" "$DATA/escape"
  refused "--data 'escape' is a symbolic link" --data escape
  refused "point outside $SCRATCH/proj" --data escape/sub
  ln -s ../../../../../outside/sub/f "$DATA/datasets/imgs/a/link"
  refused "1 symbolic link(s) inside the staged folders point outside" --data datasets/imgs
  refused "datasets/imgs/a/link ->" --data datasets/imgs
  # A link to data of the project that is not staged would dangle on the node: refused
  # (second review), naming the staged paths.
  rm "$DATA/datasets/imgs/a/link"
  ln -s ../../labels.csv "$DATA/datasets/imgs/a/link"
  refused "1 symbolic link(s) inside the staged folders point outside the staged paths (--data datasets/imgs)" --data datasets/imgs
  # Staged too, it is not an escape: it is staged as a link.
  staged --data datasets
  tar -tvf "$(archive)" | grep -q '^l.* ./datasets/imgs/a/link -> ../../labels.csv$'
}

@test "entries that are not files, folders or links are refused" {
  mkfifo "$DATA/datasets/imgs/pipe"
  refused "1 entries are not files, folders or links" --data datasets
}

@test "hostile names inside staged folders and in --data paths arrive intact" {
  local d="$DATA/my data/é ü 数据"
  mkdir -p "$d/-dash dir" "$DATA/-odd"
  printf 1 >"$d/with space.txt"
  printf 2 >"$d/-leading dash"
  printf 3 >"$d/"$'new\nline'
  printf 4 >"$d/-dash dir/"$'tab\tand \\ back'
  printf 5 >"$d/quote'\"\$(x)"
  printf 6 >"$DATA/-odd/f"
  staged --data "my data" "./-odd"
  local x=$BATS_TEST_TMPDIR/x
  mkdir -p "$x"
  tar -xf "$(archive)" -C "$x"
  diff -r "$DATA/my data" "$x/my data"
  diff -r "$DATA/-odd" "$x/-odd"
  [ "$(cat "$x/my data/é ü 数据/"$'new\nline')" = 3 ]
}

@test "compressor: zstd when there, else pigz, else plain tar; HPC_DATA_COMPRESS chooses" {
  local bin=$BATS_TEST_TMPDIR/bin tool
  mkdir -p "$bin"
  for tool in /usr/local/bin/* /usr/bin/* /bin/*; do
    case ${tool##*/} in zstd | pigz | sbatch) continue ;; esac
    [[ -e $bin/${tool##*/} ]] || ln -s "$tool" "$bin/${tool##*/}"
  done
  ln -s "$REPO_ROOT/tests/helpers/stubs/sbatch" "$bin/sbatch"
  PATH=$bin staged --data datasets
  [[ $(archive) == *.tar ]]
  tar -tf "$(archive)" | grep -qx ./datasets/labels.csv
  ln -s /usr/bin/pigz "$bin/pigz"
  PATH=$bin staged --data datasets
  [[ $(archive) == *.tar.gz ]] # the .tar one was replaced
  [ "$(gzip -dc "$(archive)" | tar -tf - | wc -l)" -eq 6 ]
  HPC_DATA_COMPRESS=none staged --data datasets
  [[ $(archive) == *.tar ]]
  rm -rf "$DATA/.hpc_staging" "$DATA/hpc_outputs"
  : >"$SBATCH_STUB_LOG"
  HPC_DATA_COMPRESS=zstd PATH=$bin refused "HPC_DATA_COMPRESS=zstd, but zstd is not on PATH" --data datasets
}

@test "two submissions of the same data at once: one builds, the other waits and reuses" {
  # A zstd that takes a second makes the two overlap for sure.
  local bin=$BATS_TEST_TMPDIR/slow
  mkdir -p "$bin"
  printf '#!/bin/sh\nsleep 1\nexec /usr/bin/zstd "$@"\n' >"$bin/zstd"
  chmod +x "$bin/zstd"
  export PATH=$bin:$PATH
  (cd "$PROJECT" && bash hpc_files/job_submitter.sh -e a --data datasets >"$BATS_TEST_TMPDIR/a.out" 2>&1) &
  local pa=$!
  (cd "$PROJECT" && bash hpc_files/job_submitter.sh -e b --data datasets >"$BATS_TEST_TMPDIR/b.out" 2>&1) &
  local pb=$!
  local sa=0 sb=0
  wait "$pa" || sa=$?
  wait "$pb" || sb=$?
  cat "$BATS_TEST_TMPDIR"/a.out "$BATS_TEST_TMPDIR"/b.out
  [ "$sa" -eq 0 ]
  [ "$sb" -eq 0 ]
  [ "$(cat "$BATS_TEST_TMPDIR"/{a,b}.out | grep -c 'data: building')" -eq 1 ]
  [ "$(cat "$BATS_TEST_TMPDIR"/{a,b}.out | grep -c 'another submission is building this archive; waiting')" -eq 1 ]
  [ "$(cat "$BATS_TEST_TMPDIR"/{a,b}.out | grep -c 'reused')" -eq 1 ]
  [ "$(sbatch_calls)" -eq 2 ]
  [ "$(extracted_listing)" = "$(listing "$DATA")" ]
  [ -z "$(find "$DATA/.hpc_staging" -name '*.tmp.*')" ]
}

@test "a failed archive build leaves no archive and submits nothing" {
  local bin=$BATS_TEST_TMPDIR/bad
  mkdir -p "$bin"
  printf '#!/bin/sh\ncat >/dev/null; echo "zstd: disk full" >&2; exit 1\n' >"$bin/zstd"
  chmod +x "$bin/zstd"
  PATH=$bin:$PATH run --separate-stderr submitter --data datasets
  [ "$status" -ne 0 ]
  [[ $stderr == *"building $DATA/.hpc_staging/"*"failed"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
  [ -z "$(find "$DATA/.hpc_staging" -name '*.tar*' -o -name '*.state')" ]
}

@test "--dry-run with --data judges the paths and writes nothing" {
  run --separate-stderr submitter --dry-run --data datasets
  [ "$status" -eq 0 ]
  [[ $stderr == *"data: 1 path(s), 6 entries, 11 B; archive $DATA/.hpc_staging/"*".tar.zst would be built"* ]]
  [[ $output == *"export HPC_DATA_ARCHIVE="* ]]
  [ ! -e "$DATA/.hpc_staging" ]
  staged --data datasets
  run --separate-stderr submitter --dry-run --data datasets
  [[ $stderr == *"is up to date (would be reused)"* ]]
}

@test "a large archive shows its progress on a terminal, and nothing when not on one" {
  command -v script
  HPC_DATA_PROGRESS_MIB=0 staged --data datasets
  [[ $stderr != *archiving* ]]
  rm -rf "$DATA/.hpc_staging"
  local out=$BATS_TEST_TMPDIR/tty.out
  # script(1) gives the submission a terminal.
  HPC_DATA_PROGRESS_MIB=0 script -qec "cd '$PROJECT' && bash hpc_files/job_submitter.sh -e t --data datasets" "$out" >/dev/null
  grep -q 'data: archiving [0-9]*%' "$out"
  archive >/dev/null
}

@test "without --data the submission starts no staging process" {
  local bin=$BATS_TEST_TMPDIR/spy tool
  mkdir -p "$bin"
  # (Not awk: the configs file's check runs it on every submission; staging's awk only
  # reads what its find prints. Not flock: every submission appends to the ledger under
  # its lock, ledger.sh; staging's flock comes with its find and tar.)
  for tool in find tar zstd pigz sha256sum realpath mktemp; do
    printf '#!/bin/sh\necho "%s $*" >>"%s"\nexit 1\n' "$tool" "$BATS_TEST_TMPDIR/spied" >"$bin/$tool"
    chmod +x "$bin/$tool"
  done
  (cd "$PROJECT" && PATH=$bin:$PATH bash hpc_files/job_submitter.sh -e s 2>/dev/null)
  [ ! -e "$BATS_TEST_TMPDIR/spied" ]
  ! grep -q HPC_DATA "$SBATCH_STUB_LOG.script.1" || false
}

@test "--results-dir and --sync-every reach the job script; bad values are refused" {
  staged --sync-every 0.5 --results-dir out/final
  grep -qx "export HPC_SYNC_EVERY_S='30'" "$SBATCH_STUB_LOG.script.1"
  grep -qx "export HPC_RESULTS_FOLDER='out/final'" "$SBATCH_STUB_LOG.script.1"
  staged --sync-every=10 --sync-every 15
  grep -qx "export HPC_SYNC_EVERY_S='900'" "$SBATCH_STUB_LOG.script.2"
  ! grep -q HPC_RESULTS_FOLDER "$SBATCH_STUB_LOG.script.2" || false
  # The defaults add nothing to the script.
  staged --results-dir results
  ! grep -q 'HPC_RESULTS_FOLDER\|HPC_SYNC_EVERY_S' "$SBATCH_STUB_LOG.script.3" || false
  rm -rf "$DATA/hpc_outputs"
  : >"$SBATCH_STUB_LOG"
  refused "--sync-every 'x' is not a number of minutes" --sync-every x
  refused "--sync-every '0' is shorter than a second" --sync-every 0
  refused "--sync-every needs a results folder" --sync-every 5 --results-dir none
  refused "--results-dir '../up' holds '..'" --results-dir ../up
  refused "--results-dir '.' names no folder" --results-dir .
  # The input-error code, as every refusal of bad input (issue 32: '..' was said to exit 1).
  local bad
  for bad in .. ../ ./.. a/../.. /abs; do
    run --separate-stderr submitter --exp-name s --results-dir "$bad"
    [ "$status" -eq 2 ] || { echo "--results-dir $bad: exit $status: $stderr"; return 1; }
  done
}

@test "--help documents the staging options" {
  run submitter --help
  local opt
  for opt in --data --results-dir --sync-every; do
    [[ $output == *"$opt"* ]] || { echo "missing $opt"; return 1; }
  done
}

@test "a tampered KEY.state is never evaluated: hostile sizes and counts rebuild the archive" {
  load ../helpers/hostile_state
  PWNED=$BATS_TEST_TMPDIR/pwned
  hostile_state_values
  staged --data datasets
  local state=("$DATA"/.hpc_staging/*.state) sha name bytes entries size field value
  read -r sha name bytes entries size <"${state[0]}"
  for field in 3 4 5; do
    for value in "${HOSTILE_STATE[@]}"; do
      local f=("$sha" "$name" "$bytes" "$entries" "$size")
      f[field - 1]=$value
      printf '%s %s %s %s %s\n' "${f[@]}" >"${state[0]}"
      staged --data datasets
      [ ! -e "$PWNED" ]
      # Not trusted: the archive is built again, and the job gets counted numbers.
      [[ $stderr == *"data: building"* ]] || { echo "field $field '$value' was trusted: $stderr"; return 1; }
      grep -qx "export HPC_DATA_BYTES='$bytes'" "$SBATCH_STUB_LOG.script.$(sbatch_calls)"
      grep -qx "export HPC_DATA_ENTRIES='$entries'" "$SBATCH_STUB_LOG.script.$(sbatch_calls)"
    done
  done
  # The untampered state rebuilt by the last submission is trusted again.
  staged --data datasets
  [[ $stderr == *reused* ]]
}

# squeue_stub: a squeue first on PATH that lists the ids of $BATS_TEST_TMPDIR/queued found
# in its -j argument, says "Invalid job id" when none is, and fails when the file
# $BATS_TEST_TMPDIR/squeue_down exists. Calls are recorded in $BATS_TEST_TMPDIR/squeue.log.
squeue_stub() {
  mkdir -p "$BATS_TEST_TMPDIR/qbin"
  : >"$BATS_TEST_TMPDIR/queued"
  cat >"$BATS_TEST_TMPDIR/qbin/squeue" <<EOF2
#!/usr/bin/env bash
printf '%s\n' "\$*" >>"$BATS_TEST_TMPDIR/squeue.log"
[ ! -e "$BATS_TEST_TMPDIR/squeue_down" ] || { echo 'squeue: error: Unable to contact slurm controller' >&2; exit 1; }
while [ \$# -gt 0 ]; do [ "\$1" = -j ] && ids=\$2; shift; done
found=0
for id in \${ids//,/ }; do
  if grep -qx "\$id" "$BATS_TEST_TMPDIR/queued"; then echo "\$id"; found=1; fi
done
if [ -z "\${ids:-}" ]; then cat "$BATS_TEST_TMPDIR/queued"; exit 0; fi # -u USER: all of them
[ \$found = 1 ] || { echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1; }
EOF2
  chmod +x "$BATS_TEST_TMPDIR/qbin/squeue"
  export PATH=$BATS_TEST_TMPDIR/qbin:$PATH
}

@test "data changed while the first job waits: each job keeps the archive of the data it was submitted with" {
  squeue_stub
  export HPC_STAGING_KEEP_MIN=0
  staged --data datasets
  local first first_listing
  first=$(archive)
  first_listing=$(listing "$DATA")
  echo 4242 >>"$BATS_TEST_TMPDIR/queued" # the first job waits in the queue
  printf 'new' >"$DATA/datasets/imgs/a/3.bin"
  # (Another experiment: one of the same name is refused while the first is queued.)
  staged --data datasets --exp-name s2
  [[ $stderr == *"data: building"* ]]
  [ "$(archive)" != "$first" ]
  # The first job's archive is still there, with the data the first job was submitted with.
  [ -f "$first" ]
  grep -qx "export HPC_DATA_ARCHIVE='$first'" "$SBATCH_STUB_LOG.script.1"
  local dir=$BATS_TEST_TMPDIR/first
  mkdir -p "$dir"
  tar -xf "$first" -C "$dir"
  [ "$(listing "$dir")" = "$first_listing" ]
  [ "$(listing "$dir")" != "$(listing "$DATA")" ]
  # Each archive lists the jobs that refer to it; its name holds its manifest's hash.
  [ "$(cat "${first%.tar*}.jobs")" = 4242 ]
  [ "$(cat "$(archive | sed 's/\.tar.*//').jobs")" = 4243 ]
  local sha
  sha=$(sed -n "s/^export HPC_DATA_SHA='\\(.*\\)'$/\\1/p" "$SBATCH_STUB_LOG.script.1")
  [[ $sha =~ ^[0-9a-f]{64}$ ]]
  [[ ${first##*/} == *"-${sha:0:16}.tar.zst" ]]
  grep -qx "export HPC_DATA_ENTRIES='6'" "$SBATCH_STUB_LOG.script.1"
}

@test "archives no queued or running job refers to are pruned; queued ones, recent ones, and all when squeue fails are kept" {
  load ../helpers/hostile_state
  # (Each submission its own experiment: one of the same name is refused while another is queued.)
  squeue_stub
  export HPC_STAGING_KEEP_MIN=0
  staged --data datasets --exp-name s1 # job 4242, archive A
  local a b c legacy
  a=$(archive)
  echo 4242 >"$BATS_TEST_TMPDIR/queued"
  printf '1' >"$DATA/datasets/imgs/a/4.bin"
  staged --data datasets --exp-name s2 # job 4243, archive B
  [ -f "$a" ] # its job is queued
  b=$(archive)
  # A legacy archive (no .jobs file, from before archives were named by content), long
  # unused: it goes when the user has no job queued at all (then, only B's 4243 is).
  legacy=$DATA/.hpc_staging/0123456789abcdef.tar.zst
  cp "$a" "$legacy"
  echo "x 0123456789abcdef.tar.zst 1 1 1" >"$DATA/.hpc_staging/0123456789abcdef.state"
  touch -d '2001-01-01' "$legacy"
  # B's job list was edited: hostile lines are ignored, never run.
  PWNED=$BATS_TEST_TMPDIR/pwned
  hostile_state_values
  printf '%s\n' "${HOSTILE_STATE[@]}" >>"${b%.tar*}.jobs"
  echo 4243 >"$BATS_TEST_TMPDIR/queued" # B's job is still queued; A's (4242) has ended
  # squeue cannot be asked: nothing is pruned.
  touch "$BATS_TEST_TMPDIR/squeue_down"
  printf '2' >"$DATA/datasets/imgs/a/5.bin"
  staged --data datasets --exp-name s3 # job 4244, archive C
  c=$(archive)
  [ -f "$a" ]
  [ -f "$b" ]
  [ -f "$legacy" ]
  rm "$BATS_TEST_TMPDIR/squeue_down"
  # A submission of unchanged data (reuse) prunes too.
  staged --data datasets --exp-name s4
  [[ $stderr == *reused* ]]
  [[ $stderr == *"data: pruned 1 archive(s)"* ]]
  [ ! -e "$a" ]
  [ ! -e "${a%.tar*}.state" ]
  [ ! -e "${a%.tar*}.jobs" ]
  [ -f "$b" ]
  [ -f "$c" ]
  [ -f "$legacy" ] # the user still has a job queued: it might be that archive's
  [ ! -e "$PWNED" ]
  # squeue was asked only for job ids, or for the user's jobs.
  ! grep -v -e '^-h -o %i -j [0-9,]*$' -e "^-h -o %i -u $(id -un)\$" "$BATS_TEST_TMPDIR/squeue.log" || false
  # Within HPC_STAGING_KEEP_MIN of its last submission an archive stays, its jobs ended or not.
  : >"$BATS_TEST_TMPDIR/queued"
  touch "$b"
  HPC_STAGING_KEEP_MIN=30 staged --data datasets --exp-name s5
  [ -f "$b" ]
  [ ! -e "$legacy" ]
  [ ! -e "$DATA/.hpc_staging/0123456789abcdef.state" ]
  staged --data datasets --exp-name s6
  [ ! -e "$b" ] && [ -f "$c" ]
}
