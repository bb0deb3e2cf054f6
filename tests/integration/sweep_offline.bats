#!/usr/bin/env bats
# Offline W&B sweeps on the real local cluster: no W&B server is reachable here (none is
# needed). The runs are the unchanged examples/sweep_train.py, which logs with wandb.

load ../helpers/cluster

setup() {
  integration_setup proj
  project_venv # wandb, wandb[sweeps], PyYAML
  PY=$TEST_VENV/bin/python
}

# sweep_id: the id job_submitter.sh printed (from $output of the last `submit`).
sweep_id() {
  sed -n 's/^Offline sweep \([a-z0-9]*\) .*/\1/p' <<<"$output"
}

# py CODE ARGS...: Python with the toolkit importable (to read ledgers and .wandb files).
py() {
  PYTHONPATH=$REPO_ROOT/python "$PY" -W ignore -c "$@"
}

# Prints "point run_id state metric config-from-.wandb sweep-id-from-.wandb" per point.
READ_RUNS='
import json, sys
from pathlib import Path
from hpc_toolkit.sweep.ledger import Ledger, attempts
from hpc_toolkit.sweep.records import read_run, run_file
folder = Path(sys.argv[1])
for point, tries in sorted(attempts(Ledger(folder).events()).items()):
    for a in tries:
        run = read_run(run_file(Path(a.run_dir))) if a.run_dir else None
        config = {k: run.config[k] for k in ("lr", "epochs")} if run else None
        print(point, a.run_id, a.state, a.metric, json.dumps(config, sort_keys=True, separators=(",", ":")),
              run.sweep_id if run else None, run.summary.get("loss") if run else None)
'

@test "the example grid (sweeper.yml, 3 x 2): 6 tasks, each point once, each run with its config, sweep id and metric" {
  # The repository's own example, as install_into_project.sh copied it.
  cmp "$PROJECT/sweeper.yml" "$REPO_ROOT/sweeper.yml"
  submit --sweep sweeper.yml -e grid --time 10
  local id dir
  id=$(sweep_id)
  dir=$SCRATCH/proj/sweeps/$id
  [[ $output == *"(array of 6 tasks, 0-5)"* ]]
  wait_job "$JOB_ID" 300
  [ "$(job_states "$JOB_ID" | grep -c '|COMPLETED|0:0$')" -eq 6 ]
  run py "$READ_RUNS" "$dir"
  echo "$output"
  [ "${#lines[@]}" -eq 6 ] # one run per point, no point twice
  # W&B's grid order: parameters sorted by name, the last one turning fastest.
  local expected=('{"epochs":5,"lr":0.01}' '{"epochs":5,"lr":0.05}' '{"epochs":5,"lr":0.1}'
    '{"epochs":10,"lr":0.01}' '{"epochs":10,"lr":0.05}' '{"epochs":10,"lr":0.1}')
  local i point run_id state metric config sweep loss
  for i in 0 1 2 3 4 5; do
    read -r point run_id state metric config sweep loss <<<"${lines[i]}"
    [ "$point" = "$i" ]
    [ "$state" = finished ]
    [ "$sweep" = "$id" ]
    [ "$config" = "${expected[i]}" ]
    [ "$metric" = "$loss" ]
    [ "$metric" != None ]
    grep -q "point $i of 6, run $run_id" "$(job_log "$JOB_ID" grid "$i")"
  done
  [ "$(cut -d' ' -f2 <<<"$output" | sort -u | wc -l)" -eq 6 ]
  # What the researcher sees.
  run --separate-stderr hpc sweep status "$id" --scratch-dir "$SCRATCH/proj"
  [ "$status" -eq 0 ]
  [[ $output == *"6 finished"* ]]
  # batch_size is the same in every run (sweeper.yml's `value: 32`): said once, above the table.
  [[ ${lines[1]} == "the same in every run: batch_size=32 "* ]]
  [[ ${lines[2]} == "POINT  STATE     LOSS"* ]]
}

@test "sync uploads each finished offline run with wandb sync (stand-in wandb on PATH)" {
  cat >"$PROJECT/g.yml" <<'EOF'
program: examples/sweep_train.py
method: grid
parameters:
  lr: {values: [0.05, 0.1]}
  epochs: {value: 1}
EOF
  submit --sweep g.yml -e sync --time 10
  local id
  id=$(sweep_id)
  wait_job "$JOB_ID" 240
  mkdir -p "$BATS_TEST_TMPDIR/bin"
  printf '#!/bin/sh\necho "$*" >>"%s/wandb.calls"\n' "$BATS_TEST_TMPDIR" >"$BATS_TEST_TMPDIR/bin/wandb"
  chmod +x "$BATS_TEST_TMPDIR/bin/wandb"
  PATH=$BATS_TEST_TMPDIR/bin:$PATH run --separate-stderr hpc sweep sync \
    "$SCRATCH/proj/sweeps/$id"
  [ "$status" -eq 0 ]
  local dirs
  dirs=$(find "$SCRATCH/proj/sweeps/$id/wandb" -maxdepth 1 -name 'offline-run-*' | sort)
  [ "$(echo "$dirs" | wc -l)" -eq 2 ]
  [ "$(sed 's/^sync //' "$BATS_TEST_TMPDIR/wandb.calls" | sort)" = "$dirs" ]
}

@test "random: a failed point is resubmitted alone and draws the same values again" {
  cat >"$PROJECT/rand.yml" <<'EOF'
method: random
run_cap: 3
parameters:
  lr: {distribution: log_uniform_values, min: 0.001, max: 0.1}
  epochs: {values: [1, 2]}
command:
  - bash
  - examples/fail_once.sh
  - ${args}
EOF
  # Point 1 fails on its first attempt only.
  cat >"$PROJECT/examples/fail_once.sh" <<'EOF'
if [ "$HPC_TASK_INDEX" = 1 ] && mkdir "$SCRATCH/failed_once" 2>/dev/null; then exit 3; fi
exec python examples/sweep_train.py "$@"
EOF
  submit --sweep rand.yml -e rand --time 10
  local id dir first
  id=$(sweep_id)
  dir=$SCRATCH/proj/sweeps/$id
  first=$JOB_ID
  wait_job "$first" 240
  [ "$(job_states "$first" | grep -c '|COMPLETED|')" -eq 2 ]
  [ "$(job_states "$first" | awk -F'|' '$1 ~ /_1$/ { print $2 }')" = FAILED ]
  run --separate-stderr hpc sweep status "$id" --scratch-dir "$SCRATCH/proj"
  [[ $output == *"to run points 1 again: bash hpc_files/job_submitter.sh --resume-sweep $id"* ]]

  submit --resume-sweep "$id" --time 10
  [[ $output == *"(array of 1 task(s): 1 as array indices 1)"* ]]
  wait_job "$JOB_ID" 240
  [ "$(job_states "$JOB_ID" | cut -d'|' -f1,2)" = "${JOB_ID}_1|COMPLETED" ]
  [ "$(sacct -X -n -P -j "$JOB_ID" -o JobName)" = rand ] # the sweep's experiment name
  run py "$READ_RUNS" "$dir"
  echo "$output"
  [ "${#lines[@]}" -eq 4 ] # 3 points, point 1 twice
  local params
  params=$(py 'import json, sys
from pathlib import Path
from hpc_toolkit.sweep.ledger import Ledger, attempts
t = attempts(Ledger(Path(sys.argv[1])).events())
print(json.dumps([[a.params for a in t[p]] for p in sorted(t)], sort_keys=True))' "$dir")
  # Both attempts of point 1 ran the same values; the three points differ.
  py 'import json, sys; p = json.loads(sys.argv[1])
assert [len(x) for x in p] == [1, 2, 1], p
assert p[1][0] == p[1][1], p[1]
assert len({json.dumps(x[0], sort_keys=True) for x in p}) == 3' "$params"
  # The values are W&B random search seeded with the sweep id and the point: a fresh
  # process draws them again.
  py 'import json, sys
from pathlib import Path
from hpc_toolkit.sweep.folder import SweepFolder
from hpc_toolkit.sweep.search import point_params
f = SweepFolder.load(Path(sys.argv[1])); p = json.loads(sys.argv[2])
assert all(point_params(f.spec(), f.sweep_id, i, {}) == p[i][0] for i in range(3))' "$dir" "$params"
  # The second attempt of point 1 reached W&B with those values.
  [[ $(sed -n 3p <<<"$output") == "1 "*" finished "* ]]
  [[ $(sed -n 2p <<<"$output") == "1 "*" failed "* ]]
}

@test "bayes: 6 runs, 2 at a time, all complete with their metric, no run id twice" {
  cat >"$PROJECT/bayes.yml" <<'EOF'
program: examples/sweep_train.py
method: bayes
metric: {name: loss, goal: minimize}
parameters:
  lr: {min: 0.001, max: 0.2}
  epochs: {values: [1, 2]}
EOF
  submit --sweep bayes.yml -e bayes --num-agents 6 --max-parallel 2 --time 10
  local id dir
  id=$(sweep_id)
  dir=$SCRATCH/proj/sweeps/$id
  grep -qx '#SBATCH --array="0-5%2"' "$(sed -n 's/^  script: //p' <<<"$output")"
  wait_job "$JOB_ID" 400
  [ "$(job_states "$JOB_ID" | grep -c '|COMPLETED|0:0$')" -eq 6 ]
  run py "$READ_RUNS" "$dir"
  echo "$output"
  [ "${#lines[@]}" -eq 6 ]
  [ "$(cut -d' ' -f1 <<<"$output" | tr '\n' ' ')" = "0 1 2 3 4 5 " ]
  [ "$(cut -d' ' -f2 <<<"$output" | sort -u | wc -l)" -eq 6 ]
  [ "$(cut -d' ' -f3 <<<"$output" | sort -u)" = finished ]
  [ "$(cut -d' ' -f6 <<<"$output" | sort -u)" = "$id" ]
  # Every run has its metric, and the parameters W&B's bayes search chose are distinct.
  [[ $(cut -d' ' -f4 <<<"$output") != *None* ]]
  [ "$(cut -d' ' -f5 <<<"$output" | sort -u | wc -l)" -eq 6 ]
}

@test "--resume-sweep while the sweep still runs: its running and queued points are taken, only the failed one runs again; of two at once, one is refused naming the other" {
  cat >"$PROJECT/held.yml" <<'EOF2'
method: grid
parameters:
  lr: {values: [0.01, 0.05, 0.1]}
  epochs: {value: 1}
command:
  - bash
  - examples/held.sh
  - ${args}
EOF2
  # Point 0 fails on its first attempt; point 1 runs until the test releases it; with
  # --max-parallel 1, point 2 waits in the queue meanwhile.
  cat >"$PROJECT/examples/held.sh" <<'EOF2'
if [ "$HPC_TASK_INDEX" = 0 ] && mkdir "$SCRATCH/failed_once" 2>/dev/null; then exit 3; fi
if [ "$HPC_TASK_INDEX" = 1 ]; then
  i=0
  while [ ! -e "$SCRATCH/release" ] && [ "$i" -lt 1500 ]; do sleep 0.2; i=$((i + 1)); done
fi
exec python examples/sweep_train.py "$@"
EOF2
  submit --sweep held.yml -e held --time 10 --max-parallel 1
  local id first i states
  id=$(sweep_id)
  first=$JOB_ID
  for ((i = 0; i < 480; i++)); do
    states=$(job_states "$first")
    grep -q "^${first}_0|FAILED|" <<<"$states" && grep -q "^${first}_1|RUNNING|" <<<"$states" && break
    sleep 0.5
  done
  echo "$states"
  grep -q "^${first}_1|RUNNING|" <<<"$states"
  [ -n "$(squeue -h -j "$first" -t PENDING -o %i)" ] # point 2: still queued
  # sbatch waits at a gate, so the two resumes overlap for sure.
  local real gate=$BATS_TEST_TMPDIR/gate
  real=$(type -P sbatch)
  mkdir -p "$BATS_TEST_TMPDIR/wrap"
  # shellcheck disable=SC2016 # the wrapper's and the inner shell's own $1, $2
  printf '#!/bin/sh\n[ "$1" = --version ] || { touch %q.reached; while [ ! -e %q ]; do sleep 0.1; done; }\nexec %q "$@"\n' \
    "$gate" "$gate" "$real" >"$BATS_TEST_TMPDIR/wrap/sbatch"
  chmod +x "$BATS_TEST_TMPDIR/wrap/sbatch"
  (cd "$PROJECT" && PATH=$BATS_TEST_TMPDIR/wrap:$PATH researcher bash hpc_files/job_submitter.sh --resume-sweep "$id" --time 10) \
    >"$BATS_TEST_TMPDIR/first.out" 2>&1 &
  local pid=$!
  for ((i = 0; i < 600; i++)); do [[ -e $gate.reached ]] && break; sleep 0.1; done
  [ -e "$gate.reached" ]
  # shellcheck disable=SC2016
  run --separate-stderr researcher bash -c 'cd "$1" && bash hpc_files/job_submitter.sh --resume-sweep "$2" --time 10' _ "$PROJECT" "$id"
  echo "$stderr"
  [ "$status" -eq 1 ]
  [[ $stderr == *"a resume of sweep $id is being submitted right now by another job_submitter.sh (job_submitter.sh --resume-sweep $id"*"nothing was submitted"* ]]
  touch "$gate"
  wait "$pid"
  cat "$BATS_TEST_TMPDIR/first.out"
  # Only point 0: point 1 runs, point 2 is queued.
  grep -q "(array of 1 task(s): 0 as array indices 0)" "$BATS_TEST_TMPDIR/first.out"
  local resumed
  resumed=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' "$BATS_TEST_TMPDIR/first.out")
  [ -n "$resumed" ]
  touch "$SCRATCH/release"
  wait_job "$first" 300 3
  wait_job "$resumed" 240 1
  [ "$(job_states "$resumed" | cut -d'|' -f1,2)" = "${resumed}_0|COMPLETED" ]
  # Every point ran once, point 0 twice; no point was started a third time.
  run py "$READ_RUNS" "$SCRATCH/proj/sweeps/$id"
  echo "$output"
  [ "${#lines[@]}" -eq 4 ]
  [ "$(cut -d' ' -f1 <<<"$output" | tr '\n' ' ')" = "0 0 1 2 " ]
  [ "$(awk '$1 != 0 || NR == 2 { print $3 }' <<<"$output" | sort -u)" = finished ]
}
