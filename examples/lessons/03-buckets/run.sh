#!/usr/bin/env bash
# Lesson 3: buckets. The same cnn training with gradient buckets capped from 16 KiB to the
# whole model, overlap on and off: startups against waiting.
#   examples/lessons/03-buckets/run.sh [--quick] [OUT]      (OUT default: runs/lesson03)
source "$(dirname "$0")/../lib.sh"
lesson_setup lesson03 "$@"
args=(--model cnn --steps 60 --caps 16K,64K,256K,1M,4M,whole)
((quick)) && args=(--model cnn --steps 12 --caps 16K,whole)
/usr/bin/python3 "$(dirname "$0")/bucket_sweep.py" --ringtrain "$ringtrain" --mpiexec "$mpiexec" \
  --out "$out" "${args[@]}"
