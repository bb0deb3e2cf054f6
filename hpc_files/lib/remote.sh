# shellcheck shell=bash
# --remote HOST: submit from a laptop. The project's code goes to HOST (anything ssh takes,
# e.g. a Host alias of ~/.ssh/config) with rsync, then job_submitter.sh runs THERE with the
# same options, in a login shell of HOST: its Slurm, its environment, its $SCRATCH; what it
# prints and its exit code come back as they are. One SSH connection is opened and reused
# by every ssh and rsync of the submission, and by the next ones for HPC_SSH_PERSIST
# (ControlMaster=auto, ControlPersist): an MFA prompt comes once.
#
# What is copied is what the code record keeps (coderecord.sh): git's tracked files and
# the untracked ones it does not ignore (without git: every file under 5 MB), the toolkit's
# folders, and the configs or sweep file the options name; never a virtual environment (a
# folder with pyvenv.cfg) nor .git. Into HPC_REMOTE_DIR, else ~/<project folder's name>.
#
# Environment: HPC_SSH_CONFIG (an ssh config file: ssh -F), HPC_SSH_CONTROL_DIR (the
# connection's socket folder, default ~/.ssh), HPC_SSH_PERSIST (default 30m).

HPC_REMOTE_TOOLKIT_FOLDERS=(hpc_files virtual_env_hpc_files singularity_hpc_files plai_cleanups python)

# _hpc_remote_control_dir_to VAR: a folder of ours only, for the connection's socket, with
# a path short enough for a Unix socket (%C adds 40 characters).
_hpc_remote_control_dir_to() {
  local -n _cd=$1
  _cd=${HPC_SSH_CONTROL_DIR:-$HOME/.ssh}
  if ((${#_cd} > 50)); then
    _cd=${TMPDIR:-/tmp}/hpc-ssh-$UID
    ((${#_cd} <= 50)) || _cd=/tmp/hpc-ssh-$UID
  fi
  mkdir -p -- "$_cd" 2>/dev/null || die "cannot create $_cd for the SSH connection's socket: set HPC_SSH_CONTROL_DIR to a folder of yours"
  # Another user's folder (made ahead of us in /tmp) would let them use the connection.
  [[ -O $_cd && ! -L $_cd ]] || die "$_cd is not your own folder: set HPC_SSH_CONTROL_DIR to a folder of yours"
  [[ $(stat -c %a -- "$_cd") == 700 ]] || chmod 0700 -- "$_cd" || die "cannot make $_cd private (chmod 700)"
}

# hpc_remote_ssh_to VAR: the ssh command (an array) that opens or reuses the connection.
hpc_remote_ssh_to() {
  local -n _ssh=$1
  local dir
  _hpc_remote_control_dir_to dir
  _ssh=(ssh)
  [[ -z ${HPC_SSH_CONFIG:-} ]] || _ssh+=(-F "$HPC_SSH_CONFIG")
  _ssh+=(-o ControlMaster=auto -o "ControlPath=$dir/hpc-%C" -o "ControlPersist=${HPC_SSH_PERSIST:-30m}"
    -o ConnectTimeout=30 -o ServerAliveInterval=30)
}

# _hpc_remote_dir_word_to VAR DIR: DIR as one word for a remote POSIX shell, a leading ~/
# left to that shell to expand.
_hpc_remote_dir_word_to() {
  local -n _dw=$1
  local dir=$2 rest
  # shellcheck disable=SC2088 # a literal ~/ is what is looked for
  if [[ $dir == "~" ]]; then
    _dw='~'
  elif [[ $dir == "~/"* ]]; then
    quote_to rest "${dir#\~/}"
    # shellcheck disable=SC2088 # the remote shell expands it
    _dw="~/$rest"
  else
    quote_to _dw "$dir"
  fi
}

# hpc_remote_dir_to VAR SOURCE_DIR: where the project goes on the login node.
hpc_remote_dir_to() {
  local -n _rd=$1
  local name=${2##*/}
  _rd=${HPC_REMOTE_DIR:-\~/$name}
  has_newline "$_rd" && die_usage "HPC_REMOTE_DIR holds a newline"
  # shellcheck disable=SC2088 # a literal ~/ is what is looked for
  [[ $_rd == /* || $_rd == "~" || $_rd == "~/"* ]] || die_usage "HPC_REMOTE_DIR '$_rd' must be an absolute path or start with ~/ (the login node's home)"
}

# _hpc_remote_list_files SOURCE_DIR LIST: the code, NUL-separated, relative to SOURCE_DIR.
_hpc_remote_list_files() {
  local src=$1 list=$2 d f venvs=() skip
  for d in "$src"/*/ "$src"/.*/; do
    [[ ! -f ${d}pyvenv.cfg ]] || venvs+=("$(basename -- "$d")")
  done
  {
    if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
      git -C "$src" ls-files -z --cached --others --exclude-standard -- . 2>/dev/null
    else
      (cd -- "$src" && find . \( -name .git -o -name __pycache__ -o -name .venv \) -prune -o -type f -size -5M -printf '%P\0')
    fi
  } | while IFS= read -r -d '' f; do
    [[ -f $src/$f || -L $src/$f ]] || continue # tracked, deleted since
    for skip in "${venvs[@]}" .git; do
      [[ $f != "$skip"/* ]] || continue 2
    done
    printf '%s\0' "$f"
  done >"$list"
  for d in "${HPC_REMOTE_TOOLKIT_FOLDERS[@]}"; do
    [[ ! -d $src/$d ]] || printf '%s\0' "$d" >>"$list"
  done
}

# _hpc_remote_input_to VAR FILE SOURCE_DIR EXTRAS_VAR: an input file the options name
# (configs, sweep), as the login node's side will see it: its path in the project when it
# lies inside it, else a copy in .hpc_remote/ (EXTRAS_VAR collects those to copy).
_hpc_remote_input_to() {
  local -n _in=$1 _extras=$4
  local file=$2 src=$3 abs
  [[ $file == /* ]] && abs=$file || abs=$PWD/$file
  [[ -f $abs ]] || die_usage "--configs/--sweep file '$file' not found (it is copied to the login node from here)"
  abs=$(realpath -- "$abs")
  if [[ $abs == "$src"/* ]]; then
    _in=${abs#"$src"/}
  else
    _extras+=("$abs")
    _in=.hpc_remote/${abs##*/}
  fi
}

# hpc_remote_args_to VAR SOURCE_DIR EXTRAS_VAR LIST ARGS...: the options for the login
# node's job_submitter.sh: --remote HOST out, --remote none in (so the profile's
# HPC_REMOTE does not send it on again), input files as that side sees them (listed in LIST
# to copy when inside the project).
hpc_remote_args_to() {
  local -n _args=$1
  local src=$2 extras_var=$3 list=$4 word value
  shift 4
  _args=(--remote none)
  while (($#)); do
    word=$1
    shift
    case $word in
      --remote) shift ;;
      --remote=*) ;;
      -f | --configs | --sweep)
        (($#)) || die_usage "option $word needs a value"
        _hpc_remote_input_to value "$1" "$src" "$extras_var"
        shift
        [[ $value == .hpc_remote/* ]] || printf '%s\0' "$value" >>"$list"
        _args+=("$word" "$value")
        ;;
      --configs=* | --sweep=*)
        _hpc_remote_input_to value "${word#*=}" "$src" "$extras_var"
        [[ $value == .hpc_remote/* ]] || printf '%s\0' "$value" >>"$list"
        _args+=("${word%%=*}=$value")
        ;;
      *) _args+=("$word") ;;
    esac
  done
}

# _hpc_remote_code_record SOURCE_DIR LIST DIR: the code record the copy carries, in DIR
# (copied to .hpc_remote/ there): code.record (the laptop's commit, branch and tree of the
# working files), code.diff (`git diff HEAD`) and code.files.new (what was copied: it
# becomes code.files there once the files the last copy had and this one lacks, removed on
# the laptop since, are removed from the copy too). The copy is
# no repository: the login node's side records the laptop's commit from these
# (coderecord.sh), and --snapshot copies the listed files.
_hpc_remote_code_record() {
  local src=$1 list=$2 dir=$3 commit="" branch="" stash tree="" host
  if commit=$(git -C "$src" rev-parse --verify -q HEAD 2>/dev/null); then
    branch=$(git -C "$src" rev-parse --abbrev-ref HEAD 2>/dev/null) || branch=""
    stash=$(git -C "$src" stash create 2>/dev/null) || stash=""
    tree=$(git -C "$src" rev-parse "${stash:-HEAD}^{tree}" 2>/dev/null) || tree=""
    git -C "$src" diff HEAD >"$dir/code.diff" 2>/dev/null || : >"$dir/code.diff"
  else
    commit="" && : >"$dir/code.diff"
  fi
  host=$(uname -n 2>/dev/null) || host=laptop
  printf 'commit: %s\nbranch: %s\ntree: %s\nfrom: %s:%s\n' "$commit" "$branch" "$tree" "$host" "$src" >"$dir/code.record"
  cp -- "$list" "$dir/code.files.new"
}

# _hpc_remote_words_to VAR WORD...: the words as one POSIX shell command line.
_hpc_remote_words_to() {
  local -n _w=$1
  local word q
  shift
  _w=""
  for word; do
    quote_to q "$word"
    _w+="${_w:+ }$q"
  done
}

# hpc_remote_submit SOURCE_DIR ARGS...: copy the code, run job_submitter.sh on the login
# node with ARGS (less --remote), print what it printed; returns its exit code.
hpc_remote_submit() {
  local src=$1 host dir dir_word ssh rsh list extras=() args said rc=0 script line
  shift
  hpc_remote_host_to host
  [[ $host != -* ]] || die_usage "--remote '$host' is not a host name"
  has_newline "$host" && die_usage "--remote holds a newline"
  hpc_remote_dir_to dir "$src"
  _hpc_remote_dir_word_to dir_word "$dir"
  command -v ssh >/dev/null || die "ssh not found on PATH: install OpenSSH's client to submit with --remote"
  command -v rsync >/dev/null || die "rsync not found on PATH: install rsync to submit with --remote"
  hpc_remote_ssh_to ssh
  list=$(mktemp "${TMPDIR:-/tmp}/hpc_remote.XXXXXX") || die "cannot create a temporary file"
  hpc_remove_at_exit "$list"
  hpc_remote_args_to args "$src" extras "$list" "$@"
  _hpc_remote_list_files "$src" "$list.code"
  hpc_remove_at_exit "$list.code"
  cat -- "$list" >>"$list.code"
  mkdir -- "$list.record" || die "cannot create $list.record"
  hpc_remove_at_exit "$list.record"
  _hpc_remote_code_record "$src" "$list.code" "$list.record"
  extras+=("$list.record/code.record" "$list.record/code.diff" "$list.record/code.files.new")

  # 1. The connection (opened here, reused below) and what the login node must have.
  said=$("${ssh[@]}" "$host" 'command -v rsync >/dev/null 2>&1 || echo "no rsync"' 2>&1) || rc=$?
  if ((rc == 255)); then
    line=$(printf '%s\n' "$said" | grep -v '^$' | tail -1)
    HPC_DIE_STATUS=1 die "cannot reach $host over ssh (${line:-no answer}): check that 'ssh $host' works from here${HPC_SSH_CONFIG:+ (with -F $HPC_SSH_CONFIG)}"
  fi
  [[ $said != *"no rsync"* ]] || HPC_DIE_STATUS=1 die "$host has no rsync: ask its admins, or copy the project there yourself and submit on it"

  # 2. The code, over the same connection.
  _hpc_remote_words_to rsh "${ssh[@]}"
  say "copying the project's code to $host:$dir"
  local dest=${dir#\~/}
  [[ $dir != "~" ]] || dest=.
  rsync -rlptz --from0 --files-from="$list.code" --exclude=__pycache__ -e "$rsh" \
    --rsync-path="mkdir -p -- $dir_word && rsync" -- "$src/" "$host:$dest/" ||
    HPC_DIE_STATUS=1 die "rsync to $host:$dir failed (exit $?): nothing submitted"
  if ((${#extras[@]})); then # (never empty: the code record)
    rsync -ptz -e "$rsh" --rsync-path="mkdir -p -- $dir_word/.hpc_remote && rsync" -- "${extras[@]}" "$host:$dest/.hpc_remote/" ||
      HPC_DIE_STATUS=1 die "rsync to $host:$dir/.hpc_remote failed: nothing submitted"
  fi

  # 3. job_submitter.sh there, in a login shell (the cluster's own environment), with the
  # options as words: nothing of this machine's environment goes along.
  # shellcheck disable=SC2016 # expanded on the login node
  script='d=$1; shift; case $d in "~") d=$HOME ;; "~/"*) d=$HOME/${d#"~/"} ;; esac
cd -- "$d" 2>/dev/null || { echo "job_submitter.sh: no folder $d on $(hostname)" >&2; exit 1; }
[ -f hpc_files/job_submitter.sh ] || { echo "job_submitter.sh: no toolkit in $d on $(hostname) (hpc_files/job_submitter.sh)" >&2; exit 1; }
r=.hpc_remote
if [ -f $r/code.files.new ]; then
  if [ -f $r/code.files ]; then
    comm -z -23 <(sort -z $r/code.files) <(sort -z $r/code.files.new) | while IFS= read -r -d "" f; do
      case /$f/ in */../* | //*) continue ;; esac
      [ ! -f "$f" ] || rm -f -- "$f"
    done
  fi
  mv -f -- $r/code.files.new $r/code.files
fi
exec bash hpc_files/job_submitter.sh "$@"'
  local cmd
  _hpc_remote_words_to cmd bash -lc "$script" hpc-remote "$dir" "${args[@]}"
  rc=0
  "${ssh[@]}" "$host" "$cmd" || rc=$?
  if ((rc == 255)); then
    HPC_DIE_STATUS=1 die "the connection to $host was lost (ssh exit 255): 'hpc status --remote $host' tells whether the job was submitted"
  fi
  ((rc == 0)) || warn "job_submitter.sh on $host exited $rc"
  return "$rc"
}
