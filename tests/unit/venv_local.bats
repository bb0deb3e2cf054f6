#!/usr/bin/env bats
# --venv-to-local, submit side (recording sbatch): what is refused before anything is
# written, the archive packed once and reused while the venv's manifest is unchanged, a
# change packed again, the plan's exports; the profile's default. Job side without Slurm:
# the copy's paths rewritten, its folder refused when it is not the user's.
# shellcheck disable=SC2030,SC2031 # each @test runs in a subshell of its own

load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'python -c "import smallpkg"'
  python3 -m venv --without-pip "$PROJECT/.venv"
  SITE=$(echo "$PROJECT"/.venv/lib/python3*/site-packages)
  echo 'WHO = "v1"' >"$SITE/smallpkg.py"
  PROFILE=$BATS_TEST_TMPDIR/p.conf
  printf 'source %q\nHPC_VENV_LOCAL_DIR=%q\n' "$REPO_ROOT/hpc_files/clusters/local.conf" \
    "$BATS_TEST_TMPDIR/copies/%u" >"$PROFILE"
}

# exported NAME [N]: the value the Nth (default: last) batch script exports for NAME.
exported() {
  sed -n "s/^export $1='\(.*\)'$/\1/p" "$SBATCH_STUB_LOG.script.${2:-$(sbatch_calls)}"
}

@test "packed once, reused while unchanged (decided in ms), packed again after pip-like changes; the script names the archive" {
  run --separate-stderr submitter -C "$PROFILE" --venv-to-local
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [[ $stderr == *"venv: $PROJECT/.venv changed or was never packed (decided in "*" ms): packing it into $SCRATCH/proj/.hpc_staging/venv-"* ]]
  [[ $stderr == *"venv: packed in "*" s ("* ]]
  local a1
  a1=$(exported HPC_VENV_LOCAL_ARCHIVE)
  [[ $a1 =~ ^$SCRATCH/proj/.hpc_staging/venv-[0-9a-f]{16}-[0-9a-f]{16}\.tar\.(zst|gz)$ ]]
  [ -f "$a1" ]
  [ "$(exported HPC_VENV_LOCAL_DIR)" = "$BATS_TEST_TMPDIR/copies/%u" ]
  [ "$(exported HPC_VENV_LOCAL_REAL)" = "$(realpath "$PROJECT/.venv")" ]
  [[ $(exported HPC_VENV_LOCAL_SHA) =~ ^[0-9a-f]{64}$ ]]
  grep -qx '4242' "${a1%.tar*}.jobs"
  tar -tf "$a1" | grep -q 'site-packages/smallpkg.py$' # (GNU tar finds the compressor itself)
  # Unchanged: reused, the same archive.
  run --separate-stderr submitter -C "$PROFILE" --venv-to-local
  [[ $stderr == *"venv: $PROJECT/.venv is unchanged: archive ${a1##*/} reused ("*"; decided in "*" ms)"* ]]
  [ "$(exported HPC_VENV_LOCAL_ARCHIVE)" = "$a1" ]
  # A package changed (its module at site-packages' top), then one added (a dist-info).
  echo 'WHO = "v2"' >"$SITE/smallpkg.py"
  run --separate-stderr submitter -C "$PROFILE" --venv-to-local
  [[ $stderr == *"changed or was never packed"* ]]
  local a2
  a2=$(exported HPC_VENV_LOCAL_ARCHIVE)
  [ "$a2" != "$a1" ]
  [ -f "$a2" ]
  [ -f "$a1" ] # the old one stays for queued jobs
  # A new package folder at the top is a change; a file deep inside one is not looked at.
  mkdir -p "$SITE/deep/sub"
  run --separate-stderr submitter -C "$PROFILE" --venv-to-local
  [[ $stderr == *"changed or was never packed"* ]]
  echo 'x = 1' >"$SITE/deep/sub/x.py"
  run --separate-stderr submitter -C "$PROFILE" --venv-to-local
  [[ $stderr == *"is unchanged"* ]]
  # What pip writes: a dist-info with its RECORD (a new one, or a RECORD rewritten).
  mkdir -p "$SITE/deep-1.0.dist-info"
  run --separate-stderr submitter -C "$PROFILE" --venv-to-local
  [[ $stderr == *"changed or was never packed"* ]]
  echo "deep/sub/x.py,," >"$SITE/deep-1.0.dist-info/RECORD"
  run --separate-stderr submitter -C "$PROFILE" --venv-to-local
  [[ $stderr == *"changed or was never packed"* ]]
}

@test "--dry-run says whether the archive would be packed or reused and writes nothing" {
  run --separate-stderr submitter -C "$PROFILE" --venv-to-local --dry-run
  [ "$status" -eq 0 ]
  [[ $stderr == *"venv: $PROJECT/.venv to each node's local disk; archive $SCRATCH/proj/.hpc_staging/venv-"*" would be built (decided in "*" ms)"* ]]
  [[ $output == *"export HPC_VENV_LOCAL_ARCHIVE="* ]]
  scratch_is_empty
}

@test "without --venv-to-local nothing of it is in the script; the profile's HPC_VENV_TO_LOCAL=yes turns it on, --no-venv-to-local off" {
  run --separate-stderr submitter -C "$PROFILE"
  [ "$status" -eq 0 ]
  [ -z "$(exported HPC_VENV_LOCAL_ARCHIVE)" ]
  printf 'HPC_VENV_TO_LOCAL=yes\n' >>"$PROFILE"
  run --separate-stderr submitter -C "$PROFILE"
  [ "$status" -eq 0 ]
  [ -n "$(exported HPC_VENV_LOCAL_ARCHIVE)" ]
  run --separate-stderr submitter -C "$PROFILE" --no-venv-to-local
  [ "$status" -eq 0 ]
  [ -z "$(exported HPC_VENV_LOCAL_ARCHIVE)" ]
  # The profile's default does not apply without a venv (--venv none; a missing venv is
  # the usual warning).
  run --separate-stderr submitter -C "$PROFILE" --venv none
  [ "$status" -eq 0 ]
  [ -z "$(exported HPC_VENV_LOCAL_ARCHIVE)" ]
  run --separate-stderr submitter -C "$PROFILE" --venv "$BATS_TEST_TMPDIR/nothing"
  [ "$status" -eq 0 ]
  [[ $stderr == *"no virtual environment at $BATS_TEST_TMPDIR/nothing"* ]]
  [ -z "$(exported HPC_VENV_LOCAL_ARCHIVE)" ]
}

@test "refused before anything is written: editable installs, absolute .pth paths, no venv, contradictions, a per-node path" {
  echo "$PROJECT/src" >"$SITE/__editable__.proj-0.1.pth"
  refused "__editable__.proj-0.1.pth (an editable install: pip install -e)" -C "$PROFILE" --venv-to-local
  rm "$SITE/__editable__.proj-0.1.pth"
  printf 'import os\n/opt/somewhere\n' >"$SITE/extra.pth"
  refused "extra.pth (adds the absolute path /opt/somewhere)" -C "$PROFILE" --venv-to-local
  rm "$SITE/extra.pth"
  mkdir -p "$SITE/proj-0.1.dist-info"
  echo '{"url": "file:///x", "dir_info": {"editable": true}}' >"$SITE/proj-0.1.dist-info/direct_url.json"
  refused "proj-0.1.dist-info (an editable install)" -C "$PROFILE" --venv-to-local
  echo '{"url": "file:///x", "dir_info": {}}' >"$SITE/proj-0.1.dist-info/direct_url.json"
  refused "--venv-to-local with --venv none" -C "$PROFILE" --venv-to-local --venv none
  refused "is not a virtual environment" -C "$PROFILE" --venv-to-local --venv "$BATS_TEST_TMPDIR/nothing"
  refused "contradict each other" -C "$PROFILE" --venv-to-local --no-venv-to-local
  refused "--setup-venv builds it later" -C "$PROFILE" --venv-to-local --setup-venv
  printf 'HPC_VENV_LOCAL_DIR=/local/%%n/venvs\n' >>"$PROFILE"
  refused "holds %n: the venv's copy must have the same path on every node" -C "$PROFILE" --venv-to-local
  printf 'HPC_VENV_TO_LOCAL=maybe\n' >>"$PROFILE"
  refused "HPC_VENV_TO_LOCAL must be 'yes' or 'no', not 'maybe'" -C "$PROFILE"
}

# --- job side, without Slurm ------------------------------------------------------------

# job_setup: a packed archive of the project's venv (its console script names the venv),
# and the job's variables as the batch script exports them.
job_setup() {
  printf '#!%s/bin/python\nimport smallpkg\n' "$PROJECT/.venv" >"$PROJECT/.venv/bin/tool"
  chmod +x "$PROJECT/.venv/bin/tool"
  run --separate-stderr submitter -C "$PROFILE" --venv-to-local
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  export HPC_VENV=$PROJECT/.venv HPC_VENV_LOCAL_ARCHIVE HPC_VENV_LOCAL_DIR HPC_VENV_LOCAL_BYTES
  HPC_VENV_LOCAL_ARCHIVE=$(exported HPC_VENV_LOCAL_ARCHIVE)
  HPC_VENV_LOCAL_DIR=$(exported HPC_VENV_LOCAL_DIR)
  HPC_VENV_LOCAL_BYTES=$(exported HPC_VENV_LOCAL_BYTES)
  export SLURM_JOB_ID=77 SLURMD_NODENAME=nodeA USER=root
}

@test "job side: the copy's scripts, activate and pyvenv.cfg name the copy; python there is the copy; a second job finds it ready" {
  job_setup
  mkdir -p "$BATS_TEST_TMPDIR/copies"
  run --separate-stderr bash "$REPO_ROOT/virtual_env_hpc_files/venv_local.sh" setup "$HPC_VENV_LOCAL_ARCHIVE"
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  local name=${HPC_VENV_LOCAL_ARCHIVE##*/} copy
  copy=$BATS_TEST_TMPDIR/copies/root/${name%.tar*}
  [[ $output == *"venv: unpacked $name ("*") into $copy in "*" ms"* ]]
  [ "$(head -1 "$copy/bin/tool")" = "#!$copy/bin/python" ]
  grep -qxE "VIRTUAL_ENV=\"?$copy\"?" "$copy/bin/activate"
  run ! grep -rqF "$PROJECT/.venv" "$copy/bin" "$copy/pyvenv.cfg"
  [ "$("$copy/bin/python" -c 'import sys, smallpkg; print(sys.prefix, smallpkg.WHO)')" = "$copy v1" ]
  "$copy/bin/tool"
  [ -f "$BATS_TEST_TMPDIR/copies/root/${name%.tar*}.jobs/77" ]
  [ "$(stat -c %a "$BATS_TEST_TMPDIR/copies/root")" = 700 ]
  SLURM_JOB_ID=78 run --separate-stderr bash "$REPO_ROOT/virtual_env_hpc_files/venv_local.sh" setup "$HPC_VENV_LOCAL_ARCHIVE"
  [ "$status" -eq 0 ]
  [[ $output == *"venv: node-local copy $copy is ready (found in "*" ms)"* ]]
  [ -f "$BATS_TEST_TMPDIR/copies/root/${name%.tar*}.jobs/78" ]
}

@test "job side: a venv folder that is a link, another user's, or open to others is left alone (the node's setup says so, exit 3: the job then uses a private folder); a missing archive says submit again" {
  job_setup
  mkdir -p "$BATS_TEST_TMPDIR/copies" "$BATS_TEST_TMPDIR/elsewhere"
  ln -s "$BATS_TEST_TMPDIR/elsewhere" "$BATS_TEST_TMPDIR/copies/root"
  run --separate-stderr bash "$REPO_ROOT/virtual_env_hpc_files/venv_local.sh" setup "$HPC_VENV_LOCAL_ARCHIVE"
  [ "$status" -eq 3 ]
  [[ $stderr == *"WARNING: venv: $BATS_TEST_TMPDIR/copies/root is not safe for the node-local venv: $BATS_TEST_TMPDIR/copies/root is a symbolic link"*"the job uses a private folder of its own instead"* ]]
  [ -z "$(ls -A "$BATS_TEST_TMPDIR/elsewhere")" ]
  rm "$BATS_TEST_TMPDIR/copies/root"
  mkdir "$BATS_TEST_TMPDIR/copies/root"
  chown nobody "$BATS_TEST_TMPDIR/copies/root"
  run --separate-stderr bash "$REPO_ROOT/virtual_env_hpc_files/venv_local.sh" setup "$HPC_VENV_LOCAL_ARCHIVE"
  [ "$status" -eq 3 ]
  [[ $stderr == *"root belongs to nobody, not to you"* ]]
  [ -z "$(ls -A "$BATS_TEST_TMPDIR/copies/root")" ]
  chown root "$BATS_TEST_TMPDIR/copies/root" && chmod 777 "$BATS_TEST_TMPDIR/copies/root"
  run --separate-stderr bash "$REPO_ROOT/virtual_env_hpc_files/venv_local.sh" setup "$HPC_VENV_LOCAL_ARCHIVE"
  [ "$status" -eq 3 ]
  [[ $stderr == *"root can be written by other users (mode 777)"* ]]
  rmdir "$BATS_TEST_TMPDIR/copies/root"
  rm -f "$HPC_VENV_LOCAL_ARCHIVE"
  run --separate-stderr bash "$REPO_ROOT/virtual_env_hpc_files/venv_local.sh" setup "$HPC_VENV_LOCAL_ARCHIVE"
  [ "$status" -eq 1 ]
  [[ $stderr == *"the venv archive $HPC_VENV_LOCAL_ARCHIVE is missing"*"submit again"* ]]
}
