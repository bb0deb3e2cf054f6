# shellcheck shell=bash
# --venv-to-local, submit side: pack the project's venv ONCE into a content-addressed
# archive under $SCRATCH/<project>/.hpc_staging/, which the job unpacks onto every node's
# local disk (virtual_env_hpc_files/venv_local.sh) and runs from there.
#
# Venvs are not relocatable: their console scripts (bin/pip, bin/torchrun) start with
# "#!<venv>/bin/python" and bin/activate names the venv's path. The node-local copy lives
# elsewhere, so the job rewrites those paths while it unpacks (what conda-pack and
# venv-pack do); bin/python stays the same link to the same base Python, and Python finds
# the copy's pyvenv.cfg next to it: sys.prefix is the copy. README: "The venv on local disk".
#
# Files (KEY = 16 hex named by the venv's path; SHA = the first 16 of the manifest's sha256):
#   .hpc_staging/venv-KEY-SHA.tar.zst|.tar.gz|.tar  the archive (temporary name, then renamed)
#   .hpc_staging/venv-KEY-SHA.state    "MANIFEST_SHA256 ARCHIVE_NAME BYTES"
#   .hpc_staging/venv-KEY-SHA.jobs     the ids of the jobs submitted with it
#   .hpc_staging/venv-KEY.lock         flock(1): one builder (and pruner) at a time
# The manifest (what "the venv is unchanged" means, decided in a few ms, not by hashing the
# venv's gigabyte): the type, size, mtime (ns) and name of pyvenv.cfg and of every entry
# of bin/ and of site-packages (top level). pip install, upgrade, reinstall and uninstall
# change it (they add, rename or remove dist-info folders there, whose mtime changes with
# their RECORD); a file edited by hand deep inside a package does not (touch the package's
# folder to repack). The refusals (editable installs) are judged only for a venv to pack.
# Archives are pruned like --data's (staging.sh): once no job of theirs is queued and their
# last submission is older than HPC_STAGING_KEEP_MIN minutes.

# hpc_venv_local_settle: J_VENV_TO_LOCAL (yes|no) from --venv-to-local, --no-venv-to-local
# and the profile's HPC_VENV_TO_LOCAL; for yes, judge the venv and walk its manifest
# (J_VENV_LOCAL_SHA, J_VENV_LOCAL_ARCHIVE ...). Writes nothing. After hpc_settle_container.
hpc_venv_local_settle() {
  J_VENV_TO_LOCAL=no J_VENV_LOCAL_ARCHIVE="" J_VENV_LOCAL_SHA="" J_VENV_LOCAL_KEY=""
  J_VENV_LOCAL_STATE="" J_VENV_LOCAL_JOBS="" J_VENV_LOCAL_BYTES=0 J_VENV_LOCAL_REAL=""
  # Where the node-local copies live (profile: HPC_VENV_LOCAL_DIR, %u = the user): the same
  # path on every node (the batch shell hands its PATH to the tasks of every node), no %n.
  J_VENV_LOCAL_DIR=$HPC_VENV_LOCAL_DIR
  local asked=${HPC_VENV_TO_LOCAL:-no} explicit=0
  [[ $asked =~ ^(yes|no)$ ]] ||
    die "cluster profile $HPC_PROFILE_FILE: HPC_VENV_TO_LOCAL must be yes or no, not '$asked'"
  ((OPT_VENV_TO_LOCAL == 0 || OPT_NO_VENV_TO_LOCAL == 0)) ||
    die "--venv-to-local and --no-venv-to-local contradict each other: give one"
  ((OPT_VENV_TO_LOCAL == 0)) || asked=yes explicit=1
  ((OPT_NO_VENV_TO_LOCAL == 0)) || asked=no
  [[ $asked == yes ]] || return 0
  # Without a venv of its own (--venv none, a container) there is nothing to copy: an
  # explicit request is a mistake, the profile's default just does not apply.
  if [[ $J_VENV == none ]]; then
    ((explicit == 0)) || {
      [[ -z ${J_CONTAINER:-} ]] ||
        die "--venv-to-local copies the project's venv, and a container job runs the image's python: drop --venv-to-local (use --container-to-local for the image)"
      die "--venv-to-local with --venv none: there is no venv to copy; drop one of them"
    }
    return 0
  fi
  if ((OPT_SETUP_VENV)); then
    ((explicit == 0)) ||
      die "--venv-to-local packs the venv at submission, and --setup-venv builds it later in a job: submit with --setup-venv first, then with --venv-to-local once it is built"
    warn "the profile copies the venv to local disk (HPC_VENV_TO_LOCAL=yes), but --setup-venv builds it later: these jobs run it from $J_VENV"
    return 0
  fi
  { [[ $J_VENV_LOCAL_DIR == /* ]] && ! has_newline "$J_VENV_LOCAL_DIR"; } ||
    die "cluster profile $HPC_PROFILE_FILE: HPC_VENV_LOCAL_DIR '$J_VENV_LOCAL_DIR' must be an absolute path on one line (for example /tmp/hpc_venvs_%u)"
  [[ $J_VENV_LOCAL_DIR != *%n* ]] ||
    die "cluster profile $HPC_PROFILE_FILE: HPC_VENV_LOCAL_DIR '$J_VENV_LOCAL_DIR' holds %n: the venv's copy must have the same path on every node (the tasks of all nodes run the batch shell's PATH); use a folder on each node's local disk whose path is the same, e.g. /tmp/hpc_venvs_%u"
  if [[ ! -f $J_VENV/pyvenv.cfg || ! -f $J_VENV/bin/activate ]] && ((explicit == 0)); then
    return 0 # the profile's default; a missing venv is hpc_venv_check's to report
  fi
  [[ -f $J_VENV/pyvenv.cfg && -f $J_VENV/bin/activate ]] ||
    die "--venv-to-local: $J_VENV is not a virtual environment (no pyvenv.cfg or bin/activate): create it first (python3 -m venv '$J_VENV'), or drop --venv-to-local"
  [[ ! -L $J_VENV ]] ||
    die "--venv-to-local: $J_VENV is a symbolic link: give the path it points to (--venv PATH)"
  HPC_VENV_LOCAL_T0=$EPOCHREALTIME
  local here=$PWD
  cd -P -- "$J_VENV" 2>/dev/null || die "--venv-to-local: cannot enter $J_VENV"
  J_VENV_LOCAL_REAL=$PWD
  cd -- "$here" || die "cannot return to $here"
  _hpc_venv_local_walk
  _hpc_venv_local_key_to J_VENV_LOCAL_KEY "$J_VENV"
  hpc_data_compressor_to HPC_VENV_LOCAL_COMPRESSOR
  local ext=tar base
  case $HPC_VENV_LOCAL_COMPRESSOR in
    zstd) ext=tar.zst ;;
    pigz) ext=tar.gz ;;
  esac
  base=$J_SCRATCH_DIR/$HPC_STAGING_DIRNAME/venv-$J_VENV_LOCAL_KEY-${J_VENV_LOCAL_SHA:0:16}
  J_VENV_LOCAL_ARCHIVE=$base.$ext J_VENV_LOCAL_STATE=$base.state J_VENV_LOCAL_JOBS=$base.jobs
  # An archive to pack: judge what it would carry. (Its size on a node is known once it is
  # packed: the state file beside it says, which the job reads when the plan says 0.)
  _hpc_venv_local_state_matches || _hpc_venv_local_refusals
  J_VENV_TO_LOCAL=yes
  if ((OPT_DRY_RUN)); then
    local what="would be built"
    _hpc_venv_local_state_matches && what="is up to date (would be reused)"
    say "venv: $J_VENV to each node's local disk; archive $J_VENV_LOCAL_ARCHIVE $what (decided in $(_hpc_venv_local_ms) ms)"
  fi
}

_hpc_venv_local_ms() {
  printf '%d' $(((${EPOCHREALTIME/[.,]/} - ${HPC_VENV_LOCAL_T0/[.,]/}) / 1000))
}

# _hpc_venv_local_site_to VAR: the venv's site-packages folder (lib/pythonX.Y/site-packages).
_hpc_venv_local_site_to() {
  local -n _site=$1
  local found=()
  shopt -s nullglob
  found=("$J_VENV"/lib/python3*/site-packages)
  shopt -u nullglob
  ((${#found[@]} == 1)) ||
    die "--venv-to-local: $J_VENV has ${#found[@]} lib/python3*/site-packages folders, not one: recreate the venv (python3 -m venv --clear), or drop --venv-to-local"
  _site=${found[0]}
}

# _hpc_venv_local_walk: J_VENV_LOCAL_SHA, the manifest's sha256 (see the header): one
# find(1) of the top levels, whose entries a slow filesystem returns with its listing. The
# names of site-packages' entries go to HPC_VENV_LOCAL_TOP (for the refusals).
_hpc_venv_local_walk() {
  local site
  _hpc_venv_local_site_to site
  HPC_VENV_LOCAL_SITE=$site
  # Three processes in all (this decision runs at every submission): find's messages go
  # straight to stderr, and its failure (pipefail) fails the walk.
  J_VENV_LOCAL_SHA=$(
    set -o pipefail
    find "$J_VENV/pyvenv.cfg" "$J_VENV/bin" "$site" -maxdepth 1 -printf '%y %s %T@ %p\0%l\0' | sha256sum
  ) || die "--venv-to-local: cannot read all of $J_VENV (find's message is above): check its permissions, or submit without --venv-to-local"
  J_VENV_LOCAL_SHA=${J_VENV_LOCAL_SHA%% *}
}

# _hpc_venv_local_key_to VAR PATH: 16 hex digits named by PATH (64-bit FNV-1a over its
# bytes, in bash: no process), the key that groups one venv's archives and their lock.
_hpc_venv_local_key_to() {
  local -n _key=$1
  local LC_ALL=C path=$2 i h=-3750763034362895579 # the FNV offset basis, as a signed int64
  for ((i = 0; i < ${#path}; i++)); do
    printf -v _key '%d' "'${path:i:1}"
    h=$(((h ^ (_key & 255)) * 1099511628211))
  done
  printf -v _key '%016x' "$h"
}

# _hpc_venv_local_refusals: die when the venv's packages live outside it (only for a venv
# to pack: an archive that exists was judged when it was packed). Reads the .pth files and
# every dist-info's direct_url.json (a second walk, one level deeper).
_hpc_venv_local_refusals() {
  local site=$HPC_VENV_LOCAL_SITE f line bad=() names=()
  shopt -s nullglob
  for f in "$site"/*; do
    case ${f##*/} in
      __editable__*) bad+=("${f##*/} (an editable install: pip install -e)") ;;
      *.egg-link) bad+=("${f##*/} (an editable install: setup.py develop)") ;;
      *.pth)
        [[ -f $f && -r $f ]] || continue
        while IFS= read -r line || [[ -n $line ]]; do
          [[ $line == /* ]] || continue
          bad+=("${f##*/} (adds the absolute path $line)")
          break
        done <"$f"
        ;;
    esac
  done
  shopt -u nullglob
  mapfile -t names < <(grep -lE '"editable"[[:space:]]*:[[:space:]]*true' -- "$site"/*.dist-info/direct_url.json 2>/dev/null)
  for f in "${names[@]}"; do
    f=${f%/direct_url.json}
    bad+=("${f##*/} (an editable install)")
  done
  ((${#bad[@]} == 0)) && return 0
  local shown
  printf -v shown '  %s\n' "${bad[@]}"
  die "--venv-to-local cannot carry $J_VENV: these packages live outside it, so its copy on the node would still read them from here (or not find them):
${shown}Install them normally (pip install PACKAGE, or pip install . for your project, not -e; code the commands run from the project folder needs no install), or submit without --venv-to-local"
}

# _hpc_venv_local_state_matches: the state names this manifest and archive, which exists;
# then J_VENV_LOCAL_BYTES comes from it.
_hpc_venv_local_state_matches() {
  local sha name bytes
  [[ -f $J_VENV_LOCAL_STATE && -f $J_VENV_LOCAL_ARCHIVE ]] || return 1
  read -r sha name bytes <"$J_VENV_LOCAL_STATE" || return 1
  [[ $sha == "$J_VENV_LOCAL_SHA" && $name == "${J_VENV_LOCAL_ARCHIVE##*/}" ]] || return 1
  is_size "$bytes" || return 1
  J_VENV_LOCAL_BYTES=$((10#$bytes))
}

# hpc_venv_local_build: make sure the archive holds the venv as walked: reuse it when its
# manifest is unchanged, else pack it (a temporary name, then renamed). One builder at a time.
hpc_venv_local_build() {
  [[ ${J_VENV_TO_LOCAL:-no} == yes ]] || return 0
  local dir=$J_SCRATCH_DIR/$HPC_STAGING_DIRNAME fd size
  hpc_staging_lock_to fd "venv-$J_VENV_LOCAL_KEY" "venv: another submission is packing this venv; waiting for it"
  if _hpc_venv_local_state_matches; then
    touch -c -- "$J_VENV_LOCAL_ARCHIVE" 2>/dev/null || true # its last submission is now
    hpc_staging_private "$J_VENV_LOCAL_ARCHIVE" "$J_VENV_LOCAL_STATE"
    _hpc_venv_local_prune "$dir"
    exec {fd}>&-
    human_bytes_to size "$J_VENV_LOCAL_BYTES"
    say "venv: $J_VENV is unchanged: archive ${J_VENV_LOCAL_ARCHIVE##*/} reused ($size; decided in $(_hpc_venv_local_ms) ms)"
    return 0
  fi
  say "venv: $J_VENV changed or was never packed (decided in $(_hpc_venv_local_ms) ms): packing it into $J_VENV_LOCAL_ARCHIVE"
  local started=$EPOCHREALTIME tmp=$J_VENV_LOCAL_ARCHIVE.tmp.$$ status rc=0
  hpc_remove_at_exit "$tmp" "$tmp.totals"
  local pack=(cat)
  case $HPC_VENV_LOCAL_COMPRESSOR in
    zstd) pack=(zstd -T0 -q -c) ;;
    pigz) pack=(pigz -c) ;;
  esac
  # tar's --totals ("Total bytes written: N") is the space the copy takes, near enough (a
  # tenth more below, for the disk's blocks): no second walk of the venv for its size.
  # Private from its first byte (hpc_staging_private), whatever the venv's modes.
  local mask
  mask=$(umask)
  umask 077
  if tar -c -f - --format=gnu --totals -C "$J_VENV" . 2>"$tmp.totals" | "${pack[@]}" >"$tmp"; then
    status=(0)
  else
    status=("${PIPESTATUS[@]}")
  fi
  umask "$mask"
  local bytes
  bytes=$(sed -n 's/^Total bytes written: \([0-9]*\).*/\1/p' "$tmp.totals" 2>/dev/null)
  grep -v '^Total bytes written' "$tmp.totals" >&2 || true
  rm -f -- "$tmp.totals"
  is_size "${bytes:-x}" || bytes=0
  bytes=$((10#$bytes + 10#$bytes / 10))
  for rc in "${status[@]}"; do ((rc == 0)) || break; done
  if ((rc != 0)); then
    rm -f -- "$tmp"
    die "--venv-to-local: packing $J_VENV failed (exit ${status[*]}; files changed while it was packed, a full disk, an unreadable file? tar's message is above). Nothing was submitted"
  fi
  mv -f -- "$tmp" "$J_VENV_LOCAL_ARCHIVE" || { rm -f -- "$tmp"; die "cannot write $J_VENV_LOCAL_ARCHIVE"; }
  hpc_keep_at_exit "$tmp" "$tmp.totals"
  local state=$J_VENV_LOCAL_STATE
  if ! (umask 077 && printf '%s %s %s\n' "$J_VENV_LOCAL_SHA" "${J_VENV_LOCAL_ARCHIVE##*/}" "$bytes" >"$state.tmp.$$") ||
    ! mv -f -- "$state.tmp.$$" "$state"; then
    rm -f -- "$state.tmp.$$"
    die "cannot write $state"
  fi
  _hpc_venv_local_prune "$dir"
  exec {fd}>&-
  local packed
  human_bytes_to size "$bytes"
  human_bytes_to packed "$(stat -c %s -- "$J_VENV_LOCAL_ARCHIVE")"
  say "venv: packed in $(_hpc_venv_local_secs "$started") s ($size -> $packed)"
}

_hpc_venv_local_secs() {
  local ms=$(((${EPOCHREALTIME/[.,]/} - ${1/[.,]/}) / 1000))
  printf '%d.%01d' $((ms / 1000)) $((ms % 1000 / 100))
}

# hpc_venv_local_record_job JOB_ID: the archive is referred to by this job.
hpc_venv_local_record_job() {
  [[ -n ${J_VENV_LOCAL_JOBS:-} ]] || return 0
  printf '%s\n' "$1" >>"$J_VENV_LOCAL_JOBS" ||
    warn "job $1 submitted, but $J_VENV_LOCAL_JOBS could not be updated: its venv archive may be pruned while the job waits"
}

# _hpc_venv_local_prune DIR: remove this venv's older archives that no queued job uses
# (staging.sh's rules: submitted more than HPC_STAGING_KEEP_MIN minutes ago, no job of its
# list queued or running; without a list, only while the user has no job queued at all).
_hpc_venv_local_prune() {
  local dir=$1 state base archive idle="" pruned=0
  command -v squeue >/dev/null || return 0
  for state in "$dir/venv-$J_VENV_LOCAL_KEY"-*.state; do
    [[ -f $state ]] || continue
    base=${state%.state}
    [[ ${base##*/} =~ ^venv-[0-9a-f]{16}-[0-9a-f]{16}$ ]] || continue
    [[ $base != "${J_VENV_LOCAL_ARCHIVE%.tar*}" ]] || continue
    archive=$state
    for archive in "$base".tar "$base".tar.* "$state"; do
      [[ -e $archive ]] && break
    done
    [[ -z $(find "$archive" -maxdepth 0 -mmin "-$HPC_STAGING_KEEP_MIN" 2>/dev/null) ]] || continue
    if [[ -f $base.jobs ]]; then
      ! _hpc_data_queued "$base.jobs" || continue
    else
      [[ -n $idle ]] || idle=$(_hpc_data_user_idle)
      [[ $idle == yes ]] || continue
    fi
    rm -f -- "$base".tar "$base".tar.* "$state" "$base.jobs"
    pruned=$((pruned + 1))
  done
  ((pruned == 0)) || say "venv: pruned $pruned older archive(s) of $J_VENV that no queued or running job uses"
}
