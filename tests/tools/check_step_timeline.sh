#!/usr/bin/env bash
# check_step_timeline.sh RINGTRAIN MPIEXEC SCRIPT
# bench/step_timeline.py on a tiny traced run (mlp 784-16-10, N=2, --zero 1 --overlap off,
# 8 steps, 2 skipped): each rank's forward, backward and optimizer rows appear over 6 steps,
# in that order, and the two waits of ZeRO-1 are numbered. The exact step (--reduction exact,
# 32 samples per rank, m = 16) shows its one pass with the layers' forward, the loss, their
# backward with, per layer, the agreement on its bounds and the adds of both micro-batches'
# terms, then the sum over ranks, in order. A run without trace.json and a negative --skip are refused with a message.
set -euo pipefail
ringtrain=$1 mpiexec=$2 script=$3
/usr/bin/python3 -c "import statistics" 2>/dev/null || {
  echo "SKIP: /usr/bin/python3 with the standard library is needed"; exit 77; }
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
MPIEXEC_TIMEOUT=60 "$mpiexec" -n 2 "$ringtrain" train --model mlp --mlp-hidden 16 --steps 8 \
  --no-eval --quiet --zero 1 --overlap off --trace-steps 8 --run-dir "$out/run" >/dev/null
/usr/bin/python3 "$script" "$out/run" --skip 2 >"$out/stdout.txt"
for rank in 0 1; do
  rows=$(awk -v r="rank $rank" '$0 == r {on = 1; next} /^rank / {on = 0} on' "$out/stdout.txt")
  order=$(printf '%s\n' "$rows" | awk '{print $1}' | grep -xE "forward|backward|optimizer" | tr '\n' ' ')
  [[ $order == "forward backward optimizer " ]] &&
    printf '%s\n' "$rows" | grep -qE "^  wait for communication #1 .* 6$" &&
    printf '%s\n' "$rows" | grep -qE "^  wait for communication #2 .* 6$" ||
    { cat "$out/stdout.txt"; echo "FAIL: rank $rank: rows '$order' or the numbered waits"; exit 1; }
done
MPIEXEC_TIMEOUT=60 "$mpiexec" -n 2 "$ringtrain" train --model mlp --mlp-hidden 16 --steps 8 \
  --no-eval --quiet --global-batch 64 --reduction exact --exact-micro-batch 16 --trace-steps 8 \
  --run-dir "$out/exact" >/dev/null
/usr/bin/python3 "$script" "$out/exact" --skip 2 >"$out/exact.txt"
# One pass; inside it the layers' forward, the loss and their backward, in that order, and
# per linear layer the agreement on its bounds, then 2 adds (the weight's one tile and the
# bias, each with both micro-batches' terms).
adds() { for i in "$@"; do printf 'exact: add to the accumulator #%d|' "$i"; done; }
want="data|exact: forward, loss, backward|exact: agree on bounds #1|$(adds 1 2)\
exact: agree on bounds #2|$(adds 3 4)\
exact: sum over ranks and round|exact: loss over ranks|optimizer|"
for rank in 0 1; do
  all=$(awk -v r="rank $rank" '$0 == r {on = 1; next} /^rank / {on = 0} on' "$out/exact.txt")
  rows=$(printf '%s\n' "$all" |
    sed -nE 's/^  (data|exact: [^#]*[a-z0-9](| #[0-9])|optimizer)  +compute .* 6$/\1/p' | tr '\n' '|')
  layers=$(printf '%s\n' "$all" | sed -nE 's/^  (forward|loss|backward)  +compute .* 6$/\1/p' |
    tr '\n' ' ')
  [[ $rows == "$want" && $layers == "forward loss backward " ]] ||
    { cat "$out/exact.txt"; echo "FAIL: exact step, rank $rank: rows '$rows', '$layers'"; exit 1; }
done
set +e
/usr/bin/python3 "$script" "$out" >"$out/none.txt" 2>&1; rc_none=$?
/usr/bin/python3 "$script" "$out/run" --skip -1 >"$out/bad.txt" 2>&1; rc_bad=$?
set -e
[[ $rc_none == 1 ]] && grep -qF "cannot read $out/trace.json" "$out/none.txt" &&
  [[ $rc_bad == 2 ]] && grep -qF -- "--skip -1: give 0 or more steps" "$out/bad.txt" ||
  { cat "$out/none.txt" "$out/bad.txt"; echo "FAIL: exit codes $rc_none, $rc_bad"; exit 1; }
echo "ok: $(head -1 "$out/stdout.txt")"
