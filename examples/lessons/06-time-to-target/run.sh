#!/usr/bin/env bash
# Lesson 6: global batch and time to target. Weak scaling (fixed local batch: more ranks, a
# bigger global batch, a different optimization) against strong scaling (fixed global batch:
# the same optimization, faster steps); and a faster step that loses.
#   examples/lessons/06-time-to-target/run.sh [--quick] [OUT]      (OUT default: runs/lesson06)
# The full lesson trains about 30 runs to 88 % test accuracy: 30-40 minutes on 2 cores.
source "$(dirname "$0")/../lib.sh"
lesson_setup lesson06 "$@"
study=(/usr/bin/python3 "$top/tools/scaling_study.py" --ringtrain "$ringtrain" --mpiexec "$mpiexec")
common=(--seeds 0,1,2 --target 0.88 --eval-every 100)
weak_ns=1,2,4 strong_ns=1,2
if ((quick)); then common=(--seeds 0 --target 0.6 --eval-every 20 --epochs 0.2 --no-plots); weak_ns=1,2; fi
summary() { grep -v "^  mpiexec"; }

echo "== weak scaling: 64 samples per rank, learning rate scaled linearly with the global batch"
"${study[@]}" --mode weak --ns "$weak_ns" --local-batch 64 --lr-scaling linear "${common[@]}" --out "$out/weak" | summary
echo; echo "== strong scaling: global batch 128 split over the ranks"
"${study[@]}" --mode strong --ns "$strong_ns" --global-batch 128 "${common[@]}" --out "$out/strong" | summary
echo; echo "== a faster step that loses: N = 2, global batch 32 against 256 (linear scaling)"
printf "%-10s %s\n" "" "   N      B      steps [range]          step ms      TTT s [range]   samples/s"
for b in 32 256; do
  printf "%-10s %s\n" "batch $b:" "$("${study[@]}" --mode strong --ns 2 --global-batch "$b" --lr-scaling linear \
    "${common[@]}" --out "$out/batch-$b" | summary | tail -1 | cut -c1-80)"
done
