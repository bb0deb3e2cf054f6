# shellcheck shell=bash
# Hydra apps: a line that runs a Hydra app (`python train.py lr=0.1`, a script with
# `@hydra.main`) and does not choose its run folder gets its task's own, written into the
# line at submission: hydra.run.dir (hydra.sweep.dir with -m/--multirun) = $HPC_RESULTS_DIR
# ($HPC_CHECKPOINT_DIR with --results-dir none). Hydra's default, outputs/<date>/<time> in
# the project, is shared by every task that starts in the same second: they overwrite one
# another. The commands file and --dry-run show the final line (docs/recipes.md: Hydra).

# hpc_hydra_is_app FILE: FILE is a Hydra app's script (it uses hydra.main). A script of less
# than 64 KiB is read and matched by bash (a grep process costs more); a longer one by grep.
hpc_hydra_is_app() {
  local LC_ALL=C text=""
  if IFS= read -r -N 65536 text 2>/dev/null <"$1"; then
    grep -qE '@hydra\.main\b|^[[:space:]]*from[[:space:]]+hydra[[:space:]]+import[[:space:]]+(.*[[:space:],])?main\b' -- "$1" 2>/dev/null
    return
  fi
  [[ $text =~ $HPC_HYDRA_MAIN_RE || $text =~ $HPC_HYDRA_FROM_RE ]]
}

# The grep's patterns over a whole file's text (bash matches no line by line): a blank is
# one within a line, ^ the file's start or a newline, \b a character not in a word, or the end.
HPC_HYDRA_MAIN_RE='@hydra[.]main([^A-Za-z0-9_]|$)'
HPC_HYDRA_FROM_RE=$'(^|\n)[ \t\r\v\f]*from[ \t\r\v\f]+hydra[ \t\r\v\f]+import[ \t\r\v\f]+([^\n]*[ \t\r\v\f,])?main([^A-Za-z0-9_]|$)'

# hpc_hydra_commands: give each command that runs a Hydra app without hydra.run.dir or
# hydra.sweep.dir its task's own folder (see the header), and say so once. Reads the
# scripts named in the configs file (J_CONFIG_SCRIPTS, configs.sh); a script found by
# other forms (python -m, after `cd x &&`) is left as it is.
# shellcheck disable=SC2016 # the variables are the job's, expanded by the task's bash
hpc_hydra_commands() {
  local hit script path hits k mode word out lines="" names="" dir='$HPC_RESULTS_DIR'
  local -a apps=() at
  for hit in "${J_CONFIG_SCRIPTS[@]}"; do
    script=${hit#*:} path=$script
    [[ $path == /* ]] || path=$J_SOURCE_DIR/$path
    ! hpc_hydra_is_app "$path" || apps+=("$script")
  done
  ((${#apps[@]})) || return 0
  [[ ${J_RESULTS_FOLDER:-results} != none ]] || dir='$HPC_CHECKPOINT_DIR'
  # One awk over every command: "INDEX run|sweep" for each that runs one of the apps as
  # `[path/]python[N] [-u] SCRIPT ...` and names neither folder itself.
  hits=$(printf '%s\n' "${J_COMMANDS[@]}" | LC_ALL=C awk -v apps="${apps[*]}" '
    BEGIN { n = split(apps, a, " "); for (i = 1; i <= n; i++) app[a[i]] }
    /hydra\.(run|sweep)\.dir=/ { next }
    {
      for (i = 1; i < NF; i++) {
        if ($i !~ /^([^ ]*\/)?python[0-9.]*$/) continue
        i += ($(i + 1) == "-u") ? 2 : 1
        if ($i in app) break
      }
      if (!($i in app)) next
      mode = "run"
      for (j = i + 1; j <= NF; j++) {
        if ($j ~ /^(;|&&|\|\||\||#)/) break
        if ($j == "-m" || $j == "--multirun") mode = "sweep"
      }
      print NR - 1 " " mode
    }')
  [[ -n $hits ]] || return 0
  mapfile -t at <<<"$hits"
  local sweeps=""
  for hit in "${at[@]}"; do
    k=${hit%% *} mode=${hit#* }
    [[ $mode != sweep || ${J_COMMANDS[k]} == *hydra/launcher=hpc_files* ]] ||
      sweeps+="${sweeps:+, }${J_COMMAND_LINES[k]:-$((k + 1))}"
    # Quoted for Hydra too: a folder holding a comma or a blank stays one value.
    word=" \"hydra.$mode.dir='$dir'\""
    _count_args_insert_to out "${J_COMMANDS[k]}" "$word" || continue
    J_COMMANDS[k]=$out
    lines+="${lines:+, }${J_COMMAND_LINES[k]:-$((k + 1))}"
  done
  [[ -z $sweeps ]] ||
    say "note: line(s) $sweeps run a Hydra multirun (-m) in one task: its points run one after another there and share one \$HPC_CHECKPOINT_DIR, so after a requeue every point sees HPC_RESUMING=1 and the last point's checkpoint. Give each point its own task: add hydra/launcher=hpc_files to the line (one array task per point), or write one line per point (docs/recipes.md: Hydra)"
  [[ -n $lines ]] || return 0
  names=${apps[*]}
  say "note: line(s) $lines run a Hydra app ($names) that chooses no run folder: each gets its task's own, hydra.run.dir='$dir' (hydra.sweep.dir with -m), instead of outputs/<date>/<time> in the project, which tasks starting in the same second share. To choose another, give hydra.run.dir (or hydra.sweep.dir) on the line (docs/recipes.md: Hydra)"
}
