#!/usr/bin/env bash
# Summary: start-up at real-cluster scale: from the job's start to `import torch, lightning`
# done, with the project and its venv on a slow shared filesystem (sshfs over loopback, a
# network filesystem's latency per file lookup), against --venv-to-local (the venv unpacked
# onto the node's local disk), against a venv already on local disk (the floor).
#
# Usage: bash tests/bench/startup.sh [--report]   (root; the cluster of HPC_LOCAL_CLUSTER_DIR)
#   --report: only print the summary of the last run's results (HPC_BENCH_DIR/results.txt)
# Environment: HPC_BENCH_SHAPES (default "1task 2nodes 4tasks"; "" = only the latency and
# the decision), HPC_BENCH_SLOW_ROUNDS
# (default "1 2": the slow filesystem's rounds; "1" saves its second, slowest run),
# HPC_BENCH_RTT_US (default 0: plain sshfs; N: every round trip to the filesystem takes N us
# more, through tests/bench/delay_line.py, a slower network filesystem),
# HPC_BENCH_LOCAL_DISK (default "disk": the node-local copies on this machine's disk, as
# the test cluster keeps them; "tmpfs": a tmpfs mounted over them for the run, standing for
# a compute node's NVMe and its large page cache: this VM's disk sustains about 110 MB/s of
# writes, so a 1.8 GB venv unpacked after others waits for writeback, 8-16 s, where the
# first one after an idle spell takes 2 s).
#
# Shapes: 1 task; 4 tasks on one node (an array pinned to node1); 2 nodes (-d script, one
# task per node). Each shape runs twice per mode: round 1 on a "cold" node (no node-local
# copy: --venv-to-local unpacks it there), round 2 on a node that is ready (the copy is
# there). The clock starts when the job's batch script starts (its process's start time,
# read from /proc: all "nodes" are this host) and stops when the import is done, in each
# task. Also prints the per-operation latency of the slow filesystem beside the typical
# Lustre/NFS figure, and the submission's "is the venv unchanged" decision. Asserts nothing.
# Needs sshfs and openssh-server (apt-get install -y sshfs openssh-server) and a venv with
# torch and lightning (HPC_BENCH_VENV, default $HPC_TEST_VENV, else /opt/hpc_files/test-venv).
# Caches are warm everywhere (the page cache of this host holds every file): the slow
# filesystem's cost is its round trips, as on a real cluster whose servers have the files
# in memory. The test cluster's nodes share one disk: on 2 nodes one node unpacks and the
# other finds the copy ready after waiting for the first (a real cluster unpacks on both).
set -euo pipefail
# shellcheck source=tests/bench/common.sh
source "${BASH_SOURCE[0]%/*}/common.sh"

SRC_VENV=${HPC_BENCH_VENV:-${HPC_TEST_VENV:-/opt/hpc_files/test-venv}}
BENCH=${HPC_BENCH_DIR:-/var/tmp/hpc_bench_startup}
PORT=${HPC_BENCH_SSH_PORT:-$((22022 + ${HPC_LOCAL_CLUSTER_PORT_OFFSET:-0}))}
REMOTE=$BENCH/remote MNT=$BENCH/shared SSHD=$BENCH/ssh
[[ $(id -u) == 0 ]] || { echo "startup.sh: run as root (sshd, sshfs)" >&2; exit 2; }
for tool in sshfs /usr/sbin/sshd ssh-keygen fusermount; do
  command -v "$tool" >/dev/null || { echo "startup.sh: $tool missing: apt-get install -y sshfs openssh-server" >&2; exit 2; }
done
"$SRC_VENV/bin/python" -c 'import torch, lightning' 2>/dev/null ||
  { echo "startup.sh: $SRC_VENV has no torch and lightning (HPC_BENCH_VENV)" >&2; exit 2; }

RESULTS=$BENCH/results.txt SUMMARY=$BENCH/summary.txt

# report: the summary of RESULTS (and of the figures in SUMMARY, written by the run).
report() {
  [[ ! -f $SUMMARY ]] || cat "$SUMMARY"
  printf '\njob start -> import torch, lightning done, seconds (median over the round'"'"'s tasks; min-max)\n'
  printf '%-8s %-6s %-22s %-22s %-8s\n' shape round slow local floor
  for shape in 1task 4tasks 2nodes; do
    for round in 1 2; do
      line=$(printf '%-8s %-6s' "$shape" "$round")
      for mode in slow local floor; do
        mapfile -t t < <(awk -v s="$shape" -v m="$mode" -v r="$round" '$1 == s && $2 == m && $3 == r { print $6 }' "$RESULTS" | sort -n)
        if ((${#t[@]})); then
          line+=$(printf ' %-22s' "$(median "${t[@]}") (${t[0]}-${t[-1]})")
        else
          line+=$(printf ' %-22s' "-")
        fi
      done
      printf '%s\n' "$line"
    done
  done
  printf '\nratios (median): local/floor and slow/local per shape and round\n'
  for shape in 1task 4tasks 2nodes; do
    for round in 1 2; do
      for mode in slow local floor; do
        mapfile -t t < <(awk -v s="$shape" -v m="$mode" -v r="$round" '$1 == s && $2 == m && $3 == r { print $6 }' "$RESULTS" | sort -n)
        printf -v "m_$mode" '%s' "$( ((${#t[@]})) && median "${t[@]}" || echo 0)"
      done
      # shellcheck disable=SC2154 # set by printf -v above
      printf '%-8s round %s: local/floor %s, slow/local %s\n' "$shape" "$round" "$(ratio "$m_local" "$m_floor")" "$(ratio "$m_slow" "$m_local")"
    done
  done
  printf '\nper task (shape mode round node task total_s setup_ms prefix): %s\n' "$RESULTS"
}
if [[ ${1:-} == --report ]]; then
  report
  exit 0
fi

eval "$(bash "$BENCH_ROOT/tests/cluster/local_cluster.sh" start 2>/dev/null)"
export SLURM_CONF HPC_LOCAL_CLUSTER_DIR
mkdir -p "$REMOTE" "$MNT" "$SSHD" /run/sshd
trap bench_stop EXIT

bench_stop() {
  local name
  if [[ ${local_disk:-disk} == tmpfs ]] && mountpoint -q "$HPC_LOCAL_CLUSTER_DIR/localvenvs"; then
    umount "$HPC_LOCAL_CLUSTER_DIR/localvenvs" || umount -l "$HPC_LOCAL_CLUSTER_DIR/localvenvs" || true
  fi
  for name in bench_startup_1 bench_startup_4 bench_startup_2n bench_pack; do
    scancel -u root -n "$name" 2>/dev/null || true
  done
  sleep 2 # the cancelled jobs leave the mount
  if mountpoint -q "$MNT"; then fusermount -u "$MNT" 2>/dev/null || fusermount -uz "$MNT" || true; fi
  [[ ! -f $SSHD/sshd.pid ]] || kill "$(cat "$SSHD/sshd.pid")" 2>/dev/null || true
}

# --- the slow shared filesystem: sshd on a private port, sshfs over loopback -------------
[[ -f $SSHD/host_key ]] || ssh-keygen -q -t ed25519 -N '' -f "$SSHD/host_key"
[[ -f $SSHD/user_key ]] || ssh-keygen -q -t ed25519 -N '' -f "$SSHD/user_key"
cp "$SSHD/user_key.pub" "$SSHD/authorized_keys"
/usr/sbin/sshd -p "$PORT" -h "$SSHD/host_key" -o ListenAddress=127.0.0.1 -o PidFile="$SSHD/sshd.pid" \
  -o AuthorizedKeysFile="$SSHD/authorized_keys" -o StrictModes=no -o PasswordAuthentication=no
sleep 0.5

# The venv on the shared filesystem: a copy of SRC_VENV whose paths say $MNT/proj/.venv
# (written in the backing folder, then its paths rewritten, as a venv made there would
# say), less the editable install the test venv has (--venv-to-local refuses those).
if [[ ! -f $REMOTE/.built ]]; then
  echo "building the benchmark's project and venv in $REMOTE (once; about 1.6 GB)" >&2
  rm -rf "$REMOTE/proj"
  mkdir -p "$REMOTE/proj" "$REMOTE/scratch"
  bash "$BENCH_ROOT/hpc_files/install_into_project.sh" "$REMOTE/proj" >/dev/null
  cp -a "$SRC_VENV" "$REMOTE/proj/.venv"
  site=$(echo "$REMOTE"/proj/.venv/lib/python3*/site-packages)
  for f in "$site"/__editable__*; do
    [[ -e $f ]] || continue
    rm -rf "$f" "$site"/"$(basename "$f" .pth | sed 's/^__editable__\.//')".dist-info
  done
  rm -rf "$site"/__editable___*finder.py "$site"/hpc_toolkit-*.dist-info
  # shellcheck source=virtual_env_hpc_files/venv_local.sh
  source "$BENCH_ROOT/virtual_env_hpc_files/venv_local.sh"
  _hpc_venv_local_rewrite "$REMOTE/proj/.venv" "$MNT/proj/.venv" "$SRC_VENV" "$(realpath "$SRC_VENV")"
  touch "$REMOTE/.built"
fi
# The toolkit itself is the worktree's (kept in step each run).
rm -rf "$REMOTE/proj/hpc_files" "$REMOTE/proj/virtual_env_hpc_files" "$REMOTE/proj/singularity_hpc_files"
bash "$BENCH_ROOT/hpc_files/install_into_project.sh" "$REMOTE/proj" >/dev/null
cat >"$REMOTE/proj/startup_probe.py" <<'PY'
# From this job's start (its batch script's process start, /proc) to `import torch,
# lightning` done, on the boot clock both are read in (no wall-clock offsets).
import os, re, sys, time
hz = os.sysconf("SC_CLK_TCK")
def started(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19]) / hz
job = os.environ["SLURM_JOB_ID"]
pat = re.compile(rb"/job0*" + job.encode() + rb"/slurm_script")
t0 = None
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if pat.search(f.read()):
                    t0 = started(pid)
                    break
        except OSError:
            pass
me = started("self")
import torch, lightning  # noqa: E401,F401
done = time.clock_gettime(time.CLOCK_BOOTTIME)
print(f"STARTUP node={os.environ.get('SLURMD_NODENAME')} task={os.environ.get('HPC_TASK_INDEX')}"
      f" rank={os.environ.get('SLURM_PROCID', '0')} total={done - t0 if t0 else -1:.2f}"
      f" python={done - me:.2f} prefix={sys.prefix}", flush=True)
PY

# Symbolic links stay links, as on NFS or Lustre: no follow_symlinks (it shows the venv's
# lib64 -> lib as a second copy of site-packages, which doubled the archive, 3.1 GiB for
# 1.6), and no_contain_symlinks where sshfs has it (Debian's sshfs refuses absolute link
# targets by default, EPERM, and a venv's bin/python3 is one). With
# HPC_BENCH_RTT_US, every round trip also crosses a delay line (delay_line.py): a slower
# filesystem, as a loaded Lustre is.
mount_opts=IdentityFile="$SSHD/user_key",StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null
rtt=${HPC_BENCH_RTT_US:-0}
[[ $rtt =~ ^[0-9]+$ ]] || { echo "startup.sh: HPC_BENCH_RTT_US must be microseconds, not '$rtt'" >&2; exit 2; }
((rtt == 0)) || mount_opts+=",ssh_command=$SRC_VENV/bin/python $BENCH_ROOT/tests/bench/delay_line.py $rtt ssh"
if mountpoint -q "$MNT"; then fusermount -u "$MNT" 2>/dev/null || fusermount -uz "$MNT"; fi
sshfs -p "$PORT" -o "no_contain_symlinks,$mount_opts" "root@127.0.0.1:$REMOTE" "$MNT" 2>/dev/null ||
  sshfs -p "$PORT" -o "$mount_opts" "root@127.0.0.1:$REMOTE" "$MNT"

# --- per-operation latency: what an import pays per file ----------------------------------
# A stat of 2000 names never looked up (no listing first: a listing brings every entry's
# attributes with it, and a stat after it is answered from the cache), and an open + read
# of 500 small files.
latency() {
  "$SRC_VENV/bin/python" - "$1" <<'PY'
import os, sys, time
root = sys.argv[1]
t = time.perf_counter()
for i in range(2000):
    os.stat(os.path.join(root, f"f{i:04d}"))
stat_us = (time.perf_counter() - t) / 2000 * 1e6
t = time.perf_counter()
for i in range(500):
    with open(os.path.join(root, f"g{i:04d}"), "rb") as f:
        f.read()
print(f"stat {stat_us:.0f} us, open + read {(time.perf_counter() - t) / 500 * 1e6:.0f} us")
PY
}
# Fresh names on each filesystem: a folder of small files made in the backing folder.
lat=$REMOTE/latency.$$
mkdir -p "$lat" && (cd "$lat" && for i in {0000..1999}; do : >"f$i" && echo x >"g$i"; done)
slow_lat=$(latency "$MNT/latency.$$")
local_lat=$(latency "$lat")
rm -rf "$lat"

export SCRATCH=$MNT/scratch
cd "$MNT/proj"
copies=$HPC_LOCAL_CLUSTER_DIR/localvenvs/root
local_disk=${HPC_BENCH_LOCAL_DISK:-disk}
case $local_disk in
  disk) local_what="this machine's disk ($(df -P "$HPC_LOCAL_CLUSTER_DIR" | awk 'NR == 2 { print $1 }'))" ;;
  tmpfs)
    rm -rf "${copies:?}"
    mountpoint -q "$HPC_LOCAL_CLUSTER_DIR/localvenvs" ||
      mount -t tmpfs -o size=8g,mode=1777 hpc_bench_local "$HPC_LOCAL_CLUSTER_DIR/localvenvs"
    local_what="a tmpfs (a node's fast local disk: writes at memory speed)"
    ;;
  *) echo "startup.sh: HPC_BENCH_LOCAL_DISK is disk or tmpfs, not '$local_disk'" >&2; exit 2 ;;
esac

# --- the submission's decision: is the venv unchanged? ------------------------------------
echo 'true' >experiment_configurations.txt
bash hpc_files/job_submitter.sh -C local --venv-to-local -n >/dev/null 2>&1 || true # packs nothing; warms sshfs
decide() { # prints the ms the submitter logged for its decision (a dry run)
  bash hpc_files/job_submitter.sh -C local --venv-to-local -n 2>&1 >/dev/null | sed -n 's/.*decided in \([0-9]*\) ms.*/\1/p'
}
# Pack it once (a real submission of a no-op job: the archive of an earlier run goes
# first, so the packing is measured), then time the decisions.
rm -rf "$SCRATCH"/proj/.hpc_staging/venv-*
t0=$(now_ms)
pack_out=$(bash hpc_files/job_submitter.sh -C local --venv-to-local -e bench_pack 2>&1)
pack_ms=$(($(now_ms) - t0))
decisions=()
for _ in 1 2 3 4 5; do decisions+=("$(decide)"); done

# --- the runs -----------------------------------------------------------------------------
: >"$RESULTS"
# An earlier run's logs go: a cluster started afresh numbers its jobs from 1 again, and a
# job's log must not be taken for an older job's of the same number.
rm -f "$SCRATCH"/proj/hpc_outputs/bench_startup_*.out
{
  printf '\nslow shared filesystem (sshfs over loopback%s): %s per file; local disk: %s\n' \
    "$( ((rtt == 0)) || echo ", plus a delay line of $rtt us per round trip")" "$slow_lat" "$local_lat"
  printf '  (Lustre / NFS metadata operations are typically 200-1000 us)\n'
  printf 'node-local copies (--venv-to-local) on %s\n' "$local_what"
  printf 'first packing of the venv (whole submission): %s ms; %s\n' "$pack_ms" "$(grep -o 'packed in.*' <<<"$pack_out" || echo 'archive reused')"
  printf 'submission decision "is the venv unchanged" (5 dry runs, venv on sshfs): %s ms; median %s ms\n' \
    "${decisions[*]}" "$(median "${decisions[@]}")"
} >"$SUMMARY"
cat "$SUMMARY"

# run SHAPE MODE ROUND ARGS...: submit, wait, append "SHAPE MODE ROUND node task total setup" lines.
run() {
  local shape=$1 mode=$2 round=$3 out id log
  shift 3
  out=$(bash hpc_files/job_submitter.sh -C local "$@" 2>&1) || { echo "$out" >&2; return 1; }
  id=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' <<<"$out" | tail -1)
  while [[ -n $(squeue -h -j "$id" -o %i 2>/dev/null) ]]; do sleep 1; done
  sleep 1
  for log in "$SCRATCH"/proj/hpc_outputs/*-"$id".out "$SCRATCH"/proj/hpc_outputs/*-"$id"_*.out; do
    [[ -f $log ]] || continue
    local setup
    setup=$(sed -n 's/.*venv: node-local copy ready on [0-9]* node(s) in \([0-9]*\) ms.*/\1/p' "$log" | tail -1)
    grep -h '^STARTUP' "$log" | while read -r _ node task _ total python prefix; do
      printf '%s %s %s %s %s %s %s %s\n' "$shape" "$mode" "$round" "${node#node=}" "${task#task=}" \
        "${total#total=}" "${setup:--}" "${prefix#prefix=}" >>"$RESULTS"
    done
  done
}

modes() { # SHAPE ARGS...: the three modes, two rounds each (round 1: no node-local copy)
  local shape=$1 mode round rounds
  shift
  for mode in floor local slow; do
    [[ $mode != local ]] || rm -rf "${copies:?}"/venv-* # a cold node for --venv-to-local's round 1
    rounds="1 2"
    [[ $mode != slow ]] || rounds=${HPC_BENCH_SLOW_ROUNDS:-1 2}
    for round in $rounds; do
      case $mode in
        slow) run "$shape" "$mode" "$round" --no-venv-to-local "$@" ;;
        local) run "$shape" "$mode" "$round" --venv-to-local "$@" ;;
        floor) run "$shape" "$mode" "$round" --venv "$SRC_VENV" --no-venv-to-local "$@" ;;
      esac
    done
  done
}

for shape in ${HPC_BENCH_SHAPES-1task 2nodes 4tasks}; do
  case $shape in
    1task)
      echo 'python startup_probe.py' >experiment_configurations.txt
      modes 1task -e bench_startup_1 --sbatch-option=--nodelist=node1
      ;;
    4tasks)
      printf 'python startup_probe.py\n%.0s' 1 2 3 4 >experiment_configurations.txt
      modes 4tasks -e bench_startup_4 --sbatch-option=--nodelist=node1
      ;;
    2nodes)
      echo 'python startup_probe.py' >experiment_configurations.txt
      modes 2nodes -e bench_startup_2n -N 2 -d script
      ;;
  esac
  report >"$BENCH/report.txt" # so far
done
report

