# shellcheck shell=bash
# Job side: did the program write into the project folder? A relative output path (nanoGPT's
# out_dir='out', a Trainer's output_dir, Lightning's lightning_logs/) lands in the project,
# shared by every task, array element and rerun, which then overwrite each other, and where
# the toolkit's requeue sees no progress. Cheap on a big project on a shared filesystem:
# one read of the project's top-level folder and one stat per entry there, once, after the
# command (find -maxdepth 1: never a walk of the tree, no inotify, nothing in the program).
# Sourced by job_runtime.sh.

# shellcheck source=virtual_env_hpc_files/job_lib.sh
source "${BASH_SOURCE[0]%/*}/job_lib.sh"

# Entries that Python and common tools make beside the code on their own: not outputs.
HPC_PROJECT_WRITES_IGNORE=" __pycache__ .git .ipynb_checkpoints .pytest_cache .mypy_cache .ruff_cache "

# hpc_project_writes_since START: (in the project folder, the current one) names the
# top-level entries made or changed since START (an epoch, $EPOCHREALTIME) in a warning
# in the job log, with the task's folders to pass instead.
hpc_project_writes_since() {
  local entry name list="" us since
  # 0.1 s earlier than START: the kernel stamps files with a coarse clock (one tick, a few
  # ms, behind $EPOCHREALTIME), so a file made at once would look older than START.
  us=$((${1%.*} * 1000000 + 10#${1#*.} - 100000))
  printf -v since "%d.%06d" $((us / 1000000)) $((us % 1000000))
  while IFS= read -r -d '' entry; do
    name=${entry#./}
    [[ $HPC_PROJECT_WRITES_IGNORE != *" $name "* && $name != *.egg-info ]] || continue
    [[ -d $entry ]] && name+=/
    list+="${list:+, }$name"
  done < <(find . -mindepth 1 -maxdepth 1 -newermt "@$since" -print0 2>/dev/null)
  [[ -n $list ]] || return 0
  # shellcheck disable=SC2016 # the variables' names, for the user's line
  hpc_log "warning: the program wrote into the project folder $PWD: $list. Every task, array element and rerun of this experiment writes to that same place and overwrites the others (and the toolkit's requeue sees no progress there). Pass this task's own folder instead: \$HPC_CHECKPOINT_DIR (checkpoints; a requeued attempt resumes from there) or \$HPC_RESULTS_DIR (results, copied back to $HPC_EXP_DIR/results), e.g. --out_dir=\$HPC_CHECKPOINT_DIR on the line, or os.environ[\"HPC_CHECKPOINT_DIR\"] in the script (README: Recipes)"
}
