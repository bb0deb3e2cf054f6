#!/usr/bin/env bats
# The documentation's shape: a short README, every heading of the old README on a docs/
# page, one flow diagram in both places, every page in the site's navigation.
# (Options and the Layout against the code: options.bats. The built site: tests/docs/.)
# index.md is README.md itself (docs/hooks/readme_index.py).

load ../helpers/common

# headings_of FILE: its markdown headings (without the #s), one per line, outside fences.
headings_of() {
  awk '/^[[:space:]]*(```|~~~)/ { f = !f; next } !f && /^#{1,6} / { sub(/^#+ /, ""); print }' "$1"
}

@test "README.md is under 250 lines" {
  local n
  n=$(wc -l <"$REPO_ROOT/README.md")
  ((n < 250)) || { echo "README.md has $n lines: move the new text into a docs/ page (README keeps: what it is, the two commands, five minutes on a real cluster, the flow, Slurm versions tested, links)" && return 1; }
}

@test "README.md keeps only its own sections: new text goes to a docs/ page" {
  run headings_of "$REPO_ROOT/README.md"
  [ "$status" -eq 0 ]
  local want
  want=$(printf '%s\n' hpc_files 'Five minutes on a real cluster' 'How a job flows' \
    'Slurm versions and setups tested' Documentation)
  [ "$output" = "$want" ] || {
    printf 'README headings:\n%s\nexpected:\n%s\n' "$output" "$want"
    echo "Put new text in docs/: an option's row in docs/reference.md's Options table (checked against"
    echo "--help), a variable in its Environment variables, a profile key in Profile settings, a file"
    echo "or folder in Folders and files, an exit code in Exit codes; how to use it on the task's page"
    echo "(mkdocs.yml's nav lists them), a new page added to that nav."
    return 1
  }
}

# old_headings_on_pages ROOT: every row of the fixture (README's headings before the move)
# names a page under ROOT (docs/PAGE, or README.md) that has the heading; says which do not.
old_headings_on_pages() {
  local heading page there file rows=0 failed=0
  while IFS=$'\t' read -r heading page there; do
    [[ -n $page ]] || continue # the header comment (no tab)
    rows=$((rows + 1))
    file=$1/docs/$page
    [[ $page != README.md ]] || file=$1/README.md
    [ -f "$file" ] || { echo "$heading: no page $page" && failed=1 && continue; }
    headings_of "$file" | grep -qxF -- "$there" ||
      { echo "$heading: $page has no heading '$there'" && failed=1; }
  done <"$REPO_ROOT/tests/docs/readme_headings.tsv"
  ((rows == 69)) || { echo "the fixture has $rows rows, README had 69 headings" && failed=1; }
  ((failed == 0))
}

@test "every heading of the old README is on the page the fixture names" {
  old_headings_on_pages "$REPO_ROOT"
}

@test "the check of old headings fails, naming it, when a page loses one" {
  mkdir "$BATS_TEST_TMPDIR/copy"
  cp -r "$REPO_ROOT/docs" "$REPO_ROOT/README.md" "$BATS_TEST_TMPDIR/copy/"
  sed -i 's/^### The archive (submitting side)$/### Archive/' "$BATS_TEST_TMPDIR/copy/docs/data.md"
  run old_headings_on_pages "$BATS_TEST_TMPDIR/copy"
  [ "$status" -ne 0 ]
  [[ $output == *"### The archive (submitting side): data.md has no heading 'The archive (submitting side)'"* ]]
}

@test "the flow diagram in README.md and in docs/how-it-works.md is the same" {
  local a b
  # shellcheck disable=SC2016 # backticks of markdown, not an expansion
  a=$(sed -n '/^```mermaid$/,/^```$/p' "$REPO_ROOT/README.md")
  # shellcheck disable=SC2016
  b=$(sed -n '/^```mermaid$/,/^```$/p' "$REPO_ROOT/docs/how-it-works.md")
  [ -n "$a" ]
  [ "$a" = "$b" ] || { diff <(echo "$a") <(echo "$b"); return 1; }
}

@test "every docs/ page is in mkdocs.yml's navigation, and every nav entry exists" {
  local f name failed=0
  for f in "$REPO_ROOT"/docs/*.md; do
    name=${f##*/}
    grep -qE "^ *- [^:]+: $name\$" "$REPO_ROOT/mkdocs.yml" || { echo "$name is not in mkdocs.yml's nav" && failed=1; }
  done
  while IFS= read -r name; do
    [[ $name == index.md || -f $REPO_ROOT/docs/$name ]] || { echo "nav names $name, which is not in docs/" && failed=1; }
  done < <(sed -nE 's/^ *- [^:]+: ([^ ]+\.md)$/\1/p' "$REPO_ROOT/mkdocs.yml")
  ((failed == 0))
}

@test "install_into_project.sh copies README and its pages into hpc_files/, every README link holds there" {
  local project=$BATS_TEST_TMPDIR/proj link failed=0
  mkdir "$project"
  run bash "$REPO_ROOT/hpc_files/install_into_project.sh" "$project"
  [ "$status" -eq 0 ]
  [ -f "$project/hpc_files/README.md" ]
  [ -f "$project/hpc_files/docs/reference.md" ]
  while IFS= read -r link; do
    [ -f "$project/hpc_files/${link%%#*}" ] || { echo "README links to $link: not in the project" && failed=1; }
  done < <(grep -oE '\]\(docs/[^)#]+' "$project/hpc_files/README.md" | cut -c3-)
  ((failed == 0))
}
