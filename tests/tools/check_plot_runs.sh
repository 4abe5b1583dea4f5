#!/usr/bin/env bash
# check_plot_runs.sh RINGTRAIN PLOT_RUNS
# tools/plot_runs.py on small runs of the built ringtrain (one process), data written here
# with NumPy (.npy: x (n, 5) float32; y float32 (n, 2) targets, or int64 class labels):
#   regression (60 steps, test MSE every 5): the PNG has the test MSE panels, against step
#     and against wall time; --print gives "final test MSE" equal to the manifest's
#   the same run killed (SIGKILL) at step 47, after its checkpoint at 40 and its records of
#     step 45, then resumed: every loss and test MSE drawn equals the uninterrupted run's
#     (the resume is bitwise), once per step, and its wall times keep rising across the two
#     launches. Also the metrics.jsonl an older ringtrain left (the killed launch's records
#     of step 45 kept beside the resumed launch's): drawn the same, step 45 once
#   a classification run beside them: one panel per metric (test accuracy and test MSE)
# Skips (77) without numpy or matplotlib for Debian's python3.
set -u
ringtrain=$1 plot_runs=$2
python=/usr/bin/python3
"$python" -c "import numpy, matplotlib" 2>/dev/null || { echo "SKIP: no numpy/matplotlib"; exit 77; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; for f in out.txt plot.txt; do [[ -f $f ]] && { echo "--- $f"; tail -n 20 "$f"; }; done; exit 1; }

"$python" - <<'PY' || fail "writing the datasets"
import os
import numpy as np
rng = np.random.default_rng(54)
W = rng.uniform(-1, 1, size=(5, 2)).astype(np.float32)
for name in ("reg", "cls"):
    os.makedirs(name)
    for split, n in (("train", 200), ("test", 64)):
        x = rng.normal(size=(n, 5)).astype(np.float32)
        y = (x @ W + 0.05 * rng.normal(size=(n, 2))).astype(np.float32)
        np.save(f"{name}/{split}_x.npy", x)
        np.save(f"{name}/{split}_y.npy", y if name == "reg" else (y[:, 0] > 0).astype(np.int64))
PY
printf '[[layers]]\ntype = "linear"\nout = 8\n[[layers]]\ntype = "relu"\n[[layers]]\ntype = "linear"\nout = "classes"\n' >net.toml
train() {  # train RUN_DIR DATA [FLAGS]: 60 steps, evaluated and logged every 5
  local dir=$1 data=$2; shift 2
  "$ringtrain" train --data "$data" --model net.toml --global-batch 16 --steps 60 --lr 0.05 \
    --eval-every 5 --log-every 5 --checkpoint-every 20 --checkpoint-async off --blas-threads 1 \
    --run-dir "$dir" \
    --quiet "$@" </dev/null >out.txt 2>&1
}
train reg reg || fail "the regression run failed"
train cls cls || fail "the classification run failed"
(train resumed reg --test-kill-rank 0 --test-kill-step 47) 2>/dev/null && fail "the run to be killed was not"
cp resumed/metrics.jsonl killed.jsonl
train resumed reg --resume auto || fail "the resumed run failed"
grep -q '"resumed_from":"step-00000040.h5","step":40}' resumed/metrics.jsonl ||
  fail "the run did not resume from its checkpoint at step 40"
mkdir legacy && cp resumed/manifest.json legacy/
# the killed launch's records, then the resumed launch's from its "resumed_from" record on
{ cat killed.jsonl; sed -n '/"resumed_from":"step-00000040.h5"/,$p' resumed/metrics.jsonl; } \
  >legacy/metrics.jsonl
[[ $(grep -c '"loss".*"step":45,' legacy/metrics.jsonl) == 2 ]] ||
  fail "the killed launch did not log step 45 before it died: nothing to draw once"

"$python" "$plot_runs" reg resumed legacy cls --wall --print -o curves.png >plot.txt 2>&1 ||
  fail "plot_runs.py failed"
"$python" - <<'PY' || fail "the plot"
import json, struct
out = open("plot.txt").read().splitlines()
summary = {l.split(":")[0]: l for l in out if not l.startswith(" ")}
# regression: the metric is the test MSE, its final value the manifest's
final = json.load(open("reg/manifest.json"))["results"]["final_test_mse"]
line = summary["reg"]
assert "final test MSE" in line and "nan" not in line, line
printed = float(line.split("final test MSE ")[1])
assert abs(printed - final) <= 1e-3 * final, (printed, final)
assert "final test accuracy" in summary["cls"] and "2 launch(es)" in summary["resumed"], summary
# panels: loss, and per metric one against step and one against wall time
wrote = [l for l in out if l.startswith("wrote curves.png: ")]
assert wrote == ["wrote curves.png: training loss (window mean) against step; test MSE against "
                 "step; test MSE against wall time (s); test accuracy against step; test "
                 "accuracy against wall time (s)"], wrote
with open("curves.png", "rb") as f:
    head = f.read(24)
assert head[:8] == b"\x89PNG\r\n\x1a\n", head
width, height = struct.unpack(">II", head[16:24])
assert width == round(5 * 5.5 * 110) and height == 4 * 110, (width, height)
# the resumed run: each step once, the same values as the uninterrupted run, wall rising
def curve(run, kind):
    return [l.split()[2:5] for l in out if l.startswith("  %s %s step " % (run, kind))]
for run in ("resumed", "legacy"):
    for kind in ("loss", "test_mse"):
        steps = [int(s) for _, s, _ in curve(run, kind)]
        assert steps == sorted(set(steps)) and steps[-1] == 60, (run, kind, steps)
        assert [v for _, _, v in curve(run, kind)] == [v for _, _, v in curve("reg", kind)], kind
    walls = [float(l.split(" wall ")[1].split()[0]) for l in out if l.startswith("  %s test_mse" % run)]
    assert all(a < b for a, b in zip(walls, walls[1:])), (run, walls)
print("ok: regression panels and final test MSE %.4g; the resumed run drawn once per step, "
      "equal to the uninterrupted one, wall time %.6f s at step 60" % (printed, walls[-1]))
PY
