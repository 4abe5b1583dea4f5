#!/usr/bin/env bash
# check_commands_page.sh TOOL RINGTRAIN PAGE
# docs/commands.md is what tools/command_reference.py writes from this build's --help, and
# the check does see a stale page: a copy without one flag's line fails, showing the line.
# (One run of the tool checks both pages: each --help starts an MPI singleton.)
set -uo pipefail
tool=$1 ringtrain=$2 page=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -v -- '^  --global-batch' "$page" >"$tmp/stale.md"
out=$(python3 "$tool" "$ringtrain" --check "$page" "$tmp/stale.md")
code=$?
echo "$out"
fail() { echo "FAILED: $*"; exit 1; }
grep -qF "command_reference: $page matches the program's --help" <<<"$out" ||
  fail "$page is not what the program's --help prints"
((code == 1)) || fail "a page without --global-batch passed the check (exit $code)"
grep -q '^+  --global-batch INT=128' <<<"$out" || fail "the difference does not show the line"
grep -qF "$tmp/stale.md is stale; write it again" <<<"$out" || fail "no hint to write the page again"
echo "commands page: OK (and a stale copy fails)"
