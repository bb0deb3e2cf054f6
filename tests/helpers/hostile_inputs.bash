# shellcheck shell=bash
# The hostile-input fixtures: every input an adversarial review (issue 12) or a newcomer
# found that the submitter must refuse. tests/unit/hostile_inputs.bats runs each row against
# a fresh project with the recording sbatch: exit 2, the message on stderr, nothing on
# stdout, sbatch never called, nothing written under $SCRATCH. Add a row for every new one.
#
# A row is three fields separated by TABs:
#   MESSAGE  a piece of the expected stderr
#   SETUP    bash run first in the project folder (write a file, export a variable); "-": none
#   ARGS     job_submitter.sh's arguments, as bash words (the test's own text, read by eval)
# Fixture files: sweep files are written by hostile_sweep_files (below).

HOSTILE_INPUTS=(
  # Item 4: --results-dir must stay under $SLURM_TMPDIR
  $'is an absolute path\t-\t--results-dir /abs/results'
  $'is an absolute path\t-\t--results-dir "$SCRATCH/proj/default/results" --sync-every 1'
  $'holds \'..\'\t-\t--results-dir ../up'
  $'holds \'..\'\t-\t--results-dir a/../../b'
  # Item 5: counts above the cluster's job limits; YAML bombs and depth
  $'more than the 10000 jobs this cluster holds\tseq 10001 | sed "s/^/echo /" >many.txt\t--configs many.txt'
  $'more than the 10000 jobs this cluster holds\twandb_key\t--wandb-sweepid e/p/abc123 --num-agents 10001'
  $'far too large\twandb_key\t--wandb-sweepid e/p/abc123 --num-agents 99999999999999999999'
  $'more than the 10,000 jobs this cluster holds\thostile_sweep_files\t--sweep grid40.yml'
  $'more than the 10,000 jobs this cluster holds\thostile_sweep_files\t--sweep runcap.yml'
  $'more than the 10,000 jobs this cluster holds\thostile_sweep_files\t--sweep random.yml --num-agents 20000'
  $'values on one grid axis\thostile_sweep_files\t--sweep maxbig.yml'
  $'aliases (*name) expand to more than\thostile_sweep_files\t--sweep bomb.yml'
  $'nested more than 64 levels deep\thostile_sweep_files\t--sweep deep.yml'
  $'refers to the value that contains it\thostile_sweep_files\t--sweep recursive.yml'
  # Item 6: numbers past 2^64 (and any count of more than 9 digits)
  $'--gpus \'18446744073709551617\' is far too large\t-\t--gpus 18446744073709551617'
  $'--num-nodes \'18446744073709551618\' is far too large\t-\t-d lightning --num-nodes 18446744073709551618'
  $'--cpus \'18446744073709551617\' is far too large\t-\t--cpus 18446744073709551617'
  $'--mem \'18446744073709551617G\' is not a memory size\t-\t--mem 18446744073709551617G'
  $'--mem-per-gpu \'99999999999999999999\' is not a memory size\t-\t--gpus 1 --mem-per-gpu 99999999999999999999'
  $'--signal-grace \'18446744073709551617\' is far too large\t-\t--signal-grace 18446744073709551617'
  $'--max-restarts \'18446744073709551617\' is far too large\t-\t--max-restarts 18446744073709551617'
  $'--sync-every \'18446744073709551617\' is not a number of minutes\t-\t--sync-every 18446744073709551617'
  $'--agent-stagger \'18446744073709551617\' is far too large\twandb_key\t--wandb-sweepid e/p/abc123 --agent-stagger 18446744073709551617'
  $'--runs-per-agent \'18446744073709551617\' is far too large\twandb_key\t--wandb-sweepid e/p/abc123 --runs-per-agent 18446744073709551617'
  $'--max-parallel \'18446744073709551617\' is far too large\t-\t--max-parallel 18446744073709551617'
  $'--procs-per-node \'18446744073709551617\' is far too large\t-\t-d script --procs-per-node 18446744073709551617'
  $'--time \'18446744073709551617\' is not a Slurm time\t-\t--time 18446744073709551617'
  $'--time \'1-18446744073709551617\' is not a Slurm time\t-\t--time 1-18446744073709551617'
  # Item 7: a line whose program cannot be found for --nodes-arg
  $'cannot tell where the program\'s arguments end\techo "( python examples/train.py )" >sub.txt\t-d lightning --nodes-arg num_nodes --configs sub.txt'
  # Item 8: a key file path the shell did not expand
  $'starts with a \'~\' the shell did not expand\texport WANDB_API_KEY=k WANDB_API_KEY_FILE="~/key"\t-e x'
  # Item 9: a backslash where it reaches sbatch --output
  $'holds a backslash\texport HPC_PROJECT_NAME=\'a\\b\'\t-e x'
  # Item 10: sbatch options the toolkit manages
  $'sets sbatch\'s --array\t-\t--sbatch-option=--array=0-3'
  $'sets sbatch\'s --array\t-\t--sbatch-option=--arr=0-3'
  $'sets sbatch\'s --array\t-\t--sbatch-option=-a'
  $'sets sbatch\'s --output\t-\t--sbatch-option=--output=/tmp/x.out'
  $'sets sbatch\'s --output\t-\t--sbatch-option -o'
  $'sets sbatch\'s --error\t-\t--sbatch-option=--error=/tmp/x.err'
  $'sets sbatch\'s --error\t-\t--sbatch-option=-e'
  $'sets sbatch\'s --job-name\t-\t--sbatch-option=--job-name=x'
  $'sets sbatch\'s --job-name\t-\t--sbatch-option=-J'
  $'use --exp-name\t-\t--sbatch-option=--job-name=x'
  $'sets sbatch\'s --requeue\t-\t--sbatch-option=--requeue'
  $'use --no-requeue\t-\t--sbatch-option=--no-requeue'
  $'use --signal-grace\t-\t--sbatch-option=--signal=USR1@60'
  $'sets sbatch\'s --open-mode\t-\t--sbatch-option=--open-mode=truncate'
  $'write the long form\t-\t--sbatch-option=-q'
  # Options that would contradict the plan's own #SBATCH lines (the last one wins in sbatch,
  # so the job would run with resources the plan's exports do not say) or replace the script.
  $'sets sbatch\'s --wrap\t-\t--sbatch-option=--wrap=id'
  $'use --cpus\t-\t--sbatch-option=--cpus-per-task=8'
  $'use --cpus\t-\t--sbatch-option=-c'
  $'use --gpus\t-\t--sbatch-option=--gres=gpu:2'
  $'use --gpus\t-\t--sbatch-option=--gpus-per-node=2'
  $'use --time\t-\t--sbatch-option=--time=5'
  $'use --num-nodes\t-\t--sbatch-option=--nodes=2'
  $'use --mem\t-\t--sbatch-option=--mem=4G'
  $'use --partition\t-\t--sbatch-option=--partition=short'
  $'use --account\t-\t--sbatch-option=-A'
  $'sets sbatch\'s --ntasks-per-node\t-\t--sbatch-option=--ntasks-per-node=4'
  $'sets sbatch\'s --export\t-\t--sbatch-option=--export=NONE'
  $'line 2 (#hpc: --sbatch-option=--cpus-per-task=8): --sbatch-option \'--cpus-per-task=8\' sets sbatch\'s --cpus-per-task\tprintf \'echo a\\n#hpc: --sbatch-option=--cpus-per-task=8\\necho b\\n\' >c.txt\t--configs c.txt'
  # Item 11: the configs file
  $'line 2: holds a NUL byte\tprintf \'echo a\\necho b\\000c\\n\' >c.txt\t--configs c.txt'
  $'line 1: holds a NUL byte\tprintf \'echo \\033[31mred\\n\' >c.txt\t--configs c.txt'
  $'line 3: holds a NUL byte\tprintf \'# x\\necho a\\necho b\\rc\\n\' >c.txt\t--configs c.txt'
  $'line 1: holds a NUL byte\tprintf \'echo \\302\\233 c1\\n\' >c.txt\t--configs c.txt'
  $'line 2: the command is not valid bash\tprintf \'echo a\\npython x.py --name "run a\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 3: the command is not valid bash\tprintf \'echo a\\n\\npython x.py \\x27a\\necho b\\x27\\n\' >c.txt\t--configs c.txt'
  $'line 1: the command is not valid bash\tprintf \'echo $(date\\necho x)\\n\' >c.txt\t--configs c.txt'
  $'line 2: the command is not valid bash\tprintf \'echo a\\nif true; then\\nfi\\n\' >c.txt\t--configs c.txt'
  $'line 2: the command is not valid bash\tprintf \'echo a\\necho `date\\necho b`\\n\' >c.txt\t--configs c.txt'
  $'line 1: the command is not valid bash\tprintf \'\\357\\273\\277echo "a\\n\' >c.txt\t--configs c.txt'
  # Item 12: a FIFO or a device as the container image
  $'neither a .sif file nor a folder\tmkfifo img.sif\t-s img.sif'
  $'neither a .sif file nor a folder\t-\t-s /dev/null'
  # Item 13: empty values, and profile values checked like options
  $'--gpus was given an empty value\t-\t--gpus='
  $'--exp-name was given an empty value\t-\t--exp-name='
  $'--partition was given an empty value\t-\t--partition ""'
  $'--sbatch-option was given an empty value\t-\t--sbatch-option='
  $'--data was given an empty value\t-\t--data='
  $'HPC_DEFAULT_PARTITION \'gpu; rm\' is not a partition\tprintf \'HPC_DEFAULT_PARTITION="gpu; rm"\\n\' >p.conf\t--cluster ./p.conf'
  $'HPC_DEFAULT_ACCOUNT \'a"b\' is not a Slurm account\tprintf \'HPC_DEFAULT_ACCOUNT=\\x27a"b\\x27\\n\' >p.conf\t--cluster ./p.conf'
  $'HPC_DEFAULT_TIME \'\' is not a Slurm time\tprintf \'HPC_DEFAULT_TIME=""\\n\' >p.conf\t--cluster ./p.conf'
  $'HPC_MAX_GPUS_PER_NODE \'18446744073709551617\' is far too large\tprintf \'HPC_MAX_GPUS_PER_NODE=18446744073709551617\\n\' >p.conf\t--cluster ./p.conf'
  $'HPC_MAX_ARRAY_PARALLEL must be a whole number\tprintf \'HPC_MAX_ARRAY_PARALLEL=x\\n\' >p.conf\t--cluster ./p.conf'
  $'HPC_LOCAL_SCRATCH \'scratch\' must be an absolute path\tprintf \'HPC_LOCAL_SCRATCH=scratch\\n\' >p.conf\t--cluster ./p.conf'
  # Issue 14.1: '#hpc:' directives of the configs file (resource blocks), each refusal names
  # the file and line, even when only the command line's options make it wrong
  $'c.txt\', line 2 (#hpc: --gpus 2 --exp-name x): --exp-name cannot be set by a directive\tprintf \'echo a\\n#hpc: --gpus 2 --exp-name x\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 2 (#hpc: --dry-run): --dry-run cannot be set by a directive\tprintf \'echo a\\n#hpc: --dry-run\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 1 (#hpc: --max-parallel 2): --max-parallel cannot be set by a directive\tprintf \'#hpc: --max-parallel 2\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 2 (#hpc: --gpu 2): unknown option: --gpu (did you mean --gpus?)\tprintf \'echo a\\n#hpc: --gpu 2\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 2 (#hpc: gpus=2): \'gpus=2\' is not an option\tprintf \'echo a\\n#hpc: gpus=2\\necho b\\n\' >c.txt\t--configs c.txt'
  $'\'$\' in a directive: a directive is not run by a shell\tprintf \'echo a\\n#hpc: --time $T\\necho b\\n\' >c.txt\t--configs c.txt'
  $'\';\' in a directive\tprintf \'echo a\\n#hpc: --gpus 1; touch pwned\\necho b\\n\' >c.txt\t--configs c.txt'
  $'\'`\' inside double quotes\tprintf \'echo a\\n#hpc: --account "`id`"\\necho b\\n\' >c.txt\t--configs c.txt'
  $'a quote (\') is not closed\tprintf \'echo a\\n#hpc: --sbatch-option \\x27--comment=a\\necho b\\n\' >c.txt\t--configs c.txt'
  $'a directive ends with a backslash\tprintf \'echo a\\n#hpc: --gpus 1 \\\\\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 2 (#hpc: --gpus -1): --gpus must be a whole number\tprintf \'echo a\\n#hpc: --gpus -1\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 2 (#hpc: --gpus 18446744073709551617): --gpus \'18446744073709551617\' is far too large\tprintf \'echo a\\n#hpc: --gpus 18446744073709551617\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 2 (#hpc: --time 0): --time \'0\' is not a Slurm time\tprintf \'echo a\\n#hpc: --time 0\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 3 (#hpc: --gpus 0): --mem-per-gpu needs GPUs\tprintf \'#hpc: --gpus 1\\necho a\\n#hpc: --gpus 0\\necho b\\n\' >c.txt\t--configs c.txt --gpus 2 --mem-per-gpu 4G'
  $'line 2 (#hpc: --sbatch-option --array=0-3): --sbatch-option \'--array=0-3\' sets sbatch\'s --array\tprintf \'echo a\\n#hpc: --sbatch-option --array=0-3\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 2 (#hpc: -N 2): --num-nodes 2 needs a distributed launcher\tprintf \'echo a\\n#hpc: -N 2\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 2 (#hpc: --which-distributed mpi): --which-distributed \'mpi\' is not a launcher\tprintf \'echo a\\n#hpc: --which-distributed mpi\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 2 (#hpc: -d torchrun): command 2 is not \'python script.py ...\'\tprintf \'echo a\\n#hpc: -d torchrun\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 2 (#hpc: --data ../up): --data \'../up\' holds \'..\'\tprintf \'echo a\\n#hpc: --data ../up\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 2 (#hpc: -s img.sif): --singularity-container: image\tprintf \'echo a\\n#hpc: -s img.sif\\necho b\\n\' >c.txt\t--configs c.txt'
  $'line 2 (#hpc: --cpus 3): --cpus 3 cannot be shared evenly\tprintf \'echo a\\n#hpc: --cpus 3\\necho b\\n\' >c.txt\t--configs c.txt -d lightning --gpus 2'
  $'line 2 (#hpc: --time 1): --signal-grace 120 s is not shorter than --time 1\tprintf \'echo a\\n#hpc: --time 1\\necho b\\n\' >c.txt\t--configs c.txt --signal-grace 120'
  # Second review of the submission side (stop 43): a here-document, environment values
  # taken raw, names that read as job numbers
  $'line 2: the command opens a here-document\tprintf \'echo a\\npython - <<\\x27EOF\\x27\\nprint(1)\\nEOF\\n\' >c.txt\t--configs c.txt'
  $'line 1: the command opens a here-document\tprintf \'cat <<EOF\\nhello\\nEOF\\n\' >c.txt\t--configs c.txt'
  $'HPC_CONFIRM_ABOVE=\'abc\' is not a whole number\texport HPC_CONFIRM_ABOVE=abc\t-e x'
  $'HPC_CONFIRM_ABOVE=\'x[$(id)]\' is not a whole number\texport HPC_CONFIRM_ABOVE=\'x[$(id)]\'\t-e x'
  $'HPC_PROJECT_DIR=\'/nonexistent\' is not a project folder\texport HPC_PROJECT_DIR=/nonexistent\t-e x'
  $'HPC_PROJECT_DIR=\'relative\' is not a project folder\texport HPC_PROJECT_DIR=relative\t-e x'
  $'--exp-name \'4\' reads as a job number\t-\t--exp-name 4'
  $'--exp-name \'13_5\' reads as a job number\t-\t--exp-name 13_5'
  # Item 15: an unknown option gets a suggestion
  $'did you mean --exp-name?\t-\t--exp_name x'
  $'did you mean --gpus?\t-\t--gpu 1'
)

# wandb_key: a key file so that online-sweep rows reach the check they are about.
wandb_key() {
  mkdir -p "$HOME/.config/hpc_files"
  (umask 077 && echo key >"$HOME/.config/hpc_files/wandb_api_key")
}

# hostile_sweep_files: sweep files that are too large, too deep or self-referring.
hostile_sweep_files() {
  local i
  {
    printf 'method: grid\nprogram: examples/sweep_train.py\nparameters:\n'
    for i in $(seq 1 40); do printf '  p%d:\n    values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n' "$i"; done
  } >grid40.yml
  printf 'method: random\nprogram: examples/sweep_train.py\nrun_cap: 99999999999999999999\nparameters:\n  lr:\n    min: 0.0\n    max: 1.0\n' >runcap.yml
  printf 'method: random\nprogram: examples/sweep_train.py\nparameters:\n  lr:\n    min: 0.0\n    max: 1.0\n' >random.yml
  printf 'method: grid\nprogram: examples/sweep_train.py\nparameters:\n  x:\n    min: 0\n    max: 100000000000000\n' >maxbig.yml
  {
    printf 'method: grid\nprogram: examples/sweep_train.py\n'
    printf 'a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n'
    local prev=a name
    for name in b c d e f g; do
      printf '%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n' "$name" "$name" \
        "$prev" "$prev" "$prev" "$prev" "$prev" "$prev" "$prev" "$prev" "$prev"
      prev=$name
    done
    printf 'parameters:\n  x:\n    values: *g\n'
  } >bomb.yml
  {
    printf 'method: grid\nprogram: examples/sweep_train.py\nparameters:\n  x:\n    values: '
    printf '%.0s[' $(seq 1 10000)
    printf '%.0s]' $(seq 1 10000)
    printf '\n'
  } >deep.yml
  printf 'method: grid\nprogram: examples/sweep_train.py\nparameters: &p\n  x: *p\n' >recursive.yml
}
