# shellcheck shell=bash
# W&B sweeps at submission. A sweep becomes the commands of one job array (task i runs
# line i), each line a call of virtual_env_hpc_files/sweep_agent.sh:
#   --wandb-sweepid E/P/ID   online: `wandb agent` per task (or one per GPU, --agents-per-gpu)
#   --sweep FILE             offline: a new sweep folder on scratch, task i runs point i
#   --resume-sweep ID        offline: the points of that sweep that have not finished
# The W&B API key never reaches Slurm: it is kept in a mode-600 file the job reads.

HPC_SWEEP_AGENT=virtual_env_hpc_files/sweep_agent.sh

hpc_sweep_requested() {
  [[ -n $OPT_SWEEPID || -n $OPT_SWEEP_FILE || -n $OPT_RESUME_SWEEP ]]
}

# _sweep_refuse_without OPTION VALUE NEEDS: OPTION is only meaningful with NEEDS.
_sweep_refuse_without() {
  [[ -z $2 || $2 == 0 ]] || die "$1 $3"
}

# hpc_sweep_validate: the sweep options against each other and the job (before anything
# is read or written). Sets J_COMMANDS=() (hpc_sweep_stage fills it).
hpc_sweep_validate() {
  J_COMMANDS=() J_ARRAY_RANGES="" J_SWEEP_KIND="" J_SWEEP_ID="" J_SWEEP_DIR=""
  local given=0
  [[ -z $OPT_SWEEPID ]] || ((++given))
  [[ -z $OPT_SWEEP_FILE ]] || ((++given))
  [[ -z $OPT_RESUME_SWEEP ]] || ((++given))
  ((given <= 1)) || die "--wandb-sweepid, --sweep and --resume-sweep are three ways to run a sweep: give one"
  if ((given == 0)); then
    _sweep_refuse_without --num-agents "$OPT_NUM_AGENTS" "needs a sweep: --wandb-sweepid ENTITY/PROJECT/ID (online) or --sweep FILE (offline)"
    _sweep_refuse_without --runs-per-agent "$OPT_RUNS_PER_AGENT" "needs --wandb-sweepid ENTITY/PROJECT/ID"
    _sweep_refuse_without --agents-per-gpu "$OPT_AGENTS_PER_GPU" "needs --wandb-sweepid ENTITY/PROJECT/ID"
    _sweep_refuse_without --agent-stagger "$OPT_AGENT_STAGGER" "needs --wandb-sweepid ENTITY/PROJECT/ID"
    return 0
  fi
  [[ -z $OPT_CONFIGS ]] ||
    die "--configs and a sweep cannot be used together: the sweep decides what each task runs (its command: block)"
  [[ $J_LAUNCHER == none ]] ||
    die "--which-distributed $J_LAUNCHER cannot be used with a sweep: each run is one command on one node (it may use every GPU of that node)"
  if [[ -n $OPT_SWEEPID ]]; then
    _sweep_validate_online
  else
    _sweep_refuse_without --runs-per-agent "$OPT_RUNS_PER_AGENT" "is for online sweeps (--wandb-sweepid); an offline sweep runs one point per array task"
    _sweep_refuse_without --agents-per-gpu "$OPT_AGENTS_PER_GPU" "is for online sweeps (--wandb-sweepid); an offline sweep runs one point per array task"
    _sweep_refuse_without --agent-stagger "$OPT_AGENT_STAGGER" "is for online sweeps (--wandb-sweepid), which call the W&B server"
    ((J_NODES == 1)) || die "--num-nodes $J_NODES: each point of an offline sweep runs on one node (it may use every GPU of it)"
    if [[ -n $OPT_SWEEP_FILE ]]; then
      J_SWEEP_KIND=offline
      [[ -f $OPT_SWEEP_FILE && -r $OPT_SWEEP_FILE ]] ||
        die "sweep file '$OPT_SWEEP_FILE' not found or not readable: write a W&B sweep file (see sweeper.yml) and pass its path"
    else
      J_SWEEP_KIND=resume
      [[ -z $OPT_NUM_AGENTS ]] || die "--num-agents cannot be used with --resume-sweep: it reruns the points that did not finish"
      [[ $OPT_RESUME_SWEEP =~ ^[a-z0-9]{4,32}$ ]] ||
        die "--resume-sweep '$OPT_RESUME_SWEEP' is not a sweep id: use the 8-character id job_submitter.sh printed (see hpc sweep status)"
    fi
  fi
}

# hpc_sweep_id_form ID: entity/project/sweep_id, as `wandb sweep` prints it.
hpc_sweep_id_form() {
  [[ $1 =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]*/[A-Za-z0-9_][A-Za-z0-9_.-]*/[a-z0-9]+$ ]]
}

_sweep_validate_online() {
  J_SWEEP_KIND=online
  if ! hpc_sweep_id_form "$OPT_SWEEPID"; then
    local hint=""
    if [[ $OPT_SWEEPID =~ ^https?://[^/]+/([^/]+)/([^/]+)/sweeps/([a-z0-9]+) ]]; then
      hint=" (for this address: --wandb-sweepid ${BASH_REMATCH[1]}/${BASH_REMATCH[2]}/${BASH_REMATCH[3]})"
    fi
    die "--wandb-sweepid '$OPT_SWEEPID' is not ENTITY/PROJECT/SWEEP_ID, the form 'wandb sweep' prints (for example my-team/my-project/abc123xy)$hint"
  fi
  J_RUNS_PER_AGENT=${OPT_RUNS_PER_AGENT:-${HPC_SWEEP_RUNS_PER_AGENT:-1}}
  is_posint "$J_RUNS_PER_AGENT" || die "--runs-per-agent must be a whole number of at least 1, not '$J_RUNS_PER_AGENT'"
  J_AGENT_STAGGER=${OPT_AGENT_STAGGER:-${HPC_SWEEP_AGENT_STAGGER:-2}}
  is_uint "$J_AGENT_STAGGER" || die "--agent-stagger must be a whole number of seconds, not '$J_AGENT_STAGGER'"
  J_NUM_AGENTS=$((10#${OPT_NUM_AGENTS:-1}))
  if ((OPT_AGENTS_PER_GPU)); then
    ((J_GPUS > 0)) || die "--agents-per-gpu needs GPUs: add --gpus N (one agent per GPU of each node)"
    local total=$((J_NODES * J_GPUS))
    [[ -z $OPT_NUM_AGENTS ]] || ((J_NUM_AGENTS == total)) ||
      die "--num-agents $J_NUM_AGENTS does not match --agents-per-gpu on $J_NODES node(s) x $J_GPUS GPU(s) = $total agents: drop --num-agents or change --gpus/--num-nodes"
    # One Slurm task per GPU (HPC_LAUNCHER_TABLE, resources.sh); sweep_agent.sh starts
    # the agents with srun.
    J_NUM_AGENTS=$total
  else
    ((J_NODES == 1)) || die "--num-nodes $J_NODES with --wandb-sweepid: add --agents-per-gpu to run one agent per GPU of every node, or use one node per agent (the default)"
  fi
}

# hpc_sweep_key_file: the agents need a W&B API key. J_WANDB_KEY_FILE is the file the job
# reads it from: the one WANDB_API_KEY was saved to (wandb_key.sh), else the key file if
# there is one, else "" when ~/.netrc has it (wandb reads that itself).
hpc_sweep_key_file() {
  [[ -z $J_WANDB_KEY_FILE ]] || return 0
  local file
  hpc_wandb_key_path_to file
  if [[ -e $file ]]; then
    hpc_wandb_key_check "$file"
    J_WANDB_KEY_FILE=$file
    return 0
  fi
  [[ -r $HOME/.netrc ]] && grep -q 'wandb' "$HOME/.netrc" && return 0
  die "no W&B API key for the agents: run 'wandb login' (it writes ~/.netrc), or export WANDB_API_KEY before submitting (it is saved to $file, mode 600), or put the key in a mode-600 file named by WANDB_API_KEY_FILE"
}

# _sweep_online_commands: one line per agent (or one line starting an agent per GPU).
_sweep_online_commands() {
  local q_id i width delay agent
  hpc_sweep_key_file
  quote_to q_id "$OPT_SWEEPID"
  agent="bash $HPC_SWEEP_AGENT online $q_id --count $J_RUNS_PER_AGENT"
  if ((OPT_AGENTS_PER_GPU)); then
    J_COMMANDS=("$agent --per-gpu --stagger $J_AGENT_STAGGER")
    return 0
  fi
  hpc_check_task_count "$J_NUM_AGENTS" "--num-agents $J_NUM_AGENTS"
  # Agents that start together wait i x stagger seconds, so they do not all call the
  # W&B API at the same instant; at most --max-parallel start together.
  width=${J_MAX_PARALLEL:-$J_NUM_AGENTS}
  for ((i = 0; i < J_NUM_AGENTS; i++)); do
    delay=$(((i % width) * J_AGENT_STAGGER))
    J_COMMANDS+=("$agent --delay $delay")
  done
}

# hpc_sweep_python_to VAR: a Python for the submit-side sweep code (PyYAML needed): the
# project's venv when it exists, else python3. The toolkit's own python/ comes first.
hpc_sweep_python_to() {
  local -n _py=$1
  if [[ $J_VENV != none && -x $J_VENV/bin/python ]]; then
    _py=$J_VENV/bin/python
  else
    _py=$(command -v python3) || die "offline sweeps need python3 (with PyYAML) on this machine, or the project's venv"
  fi
}

# _sweep_stage_py ACTION ARGS...: run hpc_toolkit.sweep.stage; its stdout into SWEEP_OUT.
_sweep_stage_py() {
  local py toolkit_py rc=0
  hpc_sweep_python_to py
  toolkit_py=${HPC_TOOLKIT_DIR%/*}/python
  # The path goes in as an argument, not PYTHONPATH (which a ':' in it would split).
  SWEEP_OUT=$("$py" -c 'import sys; sys.path.insert(0, sys.argv.pop(1))
from hpc_toolkit.sweep.stage import main; sys.exit(main(sys.argv[1:]))' \
    "$toolkit_py" --prog "$HPC_PROG" "$@") || rc=$?
  # Its exit 1 is a fault of the sweep file or options: a usage error while judging input.
  ((rc != 1)) || exit "${HPC_DIE_STATUS:-1}"
  ((rc == 0)) || exit "$rc"
}

_sweep_new_id_to() {
  local -n _id=$1
  local chars=abcdefghijklmnopqrstuvwxyz0123456789 i
  _id=""
  for ((i = 0; i < 8; i++)); do
    _id+=${chars:$((${SRANDOM:-$RANDOM} % 36)):1}
  done
}

# _sweep_offline_commands: check the sweep file and make the commands; the sweep's folder
# is written later (hpc_sweep_write), just before sbatch.
_sweep_offline_commands() {
  local args=() method count
  [[ -z $OPT_NUM_AGENTS ]] || args=(--num-agents "$((10#$OPT_NUM_AGENTS))")
  # More points than the cluster can queue are refused by the check itself.
  hpc_slurm_limits
  args+=(--max-points "$HPC_SLURM_MAX_JOB_COUNT")
  _sweep_new_id_to J_SWEEP_ID
  J_SWEEP_DIR=$J_SCRATCH_DIR/sweeps/$J_SWEEP_ID
  _sweep_stage_py check "$OPT_SWEEP_FILE" "${args[@]}" --sweep-id "$J_SWEEP_ID" --exp-name "$J_EXP_NAME"
  { IFS=$'\t' read -r method count && IFS= read -r J_SWEEP_INFO; } <<<"$SWEEP_OUT"
  J_SWEEP_METHOD=$method J_SWEEP_POINTS=$count
  _sweep_point_commands "$count"
}

# hpc_sweep_write: the new sweep's folder (sweep.json, sweep.yaml, wandb/), whole or not
# at all; removed again if the submission then fails (hpc_remove_at_exit).
hpc_sweep_write() {
  [[ $J_SWEEP_KIND == offline ]] || return 0
  local tmp=${J_SWEEP_DIR%/*}/.$J_SWEEP_ID.tmp.$$
  if ! { mkdir -p -- "${J_SWEEP_DIR%/*}" && mkdir -- "$tmp" "$tmp/wandb" &&
    printf '%s\n' "$J_SWEEP_INFO" >"$tmp/sweep.json" && cp -- "$OPT_SWEEP_FILE" "$tmp/sweep.yaml" &&
    mv -T -- "$tmp" "$J_SWEEP_DIR"; }; then
    rm -rf -- "$tmp"
    die "cannot write the sweep's folder $J_SWEEP_DIR: check that \$SCRATCH is writable"
  fi
  # A submission that stops after the folder was written leaves nothing.
  HPC_SWEEP_WRITTEN_DIR=$J_SWEEP_DIR
  hpc_remove_at_exit "$J_SWEEP_DIR"
}

_sweep_point_commands() {
  local n=$1 line q i
  quote_to q "$J_SWEEP_DIR"
  line="bash $HPC_SWEEP_AGENT offline $q"
  J_COMMANDS=()
  for ((i = 0; i < n; i++)); do
    J_COMMANDS+=("$line")
  done
}

_sweep_resume_commands() {
  local method count exp id todo
  J_SWEEP_DIR=$J_SCRATCH_DIR/sweeps/$OPT_RESUME_SWEEP
  [[ -f $J_SWEEP_DIR/sweep.json ]] ||
    die "no offline sweep '$OPT_RESUME_SWEEP' under $J_SCRATCH_DIR/sweeps (the id job_submitter.sh printed when you submitted it)"
  # One resume of a sweep at a time: its check (which points are taken) and its sbatch under
  # the sweep's lock (ledger.sh), held until this process ends.
  ((OPT_DRY_RUN)) || hpc_submission_lock "$J_SWEEP_DIR/sweep.json" "$J_SWEEP_DIR/.resume.holder" \
    "a resume of sweep $OPT_RESUME_SWEEP"
  _sweep_stage_py resume "$J_SWEEP_DIR"
  IFS=$'\t' read -r method count exp id todo <<<"$SWEEP_OUT"
  # sweep.json is a file on scratch that anyone with access may have edited: what it says
  # gets the command line's checks before it names folders or array ranges.
  local json=$J_SWEEP_DIR/sweep.json
  [[ $id == "$OPT_RESUME_SWEEP" ]] ||
    die "$json names sweep '${id:0:100}', not '$OPT_RESUME_SWEEP': the file was edited or moved; fix its sweep_id"
  [[ $method =~ ^(grid|random|bayes)$ ]] ||
    die "$json: method '${method:0:100}' is not grid, random or bayes: fix the file"
  { is_size "$count" && ((10#$count >= 1 && 10#$count <= 1000000)); } ||
    die "$json: num_points '${count:0:100}' is not a number of points from 1 to 1000000: fix the file"
  count=$((10#$count))
  [[ $todo =~ ^[0-9]+(-[0-9]+)?( [0-9]+(-[0-9]+)?)*$ || -z $todo ]] ||
    die "$json or its ledger.jsonl gives points to rerun that are not index ranges ('${todo:0:100}'): fix the files"
  [[ -z $exp ]] || is_exp_name "$exp" ||
    die "$json: exp_name '${exp:0:100}' must be 1-100 letters, digits, '.', '_', '+' or '-', not starting with '.', '+' or '-' (it names folders): fix the file, or give --exp-name"
  J_SWEEP_ID=$id J_SWEEP_METHOD=$method J_SWEEP_POINTS=$count
  if [[ -z $todo ]]; then
    printf 'Nothing to resubmit: every point of sweep %s has finished or is running (hpc sweep status %s)\n' "$id" "$id"
    exit 0
  fi
  [[ -n $OPT_EXP_NAME ]] || J_EXP_NAME=$exp
  ((OPT_DRY_RUN)) || hpc_submission_lock_note "job_submitter.sh --resume-sweep $OPT_RESUME_SWEEP"
  J_ARRAY_RANGES=$todo
  _sweep_point_commands "$count"
}

# hpc_sweep_stage: the sweep's commands (J_COMMANDS); for --sweep, the sweep's folder too
# (not with --dry-run). Called after prepare, before the submission paths are named.
hpc_sweep_stage() {
  case $J_SWEEP_KIND in
    online) _sweep_online_commands ;;
    offline) _sweep_offline_commands ;;
    resume) _sweep_resume_commands ;;
  esac
}

# hpc_sweep_dry_run_note: for --dry-run of an offline sweep, which command each task
# builds (its commands file only says "sweep_agent.sh offline FOLDER"): the first points'
# final commands and how many there are, so the arguments can be checked against the
# program (nanoGPT's --name=value, ...) before anything is queued.
hpc_sweep_dry_run_note() {
  [[ ${J_SWEEP_KIND:-} == offline ]] || return 0
  local first=3 line shown=0
  _sweep_stage_py preview "$OPT_SWEEP_FILE" --sweep-id "$J_SWEEP_ID" --count "$J_SWEEP_POINTS" --first "$first"
  printf '# Offline sweep (%s, %d points): array task i runs point i; the first %d as they will run:\n' \
    "$J_SWEEP_METHOD" "$J_SWEEP_POINTS" "$((J_SWEEP_POINTS < first ? J_SWEEP_POINTS : first))"
  while IFS= read -r line; do
    printf '#   %s\n' "$line"
    [[ $line != "point "* ]] || ((++shown))
  done <<<"$SWEEP_OUT"
  ((shown == 0 || J_SWEEP_POINTS <= shown)) || printf '#   ... and %d more\n' "$((J_SWEEP_POINTS - shown))"
  printf '\n'
}

# hpc_sweep_submitted ID...: note the submission's jobs (one per chunk) in the sweep's
# jobs.tsv (JOB_ID, TASK_OFFSET: a later --resume-sweep counts their queued points as
# taken, python/hpc_toolkit/sweep/stage.py), then say what to do next.
hpc_sweep_submitted() {
  local k text="" ids=("$@") f
  [[ -z ${HPC_SWEEP_WRITTEN_DIR:-} ]] || hpc_keep_at_exit "$HPC_SWEEP_WRITTEN_DIR"
  if [[ $J_SWEEP_KIND != online ]]; then
    for k in "${!J_CHUNKS[@]}"; do
      hpc_plan_chunk_to f "$k"
      [[ -z ${ids[k]:-} ]] || text+=${ids[k]}$'\t'${f[1]}$'\n'
    done
    printf '%s' "$text" >>"$J_SWEEP_DIR/jobs.tsv" ||
      warn "could not note jobs $* in $J_SWEEP_DIR/jobs.tsv: a --resume-sweep while they are queued would submit their points again"
  fi
  case $J_SWEEP_KIND in
    online)
      printf 'W&B sweep %s: %d agent(s), %d run(s) each (--runs-per-agent); submit again to add agents\n' \
        "$OPT_SWEEPID" "$J_NUM_AGENTS" "$J_RUNS_PER_AGENT"
      ;;
    offline | resume)
      printf 'Offline sweep %s (%s, %d points): %s\n' "$J_SWEEP_ID" "$J_SWEEP_METHOD" "$J_SWEEP_POINTS" "$J_SWEEP_DIR"
      printf '  status: hpc sweep status %s\n' "$J_SWEEP_ID"
      printf '  upload: hpc sweep sync %s   (later, where there is internet)\n' "$J_SWEEP_ID"
      ;;
  esac
}
