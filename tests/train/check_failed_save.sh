#!/usr/bin/env bash
# check_failed_save.sh RINGTRAIN MPIEXEC N MODE -- TRAIN_ARGS...
# A checkpoint save that fails does not kill the run, and leaves nothing half-written.
# TRAIN_ARGS must save at steps 10 and 20 and end at step 30 (--checkpoint-every 10 --steps 30).
#   MODE=inject: saves 10 and 20 fail (--test-fail-save-steps, after the .partial is written).
#     With --max-failed-saves 3 the run finishes: exit 0, a warning per failure on stderr,
#     save_failed records in metrics.jsonl, no .partial and no step 10/20 file, and the final
#     checkpoint bitwise equal to a run whose saves all succeeded.
#     With --max-failed-saves 2 it stops at step 20: exit 1 with one clear line, no .partial.
#   MODE=fsize: every save fails for real (ulimit -f: EFBIG, SIGXFSZ ignored by ringtrain);
#     the run stops after --max-failed-saves 2 with a clear line, exit 1, no .partial.
set -u
ringtrain=$1 mpiexec=$2 n=$3 mode=$4; shift 4
[[ "$1" == "--" ]] && shift
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; for f in *.log; do echo "--- $f"; tail -5 "$f"; done; exit 1; }
export MPIEXEC_TIMEOUT=120
run() { "$mpiexec" -n "$n" "$ringtrain" train "$@"; }

# No file named *.partial anywhere under the run directory $1.
no_partial() {
  local left
  left=$(find "$1" -name '*.partial')
  [[ -z $left ]] || fail "a failed save left $left"
}
# The metrics.jsonl of run directory $1 has failed-save records at exactly the steps $2 (e.g. "10 20").
failed_records() {
  local got
  got=$(python3 -c '
import json, sys
steps = [r["step"] for r in map(json.loads, open(sys.argv[1])) if "save_failed" in r]
print(" ".join(map(str, steps)))' "$1/metrics.jsonl") || fail "cannot read $1/metrics.jsonl"
  [[ $got == "$2" ]] || fail "$1/metrics.jsonl records failed saves at steps '$got', expected '$2'"
}

if [[ $mode == inject ]]; then
  run "$@" --quiet --run-dir A >a.log 2>&1 || fail "reference run failed"
  run "$@" --quiet --run-dir B --test-fail-save-steps 10,20 --max-failed-saves 3 >b.log 2>&1 ||
    fail "two failed saves (of 3 allowed) stopped the run"
  for s in 10 20; do
    [[ $(grep -c "warning: the checkpoint at step $s failed" b.log) == 1 ]] ||
      fail "no single warning for the failed save at step $s"
    [[ ! -e B/checkpoints/step-000000$s.h5 ]] || fail "the failed save of step $s left a checkpoint"
  done
  grep -q "the restart point stays the start of the run (2 of --max-failed-saves 3" b.log ||
    fail "the warning does not name the restart point and the count"
  no_partial B
  failed_records B "10 20"
  last=$(cat A/checkpoints/LATEST)
  [[ $(cat B/checkpoints/LATEST) == "$last" ]] || fail "LATEST names $(cat B/checkpoints/LATEST), not $last"
  for g in model optimizer schedule data rng; do
    h5diff "A/checkpoints/$last" "B/checkpoints/$last" "/$g" "/$g" >/dev/null ||
      fail "/$g differs from the run whose saves succeeded"
  done
  run "$@" --quiet --run-dir C --test-fail-save-steps 10,20 --max-failed-saves 2 >c.log 2>&1
  code=$?
  [[ $code == 1 ]] || fail "two failed saves with --max-failed-saves 2: exit $code, expected 1"
  grep -q "2 checkpoint saves in a row failed (the last at step 20" c.log || fail "no clear stop message"
  no_partial C
  failed_records C "10 20"
  echo "ok: two failed saves survived, final $last bitwise equal; --max-failed-saves 2 stopped at step 20"
elif [[ $mode == fsize ]]; then
  # 12 MiB: MPI's shared-memory files (4-8 MiB here) and the run's small files fit, a
  # checkpoint of the default mlp with AdamW (about 22 MB) does not.
  (ulimit -f 12288 && run "$@" --mlp-hidden 2048 --run-dir D --max-failed-saves 2 >d.log 2>&1)
  code=$?
  [[ $code == 1 ]] || fail "saves beyond the file size limit: exit $code, expected 1"
  grep -q "warning: the checkpoint at step 10 failed" d.log || fail "no warning for the save at step 10"
  grep -q "2 checkpoint saves in a row failed (the last at step 20" d.log || fail "no clear stop message"
  grep -qiE "file too large|EFBIG" d.log || fail "the message does not name the cause (file too large)"
  no_partial D
  failed_records D "10 20"
  [[ -z $(find D/checkpoints -name 'step-*') ]] || fail "a checkpoint file was left: $(ls D/checkpoints)"
  echo "ok: saves beyond ulimit -f failed twice, the run stopped with exit 1, nothing half-written"
else
  fail "unknown mode $mode"
fi
