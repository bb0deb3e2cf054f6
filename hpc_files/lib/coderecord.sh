# shellcheck shell=bash
# The code each job ran: the project's git commit, branch, `git diff HEAD` and untracked
# files' names, recorded in the submission's home (code.git and code.diff, job_lib.sh); the job
# log names the commit (HPC_GIT_COMMIT). --snapshot runs the job from a content-addressed
# copy of the tracked files (as they are now, edits included) under
# $SCRATCH/<project>/hpc_outputs/snapshots/<tree hash>, so edits made while the job waits
# do not change what it runs. Without git: record nothing, never fail; the job log says
# that the code is not recorded.

# hpc_code_settle: J_GIT_COMMIT and J_GIT_BRANCH ("" outside git); --snapshot needs git.
hpc_code_settle() {
  J_GIT_COMMIT="" J_GIT_BRANCH="" J_SNAPSHOT_DIR="" J_SNAPSHOT_TREE="" J_CODE_FROM="" J_CODE_TREE=""
  local out err="" refused=""
  # One git process, and only for a project in a repository (a .git in it or a folder
  # above, or GIT_DIR set): HEAD's commit and its branch ("HEAD" when detached); it fails
  # in a repository with no commit yet.
  if _hpc_code_in_repo "$J_SOURCE_DIR" && command -v git >/dev/null; then
    err=$(mktemp "${TMPDIR:-/tmp}/hpc_git.XXXXXX" 2>/dev/null) || err=/dev/null
    if out=$(git -C "$J_SOURCE_DIR" rev-parse HEAD --abbrev-ref HEAD 2>"$err") &&
      [[ $out =~ ^([0-9a-f]{40,64})$'\n'(.+)$ ]]; then
      J_GIT_COMMIT=${BASH_REMATCH[1]} J_GIT_BRANCH=${BASH_REMATCH[2]}
      [[ $J_GIT_BRANCH != HEAD ]] || J_GIT_BRANCH="(detached)"
    elif [[ $err != /dev/null ]]; then
      _hpc_code_refused_to refused "$(<"$err")"
    fi
    [[ $err == /dev/null ]] || rm -f -- "$err"
  fi
  [[ -n $J_GIT_COMMIT ]] || _hpc_code_from_remote
  if [[ -z $J_GIT_COMMIT && -n $refused ]]; then
    # Git's safe.directory check (2.35.2+): a repository owned by another user is not read.
    ((OPT_SNAPSHOT == 0)) || die_usage "--snapshot copies the project's git-tracked files, but $refused"
    warn "$refused; the code this job runs is not recorded"
  elif [[ -z $J_GIT_COMMIT ]]; then
    ((OPT_SNAPSHOT == 0)) ||
      die_usage "--snapshot copies the project's git-tracked files, but $J_SOURCE_DIR is not in a git repository with a commit (git init && git add -A && git commit), or git is missing: drop --snapshot"
    # Said in the job's log (job_runtime.sh), not here: a submission outside git is normal.
  fi
}

# _hpc_code_refused_to VAR GIT_STDERR: when git refused the repository as another user's
# ("detected dubious ownership in repository at 'DIR'"), VAR says so and what to do; else "".
_hpc_code_refused_to() {
  local -n _why=$1
  local repo owner
  _why=""
  [[ $2 =~ dubious\ ownership\ in\ repository\ at\ \'([^$'\n']*)\' ]] || return 0
  repo=${BASH_REMATCH[1]}
  owner=$(stat -c %U -- "$repo" 2>/dev/null) || owner="another user"
  _why="git refuses to read the repository $repo: it belongs to $owner, not to you (git's \"dubious ownership\" check). If you trust it: git config --global --add safe.directory $repo (or copy the project into a folder of your own)"
}

# _hpc_code_from_remote: a copy made by --remote (remote.sh) is no repository; the record it
# carries (.hpc_remote/code.record) names the commit, branch and working-tree hash the
# laptop's repository had (J_CODE_FROM: where from; J_CODE_TREE: for --snapshot).
_hpc_code_from_remote() {
  local record=$J_SOURCE_DIR/.hpc_remote/code.record line value
  [[ -f $record && -f $J_SOURCE_DIR/.hpc_remote/code.files ]] || return 0
  while IFS= read -r line; do
    value=${line#*: }
    case $line in
      "commit: "*) [[ ! $value =~ ^[0-9a-f]{40,64}$ ]] || J_GIT_COMMIT=$value ;;
      "branch: "*) has_newline "$value" || J_GIT_BRANCH=$value ;;
      "tree: "*) [[ ! $value =~ ^[0-9a-f]{40,64}$ ]] || J_CODE_TREE=$value ;;
      "from: "*) J_CODE_FROM=$value ;;
    esac
  done <"$record"
  [[ -n $J_GIT_COMMIT && -n $J_CODE_TREE ]] || J_GIT_COMMIT="" J_GIT_BRANCH="" J_CODE_TREE="" J_CODE_FROM=""
}

# _hpc_code_in_repo DIR: DIR may be in a git repository: GIT_DIR is set, or DIR or a folder
# above it holds .git (a folder, or a file: a worktree, a submodule). Builtins only.
_hpc_code_in_repo() {
  local d=$1
  [[ -z ${GIT_DIR:-} ]] || return 0
  while :; do
    [[ ! -e $d/.git ]] || return 0
    [[ $d == */* && -n ${d%/*} ]] || break
    d=${d%/*}
  done
  [[ -e /.git ]]
}

# hpc_code_plan_snapshot: with --snapshot, the folder the job runs from (J_SOURCE_DIR):
# one per distinct content of the tracked files (working-tree contents), named by their
# git tree. Part of the plan: named here, copied by hpc_code_snapshot just before sbatch.
hpc_code_plan_snapshot() {
  ((OPT_SNAPSHOT)) || return 0
  local stash tree=$J_CODE_TREE # --remote: the laptop's, named there
  # A commit of the working tree's tracked files (HEAD's own when nothing changed).
  if [[ -z $tree ]]; then
    stash=$(git -C "$J_PROJECT_DIR" stash create 2>/dev/null) || stash=""
    tree=$(git -C "$J_PROJECT_DIR" rev-parse "${stash:-HEAD}^{tree}") || die "git could not name the project's files for --snapshot"
  fi
  J_SNAPSHOT_TREE=$tree
  hpc_outputs_dir_to J_SNAPSHOT_DIR "$J_SCRATCH_DIR"
  J_SNAPSHOT_DIR+=/snapshots/$tree
  J_SOURCE_DIR=$J_SNAPSHOT_DIR
}

# hpc_code_snapshot: with --snapshot, copy the tracked files to J_SNAPSHOT_DIR once.
hpc_code_snapshot() {
  ((OPT_SNAPSHOT)) || return 0
  local src=$J_PROJECT_DIR dir=$J_SNAPSHOT_DIR tmp part
  if [[ ! -d $dir ]]; then
    mkdir -p -- "${dir%/*}" || die "cannot create ${dir%/*}"
    tmp=$dir.tmp.$$
    local copied=1 mask
    # A copy of the code is private (umask 077 while it is made: the folder 700, its files
    # 600 or 700), as the --data archives are, whatever the project's modes: only the
    # user's own jobs read it.
    mask=$(umask)
    umask 077
    if [[ -n $J_CODE_TREE ]]; then # --remote: the files the laptop sent (no repository here)
      { mkdir -p -- "$tmp" && tar -C "$src" --null -T "$src/.hpc_remote/code.files" -cf - | tar -x -C "$tmp"; } || copied=0
    else
      { mkdir -p -- "$tmp" && git -C "$src" archive --format=tar "$J_SNAPSHOT_TREE" | tar -x -C "$tmp"; } || copied=0
    fi
    if ((copied == 0)); then
      umask "$mask"
      rm -rf -- "$tmp"
      die "could not copy the project's tracked files to $dir for --snapshot"
    fi
    # The toolkit itself must be there even when the project does not track it.
    for part in hpc_files virtual_env_hpc_files singularity_hpc_files; do
      [[ ! -d $src/$part || -e $tmp/$part ]] || cp -R -- "$src/$part" "$tmp/$part"
    done
    umask "$mask"
    mv -T -- "$tmp" "$dir" 2>/dev/null || rm -rf -- "$tmp" # another submission made it first
  elif [[ -O $dir ]]; then
    # One made open by an older version is made private when it is used again.
    chmod go-rwx -- "$dir" 2>/dev/null || true
  fi
  say "snapshot: the job runs the project's tracked files as copied to $dir"
}

# hpc_code_record: after a successful submission, the code record in its home (job_lib.sh:
# code.git, and code.diff for uncommitted changes).
hpc_code_record() {
  [[ -n $J_GIT_COMMIT ]] || return 0
  # The project's own folder, also with --snapshot.
  local src=$J_PROJECT_DIR record diff_file text diff untracked
  hpc_home_path_to record "$J_HOME" code
  hpc_home_path_to diff_file "$J_HOME" diff
  if [[ -n $J_CODE_FROM ]]; then # --remote: the laptop's diff, sent with the copy
    diff=$(<"$src/.hpc_remote/code.diff") || diff=""
    untracked="" src+=" (copied by --remote from $J_CODE_FROM)"
  else
    diff=$(git -C "$src" diff HEAD 2>/dev/null) || diff=""
    untracked=$(git -C "$src" ls-files --others --exclude-standard 2>/dev/null) || untracked=""
  fi
  printf -v text 'commit: %s\nbranch: %s\nproject: %s\nsnapshot: %s\nuncommitted changes: %s\nuntracked files:\n%s' \
    "$J_GIT_COMMIT" "$J_GIT_BRANCH" "$src" "${J_SNAPSHOT_DIR:-none}" \
    "$([[ -n $diff ]] && printf 'yes (%s)' "$diff_file" || printf none)" "${untracked:+$untracked$'\n'}"
  _write_atomic "$record" "$text" 2>/dev/null || warn "could not write $record"
  # The diff is a copy of the code: private (umask 077 for its creation only, in a subshell).
  [[ -z $diff ]] || (umask 077 && _write_atomic "$diff_file" "$diff"$'\n') 2>/dev/null || warn "could not write $diff_file"
}
