#!/usr/bin/env bats
# --remote HOST: submitting from a laptop. The login node is a private sshd on 127.0.0.1
# (Debian's openssh-server, started and stopped by this file) where the test user
# (hpcalice) logs in with a key and finds the local cluster's Slurm; the laptop is the
# other user (hpcbob) with its own copy of the project in git, and no Slurm command on its
# PATH. ssh reads ~/.ssh/config from the passwd home, so the laptop's is given with
# HPC_SSH_CONFIG (ssh -F).

load ../helpers/cluster

SLURM_COMMANDS=" sbatch srun salloc sattach sbcast scancel scontrol scrontab sdiag sinfo sprio squeue sreport sacct sacctmgr sshare sstat strigger sview smap sh5util "

setup_file() {
  local sshd=/usr/sbin/sshd
  if [[ ! -x $sshd ]]; then
    if [[ -n ${HPC_SLURM_CHROOT:-} ]]; then
      skip "openssh-server is not in this Slurm root (made before slurm_chroot.sh's INCLUDE named it): rebuild the root"
    fi
    echo "no $sshd: install openssh-server (tests/setup/install_deps.sh does)" >&2
    return 1
  fi
  load ../helpers/users
  ensure_test_users
  cluster_env # the login node's Slurm
  export SSHD_DIR=$HPC_TEST_RUN_DIR/sshd
  mkdir -p "$SSHD_DIR" /run/sshd
  chmod 0755 "$SSHD_DIR"
  SSHD_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  DEAD_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  export SSHD_PORT DEAD_PORT
  ssh-keygen -q -t ed25519 -N '' -f "$SSHD_DIR/host_key"
  ssh-keygen -q -t ed25519 -N '' -f "$SSHD_DIR/client_key"
  cp "$SSHD_DIR/client_key.pub" "$SSHD_DIR/authorized_keys"
  # The login node's environment: what a cluster's login shell sets (its Slurm, $SCRATCH).
  mkdir -p "$SSHD_DIR/scratch"
  chown "$HPC_TEST_USER:" "$SSHD_DIR/scratch"
  chmod 0700 "$SSHD_DIR/scratch"
  {
    printf 'export SLURM_CONF=%q SCRATCH=%q\n' "$SLURM_CONF" "$SSHD_DIR/scratch"
    printf 'export PATH=%q:/usr/local/bin:/usr/bin:/bin\n' "$TEST_VENV/bin"
    [[ -z ${HPC_LOCAL_CLUSTER_DIR:-} ]] || printf 'export HPC_LOCAL_CLUSTER_DIR=%q\n' "$HPC_LOCAL_CLUSTER_DIR"
  } >"$SSHD_DIR/login.env"
  chmod 0644 "$SSHD_DIR/login.env"
  # A login shell of the user reads it only in sessions of this sshd (SetEnv below).
  # shellcheck disable=SC2016 # expanded by the login shell
  local home profile_line='[ -z "${HPC_SSH_TEST_ENV:-}" ] || . "$HPC_SSH_TEST_ENV"'
  home=$(getent passwd "$HPC_TEST_USER" | cut -d: -f6)
  grep -qxF "$profile_line" "$home/.profile" 2>/dev/null ||
    { printf '%s\n' "$profile_line" >>"$home/.profile" && chown "$HPC_TEST_USER:" "$home/.profile"; }
  # useradd's account is locked ('!'), which sshd refuses even with a key.
  [[ $(getent shadow "$HPC_TEST_USER" | cut -d: -f2) != '!'* ]] || usermod -p '*' "$HPC_TEST_USER"
  cat >"$SSHD_DIR/sshd_config" <<EOF
Port $SSHD_PORT
ListenAddress 127.0.0.1
HostKey $SSHD_DIR/host_key
PidFile $SSHD_DIR/sshd.pid
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
AuthorizedKeysFile $SSHD_DIR/authorized_keys
AllowUsers $HPC_TEST_USER
SetEnv HPC_SSH_TEST_ENV=$SSHD_DIR/login.env
MaxStartups 100
LogLevel INFO
EOF
  "$sshd" -f "$SSHD_DIR/sshd_config" -E "$SSHD_DIR/sshd.log"
  export REMOTE_PROJECT=rproj$SSHD_PORT
}

teardown_file() {
  if [[ -f ${SSHD_DIR:-/nonexistent}/sshd.pid ]]; then kill "$(cat "$SSHD_DIR/sshd.pid")" 2>/dev/null || true; fi
  local home
  home=$(getent passwd "$HPC_TEST_USER" | cut -d: -f6)
  [[ -z ${REMOTE_PROJECT:-} ]] || rm -rf -- "${home:?}/$REMOTE_PROJECT"
}

setup() {
  integration_setup "$REMOTE_PROJECT"
  # The laptop: hpcbob's own folder and copy of the project, a git repository.
  LAPTOP=$HPC_TEST_RUN_DIR/laptop.$BATS_TEST_NUMBER LPROJ=$HPC_TEST_RUN_DIR/laptop.$BATS_TEST_NUMBER/$REMOTE_PROJECT
  rm -rf -- "$LAPTOP"
  mkdir -p "$LAPTOP/bin" "$LAPTOP/home/.ssh"
  cp -a "$PROJECT" "$LPROJ"
  rm -rf -- "$LPROJ/.venv"
  "$TEST_VENV/bin/python3" -m venv --without-pip "$LPROJ/.venv" # never copied
  mkdir -p "$LPROJ/data"
  head -c 100000 /dev/urandom >"$LPROJ/data/big.bin" # ignored: never copied
  printf 'data/\n' >"$LPROJ/.gitignore"
  cp "$SSHD_DIR/client_key" "$LAPTOP/home/id"
  cat >"$LAPTOP/ssh_config" <<EOF
Host login dead
  HostName 127.0.0.1
  User $HPC_TEST_USER
  IdentityFile $LAPTOP/home/id
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
Host login
  Port $SSHD_PORT
Host dead
  Port $DEAD_PORT
EOF
  # Every command of this machine but Slurm's.
  local f
  for f in /usr/bin/* /bin/*; do
    [[ $SLURM_COMMANDS != *" ${f##*/} "* && ! -e $LAPTOP/bin/${f##*/} ]] || continue
    ln -s "$f" "$LAPTOP/bin/${f##*/}"
  done
  chown -R "$HPC_OTHER_USER:" "$LAPTOP"
  chmod 0700 "$LAPTOP" "$LAPTOP/home/.ssh"
  chmod 0600 "$LAPTOP/home/id"
  laptop git init -q
  laptop git add -A
  laptop git -c user.name=bob -c user.email=bob@laptop commit -qm "the project"
}

teardown() {
  # The laptop's connection (ControlPersist) ends with the test.
  [[ -z ${LAPTOP:-} ]] || laptop ssh -F "$LAPTOP/ssh_config" -o "ControlPath=$LAPTOP/home/.ssh/hpc-%C" -O exit login >/dev/null 2>&1 || true
}

# laptop CMD...: CMD as the laptop's user in the laptop's project, with nothing of this
# machine's environment but a PATH without Slurm, a secret and a marker that must stay here.
laptop() {
  (cd "$LPROJ" && runuser -u "$HPC_OTHER_USER" -- env -i HOME="$LAPTOP/home" PATH="$LAPTOP/bin" \
    USER="$HPC_OTHER_USER" HPC_SSH_CONFIG="$LAPTOP/ssh_config" HPC_SSH_PERSIST=120 HPC_LAPTOP_MARK=laptop \
    WANDB_API_KEY=laptop-secret-key ${LAPTOP_ENV:+"${LAPTOP_ENV[@]}"} "$@")
}

# laptop_hpc ARGS...: the laptop's `hpc` (its project's own hpc_toolkit).
laptop_hpc() {
  laptop env PYTHONPATH="$LPROJ/python" "$TEST_VENV/bin/python3" -m hpc_toolkit "$@"
}

login_home() { getent passwd "$HPC_TEST_USER" | cut -d: -f6; }

accepted() { grep -c 'Accepted publickey' "$SSHD_DIR/sshd.log" || true; }

@test "--remote: the first submission copies the code (not the venv, not the data) and runs there, its record the laptop's commit; a second after a code change (--snapshot) runs the new code over the same connection" {
  laptop bash -c '! command -v sbatch' # the laptop has no Slurm
  printf 'echo "version 1"\n' >"$LPROJ/run.sh"
  printf 'print("not committed yet")\n' >"$LPROJ/untracked.py"
  # shellcheck disable=SC2016 # expanded by the job
  printf 'bash run.sh > "$HPC_CHECKPOINT_DIR/v.txt" && python3 argv_dump.py env\n' >"$LPROJ/experiment_configurations.txt"
  chown "$HPC_OTHER_USER:" "$LPROJ/run.sh" "$LPROJ/untracked.py" "$LPROJ/experiment_configurations.txt"
  local before
  before=$(accepted)
  run --separate-stderr laptop bash hpc_files/job_submitter.sh --remote login --venv "$TEST_VENV" --exp-name first --time 5
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  local id remote
  id=$(submitted_ids | tail -1)
  [ -n "$id" ]
  remote=$(login_home)/$REMOTE_PROJECT
  [[ $output == *"log:    $SSHD_DIR/scratch/$REMOTE_PROJECT/hpc_outputs/first-$id.out"* ]]
  [[ $stderr == *"copying the project's code to login:~/$REMOTE_PROJECT"* ]]
  # What went: tracked, untracked-not-ignored, the toolkit; what did not: the venv, the data.
  [ -f "$remote/run.sh" ]
  [ -f "$remote/untracked.py" ]
  [ -f "$remote/hpc_files/job_submitter.sh" ]
  [ -f "$remote/python/hpc_toolkit/cli.py" ]
  [ ! -e "$remote/.venv" ]
  [ ! -e "$remote/data" ]
  [ ! -e "$remote/.git" ]
  wait_job "$id"
  [ "$(job_state "$id")" = COMPLETED ]
  # The copy is no repository: the job's code record is the laptop's commit and diff.
  local commit out=$SSHD_DIR/scratch/$REMOTE_PROJECT/hpc_outputs
  commit=$(laptop git rev-parse HEAD)
  grep -q "code: git commit $commit, run from $remote" "$out/first-$id.out"
  grep -rlq "copied by --remote from .*:$LPROJ" "$out"
  local ckpt=$SSHD_DIR/scratch/$REMOTE_PROJECT/first/checkpoints
  [ "$(cat "$ckpt/v.txt")" = "version 1" ]
  # The job's environment is the login node's: nothing of the laptop's.
  grep -q "\"SLURM_SUBMIT_DIR\": \"$remote\"" "$ckpt/env.json"
  grep -q "\"prefix\": \"$TEST_VENV\"" "$ckpt/env.json"
  run grep -c laptop "$ckpt/env.json"
  [ "$output" = 0 ]
  run grep -rlc laptop-secret-key "$SSHD_DIR/scratch/$REMOTE_PROJECT/"
  [ -z "$output" ]

  printf 'echo "version 2"\n' >"$LPROJ/run.sh" # edited, not committed
  rm "$LPROJ/untracked.py"              # removed on the laptop: removed from the copy
  runuser -u "$HPC_TEST_USER" -- touch "$remote/made_there.txt" # the copy's own: kept
  run --separate-stderr laptop bash hpc_files/job_submitter.sh --remote login --venv "$TEST_VENV" --exp-name second --time 5 --snapshot
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  id=$(submitted_ids | tail -1)
  wait_job "$id"
  # --snapshot: the laptop's files as sent, in a folder of their own
  grep -q "code: git commit $commit, run from $out/snapshots/" "$out/second-$id.out"
  [ "$(cat "$SSHD_DIR/scratch/$REMOTE_PROJECT/second/checkpoints/v.txt")" = "version 2" ]
  [ ! -e "$remote/untracked.py" ]
  [ -f "$remote/made_there.txt" ]
  [ -f "$remote/run.sh" ]
  # one login for both submissions: the connection was reused
  [ "$(($(accepted) - before))" -eq 1 ]
}

@test "hpc status, logs, --rerun and --setup-venv through --remote: run on the login node, their output and exit code back" {
  printf 'python3 argv_dump.py one\nfalse\n' >"$LPROJ/experiment_configurations.txt"
  chown "$HPC_OTHER_USER:" "$LPROJ/experiment_configurations.txt"
  run --separate-stderr laptop bash hpc_files/job_submitter.sh --remote login --venv none --exp-name st --time 5
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  local id
  id=$(submitted_ids | tail -1)
  wait_job "$id" 120 2
  run --separate-stderr laptop_hpc status st --remote login
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  [[ $output == *"== st  jobs $id"* ]]
  [[ $output == *"COMPLETED 1"* && $output == *"FAILED 1"* ]]
  run --separate-stderr laptop_hpc logs "${id}_0" --remote login
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  [[ $output == *"dumped "*"/st/checkpoints/"*"one.json"* ]]
  run --separate-stderr laptop_hpc logs "${id}_0" -f --remote login
  [ "$status" -eq 0 ]
  [[ $output == *"dumped "* ]]
  run --separate-stderr laptop bash hpc_files/job_submitter.sh --remote login --rerun "$id" --dry-run
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  [[ $output$stderr == *"1 task"* ]] || { echo "$output$stderr"; false; }
  [[ $output == *"--array=1"* ]]
  # --setup-venv: the venv is built there (its job, then the experiment after it)
  run --separate-stderr laptop bash hpc_files/job_submitter.sh --remote login --setup-venv --exp-name sv --dry-run
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  [[ $output == *"# venv job (--setup-venv), submitted first"* ]]
  [[ $output == *"$(login_home)/$REMOTE_PROJECT/.venv"* ]]
  # The profile's HPC_REMOTE: no --remote needed, for job_submitter.sh and hpc alike. The
  # login node's copy has the same profile and must not send the command on again.
  printf '\nHPC_REMOTE="login"\n' >>"$LPROJ/hpc_files/clusters/generic.conf"
  printf 'python3 argv_dump.py two\n' >"$LPROJ/experiment_configurations.txt"
  run --separate-stderr laptop bash hpc_files/job_submitter.sh --venv none --exp-name pr --time 5
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  id=$(submitted_ids | tail -1)
  wait_job "$id" 120 1
  run --separate-stderr laptop_hpc status pr
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  [[ $output == *"== pr  jobs $id"* && $output == *"COMPLETED 1"* ]]
  run --separate-stderr laptop_hpc why pr
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  # --remote none: here, where there is no Slurm (the laptop)
  run --separate-stderr laptop_hpc status pr --remote none
  [ "$status" -ne 0 ]
  [[ $output$stderr != *"== pr  jobs $id"* ]]
}

@test "hpc cancel --remote cancels the submission on the login node (asks, unless --yes)" {
  printf 'sleep 300\n' >"$LPROJ/experiment_configurations.txt"
  chown "$HPC_OTHER_USER:" "$LPROJ/experiment_configurations.txt"
  run --separate-stderr laptop bash hpc_files/job_submitter.sh --remote login --venv none --exp-name long --time 10
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  local id
  id=$(submitted_ids | tail -1)
  run --separate-stderr laptop_hpc cancel long --remote login
  [ "$status" -eq 2 ] || { echo "status $status: $output $stderr"; false; }
  [[ $stderr == *"nothing cancelled (not on a terminal: --yes cancels long on login)"* ]]
  [ -n "$(squeue -h -j "$id" -o %i)" ]
  run --separate-stderr laptop_hpc cancel long --remote login --yes
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  [[ $output == *"Cancelled $id (long, 1 task(s))"* ]]
  wait_job "$id"
  [[ $(job_state "$id") == CANCELLED* ]]
}

@test "--remote: an unreachable host, options refused there, no toolkit there: each a clear line" {
  printf 'true\n' >"$LPROJ/experiment_configurations.txt"
  run --separate-stderr laptop bash hpc_files/job_submitter.sh --remote dead --exp-name x
  [ "$status" -eq 1 ]
  [[ $stderr == *"job_submitter.sh: cannot reach dead over ssh ("*"Connection refused"*"): check that 'ssh dead' works from here (with -F $LAPTOP/ssh_config)"* ]]
  [ -z "$output" ]
  run --separate-stderr laptop_hpc status --remote dead
  [ "$status" -eq 1 ]
  [[ $stderr == *"hpc: cannot reach dead over ssh ("*"Connection refused)"* ]] || { echo "$status: $stderr"; false; }
  # Refused by the login node's side: its message, its exit code 2, nothing submitted.
  run --separate-stderr laptop bash hpc_files/job_submitter.sh --remote login --gpus lots --exp-name refused
  [ "$status" -eq 2 ]
  [[ $stderr == *"--gpus"*"lots"* ]]
  [[ $stderr == *"job_submitter.sh: warning: job_submitter.sh on login exited 2"* ]]
  [ -z "$(squeue -h -n refused -o %i)" ]
  # Unknown options are refused here, before any connection.
  run --separate-stderr laptop bash hpc_files/job_submitter.sh --remote login --gpu 1
  [ "$status" -eq 2 ]
  LAPTOP_ENV=(HPC_REMOTE_DIR="~/nowhere$SSHD_PORT")
  run --separate-stderr laptop_hpc status --remote login
  [ "$status" -eq 3 ]
  [[ $stderr == *"hpc: no folder "*"/nowhere$SSHD_PORT on "*": submit once with job_submitter.sh --remote"* ]]
}
