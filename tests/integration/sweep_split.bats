#!/usr/bin/env bats
# A grid larger than the cluster's MaxArraySize is split into several arrays, and every
# point still runs exactly once. It needs a cluster with MaxArraySize=1001 (the shared one
# has 10001): this file starts its own beside it and stops it at the end.
# About 2,500 tiny tasks: a few minutes on a 2-core machine.

load ../helpers/cluster

# The second cluster sits beside whichever one the run uses (its folder + "_sweep", its
# ports 50 higher), so that runs of the suite side by side never share it.
setup_file() {
  cluster_beside_start _sweep 50 HPC_LOCAL_MAX_ARRAY_SIZE=1001
}

teardown_file() {
  cluster_beside _sweep 50 HPC_LOCAL_MAX_ARRAY_SIZE=1001 -- stop
}

setup() {
  integration_setup proj
  project_venv
  [[ $(scontrol show config) == *"MaxArraySize            = 1001"* ]]
}

@test "a 2,500-point grid on MaxArraySize 1001: three arrays, every point run once" {
  cat >"$PROJECT/big.yml" <<'EOF'
method: grid
parameters:
  a: {min: 0, max: 49}
  b: {values: [x, y, z, w, v]}
  c: {distribution: q_uniform, min: 0, max: 10, q: 1}
command: ["${env}", "true", "${args}"]
EOF
  run --separate-stderr hpc sweep count "$PROJECT/big.yml"
  [ "$output" = 2500 ]
  submit --sweep big.yml -e big --time 10
  echo "$output"
  local ids id dir
  mapfile -t ids < <(sed -n 's/^Submitted batch job \([0-9]*\) .*/\1/p' <<<"$output")
  [ "${#ids[@]}" -eq 3 ]
  [[ ${lines[0]} == *"(array of 1001 task(s): 0-1000 as array indices 0-1000)" ]]
  [[ ${lines[1]} == *"(array of 1001 task(s): 1001-2001 as array indices 0-1000)" ]]
  [[ ${lines[2]} == *"(array of 498 task(s): 2002-2499 as array indices 0-497)" ]]
  dir=$SCRATCH/proj/sweeps/$(sed -n 's/^Offline sweep \([a-z0-9]*\) .*/\1/p' <<<"$output")
  # Each array's task records, all of them (sacct gets them a few seconds after the queue).
  wait_job "${ids[0]}" 1200 1001
  wait_job "${ids[1]}" 1200 1001
  wait_job "${ids[2]}" 1200 498
  [ "$(for id in "${ids[@]}"; do job_states "$id"; done | grep -c '|COMPLETED|0:0$')" -eq 2500 ]
  # Every point once, with the values W&B's grid search gives that point.
  PYTHONPATH=$REPO_ROOT/python "$TEST_VENV/bin/python" -W ignore -c '
import sys, warnings
from pathlib import Path
import sweeps
from hpc_toolkit.sweep.folder import SweepFolder
from hpc_toolkit.sweep.ledger import attempts
folder = SweepFolder.load(Path(sys.argv[1]))
tries = attempts(folder.ledger.events())
assert sorted(tries) == list(range(2500)), "points missing or extra"
assert all(len(t) == 1 and t[0].state == "finished" for t in tries.values()), "a point ran twice or failed"
expected = sweeps.next_runs(dict(folder.info["config"]), [], n=2501)
assert expected[-1] is None
for point, t in tries.items():
    assert t[0].params == expected[point].config, (point, t[0].params)
print("ok")' "$dir"
}
