# shellcheck shell=bash
# Reads experiment_configurations.txt: one command per line, as typed on a laptop.
# Blank lines and lines starting with '#' are skipped; a line ending in a backslash
# continues on the next one. Each command is later run by bash exactly as written, so
# each is checked here as bash would read it (bash -n), before anything waits in a queue.
# A line '#hpc: OPTIONS' is a directive: it sets options for the commands below it, until
# the next one (blocks.sh judges and groups them); to anything else it is a comment.

HPC_UTF8_BOM=$'\xef\xbb\xbf'

# hpc_read_configs FILE: fills the arrays J_COMMANDS and J_COMMAND_LINES (the file's line
# number where each command starts), and the directives: J_DIRECTIVES (the words after
# '#hpc:' of directive b, from 1), J_DIRECTIVE_LINES (its line number), J_BLOCK_FIRST (the
# index of its first command; its block ends where the next begins).
hpc_read_configs() {
  local file=$1 line pending="" lineno=0 start=0 lines
  J_COMMANDS=() J_COMMAND_LINES=() J_CONFIG_SCRIPTS=()
  J_DIRECTIVES=("") J_DIRECTIVE_LINES=(0) J_BLOCK_FIRST=(0) J_CONFIGS_FILE=$file
  [[ -e $file ]] || die "configs file '$file' not found: write the command to run (e.g. 'python train.py --lr 0.1') in experiment_configurations.txt or pass --configs FILE"
  [[ -f $file && -r $file ]] || die "configs file '$file' is not a readable file"
  mapfile -t lines <"$file"
  _configs_check_bytes "$file" lines
  # A BOM (editors on Windows write one) would glue itself to the first word: "#" would
  # no longer start a comment.
  [[ ${lines[0]:-} != "$HPC_UTF8_BOM"* ]] || lines[0]=${lines[0]#"$HPC_UTF8_BOM"}
  # The cheap glob tests guard the costlier trims and regex: most lines need none of them.
  for line in "${lines[@]}"; do
    ((++lineno))
    # Most lines: a whole command, nothing to trim (one test instead of the steps below).
    if [[ -z $pending && $line == [![:space:]#]* && $line != *[[:space:]\\] ]]; then
      J_COMMANDS+=("$line") J_COMMAND_LINES+=("$lineno")
      continue
    fi
    [[ $line != *$'\r' ]] || line=${line%$'\r'}
    if [[ -z $pending ]]; then
      # Trim leading blanks; skip blank and comment lines between commands.
      [[ $line != [[:space:]]* ]] || line=${line#"${line%%[![:space:]]*}"}
      if [[ -z $line || $line == '#'* ]]; then
        if [[ $line == '#hpc:'* ]]; then
          J_DIRECTIVES+=("${line#'#hpc:'}") J_DIRECTIVE_LINES+=("$lineno")
          J_BLOCK_FIRST+=("${#J_COMMANDS[@]}")
        elif [[ $line == '#'*[Hh][Pp][Cc]* && $line =~ ^#[[:space:]]*[Hh][Pp][Cc]([[:space:]]*:|[[:space:]]+-) ]]; then
          # A typo would silently give the lines below the command line's resources.
          warn "configs file '$file', line $lineno: '${line:0:40}' is read as a comment, not as a directive: write '#hpc: OPTIONS' (lower case, no blank before the colon) for options of the lines below"
        fi
        continue
      fi
      start=$lineno
    fi
    # An odd number of trailing backslashes continues the command on the next line.
    if [[ $line == *\\ && $line =~ (^|[^\\])(\\\\)*\\$ ]]; then
      pending+=${line%\\}
      continue
    fi
    line=$pending$line
    pending=""
    [[ $line != *[[:space:]] ]] || line=${line%"${line##*[![:space:]]}"}
    if [[ -n $line ]]; then
      J_COMMANDS+=("$line")
      J_COMMAND_LINES+=("$start")
    fi
  done
  [[ -z $pending ]] || die "configs file '$file' ends with a backslash continuation (line $lineno): finish the command or remove the trailing '\\'"
  ((${#J_COMMANDS[@]} > 0)) || die "configs file '$file' has no command: add a line such as 'python train.py --lr 0.1' (lines starting with # are comments)"
  _configs_check_length "$file"
  _configs_check_syntax "$file"
}

# The longest command a node can run: each line reaches the node as one argument (bash -c
# LINE), and Linux takes at most 128 KiB (MAX_ARG_STRLEN) in one; 1 KiB is left for what
# the toolkit adds (--nodes-arg and the like). Commands are not in the batch script (they
# are in the .commands file beside it), so Slurm's script size does not limit them.
HPC_MAX_LINE_BYTES=130048

# _configs_check_length FILE: die naming the first command too long for a node (issue 32:
# accepted, it failed after the wait in the queue: "Argument list too long", exit 126).
_configs_check_length() {
  local LC_ALL=C k n=${#J_COMMANDS[@]} all="${J_COMMANDS[*]}"
  ((${#all} > HPC_MAX_LINE_BYTES)) || return 0 # (all of them together are short enough)
  for ((k = 0; k < n; k++)); do
    ((${#J_COMMANDS[k]} <= HPC_MAX_LINE_BYTES)) && continue
    die "configs file '$1', line ${J_COMMAND_LINES[k]}: the command is ${#J_COMMANDS[k]} bytes long; a node runs each line as one argument of bash -c, and Linux takes at most $HPC_MAX_LINE_BYTES bytes (127 KiB) there. Put the long part in a file the command reads (e.g. python train.py --args-file args.txt)"
  done
}

# _configs_check_bytes FILE LINES_ARRAY: no NUL byte (bash would drop it and run a
# different command), no control character or terminal escape code (printed raw into
# terminals and logs), no carriage return but at a line's end (Windows line ends are fine).
# The same pass also lists the scripts of "python script.py" lines (J_CONFIG_SCRIPTS,
# "LINE:SCRIPT", each script once), for hpc_check_scripts_exist and hydra.sh. A file of up
# to HPC_CONFIGS_BASH_LINES lines (LINES_ARRAY: the file's lines, from mapfile) is checked
# by bash itself (two processes cost more than that); a longer one by one grep and awk.
_configs_check_bytes() {
  local file=$1 out
  J_CONFIG_SCRIPTS=()
  local -n _cb_lines=$2
  if ((${#_cb_lines[@]} <= HPC_CONFIGS_BASH_LINES)) && _configs_check_bytes_here "$file" "$2"; then
    return 0
  fi
  # grep finds; awk keeps each script's first line and stops at the first bad byte, whose
  # line it prints as "!LINE" (bash's own warning about a NUL it drops from $(...) is not
  # for the user).
  { out=$(LC_ALL=C grep -noaP '[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!$)|\xc2[\x80-\x9f]|^\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:\S*/)?python[0-9.]*\s+(?:-u\s+)?\K[A-Za-z0-9_./+-]+\.py(?=[\s;|&)]|$)' -- "$file" |
    LC_ALL=C awk '{ i = index($0, ":"); s = substr($0, i + 1) }
      s !~ /\.py$/ || s ~ /[^0-9A-Za-z_.\/+:-]/ { print "!" substr($0, 1, i - 1); exit }
      !(s in seen) { seen[s]; print }'); } 2>/dev/null || true
  [[ -n $out ]] || return 0
  if [[ $out == '!'* || $out == *$'\n!'* ]]; then
    out=${out##*!}
    _configs_bad_bytes_die "$file" "$out"
  fi
  mapfile -t J_CONFIG_SCRIPTS <<<"$out"
}

# _configs_bad_bytes_die FILE LINE: the refusal of _configs_check_bytes.
_configs_bad_bytes_die() {
  die "configs file '$1', line $2: holds a NUL byte, a control character, a terminal escape code or a carriage return inside the line; write the command with plain text only (check the editor's encoding, e.g. 'cat -A' shows them)"
}

# Up to this many lines, _configs_check_bytes checks in bash (see there).
HPC_CONFIGS_BASH_LINES=64
# The grep's two patterns in bash's terms (C locale): a C1 control character in UTF-8
# (\xc2\x80 to \xc2\x9f, a glob), and a "python script.py" line (the script: group 4).
HPC_CONFIGS_C1_GLOB=$'\xc2[\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f\x90\x91\x92\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f]'
HPC_CONFIGS_SCRIPT_RE='^[[:space:]]*([A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*[[:space:]]+)*([^[:space:]]*/)?python[0-9.]*[[:space:]]+(-u[[:space:]]+)?([A-Za-z0-9_./+-]+[.]py)([[:space:];|&)]|$)'

# _configs_check_bytes_here FILE LINES_ARRAY: _configs_check_bytes's checks and scripts, in
# bash; returns 1, having listed nothing, when FILE holds a NUL byte (which bash cannot see
# in a line: the grep names its line).
_configs_check_bytes_here() {
  local file=$1 LC_ALL=C line rest k=0 script
  local -n _bh_lines=$2
  local -A seen=()
  # read stops at the first NUL (status 0); a file without one is read to its end (1).
  ! IFS= read -r -d '' rest <"$file" || return 1
  for line in "${_bh_lines[@]}"; do
    ((++k))
    line=${line%$'\r'} # (a carriage return elsewhere is a control character below)
    rest=${line//$'\t'/}
    if [[ $rest == *[[:cntrl:]]* || $rest == *$HPC_CONFIGS_C1_GLOB* ]]; then
      _configs_bad_bytes_die "$file" "$k"
    fi
    [[ $line == *python* && $line =~ $HPC_CONFIGS_SCRIPT_RE ]] || continue
    script=${BASH_REMATCH[4]}
    [[ -z ${seen[$script]:-} ]] || continue
    seen[$script]=1
    J_CONFIG_SCRIPTS+=("$k:$script")
  done
}

# The text put after each command when all are checked by one bash -n: a comment where
# the command ended cleanly, a syntax error where a quote, backquote or $( ) it opened is
# still open, so that no command can borrow a later line's quote or bracket; each command
# is also the body of a function, whose '}' an unclosed if/for/{ ... would trip over.
HPC_CONFIGS_GUARD='#'\''("`('

# Words that bash reads as syntax at a command's start ("in" only after for/case/select:
# here anywhere). A command of plain words (below) with none of them parses.
HPC_CONFIGS_RESERVED_RE='(^|[[:space:]])(if|then|else|elif|fi|case|esac|for|select|while|until|do|done|in|function|time|coproc)([[:space:]]|$)'

# _configs_check_syntax FILE: every command parses as bash (bash -n), in one bash process
# for all of them; on an error, the command at fault is found and named by its line. A
# file of up to HPC_CONFIGS_BASH_LINES commands made only of plain words (letters, digits,
# _ . / = : , + @ % - between blanks) and no reserved word needs no bash: such a text
# cannot fail to parse (a bash process of the large submitting shell cost each submission
# about 2 ms).
_configs_check_syntax() {
  local file=$1 text err k=0 n=${#J_COMMANDS[@]}
  if ((n <= HPC_CONFIGS_BASH_LINES)); then
    local LC_ALL=C
    printf -v text '%s\n' "${J_COMMANDS[@]}"
    [[ $text == *[!A-Za-z0-9_./=:,+@%$' \t\n'-]* || $text =~ $HPC_CONFIGS_RESERVED_RE ]] || return 0
  fi
  # One printf for all commands (the format is reused per argument; the guard has no %).
  printf -v text "_hpc_line() {\n%s\n$HPC_CONFIGS_GUARD\n}\n" "${J_COMMANDS[@]}"
  if err=$(bash -n 2>&1 <<<"$text") && [[ $err != *here-document* ]]; then
    # A here-document that a later command's line closes (<<EOF ... EOF) parses whole:
    # the commands with a '<<' (not '<<<') are checked alone.
    [[ $text == *'<<'* ]] || return 0
    for ((k = 0; k < n; k++)); do
      [[ ${J_COMMANDS[k]//<<</} != *'<<'* ]] || _configs_check_one "$file" "$k"
    done
    return 0
  fi
  # Four lines per command: bash's first "line N" points at the command it choked on.
  if [[ $err =~ line\ ([0-9]+): ]]; then
    k=$(((BASH_REMATCH[1] - 1) / 4))
    ((k < n)) || k=$((n - 1))
    _configs_check_one "$file" "$k"
  fi
  # Not there (an error only bash's end of input revealed, a here-document): one by one.
  for ((k = 0; k < n; k++)); do
    _configs_check_one "$file" "$k"
  done
}

# _configs_check_one FILE K: die naming command K's line unless it parses alone.
# A here-document (<<EOF) parses with a warning alone: its text would be the next lines,
# each run as a command of its own (an array task each).
_configs_check_one() {
  local err
  if err=$(bash -n 2>&1 <<<"${J_COMMANDS[$2]}"); then
    [[ $err == *here-document* ]] || return 0
    die "configs file '$1', line ${J_COMMAND_LINES[$2]}: the command opens a here-document (<<WORD), whose text would be the lines below it, each run as a command of its own: a line is one whole command. Put the text in a file (python script.py, or bash script.sh) and run that, or use a here-string (<<<'text')"
  fi
  err=${err%%$'\n'*}
  err=${err#bash: }
  err=${err#line [0-9]*: }
  die "configs file '$1', line ${J_COMMAND_LINES[$2]}: the command is not valid bash ($err): close the quote, backquote or bracket it opens (the node runs each line with bash, on its own)"
}
