#!/usr/bin/env bash
# check_scaling_study.sh RINGTRAIN STUDY_SCRIPT
# tools/scaling_study.py on a tiny study (N = 1, 2; two seeds; an easy target reached at the
# first evaluations): both CSVs have a row per run / per N with the contract's columns, the
# weak-scaling global batch is N x the local batch, and a second invocation reuses the runs.
set -euo pipefail
ringtrain=$1 study=$2
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
args=(--mode weak --ns 1,2 --local-batch 32 --seeds 0,1 --target 0.6 --eval-every 20
      --epochs 0.2 --ringtrain "$ringtrain" --out "$out" --no-plots)
/usr/bin/python3 "$study" "${args[@]}" >"$out/log1.txt"
/usr/bin/python3 - "$out" <<'PY'
import csv, sys
out = sys.argv[1]
runs = list(csv.DictReader(open(out + "/runs.csv")))
summary = list(csv.DictReader(open(out + "/summary.csv")))
assert len(runs) == 4, runs
assert sorted((r["n"], r["seed"]) for r in runs) == [("1", "0"), ("1", "1"), ("2", "0"), ("2", "1")]
for r in runs:
    assert int(r["global_batch"]) == 32 * int(r["n"]), r
    assert r["target_reached"] == "True", r
    steps, step_s, ttt = int(r["steps_to_target"]), float(r["mean_step_s"]), float(r["time_to_target_s"])
    assert steps > 0 and steps % 20 == 0, r        # the stopping rule: at an evaluation
    assert ttt >= steps * step_s * 0.99, r         # time to target covers the steps at least
for key in ("n", "global_batch", "steps_to_target_median", "steps_min", "steps_max",
            "mean_step_s_median", "time_to_target_s_median", "samples_per_s_median", "efficiency"):
    assert key in summary[0], key
assert [s["n"] for s in summary] == ["1", "2"] and float(summary[0]["efficiency"]) == 1.0
print("ok: %d runs, summary %s" % (len(runs), [(s["n"], s["steps_to_target_median"]) for s in summary]))
PY
# The runs are kept: a second invocation reads them instead of training again.
/usr/bin/python3 "$study" "${args[@]}" >"$out/log2.txt"
if grep -q "mpiexec" "$out/log2.txt"; then echo "FAIL: the second invocation trained again"; exit 1; fi
echo "ok: rerun reused the run directories"
