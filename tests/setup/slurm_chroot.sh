#!/usr/bin/env bash
# Summary: another Slurm version for the tests: a Debian root with that version's Slurm
# (24.11 from Debian 13, 26.05 from Debian sid), a local cluster started inside it, and
# commands run there.
#
# Usage: bash tests/setup/slurm_chroot.sh build|start|run|status|stop VERSION [-- COMMAND...]
#
#   build   make the root (mmdebstrap, installed first when missing); reused when present
#   start   build if needed, mount what the root needs, start a local cluster inside it
#   run     start, run COMMAND inside the root (from this repository, with the cluster's
#           SLURM_CONF), then stop: every exit path unmounts and stops what it started
#   status  print the mounts and the cluster's state; exit 0 if it runs, 1 if not
#   stop    stop the cluster (by pid), end the root's leftover processes (by pid), unmount
#
# Versions: 24.11 (Debian 13 "trixie", slurm-wlm 24.11.x), 26.05 (Debian sid, slurm-wlm
# 26.05.x; sid's Release file on the mirror may be past its Valid-Until date, so apt in
# that root does not check it).
# The tests' normal users (tests/helpers/users.bash) are copied into the root's passwd and
# group with the host's uids, and their homes made.
# Only Slurm, munge, MariaDB and shell tools come from the root; Python and the test venv
# are the host's, bind-mounted at the same paths (Debian 13's Python 3.13 cannot install
# the test requirements without a compiler). This repository is bind-mounted at its own
# path, so tests see the same paths inside and out. Needs root.
#
# Environment:
#   HPC_SLURM_CHROOT_ROOT    the root (default /var/cache/hpc_files/slurm-VERSION)
#   HPC_SLURM_CHROOT_DIR     this instance's mount point, /tmp and records
#                            (default /tmp/hpc_slurm_chroot-VERSION)
#   HPC_SLURM_CHROOT_PORT_OFFSET  the inner cluster's port offset (default 500: clear of the
#                            22.05 cluster's HPC_LOCAL_CLUSTER_PORT_OFFSET, default 0, and of
#                            the clusters its tests start beside it at +50 and +100)
#   HPC_SLURM_CHROOT_MIRROR  Debian mirror (default: the one this machine's apt uses)
#   HPC_TEST_VENV            the venv the tests use (default <repo>/.venv)
#   HPC_TEST_JAX_VENV        the JAX venv, bound in when it exists (default /opt/hpc_files/jax-venv)
set -euo pipefail

PROG=slurm_chroot.sh
REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
INCLUDE=slurm-wlm,slurmdbd,slurm-client,munge,mariadb-server,bats,shellcheck,bubblewrap,pigz,rsync,parallel,zstd,procps,psmisc,git,ca-certificates,util-linux,mount,bsdutils,iproute2,curl,libsqlite3-0,openssh-server,openssh-client,strace,nodejs

die() {
  printf '%s: %s\n' "$PROG" "$*" >&2
  exit 2
}
say() { printf '[%s] %s\n' "$PROG" "$*" >&2; }

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
}

# suite_for VERSION: the Debian suite that carries that Slurm.
suite_for() {
  case $1 in
    24.11) echo trixie ;;
    26.05) echo sid ;;
    *) die "unknown Slurm version '$1' (known: 24.11, 26.05)" ;;
  esac
}

settle() {
  VERSION=$1
  SUITE=$(suite_for "$VERSION")
  ROOT=${HPC_SLURM_CHROOT_ROOT:-/var/cache/hpc_files/slurm-$VERSION}
  INST=${HPC_SLURM_CHROOT_DIR:-/tmp/hpc_slurm_chroot-$VERSION}
  MNT=$INST/root
  MOUNTS=$INST/mounts
  OFFSET=${HPC_SLURM_CHROOT_PORT_OFFSET:-500}
  [[ $OFFSET =~ ^[0-9]+$ ]] || die "HPC_SLURM_CHROOT_PORT_OFFSET must be a number (got '$OFFSET')"
  VENV=${HPC_TEST_VENV:-$REPO/.venv}
  JAX_VENV=${HPC_TEST_JAX_VENV:-/opt/hpc_files/jax-venv}
  # The inner cluster's folder (in the instance's own /tmp): a name no host cluster uses.
  INNER=/tmp/hpc_cluster_slurm-$VERSION
  ((EUID == 0)) || die "must run as root (mmdebstrap, mount, chroot)"
}

# mirror: the Debian archive this machine's apt uses (deb822 or one-line sources).
mirror() {
  [[ -z ${HPC_SLURM_CHROOT_MIRROR:-} ]] || { echo "$HPC_SLURM_CHROOT_MIRROR"; return; }
  local uri
  uri=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -n1)
  [[ -n $uri ]] || uri=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
    awk '{for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' | grep -v security | head -n1)
  echo "${uri:-http://deb.debian.org/debian}"
}

cmd_build() {
  if [[ -x $ROOT/usr/sbin/slurmctld && -e $ROOT/.hpc_built ]]; then
    say "reusing $ROOT ($(cat "$ROOT/.hpc_built"))"
    add_missing
    return 0
  fi
  mkdir -p -- "${ROOT%/*}"
  exec {lock}>"${ROOT%/*}/.build-$VERSION.lock"
  flock "$lock"
  [[ ! -e $ROOT/.hpc_built ]] || { flock -u "$lock"; return 0; } # built while we waited
  if ! command -v mmdebstrap >/dev/null; then
    say "installing mmdebstrap"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap; } >&2 ||
      die "could not install mmdebstrap (apt-get failed above)"
  fi
  local tmp=$ROOT.tmp.$$ mir started=$SECONDS
  mir=$(mirror)
  say "building $ROOT: Debian $SUITE from $mir (about a minute)"
  rm -rf -- "$tmp"
  local aptopt=()
  # sid's Release file on the mirror is past its Valid-Until date ("is expired").
  [[ $SUITE != sid ]] || aptopt=(--aptopt='Acquire::Check-Valid-Until "false"')
  mmdebstrap --quiet --variant=apt "${aptopt[@]}" --include="$INCLUDE" "$SUITE" "$tmp" "$mir" >&2 ||
    { rm -rf -- "$tmp"; die "mmdebstrap failed (its messages are above); nothing was kept"; }
  local got
  # shellcheck disable=SC2016 # dpkg-query's format, not a shell expansion
  got=$(chroot "$tmp" dpkg-query -W -f '${Version}' slurm-wlm 2>/dev/null) || got=""
  [[ $got == "$VERSION".* ]] || { rm -rf -- "$tmp"; die "Debian $SUITE gave slurm-wlm '$got', not $VERSION"; }
  mariadb_client "$tmp" || { rm -rf -- "$tmp"; die "could not put Debian 12's libmariadb.so.3 into the root"; }
  printf 'slurm-wlm %s from Debian %s, built %(%F %T)T\n' "$got" "$SUITE" -1 >"$tmp/.hpc_built"
  rm -rf -- "$ROOT"
  mv -- "$tmp" "$ROOT"
  flock -u "$lock"
  say "built $ROOT in $((SECONDS - started)) s: slurm-wlm $got"
}

# add_missing: a root built before INCLUDE named a package gets it now (Debian sid's
# openssh-server stopped pulling in openssh-client, which remote.bats needs).
add_missing() {
  local -a want missing=()
  local p
  IFS=, read -r -a want <<<"$INCLUDE"
  for p in "${want[@]}"; do
    # shellcheck disable=SC2016 # dpkg-query's format, not a shell expansion
    chroot "$ROOT" dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q ' installed$' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  say "adding ${missing[*]} to $ROOT (named in INCLUDE since it was built)"
  local aptopt=()
  [[ $SUITE != sid ]] || aptopt=(-o 'Acquire::Check-Valid-Until=false')
  { chroot "$ROOT" apt-get "${aptopt[@]}" update -qq &&
    DEBIAN_FRONTEND=noninteractive chroot "$ROOT" apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >&2 ||
    die "could not add ${missing[*]} to $ROOT (apt-get failed above): remove $ROOT to build it afresh"
}

# mariadb_client ROOT: Debian 12's MariaDB client library in ROOT/usr/local/lib, found
# before the root's own. Measured 2026-11-24: slurmdbd 24.11.5 with Debian 13's libmariadb3
# 11.8.9 dies at start ("fatal: _check_mysql_concat_is_sane: null result", the library's
# "Number of columns in result (=1) ... exceeds maximum allowed (=0)"); with Debian 12's
# library (10.11, same soname) it starts and sacct works.
mariadb_client() {
  local lib="" dir
  lib=$(dpkg -L libmariadb3 2>/dev/null | grep -m1 '/libmariadb\.so\.3$') || lib=""
  if [[ -z $lib ]]; then
    dir=$(mktemp -d)
    (cd "$dir" && apt-get download -qq libmariadb3 >&2 && dpkg -x libmariadb3_*.deb x) || { rm -rf -- "$dir"; return 1; }
    lib=$(find "$dir/x" -name libmariadb.so.3 | head -n1)
  fi
  [[ -n $lib ]] && cp -L -- "$lib" "$1/usr/local/lib/libmariadb.so.3" && chroot "$1" ldconfig
  local rc=$?
  [[ -z ${dir:-} ]] || rm -rf -- "$dir"
  return "$rc"
}

# bind SRC DST [rbind]: mount SRC on DST (made first, as a folder or file like SRC), as a
# slave (nothing mounted or unmounted inside flows back to the host), and record it.
bind() {
  local src=$1 dst=$2 how=--bind
  [[ ${3:-} != rbind ]] || how=--rbind
  if [[ -d $src ]]; then
    mkdir -p -- "$dst"
  else
    mkdir -p -- "${dst%/*}"
    [[ -e $dst || -L $dst ]] || : >"$dst"
  fi
  mount "$how" -- "$src" "$dst" || die "mount $how $src $dst failed"
  printf '%s\n' "$dst" >>"$MOUNTS"
  mount --make-rslave -- "$dst"
}

# bind_same PATH: PATH of the host at the same path inside the root.
bind_same() {
  grep -qxF -- "$MNT$1" "$MOUNTS" 2>/dev/null || bind "$1" "$MNT$1"
}

# bind_python: what the venv's interpreter needs: the symlinks leading to it (copied
# into the root, when the root lacks them), the interpreter, and its installation.
bind_python() {
  local py=$VENV/bin/python3 target base
  [[ -x $py ]] || die "no venv at $VENV (run bash tests/setup/install_deps.sh first, or set HPC_TEST_VENV)"
  while [[ -L $py ]]; do
    target=$(readlink -- "$py")
    [[ $target == /* ]] || target=${py%/*}/$target
    if [[ $py != "$VENV"/* && ! -e $MNT$py && ! -L $MNT$py ]]; then
      mkdir -p -- "$MNT${py%/*}"
      ln -s -- "$(readlink -- "$py")" "$MNT$py"
    fi
    py=$target
  done
  base=$("$VENV/bin/python3" -c 'import sys; print(sys.base_prefix)')
  local ver
  ver=$("$VENV/bin/python3" -c 'import sys; print("python%d.%d" % sys.version_info[:2])')
  local real
  real=$(realpath -- "$py")
  if [[ $base == /usr ]]; then
    bind_same "$real"
    bind_same "/usr/lib/$ver"
    # Debian's ensurepip takes pip's wheel from here (python -m venv, --setup-venv).
    [[ ! -d /usr/share/python-wheels ]] || bind_same /usr/share/python-wheels
    # Debian's own packages for that Python (python3-yaml: the submitting side reads sweep
    # files and #hpc: blocks with the python3 on PATH, as on a login node).
    [[ ! -d /usr/lib/python3/dist-packages ]] || bind_same /usr/lib/python3/dist-packages
  else
    bind_same "$base"
  fi
  # The tests' own `python3` (json checks, small venvs) is the same interpreter; the root
  # has no Python of its own.
  [[ -e $MNT/usr/bin/python3 ]] || ln -sfn -- "$real" "$MNT/usr/local/bin/python3"
  [[ $VENV == "$REPO"/* ]] || bind_same "$VENV"
  # The JAX venv (install_deps.sh; the same interpreter): the JAX recipe's test.
  [[ ! -d $JAX_VENV || $JAX_VENV == "$REPO"/* ]] || bind_same "$JAX_VENV"
  # Packages installed editable into a venv outside this repository: their source folders.
  local finder dir
  for finder in "$VENV"/lib/python*/site-packages/__editable___*_finder.py; do
    [[ -f $finder ]] || continue
    while IFS= read -r dir; do
      dir=${dir%/*}
      [[ -z $dir || $dir == "$REPO" || $dir == "$REPO"/* || ! -d $dir ]] || bind_same "$dir"
    done < <(sed -n "s/^MAPPING[^=]*= *{'[^']*': *'\(.*\)'}.*/\1/p" "$finder")
  done
}

# test_users: the tests' normal users (created on the host first, tests/helpers/users.bash)
# in the root's passwd and group, with the host's uids (files keep their owner across the
# root's border), and their homes.
test_users() {
  local user line home
  # shellcheck source=tests/helpers/users.bash
  source "$REPO/tests/helpers/users.bash"
  ensure_test_users >&2 || die "could not create the test users on the host"
  for user in "$HPC_TEST_USER" "$HPC_OTHER_USER"; do
    line=$(getent passwd "$user") || die "no user $user on the host"
    grep -q "^$user:" "$MNT/etc/passwd" || printf '%s\n' "$line" >>"$MNT/etc/passwd"
    line=$(getent group "$user") || die "no group $user on the host"
    grep -q "^$user:" "$MNT/etc/group" || printf '%s\n' "$line" >>"$MNT/etc/group"
    home=$(getent passwd "$user" | cut -d: -f6)
    [[ -d $MNT$home ]] || install -d -m 0700 -o "$user" -g "$user" -- "$MNT$home"
  done
}

mounted() { [[ -s $MOUNTS ]] && mountpoint -q -- "$MNT"; }

cmd_mount() {
  if mounted; then
    return 0
  fi
  mkdir -p -- "$INST" "$MNT" "$INST/tmp"
  chmod 1777 -- "$INST/tmp"
  : >"$MOUNTS"
  # The root is a mount point of its own (bubblewrap needs one), private to this instance.
  bind "$ROOT" "$MNT"
  bind /proc "$MNT/proc"
  bind /sys "$MNT/sys"
  bind /sys/fs/cgroup "$MNT/sys/fs/cgroup" rbind # 24.11's slurmd will not start without
  bind /dev "$MNT/dev"
  bind /dev/pts "$MNT/dev/pts"
  # POSIX semaphores and shared memory (Python's multiprocessing locks: Dask's nanny) live
  # in /dev/shm, a tmpfs of its own: without it the root's /dev/shm is a plain folder of
  # mode 755 and a normal user's job gets "SemLock: Permission denied".
  bind /dev/shm "$MNT/dev/shm"
  bind "$INST/tmp" "$MNT/tmp" # this instance's /tmp: its cluster, jobs and test files
  bind_same "$REPO"
  local common
  common=$(git -C "$REPO" rev-parse --path-format=absolute --git-common-dir 2>/dev/null) || common=""
  [[ -z $common || $common == "$REPO"/* ]] || bind_same "$common"
  bind_python
  test_users
  # Name resolution (torchrun's rendezvous needs the machine's own name) and TLS.
  cp -f /etc/hosts "$MNT/etc/hosts"
  [[ ! -f /etc/ssl/certs/ca-certificates.crt ]] || cp -f /etc/ssl/certs/ca-certificates.crt "$MNT/etc/ssl/certs/"
  say "mounted $ROOT at $MNT ($(wc -l <"$MOUNTS") mounts, listed in $MOUNTS)"
}

# in_root COMMAND...: COMMAND inside the root, in this repository, with a clean environment.
in_root() {
  local keep=() name
  for name in HPC_TEST_JOBS HPC_TEST_VENV HPC_TEST_JAX_VENV HPC_LOCAL_NODE_DISKS TERM; do
    [[ -z ${!name:-} ]] || keep+=("$name=${!name}")
  done
  # shellcheck disable=SC2016 # expanded inside the root
  chroot "$MNT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HPC_LOCAL_CLUSTER_DIR="$INNER" HPC_LOCAL_CLUSTER_PORT_OFFSET="$OFFSET" \
    HPC_SLURM_CHROOT="$VERSION" HPC_TEST_VENV="$VENV" "${keep[@]}" \
    /bin/bash -c 'cd "$1" && shift && exec "$@"' bash "$REPO" "$@"
}

cmd_start() {
  cmd_build
  cmd_mount
  say "starting a Slurm $VERSION cluster inside (port offset $OFFSET)"
  in_root bash tests/cluster/local_cluster.sh start >"$INST/cluster.env" ||
    die "the local cluster did not start inside the root (its messages are above)"
  # shellcheck disable=SC2016 # expanded inside the root
  say "up: $(in_root bash -c 'eval "$(bash tests/cluster/local_cluster.sh env)" && sinfo --version')"
}

# root_pids: processes whose root is this instance's mount point (daemons, jobs' steps).
root_pids() {
  local p r
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    [[ $r == "$MNT" ]] && printf '%s\n' "${p#/proc/}"
  done
  return 0
}

cmd_stop() {
  [[ -e $MOUNTS ]] || { say "nothing mounted at $MNT"; return 0; }
  local rc=0 pids i lock
  exec {lock}>"$INST/.stop.lock" # one stop at a time (a run's exit and a stop by hand)
  flock "$lock"
  [[ -e $MOUNTS ]] || return 0
  if mounted && [[ -e $MNT$INNER ]]; then
    in_root bash tests/cluster/local_cluster.sh stop || rc=1
  fi
  mapfile -t pids < <(root_pids)
  if ((${#pids[@]})); then
    say "ending ${#pids[@]} leftover process(es) of the root: ${pids[*]}"
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      mapfile -t pids < <(root_pids)
      ((${#pids[@]})) || break
      sleep 0.1
    done
    ((${#pids[@]} == 0)) || kill -KILL "${pids[@]}" 2>/dev/null || true
    sleep 0.2
  fi
  local list m
  mapfile -t list <"$MOUNTS"
  for ((i = ${#list[@]} - 1; i >= 0; i--)); do
    m=${list[i]}
    mountpoint -q -- "$m" || continue
    umount -R -- "$m" 2>/dev/null || umount -R -l -- "$m" || { say "could not unmount $m"; rc=1; }
  done
  if ((rc == 0)); then
    rm -f -- "$MOUNTS"
    say "stopped and unmounted $MNT"
  fi
  return "$rc"
}

cmd_status() {
  if ! mounted; then
    echo "Slurm $VERSION root: not mounted (root ${ROOT}: $([[ -e $ROOT/.hpc_built ]] && cat "$ROOT/.hpc_built" || echo 'not built'))"
    return 1
  fi
  echo "Slurm $VERSION root $ROOT mounted at $MNT:"
  sed 's/^/  /' "$MOUNTS"
  in_root bash tests/cluster/local_cluster.sh status
}

cmd_run() {
  (($#)) || die "run needs a command (e.g. run $VERSION -- bash tests/run_tests.sh unit)"
  trap 'cmd_stop || true' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  cmd_start
  local rc=0 child
  # In the background, so that INT/TERM reach the traps at once (bash runs a trap only once
  # its foreground command returns); cmd_stop then ends the root's processes by pid.
  # shellcheck disable=SC2016 # expanded inside the root
  in_root bash -c 'eval "$(bash tests/cluster/local_cluster.sh env)" && exec "$@"' bash "$@" &
  child=$!
  wait "$child" || rc=$?
  return "$rc"
}

main() {
  local cmd=${1:-}
  case $cmd in
    -h | --help | help | "")
      usage
      [[ -n $cmd ]] || exit 2
      return 0
      ;;
    build | start | run | status | stop) ;;
    *) die "unknown command '$cmd' (build, start, run, status, stop)" ;;
  esac
  [[ -n ${2:-} ]] || die "$cmd needs a Slurm version (e.g. $cmd 24.11)"
  settle "$2"
  shift 2
  [[ ${1:-} != -- ]] || shift
  "cmd_$cmd" "$@"
}

[[ ${BASH_SOURCE[0]} != "$0" ]] || main "$@"
