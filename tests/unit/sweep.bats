#!/usr/bin/env bats
# W&B sweeps at submission, with a recording sbatch: option checks, the commands of
# online agents and offline sweeps, the API key kept out of Slurm, the sweep's folder.

load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'python examples/train.py --lr 0.1'
  # Offline sweeps read the sweep file with the project's venv (PyYAML): the test venv.
  ln -s "$REPO_ROOT/.venv" "$PROJECT/.venv"
  printf 'machine api.wandb.ai\n  login user\n  password %s\n' "$(printf 'k%.0s' {1..40})" >"$HOME/.netrc"
  chmod 600 "$HOME/.netrc"
}

# sweep_file NAME TEXT: a sweep file in the project.
sweep_file() {
  printf '%s' "$2" >"$PROJECT/$1"
}

# commands_of N: the commands file of the Nth sbatch call.
commands_of() {
  local script
  script=$(grep -v '^--' "$SBATCH_STUB_LOG" | grep '\.sbatch$' | sed -n "${1}p")
  cat "${script%/*}/commands"
}

GRID='program: examples/sweep_train.py
method: grid
parameters:
  lr: {values: [0.1, 0.01]}
  epochs: {values: [1, 2, 3]}
'

@test "sweep options are in --help" {
  run submitter --help
  local opt
  for opt in --wandb-sweepid --num-agents --runs-per-agent --agent-stagger --agents-per-gpu \
    --sweep --resume-sweep; do
    [[ $output == *"$opt"* ]] || { echo "missing $opt"; return 1; }
  done
}

@test "a sweep id in the wrong form is refused before anything is submitted" {
  refused "--wandb-sweepid 'abc123' is not ENTITY/PROJECT/SWEEP_ID" --wandb-sweepid abc123
  refused "is not ENTITY/PROJECT/SWEEP_ID" --wandb-sweepid team/proj
  refused "is not ENTITY/PROJECT/SWEEP_ID" --wandb-sweepid 'team/proj/ab c'
  refused "is not ENTITY/PROJECT/SWEEP_ID" --wandb-sweepid "team/proj/x';rm -rf ~"
  refused "(for this address: --wandb-sweepid team/proj/abc123)" \
    --wandb-sweepid https://wandb.ai/team/proj/sweeps/abc123
}

@test "sweep options that make no sense together are refused" {
  sweep_file s.yml "$GRID"
  refused "give one" --wandb-sweepid t/p/abc --sweep s.yml
  refused "--num-agents needs a sweep" --num-agents 3
  refused "--runs-per-agent needs --wandb-sweepid" --runs-per-agent 2
  refused "--agents-per-gpu needs --wandb-sweepid" --agents-per-gpu --gpus 1
  refused "--agent-stagger needs --wandb-sweepid" --agent-stagger 3
  refused "--configs and a sweep cannot be used together" --sweep s.yml --configs experiment_configurations.txt
  refused "cannot be used with a sweep" --sweep s.yml --which-distributed lightning
  refused "--runs-per-agent is for online sweeps" --sweep s.yml --runs-per-agent 2
  refused "--agents-per-gpu is for online sweeps" --sweep s.yml --agents-per-gpu
  refused "each point of an offline sweep runs on one node" --sweep s.yml -N 2
  refused "--num-agents must be at least 1" --wandb-sweepid t/p/abc --num-agents 0
  refused "--runs-per-agent must be at least 1" --wandb-sweepid t/p/abc --runs-per-agent 0
  refused "--agent-stagger must be a whole number" --wandb-sweepid t/p/abc --agent-stagger 1.5
  refused "--agents-per-gpu needs GPUs" --wandb-sweepid t/p/abc --agents-per-gpu
  refused "does not match --agents-per-gpu on 2 node(s) x 2 GPU(s) = 4 agents" \
    --wandb-sweepid t/p/abc --agents-per-gpu --gpus 2 -N 2 --num-agents 3
  refused "add --agents-per-gpu" --wandb-sweepid t/p/abc -N 2
}

@test "bad sweep files are refused, saying where, before anything is written" {
  refused "sweep file 'none.yml' not found" --sweep none.yml
  sweep_file bad.yml $'method: grid\nparameters:\n  lr: {values: [1, 2\n'
  refused "bad.yml: line 4, column 1: not valid YAML" --sweep bad.yml
  sweep_file m.yml $'method: hyperband\nprogram: t.py\nparameters: {a: {value: 1}}\n'
  refused "m.yml: line 1: method: unknown method 'hyperband'" --sweep m.yml
  sweep_file d.yml $'method: random\nprogram: t.py\nparameters:\n  lr: {distribution: lognormal, min: 0, max: 1}\n'
  refused "d.yml: line 4: parameters.lr: unknown distribution 'lognormal'" --sweep d.yml --num-agents 2
  sweep_file c.yml $'method: grid\nprogram: t.py\nparameters:\n  lr: {min: 0.001, max: 0.1}\n'
  refused "c.yml: line 4: parameters.lr: a grid cannot enumerate distribution uniform" --sweep c.yml
  sweep_file e.yml $'method: grid\nprogram: t.py\nparameters: {}\n'
  refused "e.yml: line 3: parameters: the sweep is empty" --sweep e.yml
  sweep_file g.yml "$GRID"
  refused "--num-agents is for random and bayes sweeps; a grid sweep runs each of its 6 points once" \
    --sweep g.yml --num-agents 3
  sweep_file r.yml $'method: random\nprogram: t.py\nparameters:\n  lr: {min: 0.0, max: 1.0}\n'
  refused "pass --num-agents N (one run per array task) or set 'run_cap: N'" --sweep r.yml
}

@test "offline grid: one task per point, a new sweep folder, commands that run the agent" {
  sweep_file sweeper.yml "$GRID"
  run --separate-stderr submitter --sweep sweeper.yml -e grid --cluster local
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 1 ]
  [ "${lines[0]}" = "Submitted batch job 4242 (array of 6 tasks, 0-5)" ]
  local id
  id=$(sed -n 's/^Offline sweep \([a-z0-9]\{8\}\) (grid, 6 points): .*/\1/p' <<<"$output")
  [ -n "$id" ]
  [[ $output == *"status: hpc sweep status $id"* ]]
  local dir=$SCRATCH/proj/sweeps/$id
  [ -d "$dir/wandb" ]
  cmp "$dir/sweep.yaml" "$PROJECT/sweeper.yml"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert (d["sweep_id"], d["num_points"], d["method"], d["exp_name"]) == (sys.argv[2], 6, "grid", "grid"), d' \
    "$dir/sweep.json" "$id"
  grep -qx '#SBATCH --array="0-5"' "$SBATCH_STUB_LOG.script.1"
  [ "$(commands_of 1 | sort -u)" = "bash virtual_env_hpc_files/sweep_agent.sh offline '$dir'" ]
  [ "$(commands_of 1 | wc -l)" -eq 6 ]
}

@test "offline: --dry-run checks the file and writes nothing" {
  sweep_file sweeper.yml "$GRID"
  run --separate-stderr submitter --sweep sweeper.yml --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *"# ---- commands (6), one per array task"* ]]
  [[ $output == *"sweep_agent.sh offline '$SCRATCH/proj/sweeps/"* ]]
  # What each task will run, so that a user sees the arguments fit the program.
  [[ $output == *"# Offline sweep (grid, 6 points): array task i runs point i; the first 3 as they will run:"* ]]
  [[ $output == *$'\n#   point 0: /usr/bin/env python examples/sweep_train.py --epochs=1 --lr=0.1\n'* ]]
  [[ $output == *$'\n#   point 2: /usr/bin/env python examples/sweep_train.py --epochs=2 --lr=0.1\n#   ... and 3 more\n'* ]]
  scratch_is_empty
}

@test "offline: sbatch refusing the job leaves no sweep folder" {
  sweep_file sweeper.yml "$GRID"
  SBATCH_STUB_FAIL="Invalid partition name specified" run --separate-stderr submitter --sweep sweeper.yml
  [ "$status" -ne 0 ]
  [[ $stderr == *"nothing was submitted"* ]]
  [ -z "$(ls -A "$SCRATCH/proj/sweeps" 2>/dev/null)" ]
  [ -z "$(find "$SCRATCH" -type f)" ]
}

@test "offline random and bayes: --num-agents or run_cap runs" {
  sweep_file r.yml $'method: random\nprogram: t.py\nrun_cap: 4\nparameters:\n  lr: {min: 0.0, max: 1.0}\n'
  run --separate-stderr submitter --sweep r.yml
  [ "$status" -eq 0 ]
  [[ $output == *"(random, 4 points)"* ]]
  sweep_file b.yml $'method: bayes\nprogram: t.py\nmetric: {name: loss}\nparameters:\n  lr: {min: 0.0, max: 1.0}\n'
  run --separate-stderr submitter --sweep b.yml --num-agents 6 --max-parallel 2
  [ "$status" -eq 0 ]
  grep -qx '#SBATCH --array="0-5%2"' "$SBATCH_STUB_LOG.script.2"
}

# a_submitted_sweep: an offline grid of 6 submitted through the stub; sets SWEEP_ID, SWEEP_DIR.
# Its job (4242, in the sweep's jobs.tsv) has left Slurm's queue: squeue knows none of it.
a_submitted_sweep() {
  mkdir -p "$BATS_TEST_TMPDIR/queue"
  printf '#!/bin/sh
exit 0
' >"$BATS_TEST_TMPDIR/queue/squeue"
  chmod +x "$BATS_TEST_TMPDIR/queue/squeue"
  export PATH=$BATS_TEST_TMPDIR/queue:$PATH
  sweep_file sweeper.yml "$GRID"
  local out
  out=$(submitter --sweep sweeper.yml -e first)
  SWEEP_ID=$(sed -n 's/^Offline sweep \([a-z0-9]*\) .*/\1/p' <<<"$out")
  [ -n "$SWEEP_ID" ]
  SWEEP_DIR=$SCRATCH/proj/sweeps/$SWEEP_ID
}

# ledger POINT STATE: a finished or failed run of POINT in the sweep's ledger.
ledger() {
  printf '{"event":"start","point":%d,"run_id":"r%d","params":{},"job":"1_%d"}\n' "$1" "$1" "$1" >>"$SWEEP_DIR/ledger.jsonl"
  printf '{"event":"end","point":%d,"run_id":"r%d","state":"%s"}\n' "$1" "$1" "$2" >>"$SWEEP_DIR/ledger.jsonl"
}

@test "--resume-sweep submits only the points that did not finish, in the sweep's experiment" {
  a_submitted_sweep
  ledger 0 finished
  ledger 1 failed
  ledger 2 finished
  ledger 5 finished
  run --separate-stderr submitter --resume-sweep "$SWEEP_ID"
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 2 ]
  grep -qx '#SBATCH --array="1,3-4"' "$SBATCH_STUB_LOG.script.2"
  grep -qx '#SBATCH --job-name="first"' "$SBATCH_STUB_LOG.script.2"
  [ "$(commands_of 2 | wc -l)" -eq 6 ]
  [[ $output == *"Submitted batch job 4243 (array of 3 task(s): 1,3-4 as array indices 1,3-4)"* ]]
  [[ $output == *"Offline sweep $SWEEP_ID (grid, 6 points)"* ]]
  # The submissions ledger counts the tasks really submitted.
  [ "$(tail -1 "$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv" | cut -f2,4)" = $'4243\t3' ]
}

@test "an offline sweep is a run of its experiment: refused beside another of its submissions still running; --resume-sweep runs beside its own running points" {
  a_submitted_sweep # job 4242, experiment 'first'
  # squeue: every job of the ledger still runs, under its experiment's name.
  printf '#!/bin/sh\ncut -f2,3 "%s" | tr "\\t" " "\n' "$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv" >"$BATS_TEST_TMPDIR/queue/squeue"
  run --separate-stderr submitter --sweep sweeper.yml -e first
  [ "$status" -eq 2 ]
  [[ $stderr == *"(job 4242) of experiment 'first' is still queued or running"* ]]
  ledger 0 finished
  ledger 1 failed
  run --separate-stderr submitter --resume-sweep "$SWEEP_ID"
  echo "$stderr"
  [ "$status" -eq 0 ]
  [[ $output == *"Submitted batch job 4243 "* ]]
}

@test "--resume-sweep: nothing to do, an unknown sweep, a bad id" {
  a_submitted_sweep
  local p
  for p in 0 1 2 3 4 5; do ledger "$p" finished; done
  run --separate-stderr submitter --resume-sweep "$SWEEP_ID"
  [ "$status" -eq 0 ]
  [[ $output == "Nothing to resubmit: every point of sweep $SWEEP_ID has finished"* ]]
  [ "$(sbatch_calls)" -eq 1 ]
  run --separate-stderr submitter --resume-sweep zzzz9999
  [ "$status" -eq 2 ]
  [[ $stderr == *"no offline sweep 'zzzz9999'"* ]]
  run --separate-stderr submitter --resume-sweep "../$SWEEP_ID"
  [[ $stderr == *"is not a sweep id"* ]]
  run --separate-stderr submitter --resume-sweep "$SWEEP_ID" --num-agents 2
  [[ $stderr == *"--num-agents cannot be used with --resume-sweep"* ]]
}

@test "online: an array of agents with a run count and staggered starts" {
  run --separate-stderr submitter --wandb-sweepid team/proj/abc123 --num-agents 4 \
    --runs-per-agent 5 --agent-stagger 3 -e agents
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "Submitted batch job 4242 (array of 4 tasks, 0-3)" ]
  [[ $output == *"W&B sweep team/proj/abc123: 4 agent(s), 5 run(s) each"* ]]
  grep -qx '#SBATCH --array="0-3"' "$SBATCH_STUB_LOG.script.1"
  local agent="bash virtual_env_hpc_files/sweep_agent.sh online 'team/proj/abc123' --count 5"
  [ "$(commands_of 1)" = "$agent --delay 0
$agent --delay 3
$agent --delay 6
$agent --delay 9" ]
}

@test "online: with --max-parallel only the agents that start together are staggered" {
  run --separate-stderr submitter --wandb-sweepid team/proj/abc123 --num-agents 5 --max-parallel 2
  [ "$status" -eq 0 ]
  grep -qx '#SBATCH --array="0-4%2"' "$SBATCH_STUB_LOG.script.1"
  [ "$(commands_of 1 | sed 's/.*--delay //')" = $'0\n2\n0\n2\n0' ]
}

@test "online: one agent per GPU of every node, in one job" {
  run --separate-stderr submitter --wandb-sweepid team/proj/abc123 --agents-per-gpu --gpus 2 \
    -N 2 --cpus 4 --cluster local
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "Submitted batch job 4242" ]
  local script=$SBATCH_STUB_LOG.script.1
  grep -qx '#SBATCH --nodes="2"' "$script"
  grep -qx '#SBATCH --ntasks-per-node="2"' "$script"
  grep -qx '#SBATCH --cpus-per-task="2"' "$script"
  grep -qx '#SBATCH --gres="gpu:2"' "$script"
  [ "$(grep -c -- '--array' "$script")" = 0 ]
  [ "$(commands_of 1)" = "bash virtual_env_hpc_files/sweep_agent.sh online 'team/proj/abc123' --count 1 --per-gpu --stagger 2" ]
  [[ $output == *"4 agent(s)"* ]]
}

@test "online: WANDB_API_KEY is saved to a mode-600 file and never reaches Slurm" {
  rm "$HOME/.netrc"
  sbatch_env_stub
  local secret=wandb_secret_key_0123456789abcdef
  WANDB_API_KEY=$secret run --separate-stderr submitter --wandb-sweepid team/proj/abc123 --num-agents 2
  [ "$status" -eq 0 ]
  local key=$HOME/.config/hpc_files/wandb_api_key
  [ "$(cat "$key")" = "$secret" ]
  [ "$(stat -c %a "$key")" = 600 ]
  [ "$(stat -c %a "${key%/*}")" = 700 ]
  [[ $stderr == *"saved WANDB_API_KEY to $key (mode 600)"* ]]
  [[ $stderr != *"$secret"* && $output != *"$secret"* ]]
  [ -s "$BATS_TEST_TMPDIR/sbatch.env" ]
  [ "$(grep -c '^WANDB_API_KEY=' "$BATS_TEST_TMPDIR/sbatch.env")" = 0 ]
  run ! grep -rq -- "$secret" "$SCRATCH" "$SBATCH_STUB_LOG"* "$BATS_TEST_TMPDIR/sbatch.env"
  grep -qx "export HPC_WANDB_KEY_FILE='$key'" "$SBATCH_STUB_LOG.script.1"
  [[ $(commands_of 1) != *key* ]]
  # The same key again: nothing to save, nothing said.
  WANDB_API_KEY=$secret run --separate-stderr submitter --wandb-sweepid team/proj/abc123 --num-agents 2
  [ "$status" -eq 0 ]
  [[ $stderr != *"saved WANDB_API_KEY"* ]]
  grep -qx "export HPC_WANDB_KEY_FILE='$key'" "$SBATCH_STUB_LOG.script.2"
}

@test "online: no key anywhere is refused, saying how to give one" {
  rm "$HOME/.netrc"
  refused "no W&B API key for the agents: run 'wandb login'" --wandb-sweepid t/p/abc
}

@test "online: a key file readable by others is refused" {
  rm "$HOME/.netrc"
  local key=$BATS_TEST_TMPDIR/my key
  printf 'abc\n' >"$key"
  chmod 644 "$key"
  WANDB_API_KEY_FILE=$key refused "can be read by others (mode 644): chmod 600" --wandb-sweepid t/p/abc
  chmod 600 "$key"
  WANDB_API_KEY_FILE=$key run --separate-stderr submitter --wandb-sweepid t/p/abc
  [ "$status" -eq 0 ]
  grep -qxF "export HPC_WANDB_KEY_FILE='$key'" "$SBATCH_STUB_LOG.script.1"
}

@test "online: with ~/.netrc (wandb login) no key file is passed" {
  run --separate-stderr submitter --wandb-sweepid t/p/abc
  [ "$status" -eq 0 ]
  ! grep -q HPC_WANDB_KEY_FILE "$SBATCH_STUB_LOG.script.1" || false
}

@test "the generated sweep scripts pass shellcheck" {
  command -v shellcheck
  run --separate-stderr submitter --wandb-sweepid team/proj/abc123 --num-agents 2
  shellcheck -s bash "$SBATCH_STUB_LOG.script.1"
}

@test "hostile project and scratch paths reach the agent as one argument each" {
  make_project "it's a \"proj\" \$x"
  ln -s "$REPO_ROOT/.venv" "$PROJECT/.venv"
  export SCRATCH="$BATS_TEST_TMPDIR/scr atch;\$(touch pwned)"
  mkdir -p "$SCRATCH"
  sweep_file "s p.yml" "$GRID"
  run --separate-stderr submitter --sweep "s p.yml"
  [ "$status" -eq 0 ]
  local line dir
  line=$(commands_of 1 | head -1)
  dir=$(sed -n 's/^Offline sweep [a-z0-9]* (grid, 6 points): //p' <<<"$output")
  [ -f "$dir/sweep.json" ]
  # The commands file line, run as the job runs it, with a recording agent.
  printf '#!/bin/bash\nprintf "%%s\\n" "$@" >"%s/agent.args"\n' "$BATS_TEST_TMPDIR" \
    >"$PROJECT/virtual_env_hpc_files/sweep_agent.sh"
  (cd "$PROJECT" && bash -c "$line")
  [ "$(cat "$BATS_TEST_TMPDIR/agent.args")" = "offline
$dir" ]
  [ ! -e "$PROJECT/pwned" ] && [ ! -e pwned ]
}

@test "--resume-sweep: a tampered sweep.json (exp_name ../../.., bad counts, ids) is refused, nothing written" {
  load ../helpers/hostile_state
  a_submitted_sweep
  local json=$SWEEP_DIR/sweep.json key value before
  cp "$json" "$BATS_TEST_TMPDIR/sweep.json.orig"
  PWNED=$BATS_TEST_TMPDIR/pwned
  hostile_state_values
  # edit KEY VALUE: sweep.json with one field replaced (VALUE is JSON).
  edit() {
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d[sys.argv[2]] = json.loads(sys.argv[3]); json.dump(d, open(sys.argv[1], "w"))' \
      "$json" "$1" "$2"
  }
  # (names and the values that would run code; plain numbers are valid names)
  for value in "${HOSTILE_NAMES[@]}" "${HOSTILE_STATE[@]:0:5}"; do
    cp "$BATS_TEST_TMPDIR/sweep.json.orig" "$json"
    edit exp_name "$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$value")"
    before=$(find "$BATS_TEST_TMPDIR" ! -name 'separate-stderr-*' | sort)
    run --separate-stderr submitter --resume-sweep "$SWEEP_ID"
    [ "$status" -ne 0 ] || { echo "exp_name '$value' accepted"; return 1; }
    [[ $stderr == *"exp_name"* ]]
    [ "$(sbatch_calls)" -eq 1 ]
    [ "$(find "$BATS_TEST_TMPDIR" ! -name 'separate-stderr-*' | sort)" = "$before" ] || { diff <(echo "$before") <(find "$BATS_TEST_TMPDIR" ! -name 'separate-stderr-*' | sort); return 1; }
    [ ! -e "$PWNED" ]
  done
  for key in num_points sweep_id; do
    for value in '"../../.."' '1e400' '-1' '99999999999999999999999' '"12; touch x"' 'true' '[1]'; do
      cp "$BATS_TEST_TMPDIR/sweep.json.orig" "$json"
      edit "$key" "$value"
      run --separate-stderr submitter --resume-sweep "$SWEEP_ID"
      [ "$status" -ne 0 ] || { echo "$key $value accepted"; return 1; }
      [[ $stderr == *"$key"* ]]
      [ "$(sbatch_calls)" -eq 1 ]
    done
  done
  # A ledger with a hostile job label: it never reaches squeue; the point counts as
  # running (nothing to ask Slurm about) and is left alone.
  cp "$BATS_TEST_TMPDIR/sweep.json.orig" "$json"
  printf '{"event":"start","point":0,"run_id":"r0","params":{},"job":"1,2 --help"}\n' >>"$SWEEP_DIR/ledger.jsonl"
  run --separate-stderr submitter --resume-sweep "$SWEEP_ID"
  [ "$status" -eq 0 ]
  grep -qx '#SBATCH --array="1-5"' "$SBATCH_STUB_LOG.script.2"
}
