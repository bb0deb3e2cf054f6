#!/usr/bin/env bats
# --remote HOST (hpc_files/lib/remote.sh) with recording stubs of ssh and rsync: what is
# copied, the words the login node gets (hostile ones included), the exit code passed
# back, the clear lines. The real thing, over a real sshd: tests/integration/remote.bats.
# shellcheck disable=SC2016 # stub code in single quotes

load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'python examples/train.py --lr 0.1'
  STUBS=$BATS_TEST_TMPDIR/stubs
  mkdir -p "$STUBS"
  export STUB_LOG=$BATS_TEST_TMPDIR/stub.log REMOTE_RC=0
  : >"$STUB_LOG"
  # ssh: each call's words, one per line, then "--"; host "dead" is unreachable; the
  # submission itself (its last word starts with 'bash') answers as the login node would.
  cat >"$STUBS/ssh" <<'EOF'
#!/bin/bash
printf '%s\n' "$@" -- >>"$STUB_LOG"
for a; do [[ $a == dead ]] && { echo "ssh: connect to host dead port 22: Connection refused" >&2; exit 255; }; done
last=${*: -1}
if [[ $last == "'bash' '-lc'"* ]]; then
  printf '%s\n' "$last" >"$STUB_LOG.command"
  echo "Submitted batch job 4242"
  exit "$REMOTE_RC"
fi
exit 0
EOF
  # rsync: its words, and the file list it was given.
  cat >"$STUBS/rsync" <<'EOF'
#!/bin/bash
printf 'rsync %s\n' "$*" >>"$STUB_LOG"
for a; do [[ $a == --files-from=* ]] && tr '\0' '\n' <"${a#--files-from=}" >"$STUB_LOG.files"; done
for a; do [[ $a == */code.record ]] && cp "$a" "$STUB_LOG.record"; done
exit 0
EOF
  chmod +x "$STUBS/ssh" "$STUBS/rsync"
  export PATH=$STUBS:$PATH
  (cd "$PROJECT" && git init -q && printf 'data/\n' >.gitignore && git add -A &&
    git -c user.name=t -c user.email=t@t commit -qm init)
}

@test "what goes: tracked and untracked-not-ignored files, the toolkit, the laptop's code record; never a venv, .git or ignored data" {
  printf 'x\n' >"$PROJECT/new_untracked.py"
  mkdir -p "$PROJECT/data" "$PROJECT/myenv/bin"
  printf 'x\n' >"$PROJECT/data/big.bin"
  printf 'home = /usr\n' >"$PROJECT/myenv/pyvenv.cfg" # a venv by another name, not ignored
  printf 'x\n' >"$PROJECT/myenv/bin/python"
  rm "$PROJECT/examples/train.py" # tracked, deleted since
  run --separate-stderr submitter --remote login --exp-name e
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  [ "$output" = "Submitted batch job 4242" ]
  files=$(cat "$STUB_LOG.files")
  grep -qx new_untracked.py <<<"$files"
  grep -qx experiment_configurations.txt <<<"$files"
  grep -qx hpc_files <<<"$files" && grep -qx virtual_env_hpc_files <<<"$files" && grep -qx python <<<"$files"
  run grep -c '^data/\|^myenv/\|^\.git/\|^examples/train.py$' <<<"$files"
  [ "$output" = 0 ]
  [[ $(cat "$STUB_LOG") == *"rsync "*"--rsync-path=mkdir -p -- ~/'proj' && rsync"*" -- $PROJECT/ login:proj/"* ]]
  # the code record the copy carries: the laptop's commit (the copy is no repository)
  grep -qx "commit: $(git -C "$PROJECT" rev-parse HEAD)" "$STUB_LOG.record"
  grep -qx "from: $(uname -n):$PROJECT" "$STUB_LOG.record"
  [[ $(cat "$STUB_LOG") == *"/code.record "*"/code.diff "*"/code.files.new login:proj/.hpc_remote/"* ]]
}

@test "the login node gets the same words, less --remote, hostile ones intact; one connection's options" {
  local hostile=$'a b\'c"d $HOME `x` \\ ;|&'
  run --separate-stderr submitter --remote login --exp-name e --sbatch-option "--comment=$hostile"
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  # Evaluated by a shell as sshd would, with a `bash` that prints its words.
  mkdir -p "$BATS_TEST_TMPDIR/show"
  printf '#!/bin/sh\nshift 3\nprintf "%%s\\n" "$@"\n' >"$BATS_TEST_TMPDIR/show/bash"
  chmod +x "$BATS_TEST_TMPDIR/show/bash"
  run env PATH="$BATS_TEST_TMPDIR/show:/usr/bin:/bin" sh -c "$(cat "$STUB_LOG.command")"
  [ "${lines[0]}" = "~""/proj" ]
  [ "${lines[1]}" = --remote ]
  [ "${lines[2]}" = none ]
  [ "${lines[3]}" = --exp-name ]
  [ "${lines[4]}" = e ]
  [ "${lines[5]}" = --sbatch-option ]
  [ "${lines[6]}" = "--comment=$hostile" ]
  [ "${#lines[@]}" -eq 7 ]
  grep -qx 'ControlMaster=auto' "$STUB_LOG"
  if ((${#HOME} <= 45)); then # (a longer one is too long for a socket: $TMPDIR/hpc-ssh-UID)
    grep -qx "ControlPath=$HOME/.ssh/hpc-%C" "$STUB_LOG"
  else
    grep -q '^ControlPath=.*/hpc-ssh-[0-9]*/hpc-%C$' "$STUB_LOG"
  fi
  grep -qx 'ControlPersist=30m' "$STUB_LOG"
  ((${#HOME} > 45)) || [ "$(stat -c %a "$HOME/.ssh")" = 700 ]
}

@test "a configs file outside the project goes to .hpc_remote/, one inside by its path in the project" {
  printf 'true\n' >"$BATS_TEST_TMPDIR/elsewhere.txt"
  mkdir -p "$PROJECT/cfg" && printf 'true\n' >"$PROJECT/cfg/mine.txt"
  run --separate-stderr submitter --remote login -f "$BATS_TEST_TMPDIR/elsewhere.txt"
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  [[ $(cat "$STUB_LOG.command") == *"'-f' '.hpc_remote/elsewhere.txt'"* ]]
  [[ $(cat "$STUB_LOG") == *"rsync "*"$BATS_TEST_TMPDIR/elsewhere.txt "*" login:proj/.hpc_remote/"* ]]
  run --separate-stderr submitter --remote login --configs=cfg/mine.txt
  [ "$status" -eq 0 ]
  [[ $(cat "$STUB_LOG.command") == *"'--configs=cfg/mine.txt'"* ]]
  grep -qx cfg/mine.txt "$STUB_LOG.files"
  run --separate-stderr submitter --remote login -f missing.txt
  [ "$status" -eq 2 ]
  [[ $stderr == *"file 'missing.txt' not found"* ]]
}

@test "the login node's exit code comes back; an unreachable host is one clear line and copies nothing" {
  REMOTE_RC=2 run --separate-stderr submitter --remote login --exp-name e
  [ "$status" -eq 2 ]
  [[ $stderr == *"job_submitter.sh: warning: job_submitter.sh on login exited 2"* ]]
  : >"$STUB_LOG"
  run --separate-stderr submitter --remote dead --exp-name e
  [ "$status" -eq 1 ]
  [ "$stderr" = "job_submitter.sh: cannot reach dead over ssh (ssh: connect to host dead port 22: Connection refused): check that 'ssh dead' works from here" ]
  run grep -c '^rsync' "$STUB_LOG"
  [ "$output" = 0 ]
  [ "$(sbatch_calls)" -eq 0 ]
}

@test "the profile's HPC_REMOTE and HPC_REMOTE_DIR; --remote none submits here" {
  cp "$PROJECT/hpc_files/clusters/generic.conf" "$PROJECT/hpc_files/clusters/far.conf"
  printf 'HPC_REMOTE="login"\nHPC_REMOTE_DIR="/work/me/p q"\n' >>"$PROJECT/hpc_files/clusters/far.conf"
  run --separate-stderr submitter --cluster far --exp-name e
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  [[ $(cat "$STUB_LOG.command") == *"'/work/me/p q' '--remote' 'none' '--cluster' 'far'"* ]]
  [[ $(cat "$STUB_LOG") == *" login:/work/me/p q/"* ]]
  run --separate-stderr submitter --cluster far --remote none --exp-name e --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *"# sbatch command line (not run: --dry-run)"* ]]
  printf 'HPC_REMOTE_DIR="relative"\n' >>"$PROJECT/hpc_files/clusters/far.conf"
  run --separate-stderr submitter --cluster far
  [ "$status" -eq 2 ]
  [[ $stderr == *"HPC_REMOTE_DIR 'relative' must be an absolute path or start with ~/"* ]]
}

@test "the connection's socket folder must be the user's own" {
  mkdir -p "$BATS_TEST_TMPDIR/real"
  ln -s "$BATS_TEST_TMPDIR/real" "$BATS_TEST_TMPDIR/link"
  HPC_SSH_CONTROL_DIR=$BATS_TEST_TMPDIR/link run --separate-stderr submitter --remote login
  [ "$status" -eq 2 ] || { echo "$status $stderr"; false; }
  [[ $stderr == *"is not your own folder: set HPC_SSH_CONTROL_DIR"* ]]
  [ ! -s "$STUB_LOG" ]
}
