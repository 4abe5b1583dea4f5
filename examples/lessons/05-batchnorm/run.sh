#!/usr/bin/env bash
# Lesson 5: BatchNorm. Splitting the batch changes what BatchNorm computes; SyncBatchNorm,
# whose batch statistics are sample-count-weighted sums over all ranks, restores it.
#   examples/lessons/05-batchnorm/run.sh [--quick] [OUT]      (OUT default: runs/lesson05)
source "$(dirname "$0")/../lib.sh"
lesson_setup lesson05 "$@"
steps=20 curve_steps=400 eval_every=100
((quick)) && steps=10 curve_steps=10 eval_every=5
last=$(printf "checkpoints/step-%08d.h5" "$steps")
# lr 0.01: at a larger rate BatchNorm training turns the last-bit differences of summing in
# another order into visible ones within a few steps (chaos, not a different computation).
common=(train --model cnn-bn --steps "$steps" --global-batch 32 --lr 0.01 --no-eval --quiet --blas-threads 1)

echo "== cnn-bn, $steps steps, global batch 32: one process; 2 ranks with 8 + 24 samples, SyncBN on and off"
"$mpiexec" -n 1 "$ringtrain" "${common[@]}" --run-dir "$out/one-process"
"$mpiexec" -n 2 "$ringtrain" "${common[@]}" --local-batches 8,24 --sync-bn on --run-dir "$out/sync-bn"
"$mpiexec" -n 2 "$ringtrain" "${common[@]}" --local-batches 8,24 --sync-bn off --run-dir "$out/per-rank-bn"
for run in sync-bn per-rank-bn; do
  echo "$run: manifest says batch norm statistics are: $(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['batch_norm']['statistics'])" "$out/$run/manifest.json")"
done
# /model: the parameters and BatchNorm's running statistics. (Not /optimizer: the bias of a
# convolution followed by BatchNorm has gradient zero in exact arithmetic, so its momentum is
# float noise whose relative difference means nothing.)
echo "sync-bn vs one process: $(compare_checkpoints "$out/sync-bn/$last" "$out/one-process/$last" model)"
echo "per-rank-bn vs one process: $(compare_checkpoints "$out/per-rank-bn/$last" "$out/one-process/$last" model)"

echo; echo "== curves: cnn-bn, global batch 64 split 4 + 60, lr 0.05: does per-rank BatchNorm train worse?"
curves=(train --model cnn-bn --steps "$curve_steps" --global-batch 64 --eval-every "$eval_every"
        --log-every "$eval_every" --quiet --blas-threads 1)
"$mpiexec" -n 1 "$ringtrain" "${curves[@]}" --run-dir "$out/curve-one-process"
"$mpiexec" -n 2 "$ringtrain" "${curves[@]}" --local-batches 4,60 --sync-bn on --run-dir "$out/curve-sync-bn"
"$mpiexec" -n 2 "$ringtrain" "${curves[@]}" --local-batches 4,60 --sync-bn off --run-dir "$out/curve-per-rank-bn"
plot_curves "$out/curves.png" "Lesson 5: BatchNorm on a split batch" \
  "$out/curve-one-process" "one process, B=64" "$out/curve-sync-bn" "N=2, 4+60, SyncBN" \
  "$out/curve-per-rank-bn" "N=2, 4+60, per-rank BN"
