# shellcheck shell=bash
# Hostile values for the fields of files the toolkit wrote earlier and reads back
# (.hpc_staging/KEY.state, sweep.json, ledger.jsonl, KEY.jobs): each must be refused or
# ignored, never evaluated. Values that would run code touch $PWNED (set PWNED first, then
# call hostile_state_values).

# hostile_state_values: HOSTILE_STATE (array) for the file $PWNED.
hostile_state_values() {
  HOSTILE_STATE=(
    "x[\$(touch $PWNED)]"
    "\$(touch $PWNED)"
    "1;touch $PWNED"
    "\`touch $PWNED\`"
    "a[\$(touch $PWNED)]+1"
    '99999999999999999999999'
    '-1'
    '1e9'
    '0x10'
    '12 34'
    ''
    '../../..'
  )
}

# HOSTILE_NAMES: names a file may hold where a folder name or id is expected.
# shellcheck disable=SC2016 # $(id) is meant literally
HOSTILE_NAMES=('../../..' '..' '/etc' 'a/b' '-rf' 'a b' "a'b" 'a;b' '$(id)' '.hidden' "$(printf 'a\nb')")
