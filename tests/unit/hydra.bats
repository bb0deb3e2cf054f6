#!/usr/bin/env bats
# Hydra apps (hpc_files/lib/hydra.sh): a line that runs a script with @hydra.main and names
# no run folder gets its task's own, written into the line at submission and shown by the
# dry run; every other line is left as it is. On the cluster: tests/integration/programs.bats.
# shellcheck disable=SC2016 # the lines' $HPC_* are the job's

load ../helpers/common

setup() {
  hermetic_env
  use_sbatch_stub
}

# commands_of: the dry run's commands section ($output).
commands_of() {
  sed -n '/^# ---- commands/,$p' <<<"$output" | tail -n +2
}

@test "Hydra app lines get hydra.run.dir (hydra.sweep.dir with -m) of the task's own folder; the others stay as written" {
  make_project proj 'python app.py lr=0.1 model.depth=2' 'python -u app.py -m lr=0.1,0.2 # sweep' \
    'python app.py hydra.run.dir=here' 'python app.py -m hydra.sweep.dir=$HPC_RESULTS_DIR/s' \
    'cd . && python app.py lr=3 | tee log' 'python plain.py lr=0.1' 'python2 app2.py x=1'
  printf '%s\n' 'import hydra' '' '@hydra.main(version_base=None, config_name="c")' 'def main(cfg): pass' >"$PROJECT/app.py"
  printf '%s\n' 'from hydra import compose, initialize # the Compose API: no app' >"$PROJECT/app2.py"
  printf '%s\n' 'print("hydra.main is not used here")' >"$PROJECT/plain.py"
  run --separate-stderr submitter --dry-run
  [ "$status" -eq 0 ]
  [ "$(commands_of)" = "python app.py lr=0.1 model.depth=2 \"hydra.run.dir='\$HPC_RESULTS_DIR'\"
python -u app.py -m lr=0.1,0.2 \"hydra.sweep.dir='\$HPC_RESULTS_DIR'\" # sweep
python app.py hydra.run.dir=here
python app.py -m hydra.sweep.dir=\$HPC_RESULTS_DIR/s
cd . && python app.py lr=3 \"hydra.run.dir='\$HPC_RESULTS_DIR'\" | tee log
python plain.py lr=0.1
python2 app2.py x=1" ]
  [[ $stderr == *"note: line(s) 1, 2, 5 run a Hydra app (app.py) that chooses no run folder"* ]]
  # The multirun's points share the task's checkpoint folder: said, with what to do.
  [[ $stderr == *"note: line(s) 2 run a Hydra multirun (-m) in one task: its points run one after another there and share one \$HPC_CHECKPOINT_DIR"*"add hydra/launcher=hpc_files"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
}

@test "from hydra import main is a Hydra app too; with --results-dir none the folder is \$HPC_CHECKPOINT_DIR" {
  make_project proj 'python app.py lr=0.1'
  printf '%s\n' 'from hydra import main' '' '@main(version_base=None)' 'def run(cfg): pass' >"$PROJECT/app.py"
  run --separate-stderr submitter --dry-run --results-dir none
  [ "$status" -eq 0 ]
  [ "$(commands_of)" = "python app.py lr=0.1 \"hydra.run.dir='\$HPC_CHECKPOINT_DIR'\"" ]
}

@test "no Hydra app, no note and no change (a missing script included)" {
  make_project proj 'python missing.py lr=0.1' 'python examples/train.py --lr 0.1'
  run --separate-stderr submitter --dry-run
  [ "$status" -eq 0 ]
  [[ $stderr != *Hydra* ]]
  [ "$(commands_of)" = $'python missing.py lr=0.1\npython examples/train.py --lr 0.1' ]
}

# shellcheck disable=SC2123,SC2031 # a PATH without grep, on purpose (in subshells)
@test "a Hydra app is known the same whether bash reads the script (under 64 KiB) or grep does (longer): the forms of hydra.main and the near misses" {
  local d=$BATS_TEST_TMPDIR/apps body pad small big n=0
  mkdir -p "$d"
  pad=$(printf '# %0200d\n' $(seq 1 330)) # about 66 KB of comments
  for body in $'import hydra\n@hydra.main(config_path=None)\ndef f(c): pass' '@hydra.main' \
    $'x = 1\n  from hydra import main' 'from hydra import compose, main' $'from  hydra\timport\tmain as m' \
    '@hydra.mainly' $'from hydra import compose, initialize\nmain = 1' $'from\nhydra import main' \
    'from hydra import main_thing' '# from hydra import main' 'y = "from hydra import main"'; do
    printf '%s\n' "$body" >"$d/small.py"
    printf '%s\n%s\n' "$pad" "$body" >"$d/big.py"
    small=$(PATH=/nonexistent; source "$REPO_ROOT/hpc_files/lib/hydra.sh"; hpc_hydra_is_app "$d/small.py" && echo app || echo not)
    big=$(source "$REPO_ROOT/hpc_files/lib/hydra.sh"; hpc_hydra_is_app "$d/big.py" && echo app || echo not)
    echo "$small $big: $body"
    [ "$small" = "$big" ]
    if ((n < 5)); then [ "$small" = app ]; else [ "$small" = not ]; fi
    n=$((n + 1))
  done
  [ "$(stat -c %s "$d/big.py")" -gt 65536 ]
  # The long script goes to grep: without it on PATH, the app is not found.
  printf '%s\n%s\n' "$pad" '@hydra.main' >"$d/big.py"
  (PATH=/nonexistent; source "$REPO_ROOT/hpc_files/lib/hydra.sh"; ! hpc_hydra_is_app "$d/big.py")
}
