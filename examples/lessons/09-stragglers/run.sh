#!/usr/bin/env bash
# Lesson 9: stragglers. One rank computes twice as slowly; with the even split every step
# waits for it, with --local-batches auto the ranks move samples to the fast rank. The model
# t = max_r(b_r / s_r) + comm beside the measured step times, and, with --reduction exact,
# the bits of the adapted run against a run with no slow rank at all.
#   examples/lessons/09-stragglers/run.sh [--quick] [OUT]      (OUT default: runs/lesson09)
source "$(dirname "$0")/../lib.sh"
lesson_setup lesson09 "$@"
steps=400 window=20 test_flags=()
# --quick is what the test suite runs, beside other jobs on a small machine: there one rank
# may wait for its core more than the other at times, and auto would rightly hold the split
# (what step 2 prints when it does); --test-ignore-core-wait re-splits anyway, so the lesson's
# facts can be checked.
((quick)) && steps=120 window=10 test_flags=(--test-ignore-core-wait)
train=(train --model mlp --steps "$steps" --log-every "$window" --rebalance-every "$window"
  --no-eval --blas-threads 1 --global-batch 128 "${test_flags[@]}")
# --test-slow-rank R:F: rank R does F times its forward and backward compute, as real work.
slow=(--test-slow-rank 1:2)

echo "== 1. rank 1 computes 2x slower; the even split, 64 + 64 samples"
"$mpiexec" -n 2 "$ringtrain" "${train[@]}" "${slow[@]}" --run-dir "$out/even" >"$out/even.log" 2>&1
echo "== 2. the same run with --local-batches auto (a new split every $window steps if it pays)"
"$mpiexec" -n 2 "$ringtrain" "${train[@]}" "${slow[@]}" --local-batches auto \
  --run-dir "$out/auto" >"$out/auto.log" 2>&1
grep -m1 -i "waits for its core" "$out/auto.log" || true

echo "== 3. the model t = max_r(b_r / s_r) + comm against the measured step time"
/usr/bin/python3 "$(dirname "$0")/model.py" "$out/even" "$out/auto"

echo "== 4. --reduction exact: the adapted run (rank 1 slowed 3x) against an even one with no slow rank"
exact=(--reduction exact --exact-micro-batch 8)
"$mpiexec" -n 2 "$ringtrain" "${train[@]}" "${exact[@]}" --run-dir "$out/exact-even" >"$out/exact-even.log" 2>&1
"$mpiexec" -n 2 "$ringtrain" "${train[@]}" "${exact[@]}" --test-slow-rank 1:3 --local-batches auto \
  --run-dir "$out/exact-auto" >"$out/exact-auto.log" 2>&1
echo "splits the adapted run used: $(grep -o '"new_split":\[[0-9,]*\]' "$out/exact-auto/metrics.jsonl" | cut -d: -f2 | tr '\n' ' ')"
last=$(cat "$out/exact-even/checkpoints/LATEST")
echo "exact, adapted vs even, bit for bit: $(compare_bits "$out/exact-even/checkpoints/$last" "$out/exact-auto/checkpoints/$last")"
