#!/usr/bin/env bash
# Runs the same short trainings with two builds of ringtrain and says, per run, whether they
# end bitwise equal: the final checkpoint's /model and /optimizer (h5diff without tolerance)
# and every parameter hash in metrics.jsonl. For refactors that must not change a bit.
# Usage: tools/compare_builds.sh OLD/ringtrain NEW/ringtrain [OUT_DIR]
# (MPIEXEC: the launcher, default mpiexec.mpich; OUT_DIR: default a new temporary folder.)
# Exit status 1 if any run differs or fails.
set -euo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
[[ $# -ge 2 ]] || { echo "usage: tools/compare_builds.sh OLD/ringtrain NEW/ringtrain [OUT_DIR] (see --help)" >&2; exit 2; }
old=$1 new=$2 out=${3:-$(mktemp -d)}
mpiexec=${MPIEXEC:-mpiexec.mpich}
mkdir -p "$out"
hashes() { grep -o '"parameter_hash":"[0-9a-f]*"' "$1/metrics.jsonl"; }
status=0 i=0
while read -r n flags; do
  i=$((i + 1))
  for side in old new; do
    bin=$old; [[ $side == new ]] && bin=$new
    # shellcheck disable=SC2086
    if ! "$mpiexec" -n "$n" "$bin" train --quiet --run-dir "$out/$side$i" $flags \
        </dev/null >/dev/null 2>"$out/$side$i.err"; then
      echo "FAILED run $i ($side): $(tail -1 "$out/$side$i.err")"; status=1; continue 2
    fi
  done
  files=("$out/old$i"/checkpoints/step-*.h5)
  file=$(basename "${files[-1]}")
  if h5diff "$out/old$i/checkpoints/$file" "$out/new$i/checkpoints/$file" /model >/dev/null &&
     h5diff "$out/old$i/checkpoints/$file" "$out/new$i/checkpoints/$file" /optimizer >/dev/null &&
     diff <(hashes "$out/old$i") <(hashes "$out/new$i") >/dev/null; then
    echo "same     N=$n $flags"
  else
    echo "DIFFERS  N=$n $flags"; status=1
  fi
done <<'RUNS'
2 --steps 60 --log-every 20 --local-batches 16,112 --eval-every 30
3 --model cnn-bn --steps 12 --log-every 4 --global-batch 30 --sync-bn on --no-eval
2 --steps 40 --log-every 10 --zero 1 --optimizer adamw --lr 0.001 --checkpoint-every 15 --no-eval
2 --steps 40 --log-every 10 --overlap alternate --trace-steps 5 --no-eval
1 --model cnn --steps 10 --log-every 5 --dropout 0.2 --no-eval
3 --steps 30 --log-every 10 --overlap off --zero 1 --no-eval --local-batches 0,64,64
2 --steps 30 --log-every 10 --reduction exact --exact-micro-batch 16 --local-batches 48,80 --no-eval
3 --steps 20 --log-every 10 --reduction exact --exact-micro-batch 16 --local-batches 32,48,48 --no-eval
3 --steps 20 --log-every 10 --reduction exact --exact-micro-batch 16 --local-batches 32,48,48 --zero 1 --optimizer adamw --lr 0.001 --no-eval
2 --steps 30 --log-every 10 --collective hierarchical --ranks-per-host 1 --zero 1 --no-eval
3 --steps 20 --log-every 10 --collective hierarchical --ranks-per-host 2 --no-eval
2 --steps 30 --log-every 10 --wire bf16 --bucket-bytes 65536 --no-eval
2 --steps 30 --log-every 10 --ring-driver thread --bucket-bytes 65536 --no-eval
2 --steps 20 --log-every 10 --bucket-bytes 4096 --test-nan-rank 1 --test-nan-step 3 --no-eval
RUNS
exit $status
