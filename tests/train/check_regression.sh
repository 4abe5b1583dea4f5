#!/usr/bin/env bash
# check_regression.sh RINGTRAIN MPIEXEC
# Regression end to end (float32 targets, --loss mse chosen from y's dtype):
#  - HDF5 data written here: x (n, 5) normal, y = x W + b + noise (n, 2), 301 train and 203
#    test samples (N = 2 does not divide them); a spec of two linear layers learns it to a
#    test MSE below 2 % of the test targets' variance (an untrained model sits near 100 %,
#    the noise floor at 0.1 %), so the test fails when the model does not learn
#  - N = 1 and N = 2 with uneven local batches (5 + 11) give parameters equal within 1e-5
#    and test MSEs equal within 1e-5 (relative); the N = 2 run stopped at step 100 and
#    resumed is bitwise the uninterrupted one, with the same final and best test MSE
#  - --target 0.01 stops at the first evaluation whose test MSE is <= 0.01
#  - `eval` at N = 1 and N = 2 prints the test MSE and loss of the run's final evaluation in
#    metrics.jsonl exactly; its predictions are float32 (203, 2) whose MSE against test y is
#    the printed one; the manifest names the metric and the target's direction
#  - the same kind of data as .npy with y of shape (n): trains, eval writes predictions (203,)
#  - bad input, exit 2, one line, nothing written: NaN in test y (HDF5) and in train y (.npy),
#    a last layer of the wrong width, --loss cross-entropy on float targets, and eval of the
#    regression checkpoint on class-labelled data
# Skips (77) without numpy or h5py for Debian's python3.
set -u
ringtrain=$1 mpiexec=$2
# shellcheck source=numpy_workdir.sh
source "$(dirname "$0")/numpy_workdir.sh"
fail() { echo "FAIL: $*"; for f in out.txt err.txt; do [[ -f $f ]] && { echo "--- $f"; cat $f; }; done; exit 1; }

"$python" - <<'PY' || fail "writing the datasets"
import os
import numpy as np, h5py
rng = np.random.default_rng(2929)
W = rng.uniform(-1, 1, size=(5, 2)).astype(np.float32)
b = np.array([0.5, -0.25], np.float32)
def split(n):
    x = rng.normal(size=(n, 5)).astype(np.float32)
    y = (x @ W + b + 0.05 * rng.normal(size=(n, 2))).astype(np.float32)
    return x, y
data = {s: split(n) for s, n in (("train", 301), ("test", 203))}
def write_h5(name, edit=None):
    with h5py.File(name, "w") as f:
        for s, (x, y) in data.items():
            y = y.copy()
            if edit: edit(s, y)
            f[s + "/x"], f[s + "/y"] = x, y
write_h5("data.h5")
write_h5("nan_target.h5", lambda s, y: y.__setitem__((7, 1), np.nan) if s == "test" else None)
os.makedirs("npy")
for s, (x, y) in data.items():
    np.save(f"npy/{s}_x.npy", x)
    np.save(f"npy/{s}_y.npy", y[:, 0].copy())  # one target per sample: y of shape (n)
os.makedirs("nan_npy")
for s, (x, y) in data.items():
    t = y[:, 0].copy()
    if s == "train": t[3] = np.inf
    np.save(f"nan_npy/{s}_x.npy", x)
    np.save(f"nan_npy/{s}_y.npy", t)
with h5py.File("labels.h5", "w") as f:  # class labels: the regression model must refuse it
    for s, (x, y) in data.items():
        f[s + "/x"], f[s + "/y"] = x, (y[:, 0] > 0).astype(np.int64)
PY
spec() {  # spec OUT: linear 8, then linear OUT
  printf '[[layers]]\ntype = "linear"\nout = 8\n[[layers]]\ntype = "linear"\nout = %s\n' "$1"
}
spec '"classes"' >linear.toml
spec 3 >wrong_width.toml

train() {  # train N RUN_DIR LOCAL_BATCHES DATA [MORE FLAGS]
  local n=$1 dir=$2 local_batches=$3 data=$4; shift 4
  "$mpiexec" -n "$n" "$ringtrain" train --data "$data" --model linear.toml --global-batch 16 \
    --local-batches "$local_batches" --steps 200 --eval-every 50 --lr 0.02 --seed 3 \
    --run-dir "$dir" --quiet "$@" </dev/null >out.txt 2>err.txt || fail "training at N=$n (exit $?)"
}
train 1 run1 16 data.h5
train 2 run2 5,11 data.h5
# The same run stopped at step 100 and resumed: the loss and the best MSE come back with it.
train 2 run3 5,11 data.h5 --steps 100
train 2 run3 5,11 data.h5 --resume auto
# --target 0.01: stops at the first evaluation with test MSE <= 0.01.
train 1 run4 16 data.h5 --eval-every 10 --target 0.01

"$python" - <<'PY' || fail "the runs"
import json
import numpy as np, h5py
y = h5py.File("data.h5", "r")["test/y"][:].astype(np.float64)
variance = y.var(axis=0).mean()  # the MSE of predicting each target's mean
finals = []
for run in ("run1", "run2"):
    records = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
    evals = [r for r in records if "test_mse" in r]
    assert [r["step"] for r in evals] == [50, 100, 150, 200], evals
    assert not any("test_accuracy" in r for r in records), run
    final = evals[-1]["test_mse"]
    assert final < 0.02 * variance, (run, final, variance)
    m = json.load(open(f"{run}/manifest.json"))
    assert m["config"]["loss"] == "auto", m["config"]["loss"]
    assert m["data"]["targets"] == 2 and m["target"]["key"] == "test_mse", m["target"]
    assert m["target"]["reached_when"] == "test_mse <= target", m["target"]
    r = m["results"]
    assert r["metric"] == "test_mse" and r["final_test_mse"] == final, r
    assert r["best_test_mse"] == min(e["test_mse"] for e in evals), r
    finals.append(final)
    print(f"ok: {run}: test MSE {final:.5g} < 2% of the targets' variance {variance:.4g}")
assert abs(finals[0] - finals[1]) <= 1e-5 * finals[0], finals
def params(run):
    with h5py.File(f"{run}/checkpoints/step-00000200.h5", "r") as f:
        out = {}
        f["model"].visititems(lambda n, d: out.__setitem__(n, d[()]) if isinstance(d, h5py.Dataset) else None)
        return out
p1, p2 = params("run1"), params("run2")
assert p1.keys() == p2.keys() and p1, (p1.keys(), p2.keys())
worst = max(float(np.abs(p1[k] - p2[k]).max()) for k in p1)
assert worst <= 1e-5, worst
print(f"ok: N=1 and N=2 (5 + 11): parameters within {worst:.2g}, test MSEs {finals}")
p3 = params("run3")
assert all(np.array_equal(p2[k], p3[k]) for k in p2), "the resumed run differs"
m2, m3 = (json.load(open(f"{r}/manifest.json"))["results"] for r in ("run2", "run3"))
assert m3["final_test_mse"] == m2["final_test_mse"], (m2, m3)
assert m3["best_test_mse"] == m2["best_test_mse"], (m2, m3)
print("ok: stopped at step 100 and resumed: bitwise the uninterrupted run, same best test MSE")
m4 = json.load(open("run4/manifest.json"))
evals = [json.loads(l) for l in open("run4/metrics.jsonl")]
evals = [r for r in evals if "test_mse" in r]
first = next(r["step"] for r in evals if r["test_mse"] <= 0.01)
r = m4["results"]
assert r["target_reached"] and r["steps_to_target"] == first == r["steps"] < 200, (r, first)
assert all(e["test_mse"] > 0.01 for e in evals[:-1]), evals
assert m4["config"]["target"] == 0.01 and m4["config"]["target-accuracy"] == 0.01, m4["config"]
assert m4["stopping_rule"].startswith("stop at the first evaluation with test MSE <= 0.01"), m4
print(f"ok: --target 0.01 reached at step {first} (test MSE <= target), the run stopped there")
PY

for n in 1 2; do
  "$mpiexec" -n "$n" "$ringtrain" eval "run$n/checkpoints/step-00000200.h5" --data data.h5 \
    --predictions "pred$n.npy" </dev/null >out.txt 2>err.txt || fail "eval at N=$n (exit $?)"
  N=$n "$python" - <<'PY' || fail "eval at N=$n does not reproduce the run"
import json, os, re
import numpy as np, h5py
n = os.environ["N"]
final = [json.loads(l) for l in open(f"run{n}/metrics.jsonl")]
final = [r for r in final if "test_mse" in r][-1]
out = open("out.txt").read()
mse = float(re.search(r"test MSE (\S+),", out).group(1))
loss = float(re.search(r"test loss (\S+?)[;\n]", out).group(1))
assert mse == final["test_mse"] and loss == final["test_loss"], (mse, loss, final)
pred = np.load(f"pred{n}.npy")
assert pred.dtype == np.float32 and pred.shape == (203, 2), (pred.dtype, pred.shape)
y = h5py.File("data.h5", "r")["test/y"][:]
again = float(((pred.astype(np.float64) - y) ** 2).mean())
assert abs(again - mse) <= 1e-6 * mse, (again, mse)
print(f"ok: eval N={n}: test MSE {mse} as the run's step 200; predictions (203, 2) agree")
PY
done

"$mpiexec" -n 2 "$ringtrain" train --data npy --model linear.toml --global-batch 16 --steps 60 \
  --eval-every 30 --lr 0.02 --run-dir runnpy --quiet </dev/null >out.txt 2>err.txt ||
  fail "training on .npy targets of shape (n)"
"$mpiexec" -n 2 "$ringtrain" eval runnpy/checkpoints/step-00000060.h5 --data npy \
  --predictions prednpy.npy </dev/null >out.txt 2>err.txt || fail "eval on .npy (exit $?)"
"$python" - <<'PY' || fail ".npy targets of shape (n)"
import json, re
import numpy as np
final = [json.loads(l) for l in open("runnpy/metrics.jsonl")]
final = [r for r in final if "test_mse" in r][-1]
mse = float(re.search(r"test MSE (\S+),", open("out.txt").read()).group(1))
assert mse == final["test_mse"], (mse, final)
pred = np.load("prednpy.npy")
assert pred.dtype == np.float32 and pred.shape == (203,), (pred.dtype, pred.shape)
print(f"ok: .npy y of shape (n): trains, eval reproduces test MSE {mse}, predictions (203,)")
PY

# Bad input: exit 2, one line on stderr, nothing written.
refuse() {  # refuse NAME TEXT ARGS...
  local name=$1 text=$2; shift 2
  rm -rf bad pred.npy
  "$mpiexec" -n 2 "$ringtrain" "$@" </dev/null >out.txt 2>err.txt
  local code=$?
  [[ $code -eq 2 ]] || fail "$name: exit $code, expected 2"
  [[ $(grep -c . err.txt) -eq 1 ]] || fail "$name: the error took more than one line"
  grep -qF -- "$text" err.txt || fail "$name: stderr lacks '$text'"
  [[ ! -e bad && ! -e pred.npy ]] || fail "$name: something was written"
  echo "ok: $name: $(cat err.txt)"
}
refuse "NaN in a test target (HDF5)" "nan_target.h5 /test/y: nan at sample 7, target 1: y must be finite" \
  train --data nan_target.h5 --model linear.toml --steps 2 --run-dir bad
refuse "Inf in a train target (.npy)" "nan_npy/train_y.npy: inf at sample 3, target 0: y must be finite" \
  train --data nan_npy --model linear.toml --steps 2 --run-dir bad
refuse "a last layer of the wrong width" \
  "wrong_width.toml: layer 1 (linear, line 4): the model's output (3) holds 3 values per sample, but the data has 2 regression targets; set out = 2" \
  train --data data.h5 --model wrong_width.toml --steps 2 --run-dir bad
refuse "cross-entropy on float targets" "--loss cross-entropy: data.h5 holds float32 regression targets (2 per sample)" \
  train --data data.h5 --model linear.toml --loss cross-entropy --steps 2 --run-dir bad
refuse "eval of a regression model on class labels" \
  "labels.h5 holds integer class labels, but the model in run1/checkpoints/step-00000200.h5 was trained with --loss mse" \
  eval run1/checkpoints/step-00000200.h5 --data labels.h5 --predictions pred.npy
