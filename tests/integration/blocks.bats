#!/usr/bin/env bats
# Resource blocks on the real local Slurm cluster: '#hpc:' lines of the configs file give
# each task its block's CPUs, GPUs and time limit (seen from inside the job), every task
# keeps its line's index (HPC_TASK_INDEX, checkpoint folder, log name), all arrays are one
# submission for `hpc status`; a bad directive leaves nothing in the queue.

# shellcheck disable=SC2016 # configs lines, expanded by the job
load ../helpers/cluster

setup() {
  integration_setup proj
}


# field FILE EXPR: a value from a JSON file written by argv_dump.py (python expression on d).
field() {
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

@test "each task runs with its block's CPUs, GPUs and time limit, at its own line's index; one submission" {
  # Each line also records its job's time limit, as Slurm holds it.
  local probe='scontrol show job "${SLURM_ARRAY_JOB_ID}_$SLURM_ARRAY_TASK_ID" | grep -o "TimeLimit=[^ ]*" >"$HPC_CHECKPOINT_DIR/limit"'
  cat >"$PROJECT/experiment_configurations.txt" <<EOF
$probe; python argv_dump.py t
#hpc: --cpus 2 --gpus 1 --time 00:07:00
$probe; python argv_dump.py t
$probe; python argv_dump.py t
#hpc: --gpus 2 --cpus 3 --time 9 # two GPUs
$probe; python argv_dump.py t
#hpc:
$probe; python argv_dump.py t
EOF
  submit --exp-name blk --cpus 1 --time 5
  echo "$output"
  local ids
  mapfile -t ids < <(sed -n 's/^Submitted batch job \([0-9]*\) .*/\1/p' <<<"$output")
  [ "${#ids[@]}" -eq 3 ]
  wait_job "${ids[0]}" 180 2
  wait_job "${ids[1]}" 180 2
  wait_job "${ids[2]}" 180 1
  [ "$(job_states "${ids[0]}" | sort)" = "${ids[0]}_0|COMPLETED|0:0"$'\n'"${ids[0]}_4|COMPLETED|0:0" ]
  [ "$(job_states "${ids[1]}" | sort)" = "${ids[1]}_1|COMPLETED|0:0"$'\n'"${ids[1]}_2|COMPLETED|0:0" ]
  [ "$(job_states "${ids[2]}")" = "${ids[2]}_3|COMPLETED|0:0" ]

  local ck=$SCRATCH/proj/blk/checkpoints i want_cpus want_gpus want_limit job
  for i in 0 1 2 3 4; do
    case $i in
      0 | 4) want_cpus=1 want_gpus=0 want_limit=00:05:00 job=${ids[0]} ;;
      1 | 2) want_cpus=2 want_gpus=1 want_limit=00:07:00 job=${ids[1]} ;;
      3) want_cpus=3 want_gpus=2 want_limit=00:09:00 job=${ids[2]} ;;
    esac
    local f=$ck/task_$i/t.json
    [ "$(field "$f" 'd["env"]["HPC_TASK_INDEX"]')" = "$i" ]
    [ "$(field "$f" 'd["env"]["SLURM_ARRAY_TASK_ID"]')" = "$i" ]
    [ "$(field "$f" 'd["env"]["SLURM_ARRAY_JOB_ID"]')" = "$job" ]
    [ "$(field "$f" 'd["env"]["SLURM_CPUS_PER_TASK"]')" = "$want_cpus" ]
    # GPUs: as many as the block asked for, visible to the program (none: no variable).
    [ "$(field "$f" 'len([g for g in d["env"].get("CUDA_VISIBLE_DEVICES", "").split(",") if g])')" = "$want_gpus" ]
    [ "$(field "$f" 'd["env"].get("SLURM_GPUS_ON_NODE", "0")')" = "$want_gpus" ]
    [ "$(cat "$ck/task_$i/limit")" = "TimeLimit=$want_limit" ]
    # The log is named by the array's job id and the line's own index.
    grep -q "command: .*argv_dump.py t" "$SCRATCH/proj/hpc_outputs/blk-${job}_$i.out"
  done

  # hpc status: one submission holding the three arrays, each task under its own index.
  run --separate-stderr hpc status
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c '^== blk ' <<<"$output")" -eq 1 ]
  [[ $output == *"== blk  jobs ${ids[0]},${ids[1]},${ids[2]}  5 task(s)"*"COMPLETED 5"* ]]
  [ "$(awk '$1 == 3 {print $2}' <<<"$output")" = "${ids[2]}_3" ]
  [ "$(awk '$1 == 4 {print $2}' <<<"$output")" = "${ids[0]}_4" ]
}

@test "a bad directive is refused, and a block sbatch refuses cancels the others: nothing queued, nothing left" {
  printf '%s\n' 'echo a' '#hpc: --gpus 1 --exp-name other' 'echo b' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter -e bad --time 5
  [ "$status" -eq 2 ]
  [[ $stderr == *"line 2 (#hpc: --gpus 1 --exp-name other): --exp-name cannot be set by a directive"* ]]
  [ -z "$(squeue -h -n bad -o %i)" ]
  [ -z "$(find "$SCRATCH" -type f)" ]
  # A block's --time above its partition's MaxTime: refused before anything is written.
  printf '%s\n' 'echo a' '#hpc: -p short --time 6' 'echo b' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter -e bad --time 5
  [ "$status" -eq 2 ]
  [[ $stderr == *"line 2 (#hpc: -p short --time 6): --time 6 is longer than partition short allows (MaxTime=00:05:00)"* ]]
  [ -z "$(squeue -h -n bad -o %i)" ]
  [ -z "$(find "$SCRATCH" -type f)" ]
  # A feature no node has: the profile cannot tell, sbatch refuses the second array; the
  # first is cancelled and every file goes.
  printf '%s\n' 'sleep 60' '#hpc: --sbatch-option=--constraint=nosuchfeature' 'echo b' \
    >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter -e bad --time 5 --cpus 1
  echo "$stderr"
  [ "$status" -eq 1 ]
  [[ $stderr == *"Invalid feature specification"* ]]
  [[ $stderr == *"sbatch did not accept array 2 of 2"*"nothing was submitted (jobs "*" were cancelled)"* ]]
  [ -z "$(squeue -h -n bad -t PENDING,RUNNING -o %i)" ]
  [ -z "$(find "$SCRATCH" -name '*.sbatch' -o -name commands -o -name submissions.tsv)" ]
}
