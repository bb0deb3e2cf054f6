#!/usr/bin/env bats
# shellcheck disable=SC2030,SC2031 # each test sets its own environment
# The cluster's answers kept between submissions (hpc_files/lib/cluster.sh): a second
# submission from the same login node asks Slurm nothing; an answer that changed since
# (slurm.conf, Slurm's commands, the time, the host, a file not whole) is asked again; a
# check that would refuse on kept answers asks Slurm again first. Stub sbatch and scontrol
# that record their calls; the real cluster: integration/cluster_variants.bats.

load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'python examples/train.py --lr 0.1'
  mkdir -p "$PROJECT/.venv/bin" && : >"$PROJECT/.venv/bin/activate"
  STUBS=$BATS_TEST_TMPDIR/stubs
  mkdir -p "$STUBS"
  # What Slurm says: files the test edits (the stubs themselves stay as they are).
  export ANSWERS=$BATS_TEST_TMPDIR/answers
  mkdir -p "$ANSWERS"
  echo 5:00:00 >"$ANSWERS/maxtime"
  echo 10000 >"$ANSWERS/maxjobs"
  cat >"$STUBS/scontrol" <<'EOF'
#!/bin/sh
echo "scontrol $*" >>"$ANSWERS/calls"
case "$*" in
  "show config") printf 'Configuration data as of now\nMaxArraySize            = 1001\nMaxJobCount             = %s\nPreemptType             = preempt/none\n' "$(cat "$ANSWERS/maxjobs")" ;;
  "-a -o show partition")
    echo "PartitionName=main Default=YES MaxTime=UNLIMITED PreemptMode=OFF State=UP"
    echo "PartitionName=gpu Default=NO MaxTime=$(cat "$ANSWERS/maxtime") PreemptMode=OFF State=UP" ;;
  *) exit 1 ;;
esac
EOF
  cat >"$STUBS/sbatch" <<EOF
#!/bin/sh
[ "\$1" != --version ] || echo "sbatch --version" >>"\$ANSWERS/calls"
exec "$REPO_ROOT/tests/helpers/stubs/sbatch" "\$@"
EOF
  chmod +x "$STUBS/scontrol" "$STUBS/sbatch"
  export PATH=$STUBS:$PATH
  export SLURM_CONF=$BATS_TEST_TMPDIR/slurm.conf
  echo "ClusterName=unit" >"$SLURM_CONF"
  touch -d '1 hour ago' "$SLURM_CONF" "$STUBS/scontrol" "$STUBS/sbatch"
  KEPT=$HOME/.cache/hpc_files/slurm-answers.$HOSTNAME
}

# asks: how many times this test's Slurm was asked (sbatch --version and scontrol).
asks() {
  if [[ -e $ANSWERS/calls ]]; then wc -l <"$ANSWERS/calls"; else echo 0; fi
}

@test "a second submission from the same login node asks Slurm nothing: the first's answers, kept private, give the same plan" {
  run --separate-stderr submitter -e one
  [ "$status" -eq 0 ]
  [ "$(asks)" -eq 3 ] # sbatch --version, the partitions, the config
  [ -f "$KEPT" ]
  [ "$(stat -c %a "${KEPT%/*}")" = 700 ]
  [ "$(stat -c %U "$KEPT")" = "$(id -un)" ]
  run --separate-stderr submitter -e two
  [ "$status" -eq 0 ]
  [ "$(asks)" -eq 3 ]
  [ "$(sbatch_calls)" -eq 2 ]
  # The same answers, so the same plan: Slurm's version and the preemption watch.
  diff <(grep -E "^export HPC_(SLURM_VERSION|PREEMPT_WATCH)=" "$SBATCH_STUB_LOG.script.1") \
    <(grep -E "^export HPC_(SLURM_VERSION|PREEMPT_WATCH)=" "$SBATCH_STUB_LOG.script.2")
  grep -qx "export HPC_PREEMPT_WATCH='no'" "$SBATCH_STUB_LOG.script.2" # preempt/none, kept
  # A partition other than the first submission's comes from the same answers.
  run --separate-stderr submitter -e three -p gpu --time 6:00:00
  [ "$status" -eq 2 ]
  [[ $stderr == *"--time 6:00:00 is longer than partition gpu allows (MaxTime=5:00:00)"* ]]
}

@test "kept answers are asked again when slurm.conf or Slurm's commands changed since, when they are older than HPC_CLUSTER_CACHE_TTL, on another login node, or when the file is not whole or not a file" {
  local n
  run --separate-stderr submitter -e a
  [ "$status" -eq 0 ]
  [ "$(asks)" -eq 3 ]
  # fresh: used
  run --separate-stderr submitter -e a2
  [ "$(asks)" -eq 3 ]
  # slurm.conf edited since
  touch "$SLURM_CONF"
  run --separate-stderr submitter -e b
  [ "$status" -eq 0 ]
  [ "$(asks)" -eq 6 ]
  # sbatch replaced since (an upgrade)
  touch -d '1 minute ago' "$KEPT"
  touch "$STUBS/sbatch"
  run --separate-stderr submitter -e c
  [ "$status" -eq 0 ]
  [ "$(asks)" -eq 9 ]
  # older than the time they are good for
  sed -i "s/^time\t.*/time\t$(($(date +%s) - 301))/" "$KEPT"
  run --separate-stderr submitter -e d
  [ "$status" -eq 0 ]
  [ "$(asks)" -eq 12 ]
  # a TTL of the user's own: answers 30 s old are good for 60 s, 90 s old are not (the
  # time is set here, with a margin: a submission can take seconds on a busy machine)
  sed -i "s/^time\t.*/time\t$(($(date +%s) - 30))/" "$KEPT"
  HPC_CLUSTER_CACHE_TTL=60 run --separate-stderr submitter -e d2
  [ "$(asks)" -eq 12 ] # (fresh again)
  sed -i "s/^time\t.*/time\t$(($(date +%s) - 90))/" "$KEPT"
  HPC_CLUSTER_CACHE_TTL=60 run --separate-stderr submitter -e d3
  [ "$(asks)" -eq 15 ]
  # another login node (another file)
  HOSTNAME=login2 run --separate-stderr submitter -e e
  [ "$status" -eq 0 ]
  [ "$(asks)" -eq 18 ]
  [ -f "$HOME/.cache/hpc_files/slurm-answers.login2" ]
  # not whole: cut short, a part missing, a link to good answers
  for damage in 'truncate -s 200' 'sed -i /partitions$/d' link; do
    n=$(asks)
    if [[ $damage == link ]]; then
      cp "$KEPT" "$BATS_TEST_TMPDIR/good" && rm "$KEPT" && ln -s "$BATS_TEST_TMPDIR/good" "$KEPT"
    else
      $damage "$KEPT"
    fi
    run --separate-stderr submitter -e "f$n"
    echo "$damage: $stderr"
    [ "$status" -eq 0 ]
    [ "$(asks)" -eq $((n + 3)) ]
    rm -f "$KEPT"
    run --separate-stderr submitter -e "g$n" # keeps them again
  done
  # HPC_CLUSTER_CACHE_TTL=0: never kept, asked every time
  rm -f "$KEPT"
  n=$(asks)
  HPC_CLUSTER_CACHE_TTL=0 run --separate-stderr submitter -e h
  HPC_CLUSTER_CACHE_TTL=0 run --separate-stderr submitter -e h2
  [ "$status" -eq 0 ]
  [ "$(asks)" -eq $((n + 6)) ]
  [ ! -e "$KEPT" ]
}

@test "kept answers never refuse a submission: a MaxTime or MaxJobCount raised since is asked of Slurm again and honoured, and kept" {
  run --separate-stderr submitter -e first -p gpu --time 4:00:00
  [ "$status" -eq 0 ]
  [ "$(asks)" -eq 3 ]
  # An admin raises the partition's MaxTime: the kept 5:00:00 would refuse 8 hours.
  echo 10:00:00 >"$ANSWERS/maxtime"
  run --separate-stderr submitter -e second -p gpu --time 8:00:00
  echo "$stderr"
  [ "$status" -eq 0 ]
  # The partitions and the config asked again (the version is that of the same sbatch).
  [ "$(asks)" -eq 5 ]
  grep -q '#SBATCH --time="8:00:00"' "$SBATCH_STUB_LOG.script.2"
  grep -qx "export HPC_SLURM_VERSION='22.05.8'" "$SBATCH_STUB_LOG.script.2"
  grep -q 'MaxTime=10:00:00' "$KEPT" # Slurm's new answers are the ones kept
  run --separate-stderr submitter -e third -p gpu --time 8:00:00
  [ "$status" -eq 0 ]
  [ "$(asks)" -eq 5 ]
  # Still too long by Slurm's answer of now: refused, naming the limit.
  run --separate-stderr submitter -e fourth -p gpu --time 12:00:00
  [ "$status" -eq 2 ]
  [[ $stderr == *"longer than partition gpu allows (MaxTime=10:00:00)"* ]]
  # MaxJobCount the same way: 4 lines against a kept 3, raised to 10 since.
  echo 3 >"$ANSWERS/maxjobs"
  rm -f "$KEPT"
  run --separate-stderr submitter -e fifth
  [ "$status" -eq 0 ]
  echo 10 >"$ANSWERS/maxjobs"
  printf 'echo %s\n' 1 2 3 4 >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter -e sixth
  echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"array of 4 tasks"* ]]
}

@test "HPC_CLUSTER_CACHE_TTL that is not a whole number of seconds is refused with exit 2, saying what to give; nothing submitted or kept" {
  local bad
  for bad in abc -5 1.5 '300 ' 12345678901; do
    HPC_CLUSTER_CACHE_TTL=$bad run --separate-stderr submitter -e bad
    echo "$bad: $stderr"
    [ "$status" -eq 2 ]
    [[ $stderr == *HPC_CLUSTER_CACHE_TTL* ]]
    [[ $stderr == *"whole number of seconds"* || $stderr == *"far too large"* ]]
  done
  [ "$(sbatch_calls)" -eq 0 ]
  [ ! -e "$KEPT" ]
  [ "$(asks)" -eq 0 ]
}
