# shellcheck shell=bash
# --data, submit side: judge the paths to stage (relative to $SCRATCH/<project>), then
# build or reuse ONE compressed tar archive of them under $SCRATCH/<project>/.hpc_staging/,
# which the job extracts into $SLURM_TMPDIR on every node (virtual_env_hpc_files/staging.sh).
# Also settles --results-dir and --sync-every. Without --data nothing here starts a process.
#
# Files (KEY = 16 hex digits of the sha256 of the sorted paths; SHA = the first 16 of the
# manifest's sha256: archives are named by their content, so a later submission with
# changed data never replaces the archive an earlier, still queued job will extract):
#   .hpc_staging/KEY-SHA.tar.zst|.tar.gz|.tar  the archive (written to a temporary name,
#                                             then renamed: it is whole or absent)
#   .hpc_staging/KEY-SHA.state    "MANIFEST_SHA256 ARCHIVE_NAME BYTES ENTRIES SIZE"
#   .hpc_staging/KEY-SHA.jobs     the ids of the jobs submitted with that archive
#   .hpc_staging/KEY.lock         flock(1) lock: one builder (and pruner) at a time
# The manifest is every staged entry's type, size, modification time (ns), path and link
# target; an archive is reused while a submission's manifest hash is the one it is named by.
# Pruning (at each build or reuse): an archive is removed once no job in its KEY-SHA.jobs
# is still queued or running (squeue) and it was last submitted more than
# HPC_STAGING_KEEP_MIN minutes ago; one without a job list (older versions) only while the
# user has no job in the queue at all; when squeue cannot be asked nothing is removed. Every
# field read back from these files is checked first (they may have been edited).

HPC_STAGING_DIRNAME=.hpc_staging
# Progress of the archive build on a terminal, above this many MiB of data.
HPC_DATA_PROGRESS_MIB=${HPC_DATA_PROGRESS_MIB:-64}
# Minutes an archive is kept after its last submission, even once its jobs have ended
# (a submission between its build and its sbatch has no job id yet).
HPC_STAGING_KEEP_MIN=${HPC_STAGING_KEEP_MIN:-30}

# _hpc_results_settle: --results-dir (J_RESULTS_FOLDER) and --sync-every (J_SYNC_EVERY_S).
_hpc_results_settle() {
  J_RESULTS_FOLDER=${OPT_RESULTS_DIR:-results}
  if [[ $J_RESULTS_FOLDER != none ]]; then
    has_newline "$J_RESULTS_FOLDER" && die "--results-dir must be one line"
    # Relative to $SLURM_TMPDIR only: an absolute folder (on $SCRATCH, say) would be
    # copied into itself by every sync, and '..' leaves the job's own folder.
    [[ $J_RESULTS_FOLDER != /* ]] ||
      die "--results-dir '$J_RESULTS_FOLDER' is an absolute path: give a folder relative to \$SLURM_TMPDIR on the node's local disk (e.g. results); it is copied back to \$SCRATCH/<project>/<exp>/results for you"
    [[ /$J_RESULTS_FOLDER/ != */../* ]] ||
      die "--results-dir '$J_RESULTS_FOLDER' holds '..': give a folder inside \$SLURM_TMPDIR (e.g. results)"
    [[ ${J_RESULTS_FOLDER//[\/.]/} != "" ]] ||
      die "--results-dir '$J_RESULTS_FOLDER' names no folder: give e.g. results, or none to copy nothing back"
  fi
  J_SYNC_EVERY_S=0
  [[ -n $OPT_SYNC_EVERY ]] || return 0
  [[ $J_RESULTS_FOLDER != none ]] || die "--sync-every needs a results folder: drop --results-dir none"
  local whole frac
  [[ $OPT_SYNC_EVERY =~ ^([0-9]{0,9})(\.([0-9]{1,3}))?$ && -n ${OPT_SYNC_EVERY//./} ]] ||
    die "--sync-every '$OPT_SYNC_EVERY' is not a number of minutes (e.g. 10, or 0.5 for 30 s)"
  whole=${BASH_REMATCH[1]:-0} frac=${BASH_REMATCH[3]}000
  J_SYNC_EVERY_S=$((10#$whole * 60 + 10#${frac:0:3} * 60 / 1000))
  ((J_SYNC_EVERY_S >= 1)) || die "--sync-every '$OPT_SYNC_EVERY' is shorter than a second: give minutes, e.g. 10"
}

# _hpc_data_normalize_to VAR RAW: RAW as a clean path relative to $J_SCRATCH_DIR, or die.
_hpc_data_normalize_to() {
  local -n _rel=$1
  local raw=$2 path part parts=() out=()
  [[ -n $raw ]] || die "--data got an empty path: give paths relative to $J_SCRATCH_DIR"
  has_newline "$raw" &&
    die "--data: a path holds a newline; stage the folder that contains it instead (names inside staged folders may hold anything)"
  path=$raw
  if [[ $path == /* ]]; then
    local root=$J_SCRATCH_DIR
    # $SCRATCH may be a link (/scratch/u -> /lustre/scratch/u): accept either spelling.
    [[ $path == "$root" || $path == "$root"/* ]] || root=$(realpath -m -- "$root")
    [[ $path == "$root" || $path == "$root"/* ]] ||
      die "--data '$raw' is outside $J_SCRATCH_DIR: only data there can be staged; copy it there, and give paths relative to that folder (e.g. --data datasets/imagenet)"
    path=${path#"$root"}
  fi
  IFS=/ read -r -a parts <<<"$path"
  for part in "${parts[@]}"; do
    case $part in
      "" | .) ;;
      ..) die "--data '$raw' holds '..': give paths inside $J_SCRATCH_DIR, relative to it" ;;
      *) out+=("$part") ;;
    esac
  done
  ((${#out[@]})) || die "--data '$raw' names $J_SCRATCH_DIR itself: give the folders or files inside it to stage"
  [[ ${out[0]} != "$HPC_STAGING_DIRNAME" && ${out[0]} != "$HPC_OUTPUTS_NAME" ]] ||
    die "--data '$raw' is inside the toolkit's own folder ${out[0]}: stage your data, not that"
  local IFS=/
  _rel="${out[*]}"
}

# _hpc_data_check_links FILE WHAT [ROOT...]: die when a symlink named in FILE (NUL list of
# paths) resolves outside $J_SCRATCH_DIR, or outside every ROOT when ROOTs are given (the
# staged paths: a link inside them to a part of the project that is not staged dangled on
# the node, "No such file or directory" after the wait in the queue). WHAT says where the
# links were found.
_hpc_data_check_links() {
  local file=$1 what=$2 links=() targets=() i bad=() l r root_real roots=() ok where
  mapfile -d '' links <"$file"
  ((${#links[@]})) || return 0
  if (($# > 2)); then
    mapfile -d '' roots < <(realpath -z -e -- "${@:3}")
    where="the staged paths (--data ${J_DATA[*]})"
  else
    root_real=$(realpath -e -- "$J_SCRATCH_DIR") || die "cannot resolve $J_SCRATCH_DIR"
    roots=("$root_real") where=$J_SCRATCH_DIR
  fi
  mapfile -d '' targets < <(realpath -z -m -- "${links[@]}")
  ((${#targets[@]} == ${#links[@]})) || die "--data: could not resolve the symbolic links of the staged data (realpath failed)"
  for i in "${!links[@]}"; do
    ok=0
    for r in "${roots[@]}"; do
      [[ ${targets[i]} == "$r" || ${targets[i]} == "$r"/* ]] && ok=1 && break
    done
    ((ok == 0)) || continue
    printf -v l '%q' "${links[i]#"$J_SCRATCH_DIR"/}"
    printf -v r '%q' "${targets[i]}"
    bad+=("$l -> $r")
  done
  ((${#bad[@]} == 0)) && return 0
  local shown more=""
  printf -v shown '  %s\n' "${bad[@]:0:5}"
  ((${#bad[@]} <= 5)) || more=$'  ...\n'
  die "--data: ${#bad[@]} symbolic link(s) $what point outside $where, so their data would not be staged:
$shown${more}Stage what they lead to too (add it to --data), copy that data into the staged folders, or remove the links"
}

# _hpc_data_walk TMPDIR ABSPATHS...: one find(1) walk (the only per-file work of a
# resubmission): the content manifest goes straight into sha256sum (J_DATA_SHA), the
# symbolic links into TMPDIR/links.
_hpc_data_walk() {
  local t=$1
  shift
  J_DATA_SHA=$(find "$@" -printf '%y %s %T@ %p\0%l\0' -type l -fprint0 "$t/links" 2>"$t/errors" |
    sha256sum) || die "--data: cannot read all of the staged data: $(head -c 2000 "$t/errors")"
  J_DATA_SHA=${J_DATA_SHA%% *}
}

# _hpc_data_tally ABSPATHS...: J_DATA_BYTES (space needed when extracted: sizes rounded up
# to 4 KiB, 4 KiB per folder or link), J_DATA_ENTRIES and J_DATA_SIZE (apparent bytes).
# A second walk, only for data whose archive must be built.
_hpc_data_tally() {
  local special
  read -r J_DATA_ENTRIES J_DATA_SIZE J_DATA_BYTES special < <(find "$@" -printf '%y %s\n' | awk '
    { n++; if ($1 == "f") { s += $2; b += int(($2 + 4095) / 4096) * 4096 }
      else { b += 4096; if ($1 != "d" && $1 != "l") x++ } }
    END { printf "%d %.0f %.0f %d\n", n, s, b, x }')
  [[ $special =~ ^[0-9]+$ ]] || die "--data: cannot read all of the staged data (find or awk failed)"
  ((special == 0)) ||
    die "--data: $special entries are not files, folders or links (pipes, sockets, devices) and cannot be staged; find them with: find PATH ! -type f ! -type d ! -type l"
}

# _hpc_data_judge_paths: J_DATA = the --data paths, normalized, without duplicates,
# sorted (the same paths in any order or spelling make the same manifest and key), each
# existing and not a link; HPC_DATA_LINKED = those with a link in a middle part.
_hpc_data_judge_paths() {
  local raw rel other full part prefix parts=() i
  HPC_DATA_LINKED=()
  for raw in "${OPT_DATA[@]}"; do
    _hpc_data_normalize_to rel "$raw"
    for other in "${J_DATA[@]}"; do
      [[ $rel != "$other" ]] || continue 2 # the same path twice: once is enough
      [[ $rel != "$other"/* ]] || die "--data '$rel' is inside '$other': give only '$other'"
      [[ $other != "$rel"/* ]] || die "--data '$other' is inside '$rel': give only '$rel'"
    done
    for ((i = ${#J_DATA[@]}; i > 0; i--)); do
      [[ ${J_DATA[i - 1]} > $rel ]] || break
      J_DATA[i]=${J_DATA[i - 1]}
    done
    J_DATA[i]=$rel
  done
  for rel in "${J_DATA[@]}"; do
    full=$J_SCRATCH_DIR/$rel
    [[ ! -L $full ]] ||
      die "--data '$rel' is a symbolic link: give the path it points to instead (links inside staged folders are kept as links)"
    [[ -e $full ]] || die "--data '$rel' not found: $full does not exist (--data paths are relative to $J_SCRATCH_DIR)"
    prefix=$J_SCRATCH_DIR
    IFS=/ read -r -a parts <<<"$rel"
    for part in "${parts[@]}"; do
      prefix+=/$part
      if [[ -L $prefix ]]; then
        HPC_DATA_LINKED+=("$full")
        break
      fi
    done
  done
}

# _hpc_data_name_key: J_DATA_KEY (the set of paths) and the compressor.
_hpc_data_name_key() {
  J_DATA_KEY=$(printf '%s\0' "${J_DATA[@]}" | sha256sum) || die "sha256sum failed"
  J_DATA_KEY=${J_DATA_KEY:0:16}
  hpc_data_compressor_to HPC_DATA_COMPRESSOR
}

# _hpc_data_name_archive: J_DATA_ARCHIVE, J_DATA_STATE and J_DATA_JOBS, named by the key
# and the manifest's hash (J_DATA_SHA, from the walk).
_hpc_data_name_archive() {
  local ext=tar base
  case $HPC_DATA_COMPRESSOR in
    zstd) ext=tar.zst ;;
    pigz) ext=tar.gz ;;
  esac
  base=$J_SCRATCH_DIR/$HPC_STAGING_DIRNAME/$J_DATA_KEY-${J_DATA_SHA:0:16}
  J_DATA_ARCHIVE=$base.$ext J_DATA_STATE=$base.state J_DATA_JOBS=$base.jobs
}

# hpc_staging_settle: judge --data and walk the data once (read-only). Sets J_DATA (the
# relative paths), J_DATA_KEY, J_DATA_ARCHIVE, J_DATA_BYTES, J_DATA_SHA and the results
# settings. Writes nothing: --dry-run stops after this.
hpc_staging_settle() {
  J_DATA=() J_DATA_ARCHIVE="" J_DATA_BYTES=0 J_DATA_SHA="" J_DATA_KEY="" J_DATA_STATE=""
  J_DATA_JOBS="" J_DATA_ENTRIES=0
  _hpc_results_settle
  ((${#OPT_DATA[@]})) || return 0
  HPC_DATA_T0=$EPOCHREALTIME
  _hpc_data_judge_paths
  _hpc_data_name_key
  HPC_DATA_TMP=$(mktemp -d "${TMPDIR:-/tmp}/hpc_data.XXXXXX") || die "cannot create a temporary folder in ${TMPDIR:-/tmp}"
  # Removed below, or at exit when a check dies.
  hpc_remove_at_exit "$HPC_DATA_TMP"
  local t=$HPC_DATA_TMP rel abs=()
  if ((${#HPC_DATA_LINKED[@]})); then
    printf '%s\0' "${HPC_DATA_LINKED[@]}" >"$t/top"
    _hpc_data_check_links "$t/top" "in the --data paths"
  fi
  for rel in "${J_DATA[@]}"; do
    abs+=("$J_SCRATCH_DIR/$rel")
  done
  _hpc_data_walk "$t" "${abs[@]}"
  _hpc_data_name_archive
  _hpc_data_check_links "$t/links" "inside the staged folders" "${abs[@]}"
  # An unchanged manifest was tallied when its archive was built: no second walk.
  _hpc_data_state_matches || _hpc_data_tally "${abs[@]}"
  rm -rf -- "$t"
  hpc_keep_at_exit "$t"
  ((OPT_DRY_RUN == 0)) || _hpc_data_say_plan
}

# hpc_data_compressor_to VAR: zstd (-T0), pigz or none; HPC_DATA_COMPRESS=zstd|pigz|none
# overrides the first one found on PATH.
hpc_data_compressor_to() {
  local -n _c=$1
  local want=${HPC_DATA_COMPRESS:-auto}
  case $want in
    auto)
      if command -v zstd >/dev/null; then
        _c=zstd
      elif command -v pigz >/dev/null; then
        _c=pigz
      else
        _c=none
      fi
      ;;
    zstd | pigz)
      command -v "$want" >/dev/null || die "HPC_DATA_COMPRESS=$want, but $want is not on PATH: install it or use HPC_DATA_COMPRESS=none"
      _c=$want
      ;;
    none) _c=none ;;
    *) die "HPC_DATA_COMPRESS must be auto, zstd, pigz or none, not '$want'" ;;
  esac
}

# _hpc_data_state_matches: KEY.state holds this manifest's hash and names this archive,
# which exists; then J_DATA_BYTES, J_DATA_ENTRIES and J_DATA_SIZE come from it.
_hpc_data_state_matches() {
  local sha name bytes entries size
  [[ -f $J_DATA_STATE && -f $J_DATA_ARCHIVE ]] || return 1
  read -r sha name bytes entries size <"$J_DATA_STATE" || return 1
  # The file may have been edited: every field is checked before it is used (the counts
  # reach bash arithmetic here and in the job). A bad one means: build the archive again.
  [[ $sha == "$J_DATA_SHA" && $name == "${J_DATA_ARCHIVE##*/}" ]] || return 1
  { is_size "$bytes" && is_size "$entries" && is_size "$size"; } || return 1
  J_DATA_BYTES=$((10#$bytes)) J_DATA_ENTRIES=$((10#$entries)) J_DATA_SIZE=$((10#$size))
}

_hpc_data_elapsed_ms() {
  local now=${EPOCHREALTIME/[.,]/} t0=${HPC_DATA_T0/[.,]/}
  printf '%d' $(((now - t0) / 1000))
}

_hpc_data_say_plan() {
  local size what="would be built"
  _hpc_data_state_matches && what="is up to date (would be reused)"
  human_bytes_to size "$J_DATA_SIZE"
  say "data: ${#J_DATA[@]} path(s), $J_DATA_ENTRIES entries, $size; archive $J_DATA_ARCHIVE $what"
}

# hpc_staging_build: make sure the archive holds the data as walked by hpc_staging_settle:
# reuse it when its manifest is unchanged, else rebuild it. One builder at a time (flock);
# a second submission of the same data waits, then reuses.
# hpc_staging_lock_to FD_VAR NAME WAITING: the staging folder made, and its lock NAME.lock
# held on a new descriptor (FD_VAR), one builder of an archive at a time; WAITING is said
# while another submission holds it. --data's archives and --venv-to-local's (venv_local.sh).
hpc_staging_lock_to() {
  local -n _fd=$1
  local dir=$J_SCRATCH_DIR/$HPC_STAGING_DIRNAME
  [[ -d $dir ]] || mkdir -p -- "$dir" || die "cannot create $dir: check that \$SCRATCH is writable"
  hpc_staging_private "$dir"
  command -v flock >/dev/null || die "flock (util-linux) is not on PATH; it keeps two submissions from writing the same archive"
  exec {_fd}>>"$dir/$2.lock" || die "cannot open the lock file $dir/$2.lock"
  if ! flock -n "$_fd"; then
    say "$3"
    flock "$_fd" || die "could not lock $dir/$2.lock"
  fi
}

# hpc_staging_private PATH...: PATH (the staging folder, an archive) readable by this user
# alone (issue 32): the archives hold copies of data and venvs that may be private, and
# only this user's jobs read them. An earlier version's 0755 folder or 0644 archive is
# made private too; another user's file is left alone.
hpc_staging_private() {
  local p
  for p; do
    [[ -O $p && ! -L $p ]] || continue
    if [[ -d $p ]]; then chmod 700 -- "$p"; else chmod 600 -- "$p"; fi 2>/dev/null || true
  done
}

hpc_staging_build() {
  ((${#J_DATA[@]})) || return 0
  local dir=$J_SCRATCH_DIR/$HPC_STAGING_DIRNAME fd size
  local state=$J_DATA_STATE
  hpc_staging_lock_to fd "$J_DATA_KEY" "data: another submission is building this archive; waiting for it"
  human_bytes_to size "$J_DATA_SIZE"
  if _hpc_data_state_matches; then
    # Its last submission is now: a prune must not take it before sbatch records the job.
    touch -c -- "$J_DATA_ARCHIVE" 2>/dev/null || true
    hpc_staging_private "$J_DATA_ARCHIVE" "$state"
    _hpc_data_prune "$dir"
    exec {fd}>&-
    say "data: archive $J_DATA_ARCHIVE is up to date ($J_DATA_ENTRIES entries, $size): reused (decided in $(_hpc_data_elapsed_ms) ms)"
    return 0
  fi
  say "data: building $J_DATA_ARCHIVE ($J_DATA_ENTRIES entries, $size, compressor: $HPC_DATA_COMPRESSOR)"
  local started=$SECONDS
  rm -f -- "$state"
  _hpc_data_write_archive "$dir"
  local old base=${J_DATA_ARCHIVE%.tar*}
  # The same content with another compressor: the new archive replaces it.
  for old in "$base".tar "$base".tar.*; do
    [[ $old == "$J_DATA_ARCHIVE" || ! -e $old ]] || rm -f -- "$old"
  done
  if ! (umask 077 && printf '%s %s %s %s %s\n' "$J_DATA_SHA" "${J_DATA_ARCHIVE##*/}" "$J_DATA_BYTES" \
    "$J_DATA_ENTRIES" "$J_DATA_SIZE" >"$state.tmp.$$") ||
    ! mv -f -- "$state.tmp.$$" "$state"; then
    rm -f -- "$state.tmp.$$"
    die "cannot write $state"
  fi
  _hpc_data_prune "$dir"
  exec {fd}>&-
  local packed
  human_bytes_to packed "$(stat -c %s -- "$J_DATA_ARCHIVE")"
  say "data: archive built in $((SECONDS - started)) s ($packed)"
}

# hpc_staging_record_job JOB_ID: the archive is referred to by this job (one short append
# to KEY-SHA.jobs, after sbatch accepted it).
hpc_staging_record_job() {
  [[ -n ${J_DATA_JOBS:-} ]] || return 0
  printf '%s\n' "$1" >>"$J_DATA_JOBS" ||
    warn "job $1 submitted, but $J_DATA_JOBS could not be updated: its archive may be pruned while the job waits"
}

# _hpc_data_queued JOBS_FILE: true when a job listed in JOBS_FILE is still queued or
# running, or when that cannot be known (squeue failed). Lines that are not job ids are
# ignored (the file may have been edited).
_hpc_data_queued() {
  local ids=() id out rc=0
  while IFS= read -r id; do
    [[ $id =~ ^[1-9][0-9]{0,9}$ ]] && ids+=("$id")
  done <"$1"
  ((${#ids[@]})) || return 1
  local IFS=,
  out=$(squeue -h -o %i -j "${ids[*]}" 2>&1) || rc=$?
  if ((rc != 0)); then
    # Every listed job is gone: squeue says so for a list of unknown ids.
    [[ $out == *"Invalid job id"* ]] && return 1
    return 0
  fi
  [[ -n $out ]]
}

# _hpc_data_user_idle: "yes" when squeue answers that this user has no job in the queue.
_hpc_data_user_idle() {
  local out
  out=$(squeue -h -o %i -u "$(id -un)" 2>/dev/null) || { echo no; return 0; }
  [[ -n $out ]] && echo no || echo yes
}

# _hpc_data_prune DIR: remove the archives of DIR that no queued job refers to (see the
# header), except the one this submission uses. An archive of another set of paths is
# pruned only when its KEY.lock is free (no submission is building or using it now).
_hpc_data_prune() {
  local dir=$1 state base name key archive jobs lock fd2 pruned=0 held idle=""
  command -v squeue >/dev/null || return 0
  for state in "$dir"/*.state; do
    [[ -f $state ]] || continue
    name=${state##*/}
    name=${name%.state}
    [[ $name =~ ^([0-9a-f]{16})(-[0-9a-f]{16})?$ ]] || continue
    key=${BASH_REMATCH[1]} base=$dir/$name
    [[ $base != "${J_DATA_ARCHIVE%.tar*}" ]] || continue
    archive=""
    for archive in "$base".tar "$base".tar.*; do
      [[ -e $archive ]] && break
    done
    [[ -e $archive ]] || archive=$state
    # Submitted (or built) within the last HPC_STAGING_KEEP_MIN minutes: kept.
    [[ -z $(find "$archive" -maxdepth 0 -mmin "-$HPC_STAGING_KEEP_MIN" 2>/dev/null) ]] || continue
    jobs=$base.jobs
    if [[ -f $jobs ]]; then
      ! _hpc_data_queued "$jobs" || continue
    else
      # No job list (an archive of an older version, or a submission that stopped before
      # sbatch): pruned only while this user has no job queued or running at all.
      [[ -n $idle ]] || idle=$(_hpc_data_user_idle)
      [[ $idle == yes ]] || continue
    fi
    held=""
    if [[ $key != "$J_DATA_KEY" ]]; then
      lock=$dir/$key.lock
      exec {fd2}>>"$lock" || continue
      flock -n "$fd2" || { exec {fd2}>&-; continue; }
      held=1
    fi
    rm -f -- "$base".tar "$base".tar.* "$state" "$jobs"
    [[ -z $held ]] || exec {fd2}>&-
    pruned=$((pruned + 1))
  done
  ((pruned == 0)) || say "data: pruned $pruned archive(s) of $dir that no queued or running job uses"
}

# _hpc_data_tar_progress_to ARRAY: tar options that show a percentage on the terminal
# while a large archive is written, and nothing when stderr is not a terminal.
_hpc_data_tar_progress_to() {
  local -n _p=$1
  _p=()
  [[ -t 2 && ${HPC_QUIET:-0} != 1 ]] || return 0
  ((J_DATA_SIZE >= HPC_DATA_PROGRESS_MIB * 1048576)) || return 0
  # tar counts 10 KiB records; one checkpoint per percent of the (uncompressed) archive
  # makes the checkpoint number the percentage.
  local records=$(((J_DATA_SIZE + J_DATA_ENTRIES * 1024) / 10240 / 100))
  ((records > 0)) || records=1
  _p=("--checkpoint=$records" "--checkpoint-action=ttyout=data: archiving %u%%\r")
}

# _hpc_data_write_archive DIR: tar (+ compressor) into a temporary name, then rename.
_hpc_data_write_archive() {
  local tmp=$J_DATA_ARCHIVE.tmp.$$ rel members=() progress rc=0 status
  # A Ctrl-C or a failure leaves no half-written archive behind.
  hpc_remove_at_exit "$tmp"
  trap 'exit 130' INT
  trap 'exit 143' TERM
  for rel in "${J_DATA[@]}"; do
    members+=("./$rel") # ./ keeps a leading '-' from reading as an option
  done
  _hpc_data_tar_progress_to progress
  local tar_cmd=(tar -c -f - --sparse --format=gnu "${progress[@]}" -C "$J_SCRATCH_DIR" "${members[@]}")
  local pack=(cat)
  case $HPC_DATA_COMPRESSOR in
    zstd) pack=(zstd -T0 -q -c) ;;
    pigz) pack=(pigz -c) ;;
  esac
  # (an if, so that set -e leaves the failure to the message below)
  # Private from its first byte (umask 077 for the file's creation only), whatever the data's modes.
  local mask
  mask=$(umask)
  umask 077
  if "${tar_cmd[@]}" | "${pack[@]}" >"$tmp"; then status=(0); else status=("${PIPESTATUS[@]}"); fi
  umask "$mask"
  ((${#progress[@]} == 0)) || printf '\r\033[K' >/dev/tty 2>/dev/null
  for rc in "${status[@]}"; do
    ((rc == 0)) || break
  done
  if ((rc != 0)); then
    rm -f -- "$tmp"
    ((status[0] != 1)) ||
      die "--data: files changed while they were archived (tar exit 1); submit again once the data is stable. Nothing was submitted"
    die "--data: building $J_DATA_ARCHIVE failed (exit ${status[*]}; a full disk or an unreadable file? tar's message is above). Nothing was submitted"
  fi
  mv -f -- "$tmp" "$J_DATA_ARCHIVE" || { rm -f -- "$tmp"; die "cannot write $J_DATA_ARCHIVE"; }
  hpc_keep_at_exit "$tmp"
  trap - INT TERM
}
