#!/usr/bin/env bats
# virtual_env_hpc_files/job_lib.sh, the job side's one library: the log line, fail, this
# node's name and paths (%n, %u), modules, sizes; and the rule that no job-side file
# sources anything under hpc_files/ (the submitting side's library).
# shellcheck disable=SC2016,SC2030,SC2031 # code in single quotes; bats runs each test in a subshell

load ../helpers/common

setup() {
  hermetic_env
  LIB=$REPO_ROOT/virtual_env_hpc_files/job_lib.sh
  export SLURMD_NODENAME=node9
}

# lib BASH_CODE: run BASH_CODE in a fresh bash with only job_lib.sh loaded.
lib() {
  bash -c 'source "$1" || exit 9; eval "$2"' _ "$LIB" "$1"
}

LOG_RE='^\[hpc [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} '

@test "job_lib.sh sets no shell options, sources nothing and defines what its header lists" {
  run bash -c 'source "$1" && source "$1" && echo ok' _ "$LIB" # a second time: harmless
  [ "$output" = ok ]
  run bash -c 'a="$-|$(shopt -p)|$(set -o)"; source "$1"; b="$-|$(shopt -p)|$(set -o)"; [[ $a == "$b" ]] && echo same' _ "$LIB"
  [ "$output" = same ]
  run grep -nE '^[[:space:]]*(source|\.)[[:space:]]' "$LIB"
  [ "$status" -eq 1 ]
  local fn
  for fn in hpc_log hpc_error hpc_fail hpc_node_name_to hpc_job_user_to hpc_expand_path_to \
    hpc_node_path_to hpc_slurm_tmpdir_to hpc_node_tmpdir_to hpc_slurm_version_parse_to \
    hpc_slurm_at_least hpc_slurm_job_version hpc_slurm_job_finished hpc_slurm_stale_attempt_to \
    hpc_load_modules is_size human_bytes_to hpc_line_expanded_to; do
    grep -q "^#.* $fn" "$LIB" # in the header's help
    run lib "declare -F $fn"
    [ "$status" -eq 0 ]
  done
  # Nothing of the submitting side's library comes with it.
  run lib 'declare -F die || declare -F quote || declare -F hpc_cluster_check'
  [ "$status" -eq 1 ]
}

@test "hpc_log: one line on stdout, tagged with the node; the message is printed as it is" {
  run --separate-stderr lib 'hpc_log hello "two  words"'
  [ "$status" -eq 0 ]
  [ -z "$stderr" ]
  [[ $output =~ ${LOG_RE}node9\]\ hello\ two\ \ words$ ]]
  # Hostile messages: format directives, command substitutions, backslashes stay text.
  local hostile='%s %n %(%F)T $(touch '"$BATS_TEST_TMPDIR"'/pwned) `id` \n \\ '"'"'"'
  run bash -c 'source "$1"; hpc_log "$2"' _ "$LIB" "$hostile"
  [[ $output =~ ${LOG_RE}node9\]\ (.*)$ ]]
  [ "${BASH_REMATCH[1]}" = "$hostile" ]
  [ ! -e "$BATS_TEST_TMPDIR/pwned" ]
}

@test "the Python sweep agent writes the same log line as hpc_log" {
  local py bash_line
  run lib 'hpc_log "point 3: started  run x"'
  bash_line=$output
  run env PYTHONPATH="$REPO_ROOT/python" python3 -c \
    'from hpc_toolkit.sweep.agent import log; log("point 3: started  run x")'
  [ "$status" -eq 0 ]
  py=$output
  [[ $py =~ ${LOG_RE}node9\]\ point\ 3:\ started\ \ run\ x$ ]]
  # The same line but for the time.
  [ "${py:0:5}${py:24}" = "${bash_line:0:5}${bash_line:24}" ]
}

@test "the node's name: SLURMD_NODENAME, else HOSTNAME, else '?'" {
  run lib 'hpc_node_name_to n; echo "$n"'
  [ "$output" = node9 ]
  unset SLURMD_NODENAME
  run bash -c 'HOSTNAME=host.example; source "$1"; hpc_node_name_to n; echo "$n"; hpc_log x' _ "$LIB"
  [ "${lines[0]}" = host.example ]
  [[ ${lines[1]} =~ ${LOG_RE}host\.example\]\ x$ ]]
  run bash -c 'HOSTNAME=""; source "$1"; hpc_node_name_to n; echo "$n"' _ "$LIB"
  [ "$output" = '?' ]
  SLURMD_NODENAME='a b$(id)' run lib 'hpc_node_name_to n; echo "$n"'
  [ "$output" = 'a b$(id)' ]
}

@test "hpc_error goes to stderr; hpc_fail ends the shell with code 1, or the one given" {
  run --separate-stderr lib 'hpc_error "disk  full"'
  [ "$status" -eq 0 ]
  [ -z "$output" ]
  [[ $stderr =~ ${LOG_RE}node9\]\ ERROR:\ disk\ \ full$ ]]
  run --separate-stderr lib 'hpc_fail "no venv"; echo after'
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  [[ $stderr =~ ${LOG_RE}node9\]\ ERROR:\ no\ venv$ ]]
  run --separate-stderr lib 'hpc_fail "bad usage" 2; echo after'
  [ "$status" -eq 2 ]
  [[ $stderr == *"ERROR: bad usage" ]]
  run --separate-stderr lib '(hpc_fail "in a subshell" 7); echo "subshell ended with $?"'
  [ "$output" = "subshell ended with 7" ]
}

@test "hpc_expand_path_to: %n and %u in one pass; what they bring is never expanded again" {
  run lib 'hpc_expand_path_to p /l/%n/%u/x_%n n1 ann; echo "$p"'
  [ "$output" = /l/n1/ann/x_n1 ]
  # Other % forms stay as they are; %%n is a % and then %n (as ${x//%n/...} did).
  run lib 'hpc_expand_path_to p "/l/%j/50%/%%n/%" n1 ann; echo "$p"'
  [ "$output" = "/l/%j/50%/%n1/%" ]
  # Hostile values: '&' (bash 5.2 puts the match there in ${x//pat/&}), a user that holds
  # %n, glob characters, spaces, quotes, a command substitution, a newline, a backslash.
  local node='n&1' user=$'%n *?[a] "q" \'s\' $(touch pwned) \\ \nx'
  run bash -c 'cd "$4" && source "$1"; hpc_expand_path_to p "/s/%n/%u/%n" "$2" "$3"; printf "%s" "$p"' \
    _ "$LIB" "$node" "$user" "$BATS_TEST_TMPDIR"
  [ "$output" = "/s/$node/$user/$node" ]
  [ ! -e "$BATS_TEST_TMPDIR/pwned" ]
  # %n kept for later (staging.sh expands %u on the first node, %n on each node).
  run lib 'hpc_expand_path_to p "/l/%n/%u" %n ann; echo "$p"'
  [ "$output" = /l/%n/ann ]
  run lib 'hpc_expand_path_to p "" n1 ann; echo "[$p]"; hpc_expand_path_to p "plain" n1 ann; echo "$p"'
  [ "$output" = $'[]\nplain' ]
}

@test "hpc_node_path_to: this node and the job's user; a node name that cannot name a folder is refused" {
  export SLURM_JOB_USER=jobuser USER=loginuser
  run lib 'hpc_node_path_to p "/local/%u/%n/hpc_job_7_%n"; echo "$p"'
  [ "$output" = /local/jobuser/node9/hpc_job_7_node9 ]
  unset SLURM_JOB_USER
  run lib 'hpc_node_path_to p "/local/%u"; echo "$p"'
  [ "$output" = /local/loginuser ]
  unset USER
  run lib 'hpc_node_path_to p "/local/%u"; echo "$p"'
  [ "$output" = "/local/$(id -un)" ]
  local bad
  for bad in '../x' 'a/b' '-n' 'a b' 'n&1' '?' $'n\n1'; do
    SLURMD_NODENAME=$bad run --separate-stderr lib 'p=left; hpc_node_path_to p "/local/hpc_job_7_%n"; echo "rc=$? [$p]"'
    [ "$output" = "rc=1 []" ]
    [[ $stderr == *"cannot name a folder: set SLURMD_NODENAME" ]]
  done
  # The caller's variable may have any plain name, the functions' own included.
  run lib 'hpc_node_path_to node "/x/%n"; hpc_node_path_to user "/x/%u"; hpc_node_path_to p "/x/%n%u"; echo "$node $user $p"'
  [ "$output" = "/x/node9 /x/$(id -un) /x/node9$(id -un)" ]
  # Without %n the node's name does not matter.
  SLURMD_NODENAME='a/b' run lib 'hpc_node_path_to p "/local/plain"; echo "$p"'
  [ "$output" = /local/plain ]
}

@test "hpc_node_tmpdir_to: the job's own folder for this node, else Slurm's, else this job's TMPDIR" {
  export HPC_TMPDIR_PATTERN=/ls/hpc_job_7_%n SLURM_TMPDIR=/first/node/folder
  run lib 'hpc_node_tmpdir_to d; echo "$d"'
  [ "$output" = /ls/hpc_job_7_node9 ]
  unset HPC_TMPDIR_PATTERN
  run lib 'hpc_node_tmpdir_to d; echo "$d"'
  [ "$output" = /first/node/folder ]
  unset SLURM_TMPDIR
  export SLURM_JOB_ID=7 TMPDIR=$BATS_TEST_TMPDIR/job_7
  mkdir -p "$TMPDIR"
  run lib 'hpc_node_tmpdir_to d; echo "$d"'
  [ "$output" = "$TMPDIR" ]
  export TMPDIR=/tmp # not this job's
  run lib 'hpc_node_tmpdir_to d; echo "[$d]"'
  [ "$output" = "[]" ]
}

@test "hpc_slurm_tmpdir_to: TMPDIR counts only when a path component is the job id as Slurm's prologs name it (issue 23)" {
  unset SLURM_TMPDIR
  local d
  export SLURM_JOB_ID=96
  # pam_tmpdir-style login TMPDIRs that merely contain the id: not this job's.
  for d in tmp/user/tmp-95-96-97 tmp/user/x96 tmp/96x/a tmp/a.96b tmp/slurm-960 tmp/job_196; do
    mkdir -p "$BATS_TEST_TMPDIR/$d"
    TMPDIR=$BATS_TEST_TMPDIR/$d run lib 'hpc_slurm_tmpdir_to t; echo "[$t]"'
    [ "$output" = "[]" ] || { echo "$d taken: $output"; return 1; }
  done
  # What Slurm's prologs make: job_<id>, <id>, slurm-<id>, <user>.<id>.0 (Compute Canada).
  for d in ls/node1/job_96 ls/96 ls/slurm-96/tmp ls/alice.96.0 ls/job96; do
    mkdir -p "$BATS_TEST_TMPDIR/$d"
    TMPDIR=$BATS_TEST_TMPDIR/$d run lib 'hpc_slurm_tmpdir_to t; echo "[$t]"'
    [ "$output" = "[$BATS_TEST_TMPDIR/$d]" ] || { echo "$d not taken: $output"; return 1; }
  done
  # Slurm's own variable always counts.
  SLURM_TMPDIR=/any/tmp-95-96-97 run lib 'hpc_slurm_tmpdir_to t; echo "[$t]"'
  [ "$output" = "[/any/tmp-95-96-97]" ]
}

@test "hpc_load_modules: module load the profile's list; a node without 'module' or a failing load ends the job" {
  run --separate-stderr lib 'hpc_load_modules; echo "rc=$?"'
  [ "$output" = rc=0 ] # no HPC_MODULES: nothing to do
  export HPC_MODULES="python/3.11 cuda/12 'x;y'"
  run --separate-stderr lib 'module() { printf "[%s]" "$@"; echo; }; hpc_load_modules'
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "[load][python/3.11][cuda/12]['x;y']" ]
  [[ ${lines[1]} =~ ${LOG_RE}node9\]\ modules:\ python/3.11 ]]
  run --separate-stderr lib 'module() { return 3; }; hpc_load_modules; echo after'
  [ "$status" -eq 1 ]
  [ -z "$output" ]
  [[ $stderr == *"ERROR: module load python/3.11 cuda/12 'x;y' failed (module names differ between clusters: fix HPC_MODULES in the profile)" ]]
  # No module command on this machine (no lmod init script either): say what to set.
  [ ! -e /etc/profile.d/lmod.sh ]
  [ ! -e /etc/profile.d/modules.sh ]
  [ ! -e /usr/share/lmod/lmod/init/bash ]
  run --separate-stderr env PATH=/usr/bin:/bin bash -c 'source "$1"; hpc_load_modules; echo after' _ "$LIB"
  [ "$status" -eq 1 ]
  [[ $stderr == *"this node has no 'module' command: set HPC_MODULES=\"\" in the profile" ]]
}

@test "is_size and human_bytes_to never evaluate what they are given" {
  local v
  for v in 0 1 007 123456789012345678; do
    run lib "is_size '$v'"
    [ "$status" -eq 0 ]
  done
  for v in '' ' 1' '1 ' -1 1.5 0x10 '1+1' 'a[$(touch pwned)]' 1234567890123456789 $'1\n2'; do
    run bash -c 'cd "$3" && source "$1"; is_size "$2"' _ "$LIB" "$v" "$BATS_TEST_TMPDIR"
    [ "$status" -eq 1 ]
    run bash -c 'cd "$3" && source "$1"; human_bytes_to h "$2"; echo "$h"' _ "$LIB" "$v" "$BATS_TEST_TMPDIR"
    [ "$output" = "? B" ]
  done
  [ ! -e "$BATS_TEST_TMPDIR/pwned" ]
  run lib 'for b in 0 512 1024 1536 1048576 1073741824 5368709120; do human_bytes_to h $b; echo "$h"; done'
  [ "$output" = "$(printf '%s\n' '0 B' '512 B' '1.0 KiB' '1.5 KiB' '1.0 MiB' '1.0 GiB' '5.0 GiB')" ]
}

# --- the job side never sources the submitting side's library ----------------------------

# job_side_files: every file that runs inside a job (sourced there, or run as a step).
job_side_files() {
  local f
  for f in "$REPO_ROOT"/virtual_env_hpc_files/*.sh "$REPO_ROOT"/singularity_hpc_files/*.sh \
    "$REPO_ROOT"/plai_cleanups/cleanup_node.sh; do
    printf '%s\n' "$f"
  done
}

@test "no job-side file sources anything under hpc_files/" {
  local f line n=0 bad=()
  while IFS= read -r f; do
    n=$((n + 1))
    # Any source/. line naming hpc_files/ (not virtual_env_hpc_files/ or singularity_hpc_files/).
    while IFS= read -r line; do
      bad+=("${f#"$REPO_ROOT"/}: $line")
    done < <(grep -nE '^[^#]*(^|[;&|[:space:]])(source|\.)[[:space:]][^#]*(^|[^_[:alnum:]])hpc_files/' "$f")
  done < <(job_side_files)
  ((n >= 14))
  printf '%s\n' "${bad[@]}"
  [ "${#bad[@]}" -eq 0 ]
}

@test "the job side works in a tree without hpc_files/: job_runtime.sh and the step scripts load" {
  local t=$BATS_TEST_TMPDIR/tree
  mkdir -p "$t/plai_cleanups"
  cp -R "$REPO_ROOT/virtual_env_hpc_files" "$REPO_ROOT/singularity_hpc_files" "$t/"
  cp "$REPO_ROOT/plai_cleanups/cleanup_node.sh" "$t/plai_cleanups/"
  [ ! -e "$t/hpc_files" ]
  # Every function a batch script calls is there once job_runtime.sh is sourced.
  run --separate-stderr bash -c 'source "$1/virtual_env_hpc_files/job_runtime.sh" || exit 9
    for f in hpc_job_begin hpc_load_modules hpc_activate_venv hpc_prepare_tmpdir hpc_stage_data \
      hpc_run_command hpc_slurm_job_version hpc_slurm_job_finished hpc_container_prepare is_size; do
      declare -F "$f" >/dev/null || echo "missing $f"
    done; echo loaded' _ "$t"
  [ "$status" -eq 0 ]
  [ -z "$stderr" ]
  [ "$output" = loaded ]
  # The scripts run as steps load too (each stops at its own usage check).
  run --separate-stderr bash "$t/virtual_env_hpc_files/node_tmpdir.sh"
  [ "$status" -eq 2 ]
  [[ $stderr == "usage: node_tmpdir.sh keep"* ]]
  run --separate-stderr bash "$t/virtual_env_hpc_files/sweep_agent.sh"
  [ "$status" -eq 2 ]
  [[ $stderr == *"ERROR: usage: sweep_agent.sh online"* ]]
  run --separate-stderr bash "$t/singularity_hpc_files/container.sh" echo in-place
  [ "$output" = in-place ]
  run --separate-stderr env HPC_TMPDIR_PATTERN="$BATS_TEST_TMPDIR/ls_%n" SLURMD_NODENAME=n2 \
    bash "$t/virtual_env_hpc_files/task_wrapper.sh" plain 'echo "$SLURM_TMPDIR"'
  [ "$output" = "$BATS_TEST_TMPDIR/ls_n2" ]
  run --separate-stderr bash "$t/plai_cleanups/cleanup_node.sh"
  [ "$status" -ne 0 ]
  [[ $stderr == "cleanup_node.sh: usage: cleanup_node.sh"* ]]
}

@test "every job-side script loads job_lib.sh: itself, or through the one file it sources for it" {
  local f name missing=()
  while IFS= read -r f; do
    name=${f#"$REPO_ROOT"/}
    case $name in
      virtual_env_hpc_files/job_lib.sh) continue ;;
      virtual_env_hpc_files/proc_tree.sh) continue ;; # pure /proc reading; its caller logs
      virtual_env_hpc_files/run_line.sh | virtual_env_hpc_files/job_runtime.sh)
        # through container.sh (run_line.sh) / first of all (job_runtime.sh)
        grep -qE '^[^#]*source .*(container|job_lib)\.sh"' "$f" || missing+=("$name")
        ;;
      *) grep -qE '^[^#]*source .*job_lib\.sh"|^[^#]*source "\$\{?[A-Za-z_]*[Jj][Oo][Bb]_[Ll][Ii][Bb]\}?"' "$f" || missing+=("$name") ;;
    esac
  done < <(job_side_files)
  printf 'does not source job_lib.sh: %s\n' "${missing[@]}"
  [ "${#missing[@]}" -eq 0 ]
  grep -q 'source.*container\.sh' "$REPO_ROOT/virtual_env_hpc_files/run_line.sh"
  grep -q 'source.*job_lib\.sh' "$REPO_ROOT/singularity_hpc_files/container.sh"
}

@test "the batch scripts sbatch runs from a spool copy find the library through HPC_JOB_LIB" {
  local spool=$BATS_TEST_TMPDIR/spool
  mkdir -p "$spool/cleanup" "$spool/venv"
  cp "$REPO_ROOT/plai_cleanups/cleanup_node.sh" "$spool/cleanup/slurm_script"
  cp "$REPO_ROOT/virtual_env_hpc_files/build_venv.sh" "$spool/venv/slurm_script"
  # The submitting side exports it, as an absolute path, however hpc_lib.sh was reached.
  run bash -c 'cd "$1" && source hpc_files/lib/hpc_lib.sh && printf "%s\n" "$HPC_JOB_LIB"' _ "$REPO_ROOT"
  [[ $output == /* ]]
  [ "$output" -ef "$LIB" ]
  export HPC_JOB_LIB=$output
  run --separate-stderr bash "$spool/cleanup/slurm_script" --dry-run "$BATS_TEST_TMPDIR/ls/%n/%u"
  [ "$status" -eq 0 ]
  [[ ${lines[0]} == *" node9 (job none, user $(id -un)): $BATS_TEST_TMPDIR/ls/node9/$(id -un)" ]]
  # Without it, a copy names what is missing and removes nothing.
  unset HPC_JOB_LIB
  run --separate-stderr bash "$spool/cleanup/slurm_script" --dry-run "$BATS_TEST_TMPDIR/ls/%n"
  [ "$status" -eq 1 ]
  [[ $stderr == "cleanup_node.sh: the toolkit's job library $spool/cleanup/../virtual_env_hpc_files/job_lib.sh cannot be read on this node: nothing removed"* ]]
  run --separate-stderr env PATH=/usr/bin:/bin bash "$spool/venv/slurm_script" "$BATS_TEST_TMPDIR/v" req.txt "gcc/12"
  [ "$status" -eq 1 ]
  [[ $stderr == "build_venv.sh: the toolkit's job library $spool/venv/job_lib.sh cannot be read on this node"* ]]
  # With it, the venv job loads modules as the experiments do (no module command here).
  run --separate-stderr env PATH=/usr/bin:/bin HPC_JOB_LIB="$LIB" bash "$spool/venv/slurm_script" "$BATS_TEST_TMPDIR/v" req.txt "gcc/12"
  [ "$status" -eq 1 ]
  [[ $output =~ ${LOG_RE}node9\]\ building\ venv ]]
  [[ $stderr == *"ERROR: the cluster profile asks for modules (gcc/12) but this node has no 'module' command"* ]]
  [ ! -e "$BATS_TEST_TMPDIR/v" ]
}

@test "hpc_line_expanded_to: a simple line's words as the shell expands them, quoted unambiguously; the W&B key and secret-looking variables never (second review)" {
  mkdir -p "$BATS_TEST_TMPDIR/d" && touch "$BATS_TEST_TMPDIR/d/a.py" "$BATS_TEST_TMPDIR/d/b.py"
  export SLURM_TMPDIR=/local/job_7 NAME='two words' WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567
  cd "$BATS_TEST_TMPDIR/d"
  run lib 'hpc_line_expanded_to x "python train.py --dataset=\$SLURM_TMPDIR/data --name \"\$NAME\" *.py ~"; printf "%s\n" "$x"'
  [ "$status" -eq 0 ]
  [ "$output" = "python train.py --dataset=/local/job_7/data --name 'two words' a.py b.py $HOME" ]
  # The key stays out of the log, whatever the line does with it.
  run lib 'hpc_line_expanded_to x "python t.py --key=\$WANDB_API_KEY \"k \$WANDB_API_KEY\""; printf "%s\n" "$x"'
  [ "$output" = "python t.py '--key=<WANDB_API_KEY>' 'k <WANDB_API_KEY>'" ]
  # So do the values of the line's variables whose names look secret; others show.
  export HF_TOKEN=hf_SECRETabc123 DB_PASSWORD=s3cr3tpw OPENAI_API_KEY=sk-TOPSECRET999 LR=0.1
  run lib 'hpc_line_expanded_to x "python t.py --hf-token=\$HF_TOKEN --db=postgres://me:\${DB_PASSWORD}@db/x \$OPENAI_API_KEY --lr \$LR"; printf "%s\n" "$x"'
  [ "$output" = "python t.py '--hf-token=<HF_TOKEN>' '--db=postgres://me:<DB_PASSWORD>@db/x' '<OPENAI_API_KEY>' --lr 0.1" ]
  # Nothing to expand, or not a simple command (it would run something to expand it): "".
  local line
  for line in 'python train.py --lr 0.1' 'echo $(date)' 'echo `id`' 'a=$HOME; echo $a' 'cd $HOME && ls' \
    'echo $HOME > f' 'echo $HOME | cat' '(echo $HOME)' 'echo \$HOME $HOME' "echo 'a\$HOME'" 'echo $((1+2))'; do
    run bash -c 'source "$1" || exit 9; x=unset; hpc_line_expanded_to x "$2"; printf "[%s]\n" "$x"' _ "$LIB" "$line"
    [ "$output" = "[]" ] || { echo "line: $line -> $output"; false; }
  done
  [ ! -e "$BATS_TEST_TMPDIR/d/f" ]
}

@test "env's --default-signal is asked once per node of a submission: later tasks read the answer in the home" {
  local bin=$BATS_TEST_TMPDIR/bin home=$BATS_TEST_TMPDIR/home
  mkdir -p "$bin" "$home"
  # An env that records each call and knows --default-signal.
  printf '#!/bin/bash\necho "$*" >>"%s/env.calls"\n[[ $1 == --default-signal=* ]] && shift\nexec /usr/bin/env "$@"\n' \
    "$BATS_TEST_TMPDIR" >"$bin/env"
  chmod +x "$bin/env"
  export PATH=$bin:$PATH HPC_HOME=$home
  run lib 'hpc_env_default_signal_settle; echo "$HPC_ENV_DEFAULT_SIGNAL"'
  [ "$output" = yes ]
  [ "$(cat "$home/node_env.node9")" = default-signal=yes ]
  [ "$(wc -l <"$BATS_TEST_TMPDIR/env.calls")" -eq 1 ]
  # A second task on node9: no env; on node8: its own question.
  run lib 'hpc_env_default_signal_settle; echo "$HPC_ENV_DEFAULT_SIGNAL"'
  [ "$output" = yes ]
  [ "$(wc -l <"$BATS_TEST_TMPDIR/env.calls")" -eq 1 ]
  SLURMD_NODENAME=node8 run lib 'hpc_env_default_signal_settle; echo "$HPC_ENV_DEFAULT_SIGNAL"'
  [ "$(wc -l <"$BATS_TEST_TMPDIR/env.calls")" -eq 2 ]
  # An answer edited into something else is not believed: env is asked again.
  printf 'default-signal=yes; rm -rf /\n' >"$home/node_env.node9"
  run lib 'hpc_env_default_signal_settle; echo "$HPC_ENV_DEFAULT_SIGNAL"'
  [ "$output" = yes ]
  [ "$(wc -l <"$BATS_TEST_TMPDIR/env.calls")" -eq 3 ]
  # A node name that cannot name a file, or no home (an older version's job): no cache.
  SLURMD_NODENAME='../x' run lib 'hpc_env_default_signal_settle'
  [ ! -e "$BATS_TEST_TMPDIR/x" ] && [ "$(wc -l <"$BATS_TEST_TMPDIR/env.calls")" -eq 4 ]
}

@test "a folder's entries and whether it holds a file: dot files, links and odd names; the same under set -f and the glob options a BASH_ENV may set" {
  local d=$BATS_TEST_TMPDIR/d
  mkdir -p "$d/sub/deeper" "$BATS_TEST_TMPDIR/empty/sub"
  touch "$d/a" "$d/.b" "$d/..c" "$d/x"$'\n'"y"
  ln -s /nonexistent "$d/dangling"
  local opts names
  for opts in "" "set -f" "shopt -s nullglob" "shopt -s failglob" "shopt -s dotglob"; do
    D=$d E=$BATS_TEST_TMPDIR/empty M=$BATS_TEST_TMPDIR/missing run lib "$opts"'
      hpc_dir_entries_to e "$D"; printf "<%s>" "${e[@]}" | LC_ALL=C tr "\n" "|"; echo
      hpc_dir_has_file "$D" && echo has; hpc_dir_has_file "$E" || echo none; hpc_dir_has_file "$M" || echo absent'
    names=${lines[0]//[<>]/$'\n'}
    [ "$(grep -v '^$' <<<"$names" | LC_ALL=C sort | paste -sd ' ')" = "..c .b a dangling sub x|y" ] || { echo "$opts: ${lines[0]}"; false; }
    [ "${lines[1]}" = has ] && [ "${lines[2]}" = none ] && [ "${lines[3]}" = absent ] || { echo "$opts: $output"; false; }
  done
}
