#!/usr/bin/env bash
# local_cluster.sh - start, stop and inspect a real multi-node Slurm cluster on this one
# machine, for tests.
#
# It runs munged, mariadbd, slurmdbd, slurmctld and one slurmd per virtual node
# (node1..nodeN, all on 127.0.0.1), each started by hand and stopped by the pid in its pid
# file. Every file it writes (configuration, state, spool, logs, pid files, fake GPU
# device files, the MariaDB data folder, per-node local scratch) lives in ONE folder:
# ${HPC_LOCAL_CLUSTER_DIR:-/tmp/hpc_local_cluster}. See tests/cluster/README.md.
#
# Usage: local_cluster.sh start|stop|status|env [--nodes N]
#   eval "$(bash tests/cluster/local_cluster.sh start)"   # start, then use sbatch/sacct
#   bash tests/cluster/local_cluster.sh stop
# Progress messages go to stderr; `start` and `env` print `export NAME=VALUE` lines on
# stdout. Needs root; installs the Debian packages it needs when they are missing.
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
# HPC_LOCAL_CLUSTER_NAME: two clusters that share $SCRATCH differ by name (tests of job
# numbers handed out again: HPC_LOCAL_FIRST_JOB_ID gives both the same numbers).
readonly CLUSTER_NAME="${HPC_LOCAL_CLUSTER_NAME:-hpclocal}"
readonly MARKER_NAME=".hpc_local_cluster"
# HPC_LOCAL_CLUSTER_PORT_OFFSET moves every port, so that a second cluster (another
# HPC_LOCAL_CLUSTER_DIR) can run beside the first, e.g. with an offset of 100.
readonly PORT_OFFSET="${HPC_LOCAL_CLUSTER_PORT_OFFSET:-0}"
FIRST_JOB_ID="${HPC_LOCAL_FIRST_JOB_ID:-$((PORT_OFFSET * 1013 + 1))}"
readonly CTLD_PORT=$((16817 + PORT_OFFSET))
readonly DBD_PORT=$((16819 + PORT_OFFSET))
readonly DB_PORT=$((16306 + PORT_OFFSET))
readonly NODE_PORT_BASE=$((17000 + PORT_OFFSET))
readonly CPUS_PER_NODE=4
# GraceTime of the preemptible partition: SIGTERM, then SIGKILL this much later.
readonly PREEMPT_GRACE_S=30
readonly MEMORY_PER_NODE=4000
readonly GPUS_PER_NODE=4
# GPU type of the typed half of the nodes (typed_gpu_node), and the 'short' partition's limit.
readonly TYPED_GPU=a100
readonly SHORT_MAX_TIME_MIN=5
readonly START_TIMEOUT_S=30
readonly STOP_TIMEOUT_S=30
readonly PACKAGES=(slurm-wlm munge mariadb-server slurmdbd)
readonly HELPERS=(prolog.sh epilog.sh task_prolog.sh)

NODES=4
NODES_GIVEN=0
MAX_ARRAY_SIZE="${HPC_LOCAL_MAX_ARRAY_SIZE:-10001}"
# fake: 4 copies of /dev/null per node; real: this machine's NVIDIA GPUs (one node only).
GPU_MODE="${HPC_LOCAL_GPUS:-fake}"
NVIDIA_DEV_DIR="${HPC_LOCAL_NVIDIA_DEV_DIR:-/dev}"
# A folder of Debian 12 .deb files (tests/gpu/prepare_offline.sh): Slurm and munge are
# unpacked from them into the cluster folder instead of being installed with apt-get.
SLURM_DEBS="${HPC_LOCAL_SLURM_PREFIX:-}"
# slurmdbd (accounting through MariaDB, full sacct) or none (jobcomp/filetxt, no MariaDB):
# a private prefix carries no MariaDB; HPC_LOCAL_ACCOUNTING=jobcomp asks for none, to test
# a cluster without slurmdbd (hpc status).
ACCOUNTING_ASKED="${HPC_LOCAL_ACCOUNTING:-slurmdbd}"
ACCOUNTING=slurmdbd
# shared: every node's local scratch is BASE/localscratch/NODE, one disk that every node
# sees; pernode: each slurmd runs in a mount namespace of its own with its node's disk
# bound at one common path (HPC_LOCAL_NODE_DISK_PATH), as on clusters whose nodes each
# have a local disk at the same path: a file made there on node1 is not on node2.
NODE_DISKS="${HPC_LOCAL_NODE_DISKS:-shared}"
NODE_DISK_PATH="${HPC_LOCAL_NODE_DISK_PATH:-/localscratch}"
# yes: cgroup enforcement (proctrack/cgroup, task/cgroup with ConstrainCores,
# ConstrainRAMSpace, ConstrainDevices): a job sees only its CPUs, memory and GPUs.
CGROUPS="${HPC_LOCAL_CGROUPS:-no}"
# yes: job_container/tmpfs, a private /tmp per job and node (the cluster folder must not
# be under /tmp, which the jobs then no longer see).
PRIVATE_TMP="${HPC_LOCAL_PRIVATE_TMP:-no}"
# slurm.conf ReturnToService: 2 brings back any DOWN node that registers (even one an admin
# set DOWN, within seconds); 1 only a node that was DOWN for not responding.
RETURN_TO_SERVICE="${HPC_LOCAL_RETURN_TO_SERVICE:-2}"
MUNGE_USER=munge
GPU_GRES=""
GPU_LINES=()
BASE=""
STOPPED_PIDS=()

usage() {
    cat <<EOF
Usage: bash tests/cluster/local_cluster.sh start|stop|status|env [--nodes N]

Starts a local Slurm cluster (munged, mariadbd, slurmdbd, slurmctld, N slurmd) whose
files all live in \${HPC_LOCAL_CLUSTER_DIR:-/tmp/hpc_local_cluster}.

Commands:
  start    start the cluster (fresh state; no-op if it already runs healthy with the
           same settings), wait for N idle nodes, print the env lines on stdout
  stop     cancel all jobs, stop every daemon by its pid file, wait for them to exit
  status   print daemon and node states; exit 0 if the cluster is healthy, 1 if not
  env      print the lines to eval: export SLURM_CONF=... (and HPC_LOCAL_CLUSTER_DIR)

Options:
  --nodes N   number of virtual nodes node1..nodeN for start (default 4)
  -h, --help  print this help

Environment:
  HPC_LOCAL_CLUSTER_DIR     cluster folder (default /tmp/hpc_local_cluster)
  HPC_LOCAL_MAX_ARRAY_SIZE  slurm.conf MaxArraySize for start (default 10001)
  HPC_LOCAL_CLUSTER_PORT_OFFSET  added to every port (default 0), to run a second cluster
  HPC_LOCAL_GPUS            fake (default: 4 fake GPUs per node) or real (the GPUs that
                            nvidia-smi lists, as gres of a single node; --nodes 1)
  HPC_LOCAL_NVIDIA_DEV_DIR  where the real GPUs' nvidiaN device files are (default /dev)
  HPC_LOCAL_SLURM_PREFIX    a folder of Debian 12 .deb files (tests/gpu/prepare_offline.sh):
                            Slurm and munge run from them, unpacked into the cluster
                            folder; no apt-get, no MariaDB (accounting: sacct -c)
  HPC_LOCAL_ACCOUNTING      slurmdbd (default: MariaDB + slurmdbd, full sacct) or jobcomp
                            (no slurmdbd: JobCompType=jobcomp/filetxt; sacct fails)
  HPC_LOCAL_NODE_DISKS      shared (default: node N's local scratch is
                            CLUSTER_DIR/localscratch/nodeN, seen by every node) or pernode
                            (each slurmd in its own mount namespace with its node's disk
                            at HPC_LOCAL_NODE_DISK_PATH: SLURM_TMPDIR is the same path on
                            every node, with other contents)
  HPC_LOCAL_NODE_DISK_PATH  the common path of pernode disks (default /localscratch)
  HPC_LOCAL_CGROUPS         no (default) or yes: proctrack/cgroup and task/cgroup with
                            ConstrainCores, ConstrainRAMSpace and ConstrainDevices (cgroup v1
                            here); the fake GPUs are then character devices of NVIDIA's
                            major 195 (copies of /dev/null would deny /dev/null itself)
  HPC_LOCAL_PRIVATE_TMP     no (default) or yes: job_container/tmpfs, a private /tmp per
                            job and node; HPC_LOCAL_CLUSTER_DIR must then lie outside /tmp
  HPC_LOCAL_RETURN_TO_SERVICE  slurm.conf ReturnToService: 2 (default: a DOWN node that
                            registers comes back, even one set DOWN by scontrol) or 1 (only
                            a node DOWN for not responding; one set DOWN stays DOWN)
  HPC_LOCAL_CLUSTER_NAME    slurm.conf ClusterName (default hpclocal; lower-case letters,
                            digits)
  HPC_LOCAL_FIRST_JOB_ID    slurm.conf FirstJobId (default: 1013 x the port offset + 1)

Example:
  eval "\$(bash tests/cluster/local_cluster.sh start --nodes 4)"
  sbatch -p notmpdir --wrap 'hostname'
EOF
}

readonly T0_US="${EPOCHREALTIME/./}"

# Prints a progress message on stderr, with the seconds since the script started.
log() {
    local us=$((${EPOCHREALTIME/./} - T0_US))
    printf '[local_cluster +%d.%02ds] %s\n' $((us / 1000000)) $((us % 1000000 / 10000)) "$*" >&2
}

die() {
    printf '[local_cluster] ERROR: %s\n' "$*" >&2
    exit 1
}

# --- paths --------------------------------------------------------------------------

set_paths() {
    BASE="$(realpath -m -- "${HPC_LOCAL_CLUSTER_DIR:-/tmp/hpc_local_cluster}")"
    [[ "${BASE}" != "/" ]] || die "HPC_LOCAL_CLUSTER_DIR must not be /"
    # The path goes unquoted into slurm.conf, gres.conf and TaskProlog output.
    [[ "${BASE}" =~ ^[A-Za-z0-9/._-]+$ ]] ||
        die "HPC_LOCAL_CLUSTER_DIR may hold only letters, digits and / . _ - (got '${BASE}')"
    ETC="${BASE}/etc"
    RUN="${BASE}/run"
    LOGS="${BASE}/log"
    MUNGE_DIR="${BASE}/munge"
    DB_DIR="${BASE}/mariadb"
    SLURM_CONF_FILE="${ETC}/slurm.conf"
    SETTINGS_FILE="${BASE}/cluster.settings"
    MUNGE_SOCKET="${MUNGE_DIR}/munge.socket"
    MUNGE_PID="${MUNGE_DIR}/munged.pid"
    DB_SOCKET="${DB_DIR}/mysqld.sock"
    DB_PID="${DB_DIR}/mysqld.pid"
    DB_SAFE_PID="${DB_DIR}/mariadbd-safe.pid"
    DBD_PID="${RUN}/slurmdbd.pid"
    CTLD_PID="${RUN}/slurmctld.pid"
    PREFIX="${BASE}/slurm-prefix"
    BIN="${BASE}/bin"
    export SLURM_CONF="${SLURM_CONF_FILE}"
    # A cluster run from a private prefix: its commands come first (start, stop, status).
    if [[ -n "${SLURM_DEBS}" || "$(read_setting prefix)" == yes ]]; then
        export PATH="${BIN}:${PATH}"
    fi
}

slurmd_pid_file() { printf '%s/slurmd-%s.pid' "${RUN}" "$1"; }

node_names() {
    local i
    for ((i = 1; i <= NODES; i++)); do
        printf 'node%d\n' "${i}"
    done
}

# --- checks and packages ------------------------------------------------------------

require_root() {
    [[ "$(id -u)" -eq 0 ]] || die "must run as root (it starts munged, mariadbd and the Slurm daemons)"
}

missing_packages() {
    local pkg
    for pkg in "${PACKAGES[@]}"; do
        if [[ "$(dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null)" != "install ok installed" ]]; then
            printf '%s\n' "${pkg}"
        fi
    done
}

ensure_packages() {
    [[ -z "${SLURM_DEBS}" ]] || return 0
    local missing
    missing="$(missing_packages)"
    [[ -n "${missing}" ]] || return 0
    log "installing missing packages: ${missing//$'\n'/ }"
    # Keep the packages from starting their system-wide daemons (Debian's policy-rc.d
    # hook); this script runs its own copies.
    local policy="/usr/sbin/policy-rc.d" made_policy=0 rc=0
    if [[ ! -e "${policy}" ]]; then
        printf '#!/bin/sh\nexit 101\n' >"${policy}"
        chmod 0755 -- "${policy}"
        made_policy=1
    fi
    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "${PACKAGES[@]}"; } >&2 || rc=$?
    if ((made_policy)); then
        rm -f -- "${policy}"
    fi
    ((rc == 0)) || die "apt-get failed (exit ${rc}) while installing ${PACKAGES[*]}"
}

validate_nodes() {
    if [[ ! "${NODES}" =~ ^[1-9][0-9]*$ ]] || ((NODES > 64)); then
        die "--nodes must be an integer from 1 to 64 (got '${NODES}')"
    fi
    [[ "${MAX_ARRAY_SIZE}" =~ ^[1-9][0-9]*$ ]] ||
        die "HPC_LOCAL_MAX_ARRAY_SIZE must be a positive integer (got '${MAX_ARRAY_SIZE}')"
    case "${GPU_MODE}" in
        fake) ;;
        real)
            # The real devices cannot be split among virtual nodes: one node holds them all.
            if ((NODES_GIVEN)) && ((NODES != 1)); then
                die "HPC_LOCAL_GPUS=real runs one node (the machine's GPUs cannot be shared by virtual nodes): use --nodes 1"
            fi
            NODES=1
            ;;
        *) die "HPC_LOCAL_GPUS must be fake or real (got '${GPU_MODE}')" ;;
    esac
    if [[ -n "${SLURM_DEBS}" ]]; then
        SLURM_DEBS="$(realpath -m -- "${SLURM_DEBS}")"
        compgen -G "${SLURM_DEBS}/slurmd_*.deb" >/dev/null ||
            die "HPC_LOCAL_SLURM_PREFIX=${SLURM_DEBS} holds no slurmd_*.deb: run bash tests/gpu/prepare_offline.sh where apt works, and carry tests/.gpu_stage"
        ACCOUNTING=none
    fi
    case "${ACCOUNTING_ASKED}" in
        slurmdbd) ;;
        jobcomp) ACCOUNTING=none ;;
        *) die "HPC_LOCAL_ACCOUNTING must be slurmdbd or jobcomp (got '${ACCOUNTING_ASKED}')" ;;
    esac
    case "${NODE_DISKS}" in
        shared | pernode) ;;
        *) die "HPC_LOCAL_NODE_DISKS must be shared or pernode (got '${NODE_DISKS}')" ;;
    esac
    [[ "${CGROUPS}" == yes || "${CGROUPS}" == no ]] || die "HPC_LOCAL_CGROUPS must be yes or no (got '${CGROUPS}')"
    [[ "${CLUSTER_NAME}" =~ ^[a-z][a-z0-9]{0,39}$ ]] || die "HPC_LOCAL_CLUSTER_NAME must be lower-case letters and digits (got '${CLUSTER_NAME}')"
    [[ "${FIRST_JOB_ID}" =~ ^[1-9][0-9]{0,8}$ ]] || die "HPC_LOCAL_FIRST_JOB_ID must be a positive integer (got '${FIRST_JOB_ID}')"
    [[ "${RETURN_TO_SERVICE}" == 1 || "${RETURN_TO_SERVICE}" == 2 ]] || die "HPC_LOCAL_RETURN_TO_SERVICE must be 1 or 2 (got '${RETURN_TO_SERVICE}')"
    [[ "${PRIVATE_TMP}" == yes || "${PRIVATE_TMP}" == no ]] || die "HPC_LOCAL_PRIVATE_TMP must be yes or no (got '${PRIVATE_TMP}')"
    [[ "${NODE_DISK_PATH}" =~ ^/[A-Za-z0-9/._-]+$ && "${NODE_DISK_PATH}" != / ]] ||
        die "HPC_LOCAL_NODE_DISK_PATH must be an absolute path of letters, digits and / . _ - (got '${NODE_DISK_PATH}')"
}

port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

check_ports_free() {
    local port
    for port in "${CTLD_PORT}" "${DBD_PORT}" "${DB_PORT}" $(seq $((NODE_PORT_BASE + 1)) $((NODE_PORT_BASE + NODES))); do
        if port_in_use "${port}"; then
            die "TCP port ${port} on 127.0.0.1 is already in use (another local cluster in a different folder?)"
        fi
    done
}

# --- processes ----------------------------------------------------------------------

# Prints the pid from pid file $1 if that process is alive and its name is $2.
live_pid() {
    local file="$1" comm="$2" pid
    [[ -f "${file}" ]] || return 1
    pid="$(tr -dc '0-9' <"${file}")"
    [[ -n "${pid}" && -r "/proc/${pid}/comm" ]] || return 1
    [[ "$(cat "/proc/${pid}/comm" 2>/dev/null)" == "${comm}" ]] || return 1
    ! pid_gone "${pid}" || return 1
    printf '%s' "${pid}"
}

# Polls command "$@" every 0.1 s until it succeeds or $1 seconds pass.
wait_until() {
    local timeout_s="$1" end
    shift
    end=$((SECONDS + timeout_s))
    until "$@"; do
        ((SECONDS < end)) || return 1
        sleep 0.1
    done
}

# A daemon counts as gone once it is a zombie: its parent is init, which may reap late.
pid_gone() {
    local stat
    stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
    stat="${stat##*) }"
    [[ "${stat:0:1}" == "Z" ]]
}

all_reaped() {
    local pid
    for pid in "$@"; do
        [[ ! -e "/proc/${pid}" ]] || return 1
    done
}

all_gone() {
    local pid
    for pid in "$@"; do
        pid_gone "${pid}" || return 1
    done
}

# Sends SIGTERM to the daemons named by "pidfile:comm" pairs, waits for them to exit,
# then sends SIGKILL to any that are left.
stop_daemons() {
    local pair pid pids=()
    for pair in "$@"; do
        if pid="$(live_pid "${pair%%:*}" "${pair##*:}")"; then
            log "stopping ${pair##*:} (pid ${pid})"
            kill -TERM "${pid}" 2>/dev/null || true
            pids+=("${pid}")
        fi
    done
    ((${#pids[@]} > 0)) || return 0
    if ! wait_until "${STOP_TIMEOUT_S}" all_gone "${pids[@]}"; then
        log "some daemons ignored SIGTERM for ${STOP_TIMEOUT_S} s; sending SIGKILL to ${pids[*]}"
        kill -KILL "${pids[@]}" 2>/dev/null || true
        wait_until 5 all_gone "${pids[@]}" || die "could not kill pids ${pids[*]}"
    fi
    STOPPED_PIDS+=("${pids[@]}")
}

# --- folder -------------------------------------------------------------------------

# Fails unless the cluster folder is missing, empty or one this script made.
check_folder_is_ours() {
    [[ -e "${BASE}" ]] || return 0
    [[ -d "${BASE}" ]] || die "${BASE} exists and is not a folder"
    if [[ ! -e "${BASE}/${MARKER_NAME}" && -n "$(ls -A -- "${BASE}")" ]]; then
        die "${BASE} is not empty and was not made by this script; refusing to use or delete it (set HPC_LOCAL_CLUSTER_DIR)"
    fi
}

wipe_folder() {
    check_folder_is_ours
    rm -rf -- "${BASE}"
}

make_folders() {
    local node
    mkdir -p -- "${BASE}"
    chmod 0755 -- "${BASE}"
    touch -- "${BASE}/${MARKER_NAME}"
    mkdir -p -- "${ETC}" "${RUN}" "${LOGS}" "${BASE}/state" "${BASE}/spool" "${MUNGE_DIR}" "${DB_DIR}"
    for node in $(node_names); do
        mkdir -p -- "${BASE}/spool/slurmd-${node}" "${BASE}/gres/${node}" \
            "${BASE}/localscratch/${node}" "${BASE}/localscratch_lab/${node}"
        chmod 1777 -- "${BASE}/localscratch_lab/${node}"
    done
    # The node-local venv copies of --venv-to-local (the profiles' HPC_VENV_LOCAL_DIR): one
    # path for every node, like /tmp on a real cluster, but this cluster's own.
    mkdir -p -- "${BASE}/localvenvs"
    chmod 1777 -- "${BASE}/localvenvs"
}

# munged and mariadbd run as users munge and mysql: they must reach their folders.
check_service_users_reach_folder() {
    local user users=("${MUNGE_USER}")
    [[ "${ACCOUNTING}" == none ]] || users+=(mysql)
    for user in "${users[@]}"; do
        runuser -u "${user}" -- test -x "${BASE}" ||
            die "user ${user} cannot enter ${BASE}; choose a folder all users can reach (HPC_LOCAL_CLUSTER_DIR)"
    done
}

make_fake_gpus() {
    local node i n=0
    [[ "${GPU_MODE}" == fake ]] || return 0
    for node in $(node_names); do
        for ((i = 0; i < GPUS_PER_NODE; i++)); do
            if [[ "${CGROUPS}" == yes ]]; then
                # The device cgroup allows a job its GPUs' devices: distinct NVIDIA-major
                # devices (minor unique per cluster), never /dev/null's 1:3.
                mknod -m 0666 "${BASE}/gres/${node}/nvidia${i}" c 195 "${n}"
                n=$((n + 1))
            else
                mknod -m 0666 "${BASE}/gres/${node}/nvidia${i}" c 1 3
            fi
        done
    done
}

install_helpers() {
    local helper
    for helper in "${HELPERS[@]}"; do
        install -m 0755 -- "${SCRIPT_DIR}/${helper}" "${ETC}/${helper}"
    done
}

write_settings() {
    printf 'nodes=%s\nmax_array_size=%s\ngpus=%s\nprefix=%s\naccounting=%s\nnode_disks=%s\ncgroups=%s\nprivate_tmp=%s\ncluster_name=%s\nfirst_job_id=%s\nreturn_to_service=%s\n' "${NODES}" \
        "${MAX_ARRAY_SIZE}" "${GPU_MODE}" "$([[ -n "${SLURM_DEBS}" ]] && echo yes || echo no)" \
        "${ACCOUNTING}" "$(node_disks_setting)" "${CGROUPS}" "${PRIVATE_TMP}" "${CLUSTER_NAME}" "${FIRST_JOB_ID}" "${RETURN_TO_SERVICE}" >"${SETTINGS_FILE}"
}

# node_disks_setting: shared, or pernode:PATH (read by prolog.sh, task_prolog.sh, epilog.sh).
node_disks_setting() {
    if [[ "${NODE_DISKS}" == pernode ]]; then
        printf 'pernode:%s' "${NODE_DISK_PATH}"
    else
        printf 'shared'
    fi
}

# --- real GPUs ----------------------------------------------------------------------

# gpu_type NAME: a gres type from an nvidia-smi name, the first word with a digit, in
# lower case, cut at the first dash: "NVIDIA H100 80GB HBM3" -> h100, "Tesla V100-SXM2-16GB"
# -> v100, "NVIDIA GeForce RTX 4090" -> 4090.
gpu_type() {
    local word
    for word in ${1,,}; do
        if [[ "${word}" == *[0-9]* ]]; then
            word="${word%%-*}"
            printf '%s' "${word//[^a-z0-9_]/}"
            return 0
        fi
    done
    printf 'gpu'
}

# Fills GPU_GRES (the node's Gres=) and GPU_LINES (gres.conf) from nvidia-smi: one line
# per GPU, File=NVIDIA_DEV_DIR/nvidiaI, typed by model.
detect_real_gpus() {
    local names=() i type file
    local -A count=()
    command -v nvidia-smi >/dev/null || die "HPC_LOCAL_GPUS=real: nvidia-smi not found (no NVIDIA driver on this machine?)"
    mapfile -t names < <(nvidia-smi --query-gpu=name --format=csv,noheader) ||
        die "HPC_LOCAL_GPUS=real: nvidia-smi --query-gpu=name failed"
    ((${#names[@]} > 0)) || die "HPC_LOCAL_GPUS=real: nvidia-smi lists no GPU"
    GPU_LINES=()
    for i in "${!names[@]}"; do
        type="$(gpu_type "${names[i]}")"
        file="${NVIDIA_DEV_DIR}/nvidia${i}"
        [[ -c "${file}" ]] || die "HPC_LOCAL_GPUS=real: GPU ${i} (${names[i]}) has no device file ${file} (HPC_LOCAL_NVIDIA_DEV_DIR)"
        count[${type}]=$((${count[${type}]:-0} + 1))
        GPU_LINES+=("NodeName=node1 Name=gpu Type=${type} File=${file}")
    done
    GPU_GRES=""
    for type in "${!count[@]}"; do
        GPU_GRES+="${GPU_GRES:+,}gpu:${type}:${count[${type}]}"
    done
    log "real GPUs: ${#names[@]} (${names[0]}; gres ${GPU_GRES})"
}

# --- Slurm from .deb files ----------------------------------------------------------

# Unpacks the .deb files into PREFIX and writes BIN: one wrapper per command. The daemons
# get the prefix's libraries through LD_LIBRARY_PATH (their process names stay slurmd,
# munged...); the clients through the dynamic loader's --library-path, so that sbatch
# does not hand an LD_LIBRARY_PATH on to the jobs' environment.
install_prefix() {
    local deb libs loader name target
    [[ -n "${SLURM_DEBS}" ]] || return 0
    command -v dpkg-deb >/dev/null || die "HPC_LOCAL_SLURM_PREFIX needs dpkg-deb to unpack the .deb files"
    loader=/lib64/ld-linux-x86-64.so.2
    [[ -x "${loader}" ]] || die "HPC_LOCAL_SLURM_PREFIX: no ${loader} (the packages are for x86-64 glibc)"
    log "unpacking $(compgen -G "${SLURM_DEBS}/*.deb" | wc -l) packages from ${SLURM_DEBS} into ${PREFIX}"
    mkdir -p -- "${PREFIX}" "${BIN}"
    for deb in "${SLURM_DEBS}"/*.deb; do
        dpkg-deb -x "${deb}" "${PREFIX}" || die "dpkg-deb -x ${deb} failed"
    done
    libs="${PREFIX}/usr/lib/x86_64-linux-gnu:${PREFIX}/usr/lib/x86_64-linux-gnu/slurm-wlm:${PREFIX}/lib/x86_64-linux-gnu"
    # Debian's alternatives: slurmd -> slurmd-wlm (the link's name is the process name).
    for name in slurmctld slurmd slurmstepd; do
        ln -sfn "${name}-wlm" "${PREFIX}/usr/sbin/${name}"
    done
    for target in "${PREFIX}"/usr/sbin/{slurmctld,slurmd,slurmstepd,munged}; do
        # shellcheck disable=SC2016 # the wrapper expands $LD_LIBRARY_PATH when it runs
        printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexport LD_LIBRARY_PATH\nexec %s "$@"\n' \
            "${libs}" "${target}" >"${BIN}/${target##*/}"
    done
    for target in "${PREFIX}"/usr/bin/*; do
        if [[ "$(head -c 4 -- "${target}")" == $'\x7fELF' ]]; then
            printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "${loader}" "${libs}" "${target}" >"${BIN}/${target##*/}"
        else # a script (bats)
            printf '#!/bin/sh\nexec %s "$@"\n' "${target}" >"${BIN}/${target##*/}"
        fi
    done
    chmod 0755 -- "${BIN}"/*
    # munged runs as user munge where there is one; else as nobody (never as root).
    id -u munge >/dev/null 2>&1 || MUNGE_USER=nobody
    hash -r
    if ! "${BIN}/slurmd" -V >/dev/null || ! "${BIN}/munged" --version >/dev/null; then
        die "the unpacked Slurm or munge does not run here (${BIN}/slurmd -V or munged --version failed)"
    fi
}

# tracking_conf: slurm.conf's process tracking and task plugins (cgroups or none).
tracking_conf() {
    if [[ "${CGROUPS}" == yes ]]; then
        printf 'ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup,task/affinity\n'
    else
        printf 'ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n'
    fi
}

# container_conf: PrologFlags, and with a private /tmp the job container plugin.
container_conf() {
    if [[ "${PRIVATE_TMP}" == yes ]]; then
        printf 'PrologFlags=Alloc,Contain\nJobContainerType=job_container/tmpfs\n'
    else
        printf 'PrologFlags=Alloc\n'
    fi
}

# write_job_container_conf: each node's base folder for its jobs' private /tmp.
write_job_container_conf() {
    [[ "${PRIVATE_TMP}" == yes ]] || return 0
    local node
    {
        printf '# Generated by tests/cluster/local_cluster.sh - a private /tmp per job and node.\nAutoBasePath=true\n'
        for node in $(node_names); do
            printf 'NodeName=%s BasePath=%s/jobtmp/%s\n' "${node}" "${BASE}" "${node}"
        done
    } >"${ETC}/job_container.conf"
}

# With cgroup v2 and no systemd, slurmd 22.05 needs to be told not to ask systemd for
# its scope (no dbus), and the folder it would have made. With HPC_LOCAL_CGROUPS=yes the
# constraints, on whichever cgroup version this machine mounts.
write_cgroup_conf() {
    local v2=no
    [[ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" != cgroup2fs ]] || v2=yes
    if [[ "${CGROUPS}" == yes ]]; then
        {
            printf '# Generated by tests/cluster/local_cluster.sh - cgroup enforcement.\n'
            if [[ "${v2}" == yes ]]; then
                printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\nIgnoreSystemdOnFailure=yes\n'
            else
                printf 'CgroupPlugin=cgroup/v1\n'
            fi
            printf 'ConstrainCores=yes\nConstrainRAMSpace=yes\nConstrainDevices=yes\n'
        } >"${ETC}/cgroup.conf"
        [[ "${v2}" == no ]] || mkdir -p /sys/fs/cgroup/system.slice || true
        return 0
    fi
    [[ "${v2}" == yes && ! -d /run/systemd/system ]] || return 0
    printf '# Generated by tests/cluster/local_cluster.sh - cgroup v2 without systemd.\nCgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\nIgnoreSystemdOnFailure=yes\n' >"${ETC}/cgroup.conf"
    mkdir -p /sys/fs/cgroup/system.slice || log "could not make /sys/fs/cgroup/system.slice; slurmd may fail to start"
}

# Prints the value of setting $1 of the cluster in the folder (empty if none).
read_setting() {
    [[ -f "${SETTINGS_FILE}" ]] || return 0
    sed -n "s/^$1=//p" "${SETTINGS_FILE}"
}

# setting_or NAME DEFAULT: the setting, or DEFAULT for a cluster started before it existed.
setting_or() {
    local value
    value="$(read_setting "$1")"
    printf '%s' "${value:-$2}"
}

# --- configuration files ------------------------------------------------------------

# The accounting lines of slurm.conf: slurmdbd, or none (a job completion file, sacct -c).
accounting_conf() {
    if [[ "${ACCOUNTING}" == none ]]; then
        printf 'AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/filetxt\nJobCompLoc=%s\n' "${LOGS}/jobcomp.txt"
        return 0
    fi
    printf '%s\n' "AccountingStorageType=accounting_storage/slurmdbd" "AccountingStorageHost=127.0.0.1" \
        "AccountingStoragePort=${DBD_PORT}" \
        "# Munge socket for the connections to slurmdbd (AuthInfo does not apply to them)." \
        "AccountingStoragePass=${MUNGE_SOCKET}" "AccountingStorageTRES=gres/gpu"
}

write_slurm_conf() {
    local host gres="gpu:${GPUS_PER_NODE}" cpus="${CPUS_PER_NODE}" extra=""
    host="$(hostname -s)"
    if [[ "${GPU_MODE}" == real ]]; then
        gres="${GPU_GRES}"
        cpus="$(nproc)"
        ((cpus >= CPUS_PER_NODE)) || cpus="${CPUS_PER_NODE}"
    fi
    [[ -z "${SLURM_DEBS}" ]] || extra="PluginDir=${PREFIX}/usr/lib/x86_64-linux-gnu/slurm-wlm"
    cat >"${SLURM_CONF_FILE}" <<EOF
# Generated by tests/cluster/local_cluster.sh - local multi-node test cluster.
ClusterName=${CLUSTER_NAME}
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=${CTLD_PORT}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=${MUNGE_SOCKET},cred_expire=10
CredType=cred/munge
StateSaveLocation=${BASE}/state
SlurmdSpoolDir=${BASE}/spool/slurmd-%n
SlurmctldPidFile=${CTLD_PID}
SlurmdPidFile=${RUN}/slurmd-%n.pid
SlurmctldLogFile=${LOGS}/slurmctld.log
SlurmdLogFile=${LOGS}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
$(tracking_conf)
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
EnforcePartLimits=ALL
SchedulerParameters=bf_interval=1,sched_interval=1,sched_min_interval=0
KillWait=5
OverTimeLimit=0
MinJobAge=300
MaxJobCount=100000
# Clusters side by side (port offsets) number their jobs apart, so that two of them never
# make the same /tmp/hpc_job_<id> on this one machine's shared /tmp, and apart modulo
# 10,000 too: a multi-node job's MASTER_PORT is derived from its job id modulo 10,000, and
# these clusters share one host's ports (job 6 and job 300006 both took port 20006, and
# the second one's rendezvous failed with EADDRINUSE).
FirstJobId=${FIRST_JOB_ID}
MaxArraySize=${MAX_ARRAY_SIZE}
ReturnToService=${RETURN_TO_SERVICE}
$(container_conf)
Prolog=${ETC}/prolog.sh
Epilog=${ETC}/epilog.sh
TaskProlog=${ETC}/task_prolog.sh
GresTypes=gpu
$(accounting_conf)
JobAcctGatherType=jobacct_gather/linux
${extra}
$(node_lines "${gres}" "${cpus}")
# Preemption: only a job of 'urgent' preempts, and only jobs of 'preemptible' (the last
# node; requeued by Slurm after GraceTime). The other partitions' jobs are never preempted.
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName=tmpdir Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=1 PreemptMode=OFF
PartitionName=notmpdir Nodes=ALL Default=NO MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=1 PreemptMode=OFF
PartitionName=preemptible Nodes=node${NODES} Default=NO MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=1 PreemptMode=REQUEUE GraceTime=${PREEMPT_GRACE_S}
PartitionName=urgent Nodes=node${NODES} Default=NO MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=2 PreemptMode=OFF
# Variations that break job scripts: Slurm sets only TMPDIR (no SLURM_TMPDIR) in 'tmponly';
# 'short' has a MaxTime of ${SHORT_MAX_TIME_MIN} minutes.
PartitionName=tmponly Nodes=ALL Default=NO MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=1 PreemptMode=OFF
PartitionName=short Nodes=ALL Default=NO MaxTime=${SHORT_MAX_TIME_MIN} State=UP OverSubscribe=NO PriorityTier=1 PreemptMode=OFF
EOF
}

# typed_gpu_node NAME: the second half of the nodes (from node2 on) have typed GPUs
# (Gres=gpu:a100:N), the first half untyped ones (gpu:N); --gres=gpu:N takes either.
typed_gpu_node() {
    local n="${1#node}"
    ((NODES > 1 && n > NODES / 2))
}

# node_lines GRES CPUS: the NodeName lines. Real GPUs (HPC_LOCAL_GPUS=real): one line for
# every node with GRES and CPUS; fake ones: one line per node, typed or untyped.
node_lines() {
    local node gres
    if [[ "${GPU_MODE}" == real ]]; then
        printf 'NodeName=node[1-%d] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[%d-%d] CPUs=%s RealMemory=%d Gres=%s State=UNKNOWN\n' \
            "${NODES}" $((NODE_PORT_BASE + 1)) $((NODE_PORT_BASE + NODES)) "$2" "${MEMORY_PER_NODE}" "$1"
        return 0
    fi
    for node in $(node_names); do
        gres="gpu:${GPUS_PER_NODE}"
        ! typed_gpu_node "${node}" || gres="gpu:${TYPED_GPU}:${GPUS_PER_NODE}"
        printf 'NodeName=%s NodeHostname=localhost NodeAddr=127.0.0.1 Port=%d CPUs=%d RealMemory=%d Gres=%s State=UNKNOWN\n' \
            "${node}" $((NODE_PORT_BASE + ${node#node})) "${CPUS_PER_NODE}" "${MEMORY_PER_NODE}" "${gres}"
    done
}

write_gres_conf() {
    local node type
    if [[ "${GPU_MODE}" == real ]]; then
        {
            printf '# Generated by tests/cluster/local_cluster.sh - the real GPUs of this machine (nvidia-smi).\n'
            printf '%s\n' "${GPU_LINES[@]}"
        } >"${ETC}/gres.conf"
        return 0
    fi
    {
        printf '# Generated by tests/cluster/local_cluster.sh - fake GPUs (copies of /dev/null).\n'
        for node in $(node_names); do
            type=""
            ! typed_gpu_node "${node}" || type=" Type=${TYPED_GPU}"
            printf 'NodeName=%s Name=gpu%s File=%s/gres/%s/nvidia[0-%d]\n' \
                "${node}" "${type}" "${BASE}" "${node}" $((GPUS_PER_NODE - 1))
        done
    } >"${ETC}/gres.conf"
}

write_slurmdbd_conf() {
    local file="${ETC}/slurmdbd.conf"
    install -m 0600 /dev/null "${file}"
    cat >"${file}" <<EOF
# Generated by tests/cluster/local_cluster.sh - accounting daemon of the test cluster.
AuthType=auth/munge
AuthInfo=socket=${MUNGE_SOCKET}
DbdHost=$(hostname -s)
DbdAddr=127.0.0.1
DbdPort=${DBD_PORT}
SlurmUser=root
PidFile=${DBD_PID}
LogFile=${LOGS}/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=${DB_PORT}
StorageUser=slurm
StoragePass=$1
StorageLoc=slurm_acct_db
EOF
}

# --- daemons ------------------------------------------------------------------------

start_munge() {
    log "starting munged"
    chown "${MUNGE_USER}:" -- "${MUNGE_DIR}"
    chmod 0755 -- "${MUNGE_DIR}"
    head -c 1024 /dev/urandom >"${MUNGE_DIR}/munge.key"
    chown "${MUNGE_USER}:" -- "${MUNGE_DIR}/munge.key"
    chmod 0400 -- "${MUNGE_DIR}/munge.key"
    # By path: runuser need not keep PATH, where a private prefix's munged is first.
    runuser -u "${MUNGE_USER}" -- "$(command -v munged)" \
        --socket="${MUNGE_SOCKET}" \
        --key-file="${MUNGE_DIR}/munge.key" \
        --pid-file="${MUNGE_PID}" \
        --log-file="${MUNGE_DIR}/munged.log" \
        --seed-file="${MUNGE_DIR}/munged.seed" ||
        die "munged failed to start; see ${MUNGE_DIR}/munged.log"
    wait_until 10 live_pid "${MUNGE_PID}" munged >/dev/null ||
        die "munged did not start; see ${MUNGE_DIR}/munged.log"
}

db_options() {
    printf '%s\n' --no-defaults --user=mysql "--datadir=${DB_DIR}/data" "--tmpdir=${DB_DIR}/tmp" \
        --innodb-log-file-size=8M --innodb-buffer-pool-size=32M --innodb-lock-wait-timeout=900
}

# Runs SQL $1 as MariaDB's root (over the socket; the SQL goes through stdin, not argv).
db_query() {
    mariadb --no-defaults --socket="${DB_SOCKET}" -u root <<<"$1"
}

start_mariadb() {
    local opts
    mapfile -t opts < <(db_options)
    log "initialising MariaDB in ${DB_DIR}"
    mkdir -p -- "${DB_DIR}/tmp"
    chown mysql:mysql -- "${DB_DIR}" "${DB_DIR}/tmp"
    mariadb-install-db "${opts[@]}" --auth-root-authentication-method=socket --skip-test-db \
        >"${LOGS}/mariadb-install.log" 2>&1 ||
        die "mariadb-install-db failed; see ${LOGS}/mariadb-install.log"
    # mariadbd-safe restarts mariadbd if it crashes (10.11 was seen to die with signal 11
    # in an on-disk temporary table under load, which took accounting down for the rest
    # of the run); its own pid file lets stop end it before the server.
    log "starting mariadbd (under mariadbd-safe)"
    setsid mariadbd-safe "${opts[@]}" --skip-syslog --socket="${DB_SOCKET}" --pid-file="${DB_PID}" \
        --log-error="${DB_DIR}/error.log" --port="${DB_PORT}" --bind-address=127.0.0.1 \
        --skip-name-resolve --skip-log-bin </dev/null >/dev/null 2>&1 &
    printf '%s\n' "$!" >"${DB_SAFE_PID}"
    wait_until "${START_TIMEOUT_S}" db_query 'SELECT 1' >/dev/null 2>&1 ||
        die "mariadbd did not start; see ${DB_DIR}/error.log"
}

create_db_user() {
    local password="$1"
    db_query "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '${password}';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
FLUSH PRIVILEGES;" || die "could not create the MariaDB user for slurmdbd"
}

dbd_ready() { sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1; }

start_slurmdbd() {
    local password
    password="$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
    create_db_user "${password}"
    write_slurmdbd_conf "${password}"
    log "starting slurmdbd"
    slurmdbd || die "slurmdbd failed to start; see ${LOGS}/slurmdbd.log"
    wait_until "${START_TIMEOUT_S}" dbd_ready ||
        die "slurmdbd did not answer within ${START_TIMEOUT_S} s; see ${LOGS}/slurmdbd.log"
    sacctmgr -i add cluster "${CLUSTER_NAME}" >/dev/null ||
        die "sacctmgr could not add cluster ${CLUSTER_NAME}; see ${LOGS}/slurmdbd.log"
}

start_slurmctld() {
    log "starting slurmctld"
    slurmctld -f "${SLURM_CONF_FILE}" -c || die "slurmctld failed to start; see ${LOGS}/slurmctld.log"
    wait_until "${START_TIMEOUT_S}" scontrol ping >/dev/null 2>&1 ||
        die "slurmctld did not answer within ${START_TIMEOUT_S} s; see ${LOGS}/slurmctld.log"
}

start_slurmds() {
    local node
    log "starting ${NODES} slurmd (node1..node${NODES})"
    local stepd=()
    # slurmd runs slurmstepd from its compiled-in path unless told: the prefix's one.
    [[ -z "${SLURM_DEBS}" ]] || stepd=(-d "${BIN}/slurmstepd")
    if [[ "${NODE_DISKS}" == pernode ]]; then
        log "each slurmd in its own mount namespace, its node's disk at ${NODE_DISK_PATH}"
        mkdir -p -- "${NODE_DISK_PATH}"
    fi
    for node in $(node_names); do
        if [[ "${NODE_DISKS}" == pernode ]]; then
            # Its steps, prolog and epilog inherit the namespace; stopping slurmd by pid
            # ends it, and nothing stays mounted on the host.
            # shellcheck disable=SC2016 # expanded by sh
            unshare -m --propagation slave sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh \
                "${BASE}/localscratch/${node}" "${NODE_DISK_PATH}" \
                "$(command -v slurmd)" -f "${SLURM_CONF_FILE}" -N "${node}" "${stepd[@]}" ||
                die "slurmd ${node} failed to start in its mount namespace; see ${LOGS}/slurmd-${node}.log"
        else
            slurmd -f "${SLURM_CONF_FILE}" -N "${node}" "${stepd[@]}" ||
                die "slurmd ${node} failed to start; see ${LOGS}/slurmd-${node}.log"
        fi
    done
}

idle_node_count() {
    sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l
}

all_nodes_idle() { [[ "$(idle_node_count)" -eq "${NODES}" ]]; }

wait_nodes_idle() {
    wait_until "${START_TIMEOUT_S}" all_nodes_idle || {
        sinfo -N >&2 || true
        die "only $(idle_node_count) of ${NODES} nodes became idle within ${START_TIMEOUT_S} s; see ${LOGS}/slurmctld.log and ${LOGS}/slurmd-node*.log"
    }
}

# --- commands -----------------------------------------------------------------------

daemon_list() {
    local node
    printf '%s\n' "${MUNGE_PID}:munged"
    [[ "${ACCOUNTING}" == none ]] || printf '%s\n' "${DB_PID}:mariadbd" "${DBD_PID}:slurmdbd"
    printf '%s\n' "${CTLD_PID}:slurmctld"
    for node in $(node_names); do
        printf '%s:slurmd\n' "$(slurmd_pid_file "${node}")"
    done
}

healthy() {
    local pair
    [[ -f "${SETTINGS_FILE}" ]] || return 1
    NODES="$(read_setting nodes)"
    ACCOUNTING="$(read_setting accounting)"
    ACCOUNTING="${ACCOUNTING:-slurmdbd}"
    while IFS= read -r pair; do
        live_pid "${pair%%:*}" "${pair##*:}" >/dev/null || return 1
    done < <(daemon_list)
    scontrol ping >/dev/null 2>&1
}

print_env() {
    # shellcheck disable=SC2016 # $PATH is expanded where the lines are eval'd
    [[ ! -d "${BIN}" ]] || printf 'export PATH=%q:"$PATH"\n' "${BIN}"
    printf 'export SLURM_CONF=%q\n' "${SLURM_CONF_FILE}"
    printf 'export HPC_LOCAL_CLUSTER_DIR=%q\n' "${BASE}"
}

cancel_all_jobs() {
    local jobs
    live_pid "${CTLD_PID}" slurmctld >/dev/null || return 0
    jobs="$(timeout 10 squeue -h -o '%A' 2>/dev/null || true)"
    [[ -n "${jobs}" ]] || return 0
    log "cancelling jobs: ${jobs//$'\n'/ }"
    # shellcheck disable=SC2086 # one job id per word
    timeout 10 scancel ${jobs} 2>/dev/null || true
    wait_until "${STOP_TIMEOUT_S}" queue_empty || log "jobs still listed after ${STOP_TIMEOUT_S} s; stopping anyway"
}

queue_empty() { [[ -z "$(timeout 10 squeue -h -o '%A' 2>/dev/null)" ]]; }

# Prints pid $1 and the pids of all its descendants.
process_tree() {
    local child
    printf '%s\n' "$1"
    for child in $(pgrep -P "$1" || true); do
        process_tree "${child}"
    done
}

# Step daemons outlive slurmd. Those of this cluster run in its log folder (slurmd's
# working directory); kill any left after the jobs were cancelled, with the job
# processes under them, by pid.
# The folder is compared by device and inode, not by path: inside a chroot
# (tests/setup/slurm_chroot.sh) /proc also lists the host's processes, and a host cluster
# in a folder of the same path name must not be touched.
kill_stray_stepds() {
    local proc pids=() logs_id
    logs_id="$(stat -L -c '%d:%i' -- "${LOGS}" 2>/dev/null)" || return 0
    for proc in /proc/[0-9]*; do
        [[ "$(cat "${proc}/comm" 2>/dev/null)" == "slurmstepd" ]] || continue
        [[ "$(stat -L -c '%d:%i' -- "${proc}/cwd" 2>/dev/null)" == "${logs_id}" ]] || continue
        mapfile -t -O "${#pids[@]}" pids < <(process_tree "${proc#/proc/}")
    done
    ((${#pids[@]} > 0)) || return 0
    log "killing leftover slurmstepd and job processes: ${pids[*]}"
    kill -KILL "${pids[@]}" 2>/dev/null || true
    wait_until 5 all_gone "${pids[@]}" || log "slurmstepd ${pids[*]} did not exit"
    STOPPED_PIDS+=("${pids[@]}")
}

cmd_stop() {
    local slurmds=() node_pid
    cancel_all_jobs
    for node_pid in "${RUN}"/slurmd-*.pid; do
        if [[ -e "${node_pid}" ]]; then
            slurmds+=("${node_pid}:slurmd")
        fi
    done
    stop_daemons "${slurmds[@]}" "${CTLD_PID}:slurmctld"
    kill_stray_stepds
    stop_daemons "${DBD_PID}:slurmdbd"
    # The supervisor first (it ignores SIGTERM; a shell loop, so SIGKILL loses nothing),
    # or it would restart a server that stop had to SIGKILL.
    local safe
    if safe="$(live_pid "${DB_SAFE_PID}" mariadbd-safe)"; then
        kill -KILL "${safe}" 2>/dev/null || true
        STOPPED_PIDS+=("${safe}")
    fi
    stop_daemons "${DB_PID}:mariadbd"
    stop_daemons "${MUNGE_PID}:munged"
    # Exited daemons are zombies until init reaps them; give it a moment so that pgrep
    # shows nothing afterwards (without hanging where init never reaps).
    if ((${#STOPPED_PIDS[@]} > 0)); then
        wait_until 3 all_reaped "${STOPPED_PIDS[@]}" || true
        log "stopped (files kept in ${BASE})"
    else
        log "nothing was running in ${BASE}"
    fi
}

cmd_start() {
    local t0="${SECONDS}"
    local want_accounting="${ACCOUNTING}"
    if healthy; then
        if [[ "$(read_setting nodes)" == "${REQUESTED_NODES}" &&
            "$(read_setting max_array_size)" == "${MAX_ARRAY_SIZE}" &&
            "$(read_setting gpus)" == "${GPU_MODE}" &&
            "$(read_setting accounting)" == "${want_accounting}" &&
            "$(read_setting node_disks)" == "$(node_disks_setting)" &&
            "$(read_setting cgroups)" == "${CGROUPS}" &&
            "$(read_setting private_tmp)" == "${PRIVATE_TMP}" &&
            "$(setting_or cluster_name hpclocal)" == "${CLUSTER_NAME}" &&
            "$(setting_or first_job_id $((PORT_OFFSET * 1013 + 1)))" == "${FIRST_JOB_ID}" &&
            "$(setting_or return_to_service 2)" == "${RETURN_TO_SERVICE}" &&
            "$(read_setting prefix)" == "$([[ -n "${SLURM_DEBS}" ]] && echo yes || echo no)" ]]; then
            log "already running (${NODES} nodes) in ${BASE}"
            print_env
            return 0
        fi
        log "running with other settings; restarting"
    fi
    NODES="${REQUESTED_NODES}"
    check_folder_is_ours
    ensure_packages
    if [[ -d "${BASE}" ]]; then
        cmd_stop
    fi
    NODES="${REQUESTED_NODES}"
    ACCOUNTING="${want_accounting}"
    check_ports_free
    if [[ "${PRIVATE_TMP}" == yes && ( "${BASE}" == /tmp || "${BASE}" == /tmp/* ) ]]; then
        die "HPC_LOCAL_PRIVATE_TMP=yes hides /tmp from the jobs, and Slurm's own files with it: put HPC_LOCAL_CLUSTER_DIR outside /tmp (e.g. /var/tmp/hpc_local_cluster)"
    fi
    [[ "${GPU_MODE}" != real ]] || detect_real_gpus
    wipe_folder
    make_folders
    install_prefix
    check_service_users_reach_folder
    write_settings
    make_fake_gpus
    install_helpers
    write_slurm_conf
    write_gres_conf
    write_cgroup_conf
    write_job_container_conf
    start_munge
    if [[ "${ACCOUNTING}" != none ]]; then
        start_mariadb
        start_slurmdbd
    fi
    start_slurmctld
    start_slurmds
    wait_nodes_idle
    log "cluster up: ${NODES} idle nodes, partitions tmpdir (default), notmpdir, preemptible, urgent, tmponly and short, in $((SECONDS - t0)) s"
    print_env
}

cmd_status() {
    local pair pid rc=0
    if [[ ! -f "${SETTINGS_FILE}" ]]; then
        log "no cluster in ${BASE}"
        return 1
    fi
    NODES="$(read_setting nodes)"
    ACCOUNTING="$(read_setting accounting)"
    ACCOUNTING="${ACCOUNTING:-slurmdbd}"
    while IFS= read -r pair; do
        if pid="$(live_pid "${pair%%:*}" "${pair##*:}")"; then
            printf '%-10s running  pid %s  (%s)\n' "${pair##*:}" "${pid}" "${pair%%:*}"
        else
            printf '%-10s STOPPED  (%s)\n' "${pair##*:}" "${pair%%:*}"
            rc=1
        fi
    done < <(daemon_list)
    if ((rc == 0)); then
        sinfo || rc=1
    fi
    return "${rc}"
}

cmd_env() {
    [[ -f "${SETTINGS_FILE}" ]] || log "warning: no cluster in ${BASE} yet (run start)"
    print_env
}

main() {
    local command=""
    while (($# > 0)); do
        case "$1" in
            -h | --help)
                usage
                return 0
                ;;
            --nodes)
                (($# >= 2)) || die "--nodes needs a value"
                NODES="$2"
                NODES_GIVEN=1
                shift
                ;;
            --nodes=*) NODES="${1#--nodes=}" NODES_GIVEN=1 ;;
            start | stop | status | env)
                [[ -z "${command}" ]] || die "only one command allowed (got '${command}' and '$1')"
                command="$1"
                ;;
            *)
                usage >&2
                die "unknown argument '$1'"
                ;;
        esac
        shift
    done
    [[ -n "${command}" ]] || {
        usage >&2
        exit 2
    }
    validate_nodes
    REQUESTED_NODES="${NODES}"
    set_paths
    case "${command}" in
        start)
            require_root
            cmd_start
            ;;
        stop)
            require_root
            cmd_stop
            ;;
        status) cmd_status ;;
        env) cmd_env ;;
    esac
}

main "$@"
