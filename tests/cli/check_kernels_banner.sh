#!/usr/bin/env bash
# check_kernels_banner.sh RINGTRAIN
# The banner names the code that runs the products at the rank's thread count, and warns when
# that is OpenBLAS on several threads on a CPU with AVX-512F (measured slower there than the
# alternatives it names). One thread, the own AVX-512 kernels, and a CPU without AVX-512F (an
# AVX2 Zen 3 measured OpenBLAS on 2 threads faster than 2 ranks) draw no warning; the own AVX2
# kernels draw a note that OpenBLAS is faster.
set -euo pipefail
ringtrain=$1
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
banner() {  # banner NAME FLAGS...: the run's start-up lines in $out/NAME.txt
  local name=$1; shift
  "$ringtrain" train --steps 1 --no-eval --run-dir "$out/$name" "$@" >"$out/$name.txt" 2>&1
}
expect() {  # expect NAME TEXT
  grep -qF "$2" "$out/$1.txt" || { cat "$out/$1.txt"; echo "FAIL: $1 has no '$2'"; exit 1; }
}
refuse() {  # refuse NAME TEXT
  if grep -qF "$2" "$out/$1.txt"; then cat "$out/$1.txt"; echo "FAIL: $1 has '$2'"; exit 1; fi
}
banner openblas2 --gemm openblas --blas-threads 2
expect openblas2 "products: OpenBLAS on 2 threads"
banner openblas1 --gemm openblas --blas-threads 1
expect openblas1 "products: OpenBLAS on one thread"
refuse openblas1 "warning: OpenBLAS"
if grep -qw avx512f /proc/cpuinfo; then
  expect openblas2 "warning: OpenBLAS on 2 threads per rank was measured slower on AVX-512 CPUs"
  expect openblas2 "than --gemm own, or 2 times as many ranks with --blas-threads 1"
  banner own3 --gemm own --blas-threads 3
  expect own3 "products: ringtrain's AVX-512 kernels on 3 threads"
  refuse own3 "warning: OpenBLAS"
else
  refuse openblas2 "warning: OpenBLAS"
  if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    banner own3 --gemm own --blas-threads 3
    expect own3 "products: ringtrain's AVX2 kernels on 3 threads"
    expect own3 "note: ringtrain's AVX2 kernels were measured slower than OpenBLAS"
  fi
fi
grep -hF "products:" "$out"/*.txt
echo "ok"
