#!/usr/bin/env bash
# Lesson 1: one defined update. Runs every command of the lesson's README in order.
#   examples/lessons/01-one-update/run.sh [--quick] [OUT]      (OUT default: runs/lesson01)
source "$(dirname "$0")/../lib.sh"
lesson_setup lesson01 "$@"
steps=1500 eval_every=100
((quick)) && steps=40 eval_every=20

echo "== 1. the notes' example: 1 sample with mean gradient 2, 3 with mean 6"
"$mpiexec" -n 2 "$build/examples/lessons/lesson01_one_update"

echo; echo "== 2. 20 steps of mlp, global batch 128: one process, and 2 ranks holding 16 and 112 samples"
common=(train --steps 20 --global-batch 128 --no-eval --quiet --blas-threads 1)
"$mpiexec" -n 1 "$ringtrain" "${common[@]}" --run-dir "$out/exact-one-process"
"$mpiexec" -n 2 "$ringtrain" "${common[@]}" --local-batches 16,112 --run-dir "$out/exact-sum-scaled"
"$mpiexec" -n 2 "$ringtrain" "${common[@]}" --local-batches 16,112 --reduction mean-of-means \
  --run-dir "$out/exact-mean-of-means" 2>&1 | grep -m1 WARNING
last=checkpoints/step-00000020.h5
echo "sum-scaled vs one process: $(compare_checkpoints "$out/exact-sum-scaled/$last" "$out/exact-one-process/$last")"
echo "mean-of-means vs one process: $(compare_checkpoints "$out/exact-mean-of-means/$last" "$out/exact-one-process/$last")"

echo; echo "== 3. $steps steps each: do the curves part?"
curves=(train --steps "$steps" --global-batch 128 --eval-every "$eval_every" --log-every "$eval_every" --quiet --blas-threads 1)
"$mpiexec" -n 1 "$ringtrain" "${curves[@]}" --run-dir "$out/one-process"
"$mpiexec" -n 2 "$ringtrain" "${curves[@]}" --local-batches 16,112 --run-dir "$out/sum-scaled"
"$mpiexec" -n 2 "$ringtrain" "${curves[@]}" --local-batches 16,112 --reduction mean-of-means \
  --run-dir "$out/mean-of-means" 2>/dev/null
plot_curves "$out/curves.png" "Lesson 1: one defined update" \
  "$out/one-process" "one process, B=128" "$out/sum-scaled" "N=2, 16+112, sum-scaled" \
  "$out/mean-of-means" "N=2, 16+112, mean-of-means"

echo; echo "== 4. --reduction exact: the same $steps steps, bit for bit"
"$mpiexec" -n 1 "$ringtrain" "${curves[@]}" --reduction exact --run-dir "$out/exact-one"
"$mpiexec" -n 2 "$ringtrain" "${curves[@]}" --local-batches 16,112 --reduction exact \
  --run-dir "$out/exact-split"
last=checkpoints/step-$(printf %08d "$steps").h5
echo "sum-scaled vs one process, bit for bit: $(compare_bits "$out/sum-scaled/$last" "$out/one-process/$last")"
echo "exact 16+112 vs exact one process, bit for bit: $(compare_bits "$out/exact-split/$last" "$out/exact-one/$last")"
plot_curves "$out/curves-exact.png" "Lesson 1: --reduction exact" \
  "$out/one-process" "one process, B=128, sum-scaled" "$out/sum-scaled" "N=2, 16+112, sum-scaled" \
  "$out/exact-one" "one process, B=128, exact" "$out/exact-split" "N=2, 16+112, exact"
