#!/usr/bin/env bash
# check_old_checkpoint.sh RINGTRAIN MPIEXEC CHECKPOINT DATA_DIR
# A checkpoint written before the built-in models became spec files (CHECKPOINT: mlp with
# --mlp-hidden 8 on DATA_DIR, global batch 4, step 2 of N=2, by ringtrain built from main at
# 33ee05c) resumes with this build, and the run ends at step 4 bitwise equal to a run of this
# build that never stopped: same parameter names and shapes, same bits. `ringtrain eval`
# takes it too: the file names the built-in model (its spec was not stored yet).
set -eu
ringtrain=$1 mpiexec=$2 checkpoint=$3 data=$4
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
args=(--data "$data" --mlp-hidden 8 --global-batch 4 --no-eval --quiet --checkpoint-every 2)
"$mpiexec" -n 2 "$ringtrain" train "${args[@]}" --steps 4 --run-dir "$work/resumed" --resume "$checkpoint"
grep -q '"resumed_from":"mlp8-step2-before-specs.h5"' "$work/resumed/metrics.jsonl" ||
  { echo "FAIL: the run did not resume from $checkpoint"; exit 1; }
"$mpiexec" -n 2 "$ringtrain" train "${args[@]}" --steps 4 --run-dir "$work/straight"
"$ringtrain" inspect "$work/resumed/checkpoints/step-00000004.h5" \
  --compare "$work/straight/checkpoints/step-00000004.h5" --rtol 0
out=$("$ringtrain" eval "$checkpoint" --data "$data") || { echo "FAIL: eval of $checkpoint"; exit 1; }
[[ $out == *"test accuracy"* ]] || { echo "FAIL: eval printed: $out"; exit 1; }
echo "ok: a checkpoint from before model specs resumes to bitwise the same step 4"
