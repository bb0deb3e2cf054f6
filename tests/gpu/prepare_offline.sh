#!/usr/bin/env bash
# Summary: gather here, where apt works, what the GPU stage needs on a machine with no
# network and no Slurm: Debian 12's Slurm and munge packages and the libraries they load,
# bats and bubblewrap, all as .deb files in tests/.gpu_stage/debs/ (git-ignored, about 10 MB).
#
# Usage: bash tests/gpu/prepare_offline.sh [--force]
# Then carry tests/.gpu_stage with the project to the GPU machine and run there:
#   HPC_GPU_REPORT_DIR=/some/folder bash tests/run_tests.sh gpu
# The stage unpacks the packages into a private prefix (dpkg -x), never into /, and starts
# its own one-node cluster whose gres are the machine's real GPUs (tests/cluster/README.md).
# The packages are for x86-64 Debian 12 (bookworm), Slurm 22.05; the GPU machine needs
# glibc 2.36 or newer (Debian 12, Ubuntu 23.04 or newer). --force downloads again.
set -euo pipefail

root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
stage=$root/tests/.gpu_stage
debs=$stage/debs

# The Slurm daemons and clients, munge, and every library they need that is not part of
# glibc or the C++ runtime (a newer one of those on the GPU machine runs these binaries).
readonly PACKAGES=(
  slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge libmunge2
  libhwloc15 libjson-c5 liblua5.1-0 liblz4-1 libnuma1 libpam0g libreadline8 libtinfo6
  libdbus-1-3 libsystemd0 libyaml-0-2 libbz2-1.0 libgcrypt20 libgpg-error0 libcap2
  libselinux1 libpcre2-8-0 libudev1 libaudit1 libcap-ng0 liblzma5 libzstd1 zlib1g
  bats bubblewrap
)

die() {
  printf 'prepare_offline.sh: %s\n' "$*" >&2
  exit 2
}

main() {
  case ${1:-} in
    "") ;;
    --force) rm -rf -- "$debs" ;;
    -h | --help)
      sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
      return 0
      ;;
    *) die "unknown argument '$1' (use --force or --help)" ;;
  esac
  command -v apt-get >/dev/null || die "apt-get not found: run this on a Debian 12 machine with network"
  [[ $(dpkg --print-architecture) == amd64 ]] || die "this machine is $(dpkg --print-architecture); the GPU machines are amd64: run it on an amd64 Debian 12"
  local codename
  codename=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")
  [[ $codename == bookworm ]] || echo "prepare_offline.sh: warning: this is '$codename', not Debian 12 (bookworm): the stage was tested with bookworm's Slurm 22.05" >&2
  mkdir -p -- "$debs"
  # tmp is global: the EXIT trap runs after main has returned.
  tmp=$(mktemp -d "$stage/.download.XXXXXX")
  trap 'rm -rf -- "$tmp"' EXIT
  # apt-get download writes into the current folder; a failed run leaves nothing behind.
  (cd "$tmp" && apt-get download "${PACKAGES[@]}") >&2 ||
    die "apt-get download failed: is the network up? (apt-get update first if the lists are old)"
  rm -f -- "$debs"/*.deb
  mv -- "$tmp"/*.deb "$debs"/
  local n
  n=$(find "$debs" -name '*.deb' | wc -l)
  printf '%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ) $n packages from $codename" >"$stage/PREPARED"
  echo "prepared $n packages ($(du -sh "$debs" | cut -f1)) in ${debs#"$root"/}"
  echo "carry tests/.gpu_stage to the GPU machine, then run there: bash tests/run_tests.sh gpu"
}

[[ ${BASH_SOURCE[0]} != "$0" ]] || main "$@"
