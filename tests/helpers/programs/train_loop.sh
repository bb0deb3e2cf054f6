#!/bin/bash
# A training loop in plain bash, as cluster docs teach it, for the requeue tests:
#   bash train_loop.sh usr1|term|none|ignore STEPS [STEP_SECONDS]
# usr1/term: `trap save SIGNAL` (save the step to $HPC_CHECKPOINT_DIR, exit 0); none: no
# handler at all; ignore: a USR1 handler that saves nothing. Every rank (SLURM_PROCID)
# keeps its own step. Marks that are not checkpoints go to $HPC_EXP_DIR/marks:
# ready_ATTEMPT_RANK once running, warned_RANK when a handler ran. At the end: done_RANK
# (in the checkpoint folder) holds "STEPS ATTEMPTS". LOOP_SAVE_EXIT=N: exit N after
# saving (torchrun returns 1 when its workers stop); LOOP_PROGRESS=1: a progress bar, each
# step as "step N\r" with no newline (tqdm's way). LOOP_LATE_TRAP=N: ranks other than 0
# set their usr1 trap only after N steps (a slow rank, whose warning can come after rank
# 0 has saved and exited).
mode=$1 total=$2 pause=${3:-0.2}
rank=${SLURM_PROCID:-0} attempt=$((${HPC_RESTART_COUNT:-0} + 1))
ck=${HPC_CHECKPOINT_DIR:?} marks=${HPC_EXP_DIR:?}/marks
mkdir -p "$marks"
step=0
[[ -f $ck/step_$rank ]] && read -r step <"$ck/step_$rank"
echo "[loop] rank $rank attempt $attempt starts at step $step"
save() {
  echo "$rank" >"$marks/warned_$rank"
  printf '%s\n' "$step" >"$ck/step_$rank.tmp" && mv "$ck/step_$rank.tmp" "$ck/step_$rank"
  echo "[loop] rank $rank saved step $step; exiting for a requeue"
  exit "${LOOP_SAVE_EXIT:-0}"
}
late=0
[[ -z ${LOOP_LATE_TRAP:-} || $rank == 0 || $mode != usr1 ]] || late=$LOOP_LATE_TRAP
case $mode in
  usr1) ((late > 0)) || trap save USR1 ;;
  term) trap save TERM ;;
  ignore) trap 'echo "$rank" >"$marks/warned_$rank"; echo "[loop] rank $rank: warning ignored"' USR1 ;;
  none) ;;
  *) echo "usage: train_loop.sh usr1|term|none|ignore STEPS [STEP_SECONDS]" >&2 && exit 2 ;;
esac
: >"$marks/ready_${attempt}_$rank"
while ((step < total)); do
  sleep "$pause" & # a trap runs once the foreground command returns: wait, not sleep
  wait $!
  step=$((step + 1))
  ((late == 0 || step < late)) || { trap save USR1 && late=0; }
  [[ -z ${LOOP_PROGRESS:-} ]] || printf 'step %s\r' "$step"
done
printf '%s %s\n' "$step" "$attempt" >"$ck/done_$rank"
echo "[loop] rank $rank done: $step steps in $attempt attempt(s)"
