#!/bin/bash
# Job side: the preflight of one node, before the program (docs/requeue.md, "Preflight").
# Run once per node (one srun task per node, or sourced in a subshell of the batch shell on
# a one-node job: it then sets its variables there only) by
# hpc_preflight (longruns.sh), which reads the verdicts:
#   $HPC_PREFLIGHT_DIR/NODE.ok     the node is ready
#   $HPC_PREFLIGHT_DIR/NODE.fail   "WHY message": gpus, gpu-health, scratch, scratch-room,
#                                  rendezvous or user-check, and what was seen
# Checks only what is cheap: the GPUs asked for are visible (and nvidia-smi answers, where
# it exists); the node-local scratch can be written and has room for --data; on a
# multi-node job the first node's rendezvous port answers (HPC_PREFLIGHT_ADDR/PORT, where
# the batch shell listens); the user's --preflight COMMAND exits 0 (with the project's venv
# first on PATH). Exits 1 when the node failed, after one log line saying why.
set -u
# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"

hpc_node_name_to node
dir=${HPC_PREFLIGHT_DIR:?}
done_checks=()

fail() {
  printf '%s %s\n' "$1" "$2" >"$dir/$node.fail" 2>/dev/null
  hpc_log "preflight failed on $node: $2"
  exit 1
}

# The GPUs asked for.
want=${HPC_GPUS_PER_NODE:-0}
if ((want > 0)); then
  seen=""
  if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
    IFS=, read -r -a devs <<<"$CUDA_VISIBLE_DEVICES"
    seen=${#devs[@]}
  fi
  if command -v nvidia-smi >/dev/null; then
    out=$(timeout 60 nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader 2>&1) ||
      fail gpu-health "nvidia-smi failed (exit $?): ${out:0:300}"
    [[ -n $seen ]] || seen=$(grep -c . <<<"$out")
  fi
  [[ -n $seen ]] || fail gpus "asked for $want GPU(s), none visible (no CUDA_VISIBLE_DEVICES, no nvidia-smi)"
  ((seen >= want)) || fail gpus "asked for $want GPU(s), $seen visible (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-})"
  done_checks+=("$seen GPU(s)")
fi

# The node-local scratch: Slurm's folder for the job when it makes one (and the profile
# does not say otherwise), else the profile's HPC_LOCAL_SCRATCH on this node, where the job
# will make its own folder. A HPC_LOCAL_SCRATCH that is missing, or not safe for the job's
# files, is the profile's to fix, not this node's: the job's set-up says so (staging.sh,
# node_tmpdir.sh), and a node is not excluded for it.
scratch=""
[[ ${HPC_PROVIDES_TMPDIR:-auto} == no ]] || hpc_slurm_tmpdir_to scratch
if [[ -z $scratch || ! -d $scratch ]]; then
  hpc_node_path_to scratch "${HPC_LOCAL_SCRATCH:-/tmp}" 2>/dev/null || scratch=""
  unsafe=""
  [[ -z $scratch || ! -d $scratch ]] || hpc_unsafe_chain_to unsafe "$scratch"
  [[ -d $scratch && -z $unsafe ]] || scratch=""
fi
if [[ -n $scratch ]]; then
  # 64 KiB written by the shell itself (no mktemp, no head: each task runs this), into a
  # new file only (noclobber: never through a name someone else made, in a sticky folder).
  probe=$scratch/.hpc_preflight.$$.$RANDOM
  set -C
  if ! { printf '%65536s' '' >"$probe"; } 2>/dev/null; then
    set +C
    if [[ -f $probe && ! -L $probe ]]; then # made, not written whole
      rm -f -- "$probe"
      fail scratch "local scratch $scratch cannot be written (64 KiB failed: full?)"
    fi
    fail scratch "local scratch $scratch cannot be written"
  fi
  set +C
  rm -f -- "$probe"
  need=${HPC_DATA_BYTES:-0}
  is_size "$need" || need=0
  free_k=""
  # (no df without --data: nothing to compare its figure with)
  ((need == 0)) || free_k=$(df -Pk -- "$scratch" 2>/dev/null | awk 'NR == 2 { print $4 }')
  if is_size "${free_k:-}" && ((need > 0 && free_k * 1024 < need)); then
    human_bytes_to need_h "$need"
    human_bytes_to free_h "$((free_k * 1024))"
    fail scratch-room "local scratch $scratch has $free_h free, --data needs $need_h"
  fi
  done_checks+=("local scratch writable")
fi

# The first node's rendezvous port, from every node (the first one too).
if [[ -n ${HPC_PREFLIGHT_ADDR:-} && -n ${HPC_PREFLIGHT_PORT:-} ]]; then
  reached=0
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    # shellcheck disable=SC2016 # expanded by that bash
    if timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$HPC_PREFLIGHT_ADDR" "$HPC_PREFLIGHT_PORT" 2>/dev/null; then
      reached=1
      break
    fi
    sleep 1
  done
  ((reached)) || fail rendezvous "cannot reach the first node's rendezvous port $HPC_PREFLIGHT_ADDR:$HPC_PREFLIGHT_PORT (a firewall, or a network that is down?)"
  done_checks+=("rendezvous $HPC_PREFLIGHT_ADDR:$HPC_PREFLIGHT_PORT")
fi

# The user's own check, with the project's venv first on PATH.
if [[ -n ${HPC_PREFLIGHT:-} ]]; then
  path=$PATH
  [[ ${HPC_VENV:-none} == none || ! -d ${HPC_VENV:-}/bin ]] || path=$HPC_VENV/bin:$PATH
  rc=0
  out=$(cd -- "${HPC_SOURCE_DIR:-.}" 2>/dev/null; PATH=$path timeout 600 bash -c "$HPC_PREFLIGHT" </dev/null 2>&1) || rc=$?
  if ((rc != 0)); then
    last=${out##*$'\n'}
    fail user-check "--preflight exited $rc${last:+: ${last:0:300}}"
  fi
  done_checks+=("--preflight")
fi

{ : >"$dir/$node.ok"; } 2>/dev/null
if ((${#done_checks[@]})); then
  msg=$(IFS=, && printf '%s' "${done_checks[*]}")
  hpc_log "preflight ok on $node: ${msg//,/, }"
fi
exit 0
