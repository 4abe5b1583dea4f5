#!/usr/bin/env bash
# check_signal_stop.sh RINGTRAIN MPIEXEC SIGNAL
# Slurm preemption: SIGNAL (TERM or USR1) sent to mpiexec, which forwards it to every rank.
# The ranks agree on a step boundary, save a checkpoint there and exit 0 with a message; a
# resume continues from that step. (mpiexec's own exit code after a forwarded signal is not
# reliable, so the outcome is read from what the ranks printed and wrote.)
set -u
ringtrain=$1 mpiexec=$2 signal=$3
work=$(mktemp -d); trap 'kill %1 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; tail -20 run.log resume.log 2>/dev/null; exit 1; }
args=(--model mlp --mlp-hidden 64 --global-batch 32 --steps 1000000 --no-eval --log-every 5)
MPIEXEC_TIMEOUT=120 "$mpiexec" -n 2 "$ringtrain" train "${args[@]}" --run-dir R >run.log 2>&1 &
launcher=$!
# Wait until training is under way: the first metrics line exists (bounded: 60 s).
for _ in $(seq 600); do
  grep -q '"loss"' R/metrics.jsonl 2>/dev/null && break
  kill -0 "$launcher" 2>/dev/null || fail "the run ended before the signal"
  sleep 0.1
done
grep -q '"loss"' R/metrics.jsonl 2>/dev/null || fail "no training progress within 60 s"
kill -s "$signal" "$launcher"
wait "$launcher"
grep -q "stopped by a signal at step" run.log || fail "no 'stopped by a signal' message"
step=$(grep -o 'stopped by a signal at step [0-9]*' run.log | grep -o '[0-9]*$')
[[ -f R/checkpoints/$(printf 'step-%08d.h5' "$step") ]] || fail "no checkpoint at step $step"
"$ringtrain" inspect "R/checkpoints/$(printf 'step-%08d.h5' "$step")" --verify >/dev/null || fail "checkpoint does not verify"
MPIEXEC_TIMEOUT=120 "$mpiexec" -n 2 "$ringtrain" train "${args[@]/1000000/$((step + 10))}" \
  --run-dir R --resume auto >resume.log 2>&1 || fail "resume failed"
grep -q "resumed from .* at step $step" resume.log || fail "did not resume at step $step"
echo "ok: SIG$signal -> checkpoint at step $step, exit path clean, resumed at step $step and finished"
