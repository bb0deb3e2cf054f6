#!/usr/bin/env bats
# Every hostile input of tests/helpers/hostile_inputs.bash is refused: exit 2 (a usage
# error), a message on stderr that names the fault, nothing on stdout, the recording
# sbatch never called and nothing written under $SCRATCH. Then the inputs of issue 12
# that must be accepted, or changed, rather than refused.

load ../helpers/common
load ../helpers/hostile_inputs

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'python examples/train.py --lr 0.1'
  ln -s "$REPO_ROOT/.venv" "$PROJECT/.venv" # PyYAML for the sweep files
  # The cluster's job limit, as a cluster without scontrol would have it (Slurm's default).
  export HPC_MAX_JOB_COUNT=10000 HPC_MAX_ARRAY_SIZE=1001
}

# submitter ARGS...: as common.bash's, but a hang (an unbounded loop) fails the row, too.
submitter() {
  (cd "$PROJECT" && timeout 120 bash hpc_files/job_submitter.sh "$@")
}

# refused_hard MESSAGE ARGS...: refused (common.bash) with exit 2 exactly.
refused_hard() {
  refused "$@" || return 1
  [ "$status" -eq 2 ] || { echo "exit $status, not 2: $stderr"; return 1; }
}

@test "every hostile input of the fixtures table is refused with exit 2, nothing submitted or written" {
  local row message setup args failed=0 n=0
  for row in "${HOSTILE_INPUTS[@]}"; do
    IFS=$'\t' read -r message setup args <<<"$row"
    ((++n))
    # Each row in a subshell: its variables and files stay its own.
    if ! (
      cd "$PROJECT"
      [[ $setup == - ]] || eval "$setup"
      eval "set -- $args"
      refused_hard "$message" "$@"
    ); then
      echo "row $n failed: $row"
      failed=1
    fi
    rm -f "$PROJECT"/{c.txt,p.conf,img.sif,sub.txt,many.txt}
  done
  echo "$n rows"
  ((failed == 0))
}

@test "the fixtures table has a row for each submit-side item of issue 12" {
  local want
  for want in "is an absolute path" "jobs this cluster holds" "aliases (*name)" "nested more than" \
    "far too large" "cannot tell where" "the shell did not expand" "holds a backslash" \
    "sets sbatch's --array" "holds a NUL byte" "is not valid bash" "neither a .sif file" \
    "was given an empty value" "HPC_DEFAULT_PARTITION" "did you mean"; do
    [[ ${HOSTILE_INPUTS[*]} == *"$want"* ]] || { echo "no row for: $want"; return 1; }
  done
}
