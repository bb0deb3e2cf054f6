#!/usr/bin/env bats
# Validation before anything is written or submitted: each fault gets a clear message on
# stderr, a non-zero exit, no sbatch call and no file under $SCRATCH.

load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'python examples/train.py --lr 0.1'
}

@test "counts must be whole numbers" {
  refused "--gpus must be a whole number, not 'two'" --gpus two
  refused "--gpus must be a whole number, not '-1'" --gpus -1
  refused "--cpus must be a whole number, not '1.5'" --cpus 1.5
  refused "--num-nodes must be at least 1, not '0'" --num-nodes 0
  refused "--cpus must be at least 1" --cpus 0
  refused "--max-parallel must be a whole number" --max-parallel x
}

@test "more than one node needs a distributed launcher" {
  refused "--num-nodes 2 needs a distributed launcher" --num-nodes 2
  refused "add --which-distributed" -N 2 --gpus 1
}

@test "GPUs per node above the profile's limit are refused" {
  refused "--gpus 5 is more than the 4 GPUs per node of cluster profile 'local'" --gpus 5 --cluster local
  refused "--gpus 9 is more than the 8 GPUs per node of cluster profile 'generic'" --gpus 9
}

@test "GPU type and memory per GPU need GPUs" {
  refused "--gpu-type a100 needs GPUs" --gpu-type a100
  refused "--mem-per-gpu needs GPUs" --mem-per-gpu 8G
  refused "--mem and --mem-per-gpu cannot be used together" --gpus 1 --mem 8G --mem-per-gpu 8G
}

@test "Slurm time formats: the six forms pass, others are refused" {
  local t
  for t in 30 30:15 01:30:00 2-12 2-12:30 2-12:30:15 100:00:00; do
    run --separate-stderr submitter --dry-run --time "$t"
    [ "$status" -eq 0 ] || { echo "refused $t: $stderr"; return 1; }
    grep -qx "#SBATCH --time=\"$t\"" <<<"$output"
  done
  for t in 0 1:60 1:60:00 2-24 1-2:3:4:5 1h 90m abc 1:2:3:4 00:00; do
    refused "--time '$t' is not a Slurm time" --time "$t"
  done
}

@test "a --time past Slurm's maximum (minutes in 32 bits) is refused: 2982617-00 wrapped to 19:44:00 (issue 32)" {
  local t
  for t in 2982617-00 71582789:00:00; do
    refused "--time $t is past Slurm's maximum" --time "$t"
  done
  for t in 2982616-00 71582788:00:00; do
    run --separate-stderr submitter --dry-run --time "$t"
    [ "$status" -eq 0 ] || { echo "refused $t: $stderr"; return 1; }
  done
}

@test "memory units are checked and written the way Slurm reads them" {
  local pair
  for pair in 16G:16G 16gb:16G 500:500M 2T:2T 1024K:1024K; do
    run --separate-stderr submitter --dry-run --mem "${pair%%:*}"
    [ "$status" -eq 0 ]
    grep -qx "#SBATCH --mem=\"${pair#*:}\"" <<<"$output"
  done
  refused "--mem '1.5G' is not a memory size" --mem 1.5G
  refused "--mem '16GiB' is not a memory size" --mem 16GiB
  refused "--mem '0' is not a memory size" --mem 0
  refused "--mem-per-gpu 'lots' is not a memory size" --gpus 1 --mem-per-gpu lots
}

@test "names that end up in paths and #SBATCH lines are checked" {
  refused "--exp-name 'a b' must be" --exp-name 'a b'
  refused "--exp-name '../x' must be" --exp-name ../x
  refused "--exp-name '-x' must be" --exp-name=-x
  refused "--exp-name 'a;rm' must be" --exp-name 'a;rm'
  refused "--account 'a\"b' is not a Slurm account name" --account 'a"b'
  refused "--partition 'gpu cpu' is not a partition name" --partition 'gpu cpu'
}

@test "configs file: missing, empty, only comments, or ending in a continuation" {
  refused "configs file 'nope.txt' not found" --configs nope.txt
  : >"$PROJECT/empty.txt"
  refused "has no command" --configs empty.txt
  printf '# only\n\n   # comments\n' >"$PROJECT/comments.txt"
  refused "has no command" --configs comments.txt
  printf 'python a.py \\\n' >"$PROJECT/cont.txt"
  refused "ends with a backslash continuation" --configs cont.txt
  rm "$PROJECT/experiment_configurations.txt"
  refused "experiment_configurations.txt' not found" --gpus 1
}

@test "SCRATCH unset, relative or missing says which variable and how to set it" {
  unset SCRATCH
  run --separate-stderr submitter --dry-run
  [ "$status" -ne 0 ]
  [[ $stderr == *"SCRATCH is not set"*"export SCRATCH="* ]]
  SCRATCH=relative run --separate-stderr submitter
  [[ $stderr == *"SCRATCH='relative' is not an absolute path"* ]]
  SCRATCH=/nonexistent/scratch run --separate-stderr submitter
  [ "$status" -ne 0 ]
  [[ $stderr == *"SCRATCH=/nonexistent/scratch is not a folder"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
}

@test "sbatch missing: says how to start the local cluster or use --dry-run" {
  no_sbatch_on_path
  run --separate-stderr submitter --gpus 1
  [ "$status" -ne 0 ]
  [[ $stderr == *"sbatch not found on PATH"*"local_cluster.sh start"*"--dry-run"* ]]
  scratch_is_empty
  run --separate-stderr submitter --gpus 1 --dry-run
  [ "$status" -eq 0 ]
}

@test "unknown cluster profile lists the available ones" {
  refused "cluster profile 'nosuch' not found" --cluster nosuch
  run --separate-stderr submitter --cluster nosuch
  [[ $stderr == *"computecanada"*"generic"*"labcluster"* ]]
  HPC_CLUSTER=nosuch run --separate-stderr submitter
  [[ $stderr == *"cluster profile 'nosuch' not found"* ]]
}

@test "a profile can be a path" {
  printf 'HPC_MAX_GPUS_PER_NODE=2\nHPC_DEFAULT_PARTITION=mine\n' >"$PROJECT/my.conf"
  run --separate-stderr submitter --dry-run --cluster ./my.conf --gpus 2
  [ "$status" -eq 0 ]
  grep -qx '#SBATCH --partition="mine"' <<<"$output"
  refused "more than the 2 GPUs per node of cluster profile 'my'" --cluster ./my.conf --gpus 3
}

@test "an unknown launcher is refused with the list" {
  refused "--which-distributed 'mpi' is not a launcher: use one of none lightning torchrun script dask" --which-distributed mpi
}

@test "distributed resource mixes are checked" {
  refused "--cpus 5 cannot be shared evenly by the 2 tasks per node" --which-distributed lightning --gpus 2 --cpus 5
  refused "--procs-per-node is for CPU jobs" --which-distributed torchrun --gpus 2 --procs-per-node 2
  refused "--procs-per-node needs a distributed launcher" --procs-per-node 2
  refused "--nodes-arg and --devices-arg need a distributed launcher" --nodes-arg num_nodes
  refused "must be your program's option name without dashes" -d lightning --nodes-arg=--num_nodes
  refused "--sbatch-option 'qos=high' must be one sbatch option" --sbatch-option qos=high
}

@test "torchrun needs 'python script' lines, which it rewrites" {
  printf 'bash run.sh\n' >"$PROJECT/experiment_configurations.txt"
  refused "command 1 is not 'python script.py ...'" -d torchrun -N 2
  printf 'OMP_NUM_THREADS=2 python -u train.py --x 1\npython -m pkg.train\n' >"$PROJECT/experiment_configurations.txt"
  run --separate-stderr submitter --dry-run -d torchrun -N 2
  [ "$status" -eq 0 ]
}

@test "a --time that leaves under a minute before the --signal-grace warning is said at submission: Slurm may send the warning up to 60 s early (issue 32)" {
  run --separate-stderr submitter --dry-run --time 1 --signal-grace 30
  [ "$status" -eq 0 ]
  [[ $stderr == *"warning: --time 1 with a 30 s warning leaves 30 s before it, and Slurm may send it up to 60 s early"* ]]
  run --separate-stderr submitter --dry-run --time 3 --signal-grace 30
  [ "$status" -eq 0 ]
  [[ $stderr != *"up to 60 s early"* ]]
  run --separate-stderr submitter --dry-run --time 1 --signal-grace 30 --no-requeue
  [[ $stderr != *"up to 60 s early"* ]]
}
