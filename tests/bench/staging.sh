#!/usr/bin/env bash
# Summary: --data staging of 20,000 files of 8 KiB (random bytes, like images) on the local
# cluster. Staging (archive build + in-job extraction) against `cp -r` and `rsync -a` of
# the folder to the node's local disk; in-job extraction against a bare `tar -xf` of the
# same archive on the same disk (the floor; target: within 1.3x); the time a resubmission
# with unchanged data spends deciding to reuse the archive (target: under 100 ms).
# Prints figures (medians); asserts nothing. Caches are warm: on this machine "shared
# scratch" and "local disk" are the same disk, so cp/rsync/tar all read from memory; each
# measurement starts after a sync. The "2 nodes" of the test cluster share one disk.
#
# Usage: bash tests/bench/staging.sh [REPEATS]    (default 3: jobs, and copies per job)
set -euo pipefail
# shellcheck source=tests/bench/common.sh
source "${BASH_SOURCE[0]%/*}/common.sh"

repeats=${1:-3}
files=20000 per_dir=200
bench_setup staging
cd "$BENCH_PROJECT"
data=$SCRATCH/${BENCH_PROJECT##*/}
mkdir -p "$data/bench_ds"
for ((d = 0; d < files / per_dir; d++)); do
  mkdir "$data/bench_ds/d$d"
  head -c $((per_dir * 8192)) /dev/urandom | (cd "$data/bench_ds/d$d" && split -b 8192 -a 3 - f_)
done

# In the job, on the job's own disk: our per-node extraction (the function the job ran at
# its start: node_tmpdir.sh, free-space check included), the floor, and the two plain
# copies; REPEATS rounds, the order rotated each round.
cat >bench_job.sh <<'JOB'
source "$source_dir/virtual_env_hpc_files/node_tmpdir.sh"
ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
out=$HPC_RESULTS_DIR/bench.txt
kinds=(ours floor cp rsync)
for ((i = 0; i < $1; i++)); do
  for ((k = 0; k < ${#kinds[@]}; k++)); do
    what=${kinds[(i + k) % ${#kinds[@]}]}
    d=$SLURM_TMPDIR/${what}_$i
    mkdir -p "$d"
    sync # start each copy with no dirty pages of the one before
    t0=$(ms)
    case $what in
      ours) hpc_node_extract "$d" "$HPC_DATA_ARCHIVE" "$HPC_DATA_BYTES" ;;
      floor) tar -xf "$HPC_DATA_ARCHIVE" -C "$d" ;;
      cp) cp -r "$scratch_dir/bench_ds" "$d/" ;;
      rsync) rsync -a "$scratch_dir/bench_ds" "$d/" ;;
    esac
    echo "$what $(($(ms) - t0))" >>"$out"
    rm -rf "$d"
  done
done
sync
JOB
printf 'bash bench_job.sh %d\n' "$repeats" >experiment_configurations.txt

# submit ARGS...: submit (exp name hpc_bench_N), timed: SUBMIT_MS, SUBMIT_ID, stderr in
# $BENCH_TMP/submit_N.err.
n=0
submit() {
  local t0 t1 out
  n=$((n + 1))
  t0=$(now_ms)
  out=$(bash hpc_files/job_submitter.sh --cluster local -e "hpc_bench_$n" --time 10 "$@" 2>"$BENCH_TMP/submit_$n.err")
  t1=$(now_ms)
  SUBMIT_MS=$((t1 - t0))
  SUBMIT_ID=$(sed -n 's/^Submitted batch job \([0-9]*\).*/\1/p' <<<"$out")
}

wait_done() {
  while [[ -n $(squeue -h -j "$1" -o %i 2>/dev/null) ]]; do sleep 0.5; done
}

# extract_ms EXP ID: our in-job extraction, from the job's log.
extract_ms() {
  local s
  # shellcheck disable=SC2016 # a literal $SLURM_TMPDIR in the log line
  s=$(sed -n 's/.*extracted into \$SLURM_TMPDIR on [0-9]* node(s) in \([0-9.]*\) s$/\1/p' "$data/hpc_outputs/$1-$2.out")
  awk -v s="$s" 'BEGIN { printf "%d", s * 1000 }'
}

dry_ms=() decide_ms=() resubmit_wall=() staged=() ours=() floor=() cps=() rsyncs=()
for ((r = 0; r < repeats; r++)); do
  submit --data bench_ds --dry-run # judging + manifest walk, no job
  dry_ms+=("$SUBMIT_MS")
  sync # the job's extraction starts with no dirty pages of the job before
  submit --data bench_ds
  if ((r == 0)); then
    build_wall=$SUBMIT_MS
    grep -q 'data: building' "$BENCH_TMP/submit_$n.err"
  else
    decide_ms+=("$(sed -n 's/.*reused (decided in \([0-9]*\) ms).*/\1/p' "$BENCH_TMP/submit_$n.err")")
    resubmit_wall+=("$SUBMIT_MS")
  fi
  wait_done "$SUBMIT_ID"
  staged+=("$(extract_ms "hpc_bench_$n" "$SUBMIT_ID")")
  mapfile -t lines <"$data/hpc_bench_$n/results/bench.txt"
  for line in "${lines[@]}"; do
    read -r what t <<<"$line"
    case $what in ours) ours+=("$t") ;; floor) floor+=("$t") ;; cp) cps+=("$t") ;; rsync) rsyncs+=("$t") ;; esac
  done
done
submit
nodata_ms=$SUBMIT_MS
wait_done "$SUBMIT_ID"
# More resubmissions of the unchanged data, to a recording sbatch (no jobs): the decision.
export SBATCH_STUB_LOG=$BENCH_TMP/sbatch_stub.log
for ((r = 0; r < 10; r++)); do
  PATH=$BENCH_ROOT/tests/helpers/stubs:$PATH submit --data bench_ds
  decide_ms+=("$(sed -n 's/.*reused (decided in \([0-9]*\) ms).*/\1/p' "$BENCH_TMP/submit_$n.err")")
done
# The same extraction on 2 nodes at once, one srun step.
printf 'true\n' >experiment_configurations.txt
submit --data bench_ds --which-distributed script --num-nodes 2
wait_done "$SUBMIT_ID"
two_node=$(extract_ms "hpc_bench_$n" "$SUBMIT_ID")

archive=$(ls "$data"/.hpc_staging/*.tar*)
m_ours=$(median "${ours[@]}") m_floor=$(median "${floor[@]}") m_cp=$(median "${cps[@]}") m_rsync=$(median "${rsyncs[@]}")
m_staged=$(median "${staged[@]}") m_decide=$(median "${decide_ms[@]}")
printf 'staging benchmark: %d files x 8 KiB in %d folders (%s), %d jobs x %d rounds, medians\n' \
  "$files" $((files / per_dir)) "$(du -sh "$data/bench_ds" | cut -f1)" "$repeats" "$repeats"
printf '  archive: %s, %s; first submission (walk + build + sbatch) %s ms\n' \
  "${archive##*/}" "$(du -h "$archive" | cut -f1)" "$build_wall"
printf '  resubmission, unchanged data: decided to reuse in %s ms (each: %s; target < 100 ms)\n' \
  "$m_decide" "${decide_ms[*]}"
printf '  whole resubmission %s ms, %s ms without --data; --dry-run with --data %s ms\n' \
  "$(median "${resubmit_wall[@]}")" "$nodata_ms" "$(median "${dry_ms[@]}")"
printf '  extraction at the job start, from its log (1 node):  %6s ms (each: %s)\n' "$m_staged" "${staged[*]}"
printf '  the same extraction code, in the job, interleaved:   %6s ms (each: %s)\n' "$m_ours" "${ours[*]}"
printf '  bare tar -xf of the same archive (floor):            %6s ms (each: %s)\n' "$m_floor" "${floor[*]}"
printf '    ratio ours / floor: %sx (target <= 1.3x)\n' "$(ratio "$m_ours" "$m_floor")"
printf '  cp -r of the folder to local disk:                   %6s ms (each: %s)\n' "$m_cp" "${cps[*]}"
printf '  rsync -a of the folder:                              %6s ms (each: %s)\n' "$m_rsync" "${rsyncs[*]}"
printf '  staging, first time (submission incl. build + extraction): %s ms = %sx cp -r, %sx rsync -a\n' \
  "$((build_wall + m_ours))" "$(ratio "$((build_wall + m_ours))" "$m_cp")" "$(ratio "$((build_wall + m_ours))" "$m_rsync")"
printf '  staging, data unchanged (resubmission + extraction):       %s ms = %sx cp -r, %sx rsync -a\n' \
  "$((m_decide + m_ours))" "$(ratio "$((m_decide + m_ours))" "$m_cp")" "$(ratio "$((m_decide + m_ours))" "$m_rsync")"
printf '  2-node job, both nodes at once (one srun step; here both share one disk): %s ms\n' "$two_node"
