#!/usr/bin/env bats
# A line that is itself a launcher (torchrun, python -m torch.distributed.run, accelerate
# launch, deepspeed) is never nested in a second one: -d torchrun, -d script and
# -d lightning refuse it at submission (exit 2, nothing written), naming what to write
# instead; -d none runs it as it is. On the cluster: tests/integration/programs.bats.

# shellcheck disable=SC2016 # the variables' names, as lines and messages hold them

load ../helpers/common

setup() {
  hermetic_env
}

# refused LAUNCHER LINE WORDS...: submitting LINE with -d LAUNCHER on 2 nodes fails with
# exit 2 and a message holding every one of WORDS.
refused() {
  local launcher=$1 line=$2 word
  shift 2
  make_project proj "$line"
  run --separate-stderr submitter -d "$launcher" --num-nodes 2 --cluster local --venv none -n
  [ "$status" -eq 2 ]
  [ -z "$output" ]
  for word; do
    [[ $stderr == *"$word"* ]] || { echo "no '$word' in: $stderr" >&2 && return 1; }
  done
}

@test "-d torchrun refuses a torchrun line of its own, in either spelling, naming the python form" {
  refused torchrun 'torchrun --nproc-per-node=2 train.py --lr 1' "starts 'torchrun'" "python SCRIPT ARGS" "-d none"
  refused torchrun 'python -m torch.distributed.run --nnodes 2 train.py' "starts 'python -m torch.distributed.run'" "python SCRIPT ARGS"
}

@test "-d torchrun refuses accelerate launch, naming the python form and ACCELERATE_* variables" {
  refused torchrun 'accelerate launch --num_processes 2 train.py' "starts 'accelerate launch'" "python SCRIPT ARGS" ACCELERATE_MIXED_PRECISION
  refused torchrun 'python -m accelerate.commands.launch train.py' "starts 'python -m accelerate.commands.launch'"
}

@test "-d script and -d lightning refuse a launcher line, naming -d torchrun" {
  refused script 'accelerate launch train.py' "-d script runs the line in each of the job's tasks" "-d torchrun"
  refused lightning 'cd src && torchrun train.py' "starts 'torchrun'" "-d torchrun"
  refused script 'deepspeed train.py' "starts 'deepspeed'"
}

@test "-d none runs a launcher line as it is; a program merely named like one is not refused" {
  make_project proj 'accelerate launch --num_processes 2 train.py'
  run --separate-stderr submitter --cluster local --venv none -n
  [ "$status" -eq 0 ]
  [[ $output == *"accelerate launch --num_processes 2 train.py"* ]]
  make_project proj2 'python train.py --launcher torchrun'
  run --separate-stderr submitter -d torchrun --num-nodes 2 --cluster local --venv none -n
  [ "$status" -eq 0 ]
  [[ $output == *"torchrun --nnodes=2"*"train.py --launcher torchrun"* ]]
}

@test "a relative output folder among a line's arguments is a warning at submission, naming the task's folders" {
  make_project proj 'python train.py --out_dir=out --lr 1
python train.py --output_dir "runs" --lr 2
python train.py --out_dir=$HPC_CHECKPOINT_DIR
python train.py --save_dir /abs/path --log-level 3'
  run --separate-stderr submitter --cluster local --venv none -n
  [ "$status" -eq 0 ]
  [[ $stderr == *"warning: line(s) 1, 2 of the commands write output to a relative folder in the project (--out_dir out)"* ]]
  [[ $stderr == *'--out_dir=$HPC_CHECKPOINT_DIR'* && $stderr == *'$HPC_RESULTS_DIR'* ]]
  make_project proj2 'python train.py --out_dir=$SCRATCH/x --log_level info'
  run --separate-stderr submitter --cluster local --venv none -n
  [ "$status" -eq 0 ]
  [[ $stderr != *"relative folder"* ]]
}
