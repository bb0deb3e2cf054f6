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
    "was given an empty value" "HPC_DEFAULT_PARTITION" "did you mean" "cannot be set by a directive" \
    "in a directive"; do
    [[ ${HOSTILE_INPUTS[*]} == *"$want"* ]] || { echo "no row for: $want"; return 1; }
  done
}

@test "configs: a UTF-8 BOM is stripped, so a first '# comment' stays a comment" {
  printf '\357\273\277# a comment\npython examples/train.py --lr 0.1\n' >"$PROJECT/bom.txt"
  run --separate-stderr submitter --dry-run --configs bom.txt
  [ "$status" -eq 0 ]
  [[ $output == *"# ---- commands (1), one per array task"* ]]
  [[ $output != *$'\357\273\277'* ]]
}

# shellcheck disable=SC2016,SC1003 # the lines are the configs file's text, not ours
@test "configs: Windows line ends, comments with quotes and every kind of valid line pass bash -n" {
  printf '%s\r\n' 'python examples/train.py --x "a b" # it'\''s' \
    'for i in 1 2; do echo "$i"; done' '{ echo a; }' 'echo "a\"b" '\''c'\''' \
    'echo $(date) `date` $((1 + 2))' 'python examples/train.py \' '  --lr 0.1' \
    'echo "x" > out.txt 2>&1 | tee -a log' 'cat <<<"here-string" | tr a-z A-Z' >"$PROJECT/ok.txt"
  run --separate-stderr submitter --dry-run --configs ok.txt
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [[ $output == *"# ---- commands (8), one per array task"* ]]
}

@test "configs: the line named for a bash error is the file's line, past comments and continuations" {
  printf '# c\n\necho a \\\n  b\n# it'\''s\necho "fine"\necho "open\necho done\n' >"$PROJECT/c.txt"
  refused_hard "configs file 'c.txt', line 7: the command is not valid bash" --configs c.txt
}

# Lines of plain words skip bash -n (configs.sh): one that is a reserved word alone, or
# starts with one, is still refused; a reserved word as a program's argument still passes.
@test "configs: plain words that are bash syntax (fi, done, if x, for) are still refused; as arguments they pass" {
  local bad
  for bad in 'fi' 'python examples/train.py --lr 0.1 fi
done' 'if python examples/train.py' 'for x' 'time'; do
    printf 'python examples/train.py --lr 0.2\n%s\n' "$bad" >"$PROJECT/c.txt"
    if [[ $bad == time ]]; then # 'time' alone parses: accepted
      run --separate-stderr submitter --dry-run --configs c.txt
      [ "$status" -eq 0 ] || { echo "time: $stderr"; return 1; }
      continue
    fi
    refused_hard "configs file 'c.txt', line" --configs c.txt || { echo "for: $bad"; return 1; }
    [[ $stderr == *"is not valid bash"* ]]
  done
  printf '%s\n' 'python examples/train.py --mode in --then fi --do=done' 'python examples/train.py case=esac' >"$PROJECT/c.txt"
  run --separate-stderr submitter --dry-run --configs c.txt
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  [[ $output == *"# ---- commands (2), one per array task"* ]]
}

@test "--nodes-arg/--devices-arg go where the program's arguments end: before a comment, a ';', a pipe" {
  printf '%s\n' 'python examples/train.py --lr 0.1 # note; x' \
    'python examples/train.py --name "a;b" ; echo done' \
    'cd examples && python train.py --x 1 | tee log.txt' >"$PROJECT/c.txt"
  run --separate-stderr submitter --dry-run --configs c.txt -d lightning -N 2 --gpus 2 \
    --nodes-arg num_nodes --devices-arg devices
  [ "$status" -eq 0 ] || { echo "$stderr"; return 1; }
  local cmds=${output#*one per array task*$'\n'}
  [ "$cmds" = "$(printf '%s\n' \
    'python examples/train.py --lr 0.1 --num_nodes 2 --devices 2 # note; x' \
    'python examples/train.py --name "a;b" --num_nodes 2 --devices 2 ; echo done' \
    'cd examples && python train.py --x 1 --num_nodes 2 --devices 2 | tee log.txt')" ]
  # The commands file holds the same final commands, and the job adds nothing.
  run --separate-stderr submitter --configs c.txt -d lightning -N 2 --gpus 2 \
    --nodes-arg num_nodes --devices-arg devices -e x
  [ "$status" -eq 0 ]
  [ "$(cat "$SCRATCH"/proj/hpc_outputs/jobs/x-*/commands)" = "$cmds" ]
  run ! grep -q 'HPC_NODES_ARG\|HPC_DEVICES_ARG' "$SCRATCH"/proj/hpc_outputs/jobs/x-*/job.sbatch
}

@test "a relative WANDB_API_KEY_FILE is made absolute: the job finds the key from any folder" {
  mkdir -p "$PROJECT/sub"
  (cd "$PROJECT/sub" && WANDB_API_KEY=secret WANDB_API_KEY_FILE=keys/wandb \
    bash ../hpc_files/job_submitter.sh -e x) >/dev/null
  [ "$(cat "$PROJECT/sub/keys/wandb")" = secret ]
  grep -qxF "export HPC_WANDB_KEY_FILE='$PROJECT/sub/keys/wandb'" "$SCRATCH"/proj/hpc_outputs/jobs/x-*/job.sbatch
}

@test "the cluster's MaxJobCount comes from scontrol show config, once; above it is refused" {
  unset HPC_MAX_JOB_COUNT HPC_MAX_ARRAY_SIZE
  local bin=$BATS_TEST_TMPDIR/bin calls=$BATS_TEST_TMPDIR/scontrol.calls
  mkdir -p "$bin"
  printf '#!/bin/bash\necho "$*" >>%q\nprintf "MaxArraySize = 1001\\nMaxJobCount = 50\\n"\n' "$calls" >"$bin/scontrol"
  chmod +x "$bin/scontrol"
  export PATH=$bin:$PATH
  seq 51 | sed 's/^/echo /' >"$PROJECT/c.txt"
  refused_hard "51 tasks are more than the 50 jobs this cluster holds at once (MaxJobCount)" --configs c.txt
  seq 50 | sed 's/^/echo /' >"$PROJECT/c.txt"
  : >"$calls"
  run --separate-stderr submitter --configs c.txt -e x
  [ "$status" -eq 0 ]
  [ "$(grep -c '^show config' "$calls")" -eq 1 ]
}

@test "a 'python script.py' line whose script is not in the project warns, in --dry-run too" {
  printf 'python examples/nope.py --lr 1\npython examples/train.py\npython /abs/x.py\n' >"$PROJECT/c.txt"
  run --separate-stderr submitter --dry-run --configs c.txt
  [ "$status" -eq 0 ]
  [[ $stderr == *"configs file line 1 runs examples/nope.py, which is not in the project"* ]]
  [[ $stderr == *"/abs/x.py"* ]]
  [[ $stderr != *"examples/train.py,"* ]]
}

@test "an unknown option suggests the nearest, and every usage error exits 2" {
  run --separate-stderr submitter --exp_name x
  [ "$status" -eq 2 ]
  [[ $stderr == *"unknown option: --exp_name (did you mean --exp-name?)"* ]]
  run --separate-stderr submitter --nodes-args x
  [[ $stderr == *"(did you mean --nodes-arg?)"* ]]
  run --separate-stderr submitter --frobnicate
  [ "$status" -eq 2 ]
  [[ $stderr != *"did you mean"* ]]
  # A failure after the input was judged (sbatch refuses) is exit 1, not 2.
  SBATCH_STUB_FAIL="no" run --separate-stderr submitter -e x
  [ "$status" -eq 1 ]
}

@test "install_into_project: usage errors exit 2" {
  run --separate-stderr bash "$REPO_ROOT/hpc_files/install_into_project.sh"
  [ "$status" -eq 2 ]
  run --separate-stderr bash "$REPO_ROOT/hpc_files/install_into_project.sh" "$BATS_TEST_TMPDIR/none"
  [ "$status" -eq 2 ]
  [[ $stderr == *"does not exist: create it first"* ]]
}

@test "install_into_project copies the examples the default configs and sweeper.yml run, and every example the manual names" {
  local fresh=$BATS_TEST_TMPDIR/fresh
  mkdir -p "$fresh"
  bash "$REPO_ROOT/hpc_files/install_into_project.sh" "$fresh" >/dev/null
  [ -f "$fresh/examples/train.py" ]
  [ -f "$fresh/examples/sweep_train.py" ]
  # The default submission finds every script it names (no warning).
  # shellcheck disable=SC2016 # $1 is the inner shell's
  run --separate-stderr bash -c 'cd "$1" && bash hpc_files/job_submitter.sh --dry-run --venv none' _ "$fresh"
  [ "$status" -eq 0 ]
  [[ $stderr != *"not in the project"* ]]
  # Every example the manual (README and docs/) names (examples/X) comes with it, in hpc_files/examples/.
  local ex named=0 names
  mapfile -t names < <(grep -ho 'examples/[A-Za-z0-9_]*\.\(py\|txt\)' "$fresh/hpc_files/README.md" "$fresh"/hpc_files/docs/*.md | sort -u)
  for ex in "${names[@]}"; do
    [ -f "$fresh/hpc_files/$ex" ] || { echo "the manual names $ex, not installed in hpc_files/$ex"; false; }
    named=$((named + 1))
  done
  [ "$named" -ge 6 ]
  cmp "$REPO_ROOT/examples/lightning_ddp.py" "$fresh/hpc_files/examples/lightning_ddp.py"
  # A project's own example file is never overwritten.
  echo mine >"$fresh/examples/train.py"
  bash "$REPO_ROOT/hpc_files/install_into_project.sh" "$fresh" >/dev/null
  [ "$(cat "$fresh/examples/train.py")" = mine ]
}

@test "a command longer than the node can run (Linux takes at most 128 KiB in one argument) is refused at submission, naming its line and length (issue 32)" {
  local long
  long=$(head -c 140000 /dev/zero | tr '\0' x)
  printf 'echo short\necho %s\n' "$long" >"$PROJECT/c.txt"
  refused_hard "configs file 'c.txt', line 2: the command is 140005 bytes long; a node runs each line as one argument of bash -c, and Linux takes at most 130048 bytes (127 KiB) there" --configs c.txt
  # Just below the limit: submitted (the node runs it: tests/integration/inputs.bats).
  long=$(head -c 130000 /dev/zero | tr '\0' x)
  printf 'echo %s\n' "$long" >"$PROJECT/c.txt"
  run --separate-stderr submitter --dry-run --configs c.txt
  [ "$status" -eq 0 ] || { echo "${stderr:0:500}"; return 1; }
}

# bytes_check FILE [MAX_BASH_LINES] [PATH]: what the configs bytes check makes of FILE (the
# scripts it lists, or its refusal), with bash checking files of up to MAX_BASH_LINES lines.
bytes_check() {
  bash -c 'source "$1/hpc_files/job_submitter.sh"
    [[ -z $3 ]] || HPC_CONFIGS_BASH_LINES=$3
    [[ -z $4 ]] || PATH=$4
    mapfile -t lines <"$2"
    _configs_check_bytes "$2" lines
    printf "%s\n" "${J_CONFIG_SCRIPTS[@]}"' _ "$REPO_ROOT" "$1" "${2:-}" "${3:-}" 2>&1 || echo "exit $?"
}

# shellcheck disable=SC2016 # the lines are the configs file's text
@test "configs: the bytes check of a short file (in bash) and of a long one (grep and awk) agree on every fixture: the same scripts, the same refusal" {
  local d=$BATS_TEST_TMPDIR/bytes f here grep n=0
  mkdir -p "$d"
  printf '%s\n' 'python a.py --x 1' '  FOO=1 BAR=x/y python3 -u sub/b.py lr=2' 'python a.py again' \
    '/usr/bin/python3.11 ./c.py;echo' 'python d.py| tee' 'python e.py)' 'python f.pyc' 'mypython g.py' \
    'python h.py.bak' '# python i.py' 'cd x && python j.py' 'python -m k' 'python  tab.py' \
    'python l+m-n.py&' 'python "q.py"' 'python2 r.py' >"$d/scripts.txt"
  printf 'python a.py\r\npython b.py --x\t1\r\n' >"$d/crlf.txt"
  printf '\357\273\277python bom.py\nécho « ü » python u.py\n' >"$d/utf8.txt"
  printf 'python a.py\nls\npython a.py\r\rx\n' >"$d/cr.txt"
  printf 'python a.py\necho \033[31mred\n' >"$d/esc.txt"
  printf 'python a.py\necho \302\233 c1\npython b.py\n' >"$d/c1.txt"
  printf 'echo \177 del\n' >"$d/del.txt"
  printf 'echo a\necho b\000c\n' >"$d/nul.txt"
  printf 'python a.py\000' >"$d/nul_end.txt"
  printf 'python a.py\npython b.py' >"$d/no_newline.txt"
  printf 'echo \013 vt\n' >"$d/vt.txt"
  for f in "$d"/*.txt; do
    here=$(bytes_check "$f") grep=$(bytes_check "$f" 0)
    echo "${f##*/}: bash: $here | grep: $grep"
    [ "$here" = "$grep" ]
    n=$((n + 1))
  done
  [ "$n" -eq 11 ]
  # A short file is checked by bash alone (no grep or awk on PATH), a long one is not.
  [ "$(bytes_check "$d/scripts.txt" "" /nonexistent)" = "$(bytes_check "$d/scripts.txt")" ]
  [ -z "$(bytes_check "$d/scripts.txt" 0 /nonexistent)" ] # (grep missing: it found nothing)
  # What they agree on, for some: the scripts with their first line; each refusal names its line.
  [ "$(bytes_check "$d/scripts.txt")" = $'1:a.py\n2:sub/b.py\n4:./c.py\n5:d.py\n6:e.py\n13:tab.py\n14:l+m-n.py\n16:r.py' ]
  [ "$(bytes_check "$d/crlf.txt")" = $'1:a.py\n2:b.py' ]
  [[ $(bytes_check "$d/cr.txt") == *"line 3: holds a NUL byte, a control character"* ]]
  [[ $(bytes_check "$d/c1.txt") == *"line 2: holds"* ]]
  [[ $(bytes_check "$d/nul.txt") == *"line 2: holds"* ]]
}
