#!/usr/bin/env bash
# Summary: the preemption path on the local cluster's Slurm: a toolkit job of partition
# 'preemptible' (examples/requeue_train.py) is preempted by a job of 'urgent'; printed:
# how long the urgent job waited for the node, the toolkit job's attempts and their
# states, the seconds from the preemption to the notice in the job and to its requeue,
# and training steps lost; beside it, the urgent job's wait when it preempts a raw
# `sbatch --requeue` job that does nothing about it (Slurm waits out the GraceTime).
#
# Usage: bash tests/bench/preempt.sh
#   On Slurm 24.11: bash tests/setup/slurm_chroot.sh run 24.11 -- bash tests/bench/preempt.sh
set -euo pipefail
# shellcheck source=tests/bench/common.sh
source "${BASH_SOURCE[0]%/*}/common.sh"

bench_setup preempt
cd "$BENCH_PROJECT"
version=$(sbatch --version | awk '{print $2}')
grace=$(scontrol show partition preemptible | grep -o 'GraceTime=[0-9]*')

# epoch T: seconds since 1970 of a Slurm time stamp (2026-11-24T15:01:02).
epoch() { date -d "$1" +%s; }

# gone ID: the job has left the queue.
gone() { [[ -z $(squeue -h -j "$1" -o %i 2>/dev/null) ]]; }

# wait_started ID: print the Start time of job ID once it has started.
wait_started() {
  local s
  while :; do
    s=$(sacct -n -X -P -j "$1" -o Start 2>/dev/null | tail -1)
    [[ -z $s || $s == Unknown || $s == None ]] || { printf '%s\n' "$s"; return 0; }
    sleep 0.5
  done
}

# wait_recorded ID N: until sacct holds N finished attempts of job ID (sacct -D).
wait_recorded() {
  until gone "$1" && (($(sacct -n -X -D -P -j "$1" -o State | grep -cvE 'RUNNING|PENDING') >= $2)); do sleep 0.5; done
}

# --- the toolkit's job ------------------------------------------------------------------
printf 'python examples/requeue_train.py --steps 40 --step-sleep 0.2\n' >experiment_configurations.txt
out=$(bash hpc_files/job_submitter.sh --time 10 --exp-name hpc_bench --cluster local --partition preemptible --cpus 4)
id=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' <<<"$out")
progress=$SCRATCH/project/hpc_bench/checkpoints/progress.log
log=$SCRATCH/project/hpc_outputs/hpc_bench-$id.out
until [[ -f $progress ]] && grep -q '^1 5$' "$progress"; do sleep 0.2; done
urgent=$(sbatch --parsable --partition urgent --cpus-per-task 4 --time 1 --output /dev/null --job-name hpc_bench --wrap 'sleep 2')
urgent_start=$(wait_started "$urgent")
urgent_submit=$(sacct -n -X -P -j "$urgent" -o Submit | tail -1)
wait_recorded "$id" 2
sleep 15 # a stale requeue request (24.11) would start another attempt within about 12 s
wait_recorded "$id" 2
attempts=$(sacct -n -X -D -P -j "$id" -o State,ExitCode | tr '\n' ' ')
notice=$(grep -m1 -oE '^\[hpc [0-9-]+ [0-9:]+ [^]]*\] preempted at [0-9T:-]+' "$log" || true)
preempt_time=${notice##*preempted at }
notice_time=$(sed -E 's/^\[hpc ([0-9-]+ [0-9:]+) .*/\1/' <<<"$notice")
requeue_time=$(grep -m1 -oE '^\[hpc [0-9-]+ [0-9:]+ [^]]*\] requeueing job' "$log" | sed -E 's/^\[hpc ([0-9-]+ [0-9:]+) .*/\1/' || true)
lost=$(python3 - "$progress" <<'PY'
import sys
rows = [tuple(map(int, line.split())) for line in open(sys.argv[1])]
a2 = [s for a, s in rows if a == 2]
print(max(s for a, s in rows if a == 1) - (min(a2) - 1) if a2 else "no attempt 2")
PY
)
toolkit_wait=$(($(epoch "$urgent_start") - $(epoch "$urgent_submit")))

# --- a raw sbatch --requeue job, preempted the same way ---------------------------------
raw=$(sbatch --parsable --partition preemptible --cpus-per-task 4 --requeue --time 10 --output /dev/null --job-name hpc_bench --wrap 'sleep 600')
wait_started "$raw" >/dev/null
sleep 3
urgent2=$(sbatch --parsable --partition urgent --cpus-per-task 4 --time 1 --output /dev/null --job-name hpc_bench --wrap 'sleep 2')
raw_start=$(wait_started "$urgent2")
raw_submit=$(sacct -n -X -P -j "$urgent2" -o Submit | tail -1)
raw_wait=$(($(epoch "$raw_start") - $(epoch "$raw_submit")))
scancel "$raw" 2>/dev/null || true

echo "preemption benchmark on Slurm $version (partition preemptible, $grace s)"
echo "  toolkit job $id attempts (sacct -D): $attempts"
echo "  preempted at $preempt_time; notice in the job at ${notice_time#* }: $(($(epoch "$notice_time") - $(epoch "$preempt_time"))) s; requeued at ${requeue_time#* }: $(($(epoch "$requeue_time") - $(epoch "$preempt_time"))) s after the preemption"
echo "  training steps lost: $lost (target: at most 1)"
echo "  the urgent job waited ${toolkit_wait} s for the node (toolkit job) vs ${raw_wait} s (raw sbatch --requeue job): $(ratio "$toolkit_wait" "$raw_wait")x"
