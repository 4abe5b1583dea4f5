#!/usr/bin/env bash
# check_lesson.sh RUN_SCRIPT BUILD_DIR TEXT...
# Runs a lesson's run.sh --quick into a fresh folder; passes iff it exits 0 and its output
# holds every TEXT (the facts the lesson's README states), so the lessons never rot.
set -uo pipefail
script=$1 build=$2; shift 2
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
BUILD=$build bash "$script" --quick "$out/run" >"$out/log.txt" 2>&1
code=$?
fail() { cat "$out/log.txt"; echo "FAIL: $*"; exit 1; }
((code == 0)) || fail "$script exited $code"
for text in "$@"; do
  grep -qF -- "$text" "$out/log.txt" || fail "the output lacks '$text'"
done
echo "ok: $script: ${#@} facts found"
