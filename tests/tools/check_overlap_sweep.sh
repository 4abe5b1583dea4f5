#!/usr/bin/env bash
# check_overlap_sweep.sh RINGTRAIN MPIEXEC SWEEP_SCRIPT PLOT_SCRIPT
# bench/overlap_sweep.py on a tiny sweep (mlp, N=2, the default cap and 16 KiB, overlap on and
# off, one round of a few steps): it prints the table, the default rule and the measured best;
# its JSON has a summary row per cap with the run's bucket plan (collectives per step = buckets
# + the 1-float agreement, exposed <= comm, overlap off exposes all of its comm) and a finite
# prediction; the kept traces and the JSON feed tools/plot_overlap.py (when matplotlib is there).
set -euo pipefail
ringtrain=$1 mpiexec=$2 sweep=$3 plot=$4
/usr/bin/python3 -c "import json, statistics, subprocess, tempfile" 2>/dev/null || {
  echo "SKIP: /usr/bin/python3 with the standard library is needed"; exit 77; }
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
/usr/bin/python3 "$sweep" --models mlp --ranks 2 --caps 16K --rounds 1 --steps mlp=8 \
  --trace-steps 5 --max-others 100 --retries 0 --timeout 60 --ringtrain "$ringtrain" \
  --mpiexec "$mpiexec" --keep-traces "$out/traces" --json "$out/sweep.json" >"$out/stdout.txt"
for text in "mlp, N=2" "default rule: " "measured best with overlap on: cap 16 KiB"; do
  grep -qF "$text" "$out/stdout.txt" || { cat "$out/stdout.txt"; echo "FAIL: no '$text'"; exit 1; }
done
/usr/bin/python3 - "$out/sweep.json" <<'PY'
import json, math, sys
doc = json.load(open(sys.argv[1]))
runs, summary = doc["runs"], doc["summary"]
assert sorted((r["cap"], r["overlap"]) for r in runs) == [
    (0, "off"), (0, "on"), (16384, "off"), (16384, "on")], [(r["cap"], r["overlap"]) for r in runs]
assert [s["cap"] for s in summary] == [0, 16384], summary
for r in runs:
    b = r["buckets"]
    assert b["count"] == len(b["bytes"]) == len(b["ready_after_layer"]), b
    assert round(r["collectives"]) == b["count"] + 1, (r["collectives"], b)
    assert 0 < r["comm_s"] and 0 <= r["exposed_s"] <= r["comm_s"] * (1 + 1e-9), r
    if r["overlap"] == "off":  # nothing to overlap with: every ring is waited for
        assert abs(r["exposed_s"] - r["comm_s"]) <= 1e-6 * r["comm_s"], r
    assert sum(b["bytes"]) == sum(runs[0]["buckets"]["bytes"]), b  # every cap covers the model
    assert r["times"] and r["times"]["backward_by_layer"], r["times"]
small, default = summary[1], summary[0]
assert small["buckets"] > default["buckets"], (small, default)  # a smaller cap splits more
for s in summary:
    for key in ("pred_step_on_s", "pred_step_off_s", "pred_exposed_s"):
        assert math.isfinite(s[key]) and s[key] >= 0, (key, s)
    assert s["pred_step_on_s"] <= s["pred_step_off_s"], s  # the model never loses by overlap
print("ok: %d runs, buckets %s" % (len(runs), [s["buckets"] for s in summary]))
PY
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 "$plot" sweep "$out/sweep.json" -o "$out/sweep.png" >/dev/null
  /usr/bin/python3 "$plot" timeline "$out/traces/mlp-n2-default-on-r1/trace.json" --step 3 \
    -o "$out/step.png" >/dev/null
  for f in sweep.png step.png; do [[ -s $out/$f ]] || { echo "FAIL: no $f"; exit 1; }; done
  echo "ok: plots drawn"
else
  echo "matplotlib missing: plots not checked"
fi
