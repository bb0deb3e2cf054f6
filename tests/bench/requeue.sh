#!/usr/bin/env bash
# Summary: training steps lost per requeue (steps done after the last checkpoint that had
# to be done again), for examples/requeue_train.py warned twice with `scancel --batch --signal=USR1` on the local cluster (target: at most one
# step lost per requeue).
#
# Usage: bash tests/bench/requeue.sh
set -euo pipefail
# shellcheck source=tests/bench/common.sh
source "${BASH_SOURCE[0]%/*}/common.sh"

bench_setup requeue
cd "$BENCH_PROJECT"
printf 'python examples/requeue_train.py --steps 60 --step-sleep 0.2\n' >experiment_configurations.txt
out=$(bash hpc_files/job_submitter.sh --time 10 --exp-name hpc_bench --cluster local)
id=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' <<<"$out")
progress=$SCRATCH/project/hpc_bench/checkpoints/progress.log

# wait_steps ATTEMPT N: until attempt ATTEMPT has done N steps.
wait_steps() {
  until [[ -f $progress ]] && [[ $(awk -v a="$1" '$1 == a' "$progress" | wc -l) -ge $2 ]]; do sleep 0.2; done
}

for attempt in 1 2; do
  wait_steps "$attempt" 10
  scancel --batch --signal=USR1 "$id"
done
while [[ -n $(squeue -h -j "$id" -o %i 2>/dev/null) ]]; do sleep 0.5; done

python3 - "$progress" "$SCRATCH/project/hpc_outputs/hpc_bench-$id.out" <<'PY'
import re, sys
rows = [tuple(map(int, line.split())) for line in open(sys.argv[1])]
attempts = sorted({a for a, _ in rows})
lost = []
for a in attempts[1:]:
    done_before = max(s for b, s in rows if b == a - 1)
    first_now = min(s for b, s in rows if b == a)
    lost.append(done_before - (first_now - 1))
log = open(sys.argv[2]).read()
final = max(s for _, s in rows)
print(f"requeue benchmark: {len(attempts) - 1} requeues, {final} steps in {len(attempts)} attempts")
print(f"  steps lost per requeue: {lost} (target: at most 1)")
print(f"  requeued attempts in the log: {len(re.findall('requeueing job', log))}")
PY
