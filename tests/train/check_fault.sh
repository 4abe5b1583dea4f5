#!/usr/bin/env bash
# check_fault.sh RINGTRAIN MPIEXEC N EXPECTED_EXIT TEXT [JSON_CHECK] -- ARGS...
# Runs `mpiexec -n N ringtrain train ARGS --run-dir out` with an injected fault; passes iff
# the exit code is EXPECTED_EXIT ("nonzero" accepts any failure), the output holds TEXT,
# and (if given) the Python expression JSON_CHECK holds for the manifest `m`.
set -u
ringtrain=$1 mpiexec=$2 n=$3 expected=$4 text=$5; shift 5
check=""
if [[ "$1" != "--" ]]; then check=$1; shift; fi
shift  # --
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
start=$(date +%s)
MPIEXEC_TIMEOUT=120 "$mpiexec" -n "$n" "$ringtrain" train "$@" --run-dir out >out.txt 2>&1
code=$?
fail() { echo "FAIL: $*"; cat out.txt; exit 1; }
if [[ $expected == nonzero ]]; then [[ $code -ne 0 ]] || fail "exit 0, expected a failure"
else [[ $code -eq $expected ]] || fail "exit $code, expected $expected"; fi
# A rank that aborts may lose its last stderr line in hydra's forwarding;
# the watchdog's message also lands in out/watchdog-rank<R>.txt, which is checked as well.
grep -qF -- "$text" out.txt out/watchdog-rank*.txt 2>/dev/null || fail "output lacks '$text'"
if [[ $text == *"watchdog:"* ]]; then
  grep -qF -- "$text" out/watchdog-rank*.txt 2>/dev/null || fail "no out/watchdog-rank<R>.txt holds '$text'"
fi
if [[ -n "$check" ]]; then
  python3 -c "import json,sys; m=json.load(open('out/manifest.json')); sys.exit(0 if ($check) else 1)" ||
    fail "manifest check failed: $check"
fi
echo "ok: exit $code after $(( $(date +%s) - start )) s: $(grep -hF -- "$text" out.txt out/watchdog-rank*.txt 2>/dev/null | head -1)"
