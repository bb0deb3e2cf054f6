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
  run --separate-stderr submitter ""
  [ "$status" -eq 2 ]
  [[ $stderr == *"unexpected argument: "* ]]
  run --separate-stderr submitter -
  [ "$status" -eq 2 ]
  [[ $stderr == *"unknown option: -"* ]]
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

# readme_rows_to MAP PAGE HEADING: the first table of options after the page's line HEADING, as
# MAP[form]="meaning<TAB>default", with markdown's backticks and \| undone.
readme_rows_to() {
  local -n _rows=$1
  local line seen=0 in=0
  local -a cells
  while IFS= read -r line; do
    if [[ $line == "$3" ]]; then in=1 && continue; fi
    ((in)) || continue
    if [[ $line == '| `-'* ]]; then
      seen=1
      line=${line//\\|/$'\x01'} line=${line//\`/}
      IFS='|' read -ra cells <<<"$line"
      cells=("${cells[@]//$'\x01'/|}")
      cells=("${cells[@]# }") && cells=("${cells[@]% }")
      _rows["${cells[1]}"]="${cells[2]}"$'\t'"${cells[3]:-}"
    elif ((seen)); then
      return 0
    fi
  done <"$2"
}

# spec_agrees_with SPEC_FUNCTION PAGE HEADING HELP_TEXT: every option of the spec is in the
# page's table after the heading (the reference, docs/reference.md: its meaning begins with
# the spec's help line, same default) and in the --help text; the page has no option the
# spec lacks.
spec_agrees_with() {
  local -A readme=() forms=()
  local i form want got help_flat failed=0
  readme_rows_to readme "$2" "$3"
  ((${#readme[@]})) || { echo "no options table after '$3' in ${2##*/}"; return 1; }
  read -d '' -ra help_flat <<<"$4" || true
  help_flat=" ${help_flat[*]} "
  set -- "$1" "$3"
  # shellcheck source=hpc_files/lib/hpc_lib.sh
  source "$REPO_ROOT/hpc_files/lib/hpc_lib.sh"
  # shellcheck source=hpc_files/lib/options.sh
  source "$REPO_ROOT/hpc_files/lib/options.sh"
  if [[ $1 == cleanup_options ]]; then
    # shellcheck source=plai_cleanups/submit_cleanup.sh
    source "$REPO_ROOT/plai_cleanups/submit_cleanup.sh" # functions only (its main guard)
    set +u +o pipefail
  fi
  hpc_options_use "$1"
  for i in "${!_HPC_OPT_KIND[@]}"; do
    [[ ${_HPC_OPT_KIND[i]} != section ]] || continue
    _hpc_opt_form_to form "$i"
    form=${form#    }
    forms[$form]=1
    want=${_HPC_OPT_HELP[i]}
    [[ -z ${_HPC_OPT_DEFAULT[i]} ]] || want+=" (default: ${_HPC_OPT_DEFAULT[i]})"
    read -ra want <<<"$form $want"
    if [[ $help_flat != *" ${want[*]} "* ]]; then
      echo "--help does not show: ${want[*]}"
      failed=1
    fi
    if [[ -z ${readme[$form]+x} ]]; then
      echo "${2##*/} ($3) has no row for $form: add | \`$form\` | ${_HPC_OPT_HELP[i]} | ${_HPC_OPT_DEFAULT[i]} |"
      failed=1
      continue
    fi
    got=${readme[$form]}
    if [[ ${got%%$'\t'*} != "${_HPC_OPT_HELP[i]}"* ]]; then
      printf '%s, %s: the meaning must begin with the --help line\n  page:   %s\n  --help: %s\n' "${2##*/}" \
        "$form" "${got%%$'\t'*}" "${_HPC_OPT_HELP[i]}"
      failed=1
    fi
    if [[ ${got#*$'\t'} != "${_HPC_OPT_DEFAULT[i]}" ]]; then
      printf '%s, %s: default "%s", --help says "%s"\n' "${2##*/}" "$form" "${got#*$'\t'}" "${_HPC_OPT_DEFAULT[i]}"
      failed=1
    fi
  done
  for form in "${!readme[@]}"; do
    [[ -n ${forms[$form]:-} ]] || { echo "${2##*/} ($3) documents $form, which is not an option" && failed=1; }
  done
  ((failed == 0))
}

@test "the reference's Options table and --help agree: every option in both, same meaning and default" {
  run --separate-stderr submitter --help
  [ "$status" -eq 0 ]
  spec_agrees_with hpc_submit_options "$REPO_ROOT/docs/reference.md" '## Options' "$output"
}

@test "the reference's cleanup table and the cleanup's --help agree too" {
  run --separate-stderr bash "$REPO_ROOT/plai_cleanups/submit_cleanup.sh" --help
  [ "$status" -eq 0 ]
  spec_agrees_with cleanup_options "$REPO_ROOT/docs/reference.md" '## Cleanup options' "$output"
}

@test "a reference page that disagrees with --help fails the check" {
  local help
  help=$(submitter --help)
  # shellcheck disable=SC2016 # backticks of markdown
  sed 's/^| `-g, --gpus N` | GPUs per node/| `-g, --gpus N` | GPU count per node/' \
    "$REPO_ROOT/docs/reference.md" >"$BATS_TEST_TMPDIR/reference.md"
  run spec_agrees_with hpc_submit_options "$BATS_TEST_TMPDIR/reference.md" '## Options' "$help"
  [ "$status" -ne 0 ]
  [[ $output == *"-g, --gpus N: the meaning must begin with the --help line"* ]]
}

@test "hpc_options_parse reads a word list (a file line) into the same OPT_* variables, without resetting" {
  # shellcheck source=hpc_files/lib/hpc_lib.sh
  source "$REPO_ROOT/hpc_files/lib/hpc_lib.sh"
  # shellcheck source=hpc_files/lib/options.sh
  source "$REPO_ROOT/hpc_files/lib/options.sh"
  hpc_options_use hpc_submit_options
  hpc_options_reset
  local -a words
  read -ra words <<<'--gpus 2 -t 30 --data a b --sbatch-option --qos=high -n'
  hpc_options_parse "${words[@]}"
  hpc_options_parse --exp-name=x --data c
  [ "$OPT_GPUS" = 2 ]
  [ "$OPT_TIME" = 30 ]
  [ "$OPT_EXP_NAME" = x ]
  [ "$OPT_DRY_RUN" = 1 ]
  [ "${OPT_DATA[*]}" = "a b c" ]
  [ "${OPT_SBATCH_OPTIONS[*]}" = "--qos=high" ]
  [ "$OPT_YES" = 0 ]
  [ -z "$OPT_CPUS" ]
  run --separate-stderr hpc_options_parse --gpus
  [ "$status" -eq 2 ]
  [[ $stderr == *"option --gpus needs a value"* ]]
}

@test "every option table of the toolkit passes the spec check; a malformed row is refused by name" {
  source "$REPO_ROOT/hpc_files/lib/hpc_lib.sh"
  source "$REPO_ROOT/hpc_files/lib/options.sh"
  hpc_options_check hpc_submit_options
  [ "${#_HPC_OPT_KIND[@]}" -gt 50 ]
  # The cleanup's table (plai_cleanups/submit_cleanup.sh, sourced without running).
  run bash -c 'source "$1/plai_cleanups/submit_cleanup.sh"; hpc_options_check cleanup_options && echo checked' _ "$REPO_ROOT"
  [ "$status" -eq 0 ]
  [ "${lines[-1]}" = checked ]
  bad_spec() { hpc_option - --frob maybe X OPT_FROB '' 'frobnicate'; }
  run --separate-stderr hpc_options_check bad_spec
  [ "$status" -ne 0 ]
  [[ $stderr == *"--frob has kind 'maybe'"* ]]
  twice_spec() { hpc_option - --a flag '' OPT_A '' 'a'; hpc_option - --b,--a flag '' OPT_B '' 'b'; }
  run --separate-stderr hpc_options_check twice_spec
  [[ $stderr == *"--a is in two rows"* ]]
  for bad in "hpc_option -ab --x flag '' OPT_X '' x" "hpc_option - x flag '' OPT_X '' x" \
    "hpc_option - --x flag ARG OPT_X '' x" "hpc_option - --x value '' OPT_X '' x" "hpc_option - --x flag '' OPT_X ''"; do
    eval "bad_spec() { $bad; }"
    run --separate-stderr hpc_options_check bad_spec
    echo "$bad: $stderr"
    [ "$status" -ne 0 ]
    [[ $stderr == *"option spec: "* ]]
  done
}

@test "the Layout (docs/how-it-works.md) names every file of the toolkit" {
  local layout f missing=0
  layout=$(sed -n '/^## Layout$/,/^## /p' "$REPO_ROOT/docs/how-it-works.md")
  [ -n "$layout" ]
  while IFS= read -r f; do
    f=${f#hpc_files/lib/} f=${f#*/}
    [[ $f != */* ]] || f=${f%%/*}/ # a subfolder is named as a whole (clusters/, local_slurm/)
    [[ $layout == *"\`$f\`"* ]] || { echo "the Layout in docs/how-it-works.md does not name $f" && missing=1; }
  done < <(git -C "$REPO_ROOT" ls-files hpc_files plai_cleanups singularity_hpc_files \
    virtual_env_hpc_files examples)
  ((missing == 0))
}
