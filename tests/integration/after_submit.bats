#!/usr/bin/env bats
# After submitting, on the cluster with slurmdbd: hpc status (per task, from sacct),
# --efficiency, hpc logs (a task, --failed, -f while pending), hpc cancel. Arrays, split
# arrays (HPC_MAX_ARRAY_SIZE=2: several Slurm arrays in one submission) and failed tasks.
# The cluster without slurmdbd is after_submit_jobcomp.bats.

load ../helpers/cluster

setup() {
  integration_setup proj
}


@test "status: per task state, exit code, elapsed, node and log of a split array, from sacct" {
  printf '%s\n' 'echo t0' 'echo t1' 'echo broken >&2; exit 4' 'echo t3' 'echo t4' \
    >"$PROJECT/experiment_configurations.txt"
  HPC_MAX_ARRAY_SIZE=2 submit --exp-name split --time 5
  local ids
  mapfile -t ids < <(sed -n 's/^Submitted batch job \([0-9]*\) .*/\1/p' <<<"$output")
  [ "${#ids[@]}" -eq 3 ]
  wait_job "${ids[0]}" 120 2
  wait_job "${ids[1]}" 120 2
  wait_job "${ids[2]}" 120 1
  run --separate-stderr hpc status
  echo "$output"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "States from: sacct" ]
  [[ ${lines[1]} == "== split  jobs ${ids[0]},${ids[1]},${ids[2]}  5 task(s)"*"COMPLETED 4, FAILED 1" ]]
  # Columns stand 2+ spaces apart; ATTEMPTS ("1: failed (exit 4)") holds single spaces.
  mapfile -t f < <(awk '$1 == 2' <<<"$output" | sed 's/   */\n/g')
  [ "${f[1]}" = "${ids[1]}_0" ]
  [ "${f[2]}" = FAILED ]
  [ "${f[3]}" = 4:0 ]
  [[ ${f[4]} =~ ^[0-9:]+$ ]]
  [[ ${f[5]} == node[1-4] ]]
  [ "${f[6]}" = "1: failed (exit 4)" ]
  [ "${f[7]}" = "$SCRATCH/proj/hpc_outputs/split-${ids[1]}_0.out" ]
  grep -q 'command: echo broken' "${f[7]}"
  [ "$(awk '$1 == 4 {print $2, $3}' <<<"$output")" = "${ids[2]}_0 COMPLETED" ]
  # logs: one task by JOB_TASK, by --task, and the tails of the failed ones only.
  run --separate-stderr hpc logs "${ids[2]}_0"
  [ "$status" -eq 0 ]
  [[ $output == *"command: echo t4"* ]]
  run --separate-stderr hpc logs split --task 3
  [[ $output == *"command: echo t3"* && $output != *"echo t4"* ]]
  run --separate-stderr hpc logs split --failed -n 5
  echo "$output"
  [ "$status" -eq 0 ]
  [[ $output == *"==> task 2 (${ids[1]}_0) FAILED exit 4:0 on node"* ]]
  [[ $output == *"broken"* ]]
  [[ $output != *"task 0"* && $output != *"task 3"* ]]
}

@test "status --efficiency: CPU, memory, time used vs limit, GPU not recorded here" {
  # shellcheck disable=SC2016 # run by the job
  printf '%s\n' 'end=$((SECONDS + 4)); while ((SECONDS < end)); do :; done' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name eff --time 7 --cpus 2
  wait_job "$JOB_ID"
  run --separate-stderr hpc report eff
  echo "$output"
  [ "$status" -eq 0 ]
  local -a f
  mapfile -t f < <(awk '$1 == 0' <<<"$output" | sed 's/   */\n/g') # ATTEMPTS holds single spaces
  [ "${f[2]}" = COMPLETED ]
  [ "${f[6]}" = "1: finished" ]
  [[ ${f[7]} =~ ^[0-9]+%$ ]]
  # CPU EFF is TotalCPU / (Elapsed x AllocCPUS) of Slurm's own figures (the share of the
  # busy loop depends on the machine's load, so the figure itself is not asserted).
  local want
  # (The job's own line without -X: with -X, 22.05 prints TotalCPU 00:00:00.)
  want=$(sacct -n -P -j "$JOB_ID" -o JobID,TotalCPU,ElapsedRaw,AllocCPUS | grep "^$JOB_ID|" | python3 -c '
import sys
_, cpu, el, n = sys.stdin.read().strip().split("|")
d, _, hms = cpu.rpartition("-")
parts = [float(p) for p in hms.split(":")]
while len(parts) < 3:
    parts.insert(0, 0.0)
s = (int(d) if d else 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]
print(f"{100 * s / (int(el) * int(n)):.0f}%")')
  [ "${f[7]}" = "$want" ]
  [ "${f[10]}" = "not available" ] # GPU UTIL (no GPU accounting here)
  [[ ${f[8]} =~ ^[0-9]+M/[0-9]+M$ ]]
  [[ ${f[9]} == *"/00:07:00" ]]
}

@test "logs -f waits for a held job's log, follows it and ends with the job" {
  printf '%s\n' 'echo first; sleep 4; echo second' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name follow --time 5 --sbatch-option=--hold
  [ ! -e "$SCRATCH/proj/hpc_outputs/follow-$JOB_ID.out" ]
  hpc logs -f "$JOB_ID" >"$BATS_TEST_TMPDIR/followed" 2>"$BATS_TEST_TMPDIR/followed.err" &
  local pid=$! waited=0
  # Released only once the follower says it waits (its start takes long on a loaded machine).
  until grep -q "waiting for $SCRATCH/proj/hpc_outputs/follow-$JOB_ID.out" "$BATS_TEST_TMPDIR/followed.err"; do
    ((waited++ < 120)) || false
    sleep 0.5
  done
  kill -0 "$pid" # still waiting for the log
  scontrol release "$JOB_ID"
  waited=0
  while kill -0 "$pid" 2>/dev/null && ((waited++ < 120)); do sleep 1; done
  wait "$pid"
  cat "$BATS_TEST_TMPDIR/followed"
  grep -qx first "$BATS_TEST_TMPDIR/followed"
  grep -qx second "$BATS_TEST_TMPDIR/followed"
  grep -q 'command ended with exit code 0' "$BATS_TEST_TMPDIR/followed"
}

@test "cancel: refused without a terminal or --yes; --yes cancels every array and the venv job" {
  printf '# nothing to install\n' >"$PROJECT/requirements.txt"
  printf 'sleep 300\n%.0s' 1 2 3 >"$PROJECT/experiment_configurations.txt"
  HPC_MAX_ARRAY_SIZE=2 submit --exp-name long --time 10 --setup-venv --venv "$BATS_TEST_TMPDIR/v"
  local ids venv_job
  mapfile -t ids < <(sed -n 's/^Submitted batch job \([0-9]*\) .*/\1/p' <<<"$output")
  venv_job=$(sed -n 's/^Submitted venv job \([0-9]*\).*/\1/p' <<<"$output")
  [ "${#ids[@]}" -eq 2 ]
  [ -n "$venv_job" ]
  run --separate-stderr hpc cancel long </dev/null
  [ "$status" -eq 2 ]
  [[ $stderr == *"not on a terminal: pass --yes"* ]]
  [ -n "$(squeue -h -j "${ids[0]}" -o %i)" ]
  run --separate-stderr hpc cancel long --yes
  echo "$output $stderr"
  [ "$status" -eq 0 ]
  [[ $output == "Cancelled $venv_job, ${ids[0]}, ${ids[1]} (long, 3 task(s))" ]]
  wait_job "$venv_job" 60
  wait_job "${ids[0]}" 60
  wait_job "${ids[1]}" 60
  # The venv job (nothing to install) may have finished before the cancel.
  [[ $(job_state "$venv_job") == @(CANCELLED|COMPLETED)* ]]
  job_states "${ids[1]}" | grep -q CANCELLED
  run --separate-stderr hpc status long --summary
  echo "$output"
  [[ ${lines[1]} == *"CANCELLED 3" ]]
}

@test "a job number of the ledger that is another job now (Slurm numbered afresh): cancel leaves it alone, and the experiment is not refused as running" {
  # The ledger says job N was a submission of 'old'; this user's job N now is another job
  # (a cluster whose Slurm numbered its jobs afresh, or two clusters sharing $SCRATCH).
  local other ledger=$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv
  other=$(sbatch --parsable -J unrelated --time 5 --output=/dev/null --wrap 'sleep 300')
  researcher mkdir -p "${ledger%/*}"
  # shellcheck disable=SC2016 # the inner shell's arguments
  researcher bash -c 'printf "%s\t%s\told\t1\t%s\told-1\tjob\t0\t%s\n" 2026-11-01T00:00:00+0000 "$1" "$2" "$3" >>"$4"' \
    _ "$other" "${ledger%/*}/old-1.sbatch" "$SCRATCH/proj/hpc_outputs/old-%j.out" "$ledger"
  run --separate-stderr hpc cancel old --yes
  echo "$output $stderr"
  [ "$status" -eq 1 ]
  [[ $stderr == *"job $other is another job now (named 'unrelated', not 'old'): left alone"* ]]
  [[ $stderr == *"nothing cancelled: the jobs of submission old-1 have ended"* ]]
  [ -n "$(squeue -h -j "$other" -o %i)" ]
  printf 'echo new\n' >"$PROJECT/experiment_configurations.txt"
  submit --exp-name old --time 5
  wait_job "$JOB_ID" 120
  [ "$(job_state "$JOB_ID")" = COMPLETED ]
  [ -n "$(squeue -h -j "$other" -o %i)" ]
  scancel "$other"
}

@test "status, logs and cancel name what to do for an unknown job or experiment" {
  run --separate-stderr hpc logs 999999
  [ "$status" -eq 1 ]
  [[ $stderr == *"job 999999 is not in the ledger of this project: run \`hpc status\`"* ]]
  run --separate-stderr hpc cancel nope --yes
  [ "$status" -eq 1 ]
  [[ $stderr == *"no submission of experiment 'nope' is recorded"* ]]
}
