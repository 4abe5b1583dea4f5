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
#   MODE=recover: the ranks start under a soft ulimit -f, so the save at step 10 fails for
#     real. The run pauses after step P (--test-pause-step) while the test lifts every rank's
#     limit (prlimit), then goes on: exit 0, and the final checkpoint is bitwise equal to a run
#     whose saves all succeeded. Synchronous saves: P = 15, failed 10, durable 20 and 30. With
#     background saves, P = 25: the save at 10 failed (agreed at step 20); the save at 20 may
#     still be writing when the limit is lifted, so it may go either way; the save at 30 is the
#     first to start with space back and must succeed.
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
# The steps of the failed-save records in the metrics.jsonl of run directory $1.
failed_steps() {
  python3 -c '
import json, sys
steps = [r["step"] for r in map(json.loads, open(sys.argv[1])) if "save_failed" in r]
print(" ".join(map(str, steps)))' "$1/metrics.jsonl" || fail "cannot read $1/metrics.jsonl"
}
# Run directory $1 has failed-save records at exactly the steps $2 (e.g. "10 20"; a bash
# regular expression such as "10( 20)?" allows a choice).
failed_records() {
  local got
  got=$(failed_steps "$1")
  [[ $got =~ ^$2$ ]] || fail "$1/metrics.jsonl records failed saves at steps '$got', expected '$2'"
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
elif [[ $mode == recover ]]; then
  pause=15 failed="10" durable="20 30"
  [[ " $* " == *" --checkpoint-async on "* ]] && pause=25 failed="10( 20)?" durable="30"
  run "$@" --quiet --mlp-hidden 2048 --run-dir A >a.log 2>&1 || fail "reference run failed"
  (ulimit -S -f 12288 && exec "$mpiexec" -n "$n" "$ringtrain" train "$@" --mlp-hidden 2048 \
    --run-dir E --max-failed-saves 3 --test-pause-step $pause --test-pause-file "$work/go" \
    </dev/null >e.log 2>&1) &
  job=$!
  for _ in $(seq 600); do  # the run's pause, then the ranks' limits are lifted
    grep -q "test pause after step $pause" e.log 2>/dev/null && break
    kill -0 $job 2>/dev/null || break
    sleep 0.1
  done
  grep -q "warning: the checkpoint at step 10 failed" e.log || { touch go; wait $job; fail "no warning for the save at step 10 before the pause"; }
  lifted=0
  for exe in /proc/[0-9]*/exe; do  # this test's ranks: ringtrain processes whose cwd is $work
    pid=${exe#/proc/}; pid=${pid%/exe}
    [[ $(readlink "$exe" 2>/dev/null) == "$(readlink -f "$ringtrain")" ]] || continue
    [[ $(readlink "/proc/$pid/cwd" 2>/dev/null) == "$work" ]] || continue
    prlimit --pid "$pid" --fsize=unlimited && lifted=$((lifted + 1))
  done
  touch go
  wait $job
  code=$?
  [[ $lifted == "$n" ]] || fail "lifted the file size limit of $lifted ranks, expected $n"
  [[ $code == 0 ]] || fail "the run with space back: exit $code, expected 0"
  failed_records E "$failed"
  no_partial E
  for s in $(failed_steps E); do
    [[ ! -e E/checkpoints/step-000000$s.h5 ]] || fail "the failed save of step $s left a checkpoint"
  done
  for s in $durable; do
    [[ -e E/checkpoints/step-000000$s.h5 ]] || fail "no durable checkpoint at step $s once space was back"
  done
  for g in model optimizer schedule data rng; do
    h5diff A/checkpoints/step-00000030.h5 E/checkpoints/step-00000030.h5 "/$g" "/$g" >/dev/null ||
      fail "/$g differs from the run whose saves succeeded"
  done
  echo "ok: saves at $(failed_steps E) failed beyond ulimit -f; with the limit lifted after step $pause the saves at $durable succeeded, bitwise"
else
  fail "unknown mode $mode"
fi
