#!/usr/bin/env bash
# check_blas_banner.sh RINGTRAIN
# OpenBLAS settings that the environment pins are the user's choice, kept, and named in the
# banner with what to do: OPENBLAS_CORETYPE=Prescott (kernels below any x86-64 CPU with AVX2)
# and OPENBLAS_L2_SIZE. Without them the banner names neither.
set -euo pipefail
ringtrain=$1
grep -qw avx2 /proc/cpuinfo || { echo "SKIP: this CPU has no AVX2, Prescott is its level"; exit 77; }
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
OPENBLAS_CORETYPE=Prescott OPENBLAS_L2_SIZE=512 "$ringtrain" train --steps 1 --no-eval \
  --run-dir "$out/pinned" >"$out/pinned.txt" 2>&1
for text in "OpenBLAS kernels Prescott (slow: this CPU supports" \
            "OPENBLAS_CORETYPE=Prescott in the environment chose these: unset it" \
            "OPENBLAS_L2_SIZE=512 in the environment"; do
  grep -qF "$text" "$out/pinned.txt" || { cat "$out/pinned.txt"; echo "FAIL: no '$text'"; exit 1; }
done
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$ringtrain" train --steps 1 --no-eval \
  --run-dir "$out/free" >"$out/free.txt" 2>&1
for text in "in the environment chose these" "OPENBLAS_L2_SIZE"; do
  if grep -qF "$text" "$out/free.txt"; then cat "$out/free.txt"; echo "FAIL: '$text' unasked"; exit 1; fi
done
grep -F "OpenBLAS kernels" "$out/pinned.txt" "$out/free.txt"
echo "ok"
