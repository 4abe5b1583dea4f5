#!/usr/bin/env bash
# check_cli.sh RINGTRAIN MPIEXEC EXPECTED_EXIT EXPECTED_TEXT [MPI2 | PLAIN] ARGS...
# Runs ringtrain in an empty directory with --run-dir out (PLAIN: without it, for subcommands
# that take no run directory); passes iff the exit code is the expected one, stderr holds the
# text on ONE line, and nothing was written.
set -u
ringtrain=$1 mpiexec=$2 expected=$3 text=$4; shift 4
launch=("$ringtrain")
run_dir=(--run-dir out)
if [[ "${1:-}" == MPI2 ]]; then launch=("$mpiexec" -n 2 "$ringtrain"); shift; fi
if [[ "${1:-}" == PLAIN ]]; then run_dir=(); shift; fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
"${launch[@]}" "$@" "${run_dir[@]}" >stdout.txt 2>stderr.txt
code=$?
fail() { echo "FAIL: $*"; echo "--- stdout"; cat stdout.txt; echo "--- stderr"; cat stderr.txt; exit 1; }
[[ $code -eq $expected ]] || fail "exit code $code, expected $expected"
grep -qF -- "$text" stderr.txt || fail "stderr lacks '$text'"
lines=$(grep -c . stderr.txt)
[[ $lines -eq 1 ]] || fail "the error took $lines lines, expected one"
written=$(find . -mindepth 1 ! -name stdout.txt ! -name stderr.txt)
[[ -z "$written" ]] || fail "files were written: $written"
echo "ok: exit $code: $(cat stderr.txt)"
