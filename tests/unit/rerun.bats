#!/usr/bin/env bats
# --rerun JOB_ID (hpc_files/lib/rerun.sh) with a recording sbatch and a stub sacct: the
# options that go with it, bad ids, the script copy, the plan's fields checked again in
# bash, sbatch refusing. The real cluster: tests/integration/rerun.bats.

# shellcheck disable=SC2030,SC2031 # each @test runs in a subshell of its own: copy is set per test
load ../helpers/common
load ../helpers/hostile_state

setup() {
  hermetic_env
  use_sbatch_stub
  make_project proj 'echo 0' 'echo 1' 'echo 2' 'echo 3' 'echo 4'
  mkdir -p "$PROJECT/.venv/bin" && : >"$PROJECT/.venv/bin/activate"
  LEDGER=$SCRATCH/proj/hpc_outputs/jobs/submissions.tsv
  export PWNED=$BATS_TEST_TMPDIR/pwned
  # sacct answers $SACCT_ROWS (the states of the stub's jobs).
  mkdir -p "$BATS_TEST_TMPDIR/slurm"
  # shellcheck disable=SC2016
  printf '#!/bin/sh\nprintf "%%s" "$SACCT_ROWS"\n' >"$BATS_TEST_TMPDIR/slurm/sacct"
  chmod +x "$BATS_TEST_TMPDIR/slurm/sacct"
  export PATH=$BATS_TEST_TMPDIR/slurm:$PATH
}

# five_submitted: a 5-task array as job 4242 (the stub's first id), tasks 1 and 3 failed.
five_submitted() {
  submitter -e five >/dev/null
  export SACCT_ROWS='4242_0|COMPLETED|0:0
4242_1|FAILED|3:0
4242_2|COMPLETED|0:0
4242_3|OUT_OF_MEMORY|0:125
4242_4|COMPLETED|0:0
'
}

@test "only --dry-run and --yes go with --rerun: anything else is refused, nothing written" {
  for opt in "--gpus 2" "-e other" "--time 10" "--configs x.txt" "--sbatch-option=--qos=high" "--local"; do
    # shellcheck disable=SC2086 # the option and its value as two words
    refused "drop ${opt%%[ =]*}" --rerun 4242 $opt
    [ "$status" -eq 2 ]
  done
}

@test "bad job ids: exit 2, nothing submitted or written" {
  hostile_state_values
  local v
  for v in "${HOSTILE_STATE[@]}" 4242x 4242_x '4242,4243' '1234567890123456789'; do
    run --separate-stderr submitter --rerun "$v"
    [ "$status" -eq 2 ] || { echo "'$v': $status $stderr"; false; }
    [ -z "$output" ]
  done
  [ "$(sbatch_calls)" -eq 0 ]
  scratch_is_empty
  [ ! -e "$PWNED" ]
  # A job id the ledger does not hold.
  five_submitted
  : >"$SBATCH_STUB_LOG"
  run --separate-stderr submitter --rerun 999
  [ "$status" -eq 2 ]
  [[ $stderr == *"job 999 is not in this project's ledger"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
}

@test "two failed tasks: one sbatch of a copy with only --array narrowed; the ledger links it" {
  five_submitted
  local original
  original=$(cut -f5 "$LEDGER")
  : >"$SBATCH_STUB_LOG"
  run --separate-stderr submitter --rerun 4242_2
  echo "$output $stderr"
  [ "$status" -eq 0 ]
  [ "${lines[1]}" = "  task 1 (line 2): FAILED (exit 3:0), was 4242_1" ]
  [ "${lines[2]}" = "  task 3 (line 4): OUT_OF_MEMORY (exit 0:125), was 4242_3" ]
  [ "${lines[3]}" = "Submitted batch job 4242 (array of 2 task(s) as array indices 1,3)" ]
  # Task 1's program failed by itself (exit 3): the rerun runs the same line again.
  [[ $stderr == *"warning: 1 task(s) failed on their program's own exit code (not preemption, time or a node): task 1 (line 2, exit 3). --rerun runs the same line(s) again"* ]]
  [[ $stderr != *"task 3 (line 4"* ]] # (out of memory: not the program's own exit)
  [ "$(sbatch_calls)" -eq 1 ]
  local copy
  copy=$(sed -n 2p "$SBATCH_STUB_LOG")
  [ "$(sed -n 1p "$SBATCH_STUB_LOG")" = --parsable ]
  # The copy is in the rerun's own home, with its manifest: only the array and
  # HPC_RERUN_OF differ from the original's.
  [[ $copy == "$SCRATCH/proj/hpc_outputs/jobs/five-"*/job.sbatch ]]
  [ "${copy%/*}" != "${original%/*}" ]
  run diff "$original" "$copy"
  [ "$(grep -c '^[<>]' <<<"$output")" -eq 4 ]
  [[ $output == *'> #SBATCH --array="1,3"'* ]]
  [[ $output == *"> export HPC_RERUN_OF='five-"* ]]
  run diff "${original%/*}/job.plan" "${copy%/*}/job.plan"
  [ "$(grep -c '^[<>]' <<<"$output")" -eq 3 ]
  [[ $output == *$'> @array\t1,3'* ]]
  [[ $output == *$'> HPC_RERUN_OF\tfive-'* ]]
  [ "$(ls "${copy%/*}")" = "$(printf '%s\n' job.plan job.sbatch)" ]
  # hpc reads the rerun's tasks from its manifest: indices 1 and 3.
  [ "$(PYTHONPATH=$REPO_ROOT/python python3 -c 'import sys; from pathlib import Path
from hpc_toolkit.submissions import read_script
print(read_script(Path(sys.argv[1])).indices)' "$copy")" = "[1, 3]" ]
  # The ledger: the rerun's line, twelve fields, rerun_of = the original's submission id
  # (one field a line: read -a would merge the empty ones, tabs being IFS whitespace).
  [ "$(wc -l <"$LEDGER")" -eq 2 ]
  local -a f
  mapfile -t f < <(tail -1 "$LEDGER" | tr '\t' '\n')
  [ "${#f[@]}" -eq 12 ] || { printf '%s\n' "${f[@]}"; false; }
  [ "${f[11]}" = "${USER:-}" ]
  [ "${f[3]}" = 2 ]
  [ "${f[4]}" = "$copy" ]
  [ "${f[6]}" = job ]
  [ "${f[7]}" = 0 ]
  [ "${f[9]}" = "$(head -1 "$LEDGER" | cut -f6)" ]
  [ "${f[8]}" = "$(head -1 "$LEDGER" | cut -f9)" ]
}

@test "--rerun warns only about programs that failed by themselves: not a timeout, preemption, node failure or the toolkit's own no-progress and restart-limit codes" {
  five_submitted
  local rows='4242_0|TIMEOUT|0:0
4242_1|FAILED|124:0
4242_2|FAILED|75:0
4242_3|NODE_FAIL|0:0
4242_4|FAILED|0:9
'
  SACCT_ROWS=$rows run --separate-stderr submitter --rerun 4242 --dry-run
  echo "$output $stderr"
  [ "$status" -eq 0 ]
  [[ $stderr != *warning* ]]
  rows=${rows/4242_4|FAILED|0:9/4242_4|FAILED|2:0}
  SACCT_ROWS=${rows/4242_0|TIMEOUT|0:0/4242_0|FAILED|1:0} run --separate-stderr submitter --rerun 4242 --dry-run
  [[ $stderr == *"warning: 2 task(s) failed on their program's own exit code (not preemption, time or a node): task 0 (line 1, exit 1), task 4 (line 5, exit 2)."* ]]
  [[ $stderr == *"unless you fixed what they run (the code, its data), they fail the same way; a wrong line (a typo in it) needs a new submission with the line fixed, not --rerun"* ]]
}

@test "a WANDB_API_KEY in the rerunning shell never reaches sbatch (the copy names the key file)" {
  sbatch_env_stub
  local secret=rerun_secret_0123456789abcdef key=$HOME/.config/hpc_files/wandb_api_key
  WANDB_API_KEY=$secret five_submitted
  grep -qx "export HPC_WANDB_KEY_FILE='$key'" "$SBATCH_STUB_LOG.script.1"
  : >"$SBATCH_STUB_LOG" && rm -f "$BATS_TEST_TMPDIR/sbatch.env"
  WANDB_API_KEY=$secret run --separate-stderr submitter --rerun 4242
  [ "$status" -eq 0 ]
  [ "$(sbatch_calls)" -eq 1 ]
  [ -s "$BATS_TEST_TMPDIR/sbatch.env" ]
  ! grep -q WANDB_API_KEY= "$BATS_TEST_TMPDIR/sbatch.env" || false
  run ! grep -rq -- "$secret" "$SCRATCH" "$SBATCH_STUB_LOG"* "$BATS_TEST_TMPDIR/sbatch.env"
}

@test "--dry-run says what it would do and writes nothing; all completed: nothing to rerun" {
  five_submitted
  : >"$SBATCH_STUB_LOG"
  cp "$LEDGER" "$BATS_TEST_TMPDIR/ledger"
  run --separate-stderr submitter --rerun 4242 --dry-run
  [ "$status" -eq 0 ]
  [[ $output == *"with --array=1,3 and submit"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
  cmp "$LEDGER" "$BATS_TEST_TMPDIR/ledger"
  [ -z "$(find "$SCRATCH" -name '*-rerun*')" ]
  SACCT_ROWS=$(printf '4242_%s|COMPLETED|0:0\n' 0 1 2 3 4) run --separate-stderr submitter --rerun 4242
  [ "$status" -eq 0 ]
  [[ $output == "Nothing to rerun: every task of submission five-"*" (job(s) 4242) completed" ]]
  [ "$(sbatch_calls)" -eq 0 ]
}

@test "sbatch refuses: the copy is removed, the ledger unchanged, exit 1" {
  five_submitted
  cp "$LEDGER" "$BATS_TEST_TMPDIR/ledger"
  SBATCH_STUB_FAIL="Invalid partition" run --separate-stderr submitter --rerun 4242
  [ "$status" -eq 1 ]
  [[ $stderr == *"sbatch did not accept the rerun of "*"nothing was submitted"* ]]
  cmp "$LEDGER" "$BATS_TEST_TMPDIR/ledger"
  [ -z "$(find "$SCRATCH" -name '*-rerun*')" ]
}

@test "the copy keeps the %N cap; a script without an --array line is refused" {
  # shellcheck source=hpc_files/lib/hpc_lib.sh
  source "$REPO_ROOT/hpc_files/lib/hpc_lib.sh"
  # shellcheck source=hpc_files/lib/rerun.sh
  source "$REPO_ROOT/hpc_files/lib/rerun.sh"
  printf '%s\n' '#!/bin/bash' '#SBATCH --job-name="x"' '#SBATCH --array="0-9%3"' 'echo body' >"$BATS_TEST_TMPDIR/s"
  local text
  hpc_rerun_script_text_to text "$BATS_TEST_TMPDIR/s" 2,5-6 "a note"
  [ "$text" = "$(printf '%s\n' '#!/bin/bash' '# a note' '#SBATCH --job-name="x"' '#SBATCH --array="2,5-6%3"' 'echo body')"$'\n' ]
  [ "$RERUN_CAP" = %3 ]
  hpc_rerun_script_text_to text "$BATS_TEST_TMPDIR/s" - "a note"
  [[ $text == *'#SBATCH --array="0-9%3"'* ]]
  # With the submission it reruns: HPC_RERUN_OF exported after every #SBATCH line, before
  # the script's first export (sbatch stops reading directives at the first command).
  printf '%s\n' '#!/bin/bash' '#SBATCH --array="0-3"' '# c' "export A='1'" "export B='2'" >"$BATS_TEST_TMPDIR/p"
  hpc_rerun_script_text_to text "$BATS_TEST_TMPDIR/p" 1 "a note" "exp-20261124 'x"
  [ "$text" = "$(printf '%s\n' '#!/bin/bash' '# a note' '#SBATCH --array="1"' '# c' "export HPC_RERUN_OF='exp-20261124 '\\''x'" "export A='1'" "export B='2'")"$'\n' ]
  sed -i '/--array/d' "$BATS_TEST_TMPDIR/s"
  HPC_DIE_STATUS=2 run hpc_rerun_script_text_to text "$BATS_TEST_TMPDIR/s" 1 "a note"
  [ "$status" -eq 2 ]
  [[ $output == *"has no #SBATCH --array line"* ]]
}

@test "every field of the plan is checked again in bash: hostile values are refused" {
  source "$REPO_ROOT/hpc_files/lib/hpc_lib.sh"
  source "$REPO_ROOT/hpc_files/lib/rerun.sh"
  J_SCRATCH_DIR=$SCRATCH/proj HPC_STAGING_DIRNAME=.hpc_staging HPC_DIE_STATUS=2
  local jobs=$SCRATCH/proj/hpc_outputs/jobs T=$'\t'
  local good="submission${T}ex-1${T}ex${T}42
script${T}$jobs/ex-1.sbatch${T}1,3${T}2${T}0${T}/s/ex-%A_%a.out${T}-
task${T}1${T}42_1${T}FAILED${T}1:0${T}-${T}-"
  _rerun_read_plan "$good"
  [ "${#RERUN_SCRIPTS[@]}" -eq 1 ]
  [ "${#RERUN_TASKS[@]}" -eq 1 ]
  [ "$RERUN_OF" = ex-1 ]
  hostile_state_values
  local v line col plan
  for v in "${HOSTILE_STATE[@]}" "/etc/x.sbatch" "$jobs/../x.sbatch" "$jobs/a/b.sbatch"; do
    for line in 1 2 3; do
      for col in 2 3 4 5 6 7 8; do
        plan=$(awk -F'\t' -v OFS='\t' -v l="$line" -v c="$col" -v v="$v" 'NR == l && c <= NF { $c = v } { print }' <<<"$good")
        [ "$plan" != "$good" ] || continue
        # Still legal: a task count, offset or array index that is a small number; a
        # submission id or experiment name that is a plain name.
        [[ ! $v =~ ^[0-9]+$ || ${#v} -gt 9 ]] || continue
        ! [[ $line == 1 && $col -le 3 && $v =~ ^[A-Za-z0-9_][A-Za-z0-9_.+-]*$ ]] || continue
        ! [[ $line == 2 && $col == 6 && $v == /* ]] || continue # any absolute log pattern
        ! [[ $line == 3 && $col == 7 && $v =~ ^[A-Za-z0-9\ ,:\;\(\)_.-]+$ ]] || continue # words
        run _rerun_read_plan "$plan"
        [ "$status" -eq 2 ] || { echo "line $line col $col = '$v': $status"; false; }
        [[ $output == *"the rerun plan has a field that is not what it should be"* ]]
      done
    done
  done
  [ ! -e "$PWNED" ]
}

@test "a single job: its script copied unchanged but for the note; the ledger keeps %j" {
  printf 'echo one\n' >"$PROJECT/experiment_configurations.txt"
  submitter -e solo >/dev/null
  local original
  original=$(cut -f5 "$LEDGER")
  : >"$SBATCH_STUB_LOG"
  SACCT_ROWS=$'4242|NODE_FAIL|0:0\n' run --separate-stderr submitter --rerun 4242
  [ "$status" -eq 0 ]
  [ "${lines[1]}" = "  task 0 (line 1): NODE_FAIL (exit 0:0), was 4242" ]
  [ "${lines[2]}" = "Submitted batch job 4242" ]
  run diff "$original" "$(sed -n 2p "$SBATCH_STUB_LOG")"
  [ "$(grep -c '^[<>]' <<<"$output")" -eq 2 ]
  [[ $output == *"> # Rerun of submission solo-"* ]]
  [[ $output == *"> export HPC_RERUN_OF='solo-"* ]]
  [ "$(tail -1 "$LEDGER" | cut -f4,9)" = "1"$'\t'"$SCRATCH/proj/hpc_outputs/solo-%j.out" ]
}

@test "no Python 3.9 here (an old python3, no venv python): a clear refusal, exit 2" {
  five_submitted
  : >"$SBATCH_STUB_LOG"
  printf '#!/bin/sh\nexit 1\n' >"$BATS_TEST_TMPDIR/slurm/python3"
  chmod +x "$BATS_TEST_TMPDIR/slurm/python3"
  run --separate-stderr submitter --rerun 4242
  [ "$status" -eq 2 ]
  [[ $stderr == *"--rerun needs Python 3.9 or later (the standard library only)"* ]]
  [ "$(sbatch_calls)" -eq 0 ]
}

@test "a split array whose second rerun array sbatch refuses: the first is cancelled, nothing kept" {
  HPC_MAX_ARRAY_SIZE=2 submitter -e split >/dev/null # jobs 4242, 4243, 4244
  export SACCT_ROWS=$'4242_0|COMPLETED|0:0\n4242_1|FAILED|1:0\n4243_0|COMPLETED|0:0\n4243_1|COMPLETED|0:0\n4244_0|TIMEOUT|0:0\n'
  cp "$LEDGER" "$BATS_TEST_TMPDIR/ledger"
  : >"$SBATCH_STUB_LOG"
  # sbatch takes the first copy, refuses the second; scancel records what it cancels.
  cat >"$BATS_TEST_TMPDIR/slurm/sbatch" <<STUB
#!/bin/sh
[ "\$(grep -c '^--\$' "$SBATCH_STUB_LOG")" -eq 0 ] || export SBATCH_STUB_FAIL="Job violates accounting policy"
exec "$REPO_ROOT/tests/helpers/stubs/sbatch" "\$@"
STUB
  printf '#!/bin/sh\necho "$@" >>"%s"\n' "$BATS_TEST_TMPDIR/scancel.log" >"$BATS_TEST_TMPDIR/slurm/scancel"
  chmod +x "$BATS_TEST_TMPDIR/slurm/sbatch" "$BATS_TEST_TMPDIR/slurm/scancel"
  run --separate-stderr submitter --rerun 4243
  [ "$status" -eq 1 ]
  [[ $stderr == *"sbatch did not accept the rerun of "*"-part3.sbatch"*"(jobs 4242 were cancelled)"* ]]
  [ "$(cat "$BATS_TEST_TMPDIR/scancel.log")" = 4242 ]
  cmp "$LEDGER" "$BATS_TEST_TMPDIR/ledger"
  [ -z "$(find "$SCRATCH" -name '*-rerun*')" ]
}
