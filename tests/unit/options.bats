#!/usr/bin/env bats
# Option parsing of job_submitter.sh: help, long/short/inline forms, unknown options.

load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'python examples/train.py --lr 0.1'
}

@test "--help and -h print the usage on stdout and exit 0" {
  run --separate-stderr submitter --help
  [ "$status" -eq 0 ]
  [[ $output == *"Usage: bash hpc_files/job_submitter.sh"* ]]
  [ -z "$stderr" ]
  run --separate-stderr submitter -h
  [ "$status" -eq 0 ]
  [[ $output == *"--which-distributed"* ]]
}

@test "--help documents every option" {
  run submitter --help
  local opt
  for opt in --account --partition --gpus --cpus --mem --mem-per-gpu --time --gpu-type \
    --exp-name --num-nodes --nodes --which-distributed --configs --data \
    --singularity-container --wandb-sweepid --cluster --dry-run --yes --help \
    --max-parallel --venv --setup-venv; do
    [[ $output == *"$opt"* ]] || { echo "missing $opt"; return 1; }
  done
}

@test "an unknown option is an error on stderr with exit 2, nothing submitted" {
  run --separate-stderr submitter --gpu 1
  [ "$status" -eq 2 ]
  [[ $stderr == *"unknown option: --gpu"* ]]
  [[ $stderr == *"--help"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
  scratch_is_empty
}

@test "a stray argument is an error that says where commands go" {
  run --separate-stderr submitter python train.py
  [ "$status" -eq 2 ]
  [[ $stderr == *"unexpected argument: python"* ]]
  [[ $stderr == *"experiment_configurations.txt"* ]]
}

@test "an option without its value is an error" {
  run --separate-stderr submitter --exp-name
  [ "$status" -eq 2 ]
  [[ $stderr == *"option --exp-name needs a value"* ]]
  run --separate-stderr submitter --gpus --cpus 2
  [ "$status" -eq 2 ]
  [[ $stderr == *"option --gpus needs a value"* ]]
}

@test "a flag given a value is an error" {
  run --separate-stderr submitter --dry-run=yes
  [ "$status" -eq 2 ]
  [[ $stderr == *"--dry-run takes no value"* ]]
}

@test "long, short and --opt=value forms give the same script" {
  run --separate-stderr submitter --dry-run --gpus 2 --cpus 4 --time 30 --exp-name a --cluster local
  [ "$status" -eq 0 ]
  local long=$output
  run --separate-stderr submitter -n -g 2 -c 4 -t 30 -e a -C local
  [ "$status" -eq 0 ]
  [ "$(grep '^#SBATCH' <<<"$long")" = "$(grep '^#SBATCH' <<<"$output")" ]
  run --separate-stderr submitter --dry-run --gpus=2 --cpus=4 --time=30 --exp-name=a --cluster=local
  [ "$status" -eq 0 ]
  [ "$(grep '^#SBATCH' <<<"$long")" = "$(grep '^#SBATCH' <<<"$output")" ]
  grep -q '^#SBATCH --gres="gpu:2"$' <<<"$long"
}

@test "--nodes is an alias of --num-nodes" {
  run --separate-stderr submitter -n --nodes 3 --which-distributed none
  [ "$status" -ne 0 ]
  [[ $stderr == *"--num-nodes 3 needs a distributed launcher"* ]]
}
