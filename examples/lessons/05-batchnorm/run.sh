#!/usr/bin/env bash
# Lesson 5: BatchNorm. Splitting the batch changes what BatchNorm computes; SyncBatchNorm,
# whose batch statistics are sample-count-weighted sums over all ranks, restores it.
#   examples/lessons/05-batchnorm/run.sh [--quick] [OUT]      (OUT default: runs/lesson05)
source "$(dirname "$0")/../lib.sh"
lesson_setup lesson05 "$@"
steps=20
((quick)) && steps=5
last=$(printf "checkpoints/step-%08d.h5" "$steps")
# lr 0.01: at a larger rate BatchNorm training turns the last-bit differences of summing in
# another order into visible ones within a few steps (chaos, not a different computation).
# --conv-algorithm im2col for the same reason: Winograd's convolution (the default for the
# second layer) rounds its outputs to ~6e-6 of the largest instead of ~1e-7, and after 4
# steps that noise, not BatchNorm, is what one process and two ranks differ by (1.3e-4).
common=(train --model cnn-bn --steps "$steps" --global-batch 32 --lr 0.01 --no-eval --quiet --blas-threads 1
        --conv-algorithm im2col --checkpoint-every 1 --keep "$steps")

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

echo; echo "== step by step: largest relative difference to one process in /model after each step"
printf "%5s %14s %14s\n" step sync-bn per-rank-bn | tee "$out/divergence.txt"
for ((k = 1; k <= steps; ++k)); do
  file=$(printf "checkpoints/step-%08d.h5" "$k")
  diff_of() { compare_checkpoints "$out/$1/$file" "$out/one-process/$file" model | sed 's/.*difference \([^ ]*\) .*/\1/'; }
  printf "%5d %14s %14s\n" "$k" "$(diff_of sync-bn)" "$(diff_of per-rank-bn)" | tee -a "$out/divergence.txt"
done
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 - "$out" <<'PY'
import sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = [line.split() for line in open(sys.argv[1] + "/divergence.txt").read().splitlines()[1:]]
steps = [int(r[0]) for r in rows]
fig, ax = plt.subplots(figsize=(6.5, 4))
ax.semilogy(steps, [float(r[1]) for r in rows], "o-", label="N=2, 8+24, SyncBN")
ax.semilogy(steps, [float(r[2]) for r in rows], "s-", label="N=2, 8+24, per-rank BN")
ax.axhline(1e-5, color="k", lw=0.8, ls="--", label="tolerance 1e-5")
ax.set_xlabel("step")
ax.set_ylabel("largest relative difference to one process (/model)")
ax.set_title("Lesson 5: BatchNorm on a split batch (cnn-bn, batch 32)")
ax.grid(alpha=0.3)
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[1] + "/divergence.png", dpi=110)
print("wrote %s/divergence.png" % sys.argv[1])
PY
fi
