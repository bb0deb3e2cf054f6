# shellcheck shell=bash
# Reads experiment_configurations.txt: one command per line, as typed on a laptop.
# Blank lines and lines starting with '#' are skipped; a line ending in a backslash
# continues on the next one. Each command is later run by bash exactly as written.

# hpc_read_configs FILE: fills the array J_COMMANDS.
hpc_read_configs() {
  local file=$1 line pending="" lineno=0 lines
  J_COMMANDS=()
  [[ -e $file ]] || die "configs file '$file' not found: write the command to run (e.g. 'python train.py --lr 0.1') in experiment_configurations.txt or pass --configs FILE"
  [[ -f $file && -r $file ]] || die "configs file '$file' is not a readable file"
  mapfile -t lines <"$file"
  # The cheap glob tests guard the costlier trims and regex: most lines need none of them.
  for line in "${lines[@]}"; do
    ((++lineno))
    [[ $line != *$'\r' ]] || line=${line%$'\r'}
    if [[ -z $pending ]]; then
      # Trim leading blanks; skip blank and comment lines between commands.
      [[ $line != [[:space:]]* ]] || line=${line#"${line%%[![:space:]]*}"}
      [[ -z $line || $line == '#'* ]] && continue
    fi
    # An odd number of trailing backslashes continues the command on the next line.
    if [[ $line == *\\ && $line =~ (^|[^\\])(\\\\)*\\$ ]]; then
      pending+=${line%\\}
      continue
    fi
    line=$pending$line
    pending=""
    [[ $line != *[[:space:]] ]] || line=${line%"${line##*[![:space:]]}"}
    [[ -n $line ]] && J_COMMANDS+=("$line")
  done
  [[ -z $pending ]] || die "configs file '$file' ends with a backslash continuation (line $lineno): finish the command or remove the trailing '\\'"
  ((${#J_COMMANDS[@]} > 0)) || die "configs file '$file' has no command: add a line such as 'python train.py --lr 0.1' (lines starting with # are comments)"
}
