#!/usr/bin/env bash
# check_overlap_paired.sh RINGTRAIN MPIEXEC SCRIPT
# bench/overlap_paired.py on a tiny run (mlp 784-16-10, N=2, 12 steps in windows of 2, one
# run): every warm window reports both modes' step times, the summary line counts them (5
# windows: the first of 6 is left out), and the breakdown line says where the time went.
# Bad arguments are refused with exit code 2.
set -euo pipefail
ringtrain=$1 mpiexec=$2 script=$3
/usr/bin/python3 -c "import statistics, tempfile" 2>/dev/null || {
  echo "SKIP: /usr/bin/python3 with the standard library is needed"; exit 77; }
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
/usr/bin/python3 "$script" --model mlp --ranks 2 --runs 1 --steps 12 --window 2 --timeout 60 \
  --flags "--mlp-hidden 16 --bucket-bytes 4096" --ringtrain "$ringtrain" --mpiexec "$mpiexec" \
  >"$out/stdout.txt"
grep -qE "^  run 1:  5 windows, step on +[0-9.]+ ms off +[0-9.]+ ms" "$out/stdout.txt" &&
  grep -qE "^mlp N=2: step with overlap / step without \(means over ranks\), median over 5 windows: [0-9.]+ " \
    "$out/stdout.txt" &&
  grep -qE "^where it went \(rank 0, on minus off, medians\): backward [-+][0-9.]+ ms .*exposed wait [-+][0-9.]+ ms; exposed / comm with overlap [0-9]+ %" \
    "$out/stdout.txt" || { cat "$out/stdout.txt"; echo "FAIL: no per-run, summary or breakdown line"; exit 1; }
set +e
/usr/bin/python3 "$script" --window 3 --ringtrain "$ringtrain" >"$out/bad.txt" 2>&1
rc=$?
set -e
[[ $rc == 2 ]] && grep -qF -- "--window 3: give an even number" "$out/bad.txt" ||
  { cat "$out/bad.txt"; echo "FAIL: an odd --window exited $rc"; exit 1; }
echo "ok: $(tail -2 "$out/stdout.txt" | head -1)"
