#!/usr/bin/env bash
# check_eval_predict.sh RINGTRAIN MPIEXEC N
# `ringtrain eval` predicts, at N ranks:
#  - given a run directory it takes the newest checkpoint that verifies: step 20, and step 10
#    (saying it passed over step 20) once step 20 is damaged
#  - on data that hold only x (HDF5 /x, HDF5 /test/x without y, test_x.npy alone, one x.npy
#    file) it writes the same predictions as on the labelled data and prints no metric
#  - --outputs probabilities: float32 (n, 3), rows summing to 1, whose argmax is the classes;
#    --outputs values: the logits (n, 3), whose softmax is the probabilities
#  - --split train: the train samples, and the accuracy printed is that of the predictions
#  - a regression model predicts x-only data as values (n, 2); --outputs classes is refused;
#    --split validation of a run without a validation split is refused (exit 2)
# Skips (77) without numpy or h5py for Debian's python3.
set -u
ringtrain=$1 mpiexec=$2 n=$3
# shellcheck source=numpy_workdir.sh
source "$(dirname "$0")/numpy_workdir.sh"
fail() { echo "FAIL: $*"; for f in out.txt err.txt; do [[ -f $f ]] && { echo "--- $f"; cat $f; }; done; exit 1; }

"$python" - <<'PY' || fail "writing the datasets"
import os
import numpy as np, h5py
rng = np.random.default_rng(61)
def split(n):
    y = rng.integers(0, 3, n)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    x[:, 0] += 0.8 * y
    return x, y.astype(np.int64)
(tx, ty), (sx, sy) = split(120), split(45)
with h5py.File("data.h5", "w") as f:
    f["train/x"], f["train/y"], f["test/x"], f["test/y"] = tx, ty, sx, sy
with h5py.File("x_only.h5", "w") as f:
    f["x"] = sx
with h5py.File("test_x_only.h5", "w") as f:
    f["test/x"] = sx
os.makedirs("npy_x")
np.save("npy_x/test_x.npy", sx)
np.save("x.npy", sx)
with h5py.File("reg.h5", "w") as f:
    f["train/x"], f["train/y"] = tx, tx[:, :2] * 2.0
    f["test/x"], f["test/y"] = sx, sx[:, :2] * 2.0
PY
train() { "$mpiexec" -n "$n" "$ringtrain" train --global-batch 16 --mlp-hidden 8 --steps 20 \
  --eval-every 10 --checkpoint-every 10 --quiet "$@" || fail "training $*"; }
evaluate() { "$mpiexec" -n "$n" "$ringtrain" eval "$@" >out.txt 2>err.txt || fail "eval $* exit $?"; }
train --data data.h5 --run-dir run
train --data reg.h5 --run-dir reg

evaluate run --data data.h5 --predictions labelled.npy
grep -q "run/checkpoints/step-00000020.h5 (step 20) on data.h5: 45 test samples, test accuracy" \
  out.txt || fail "eval RUN_DIR did not take step 20"
for data in x_only.h5 test_x_only.h5 npy_x x.npy; do
  evaluate run/checkpoints/step-00000020.h5 --data "$data" --predictions "pred_$data.npy"
  grep -q "45 test samples, no labels, so no metric" out.txt || fail "eval on $data printed a metric"
  cmp "pred_$data.npy" labelled.npy || fail "the predictions on $data differ"
done
evaluate run --data data.h5 --outputs probabilities --predictions p.npy
evaluate run --data data.h5 --outputs values --predictions v.npy
evaluate run --data data.h5 --split train --predictions train.npy
"$python" - <<'PY' || fail "the outputs"
import re
import numpy as np, h5py
classes, p, v, train = (np.load(f) for f in ("labelled.npy", "p.npy", "v.npy", "train.npy"))
assert p.dtype == np.float32 and p.shape == (45, 3), (p.dtype, p.shape)
assert np.allclose(p.sum(axis=1), 1.0, atol=1e-6), p.sum(axis=1)
assert (p.argmax(axis=1) == classes).all()
assert v.dtype == np.float32 and v.shape == (45, 3), (v.dtype, v.shape)
e = np.exp(v.astype(np.float64) - v.max(axis=1, keepdims=True))
assert np.allclose(e / e.sum(axis=1, keepdims=True), p, atol=1e-6)
y = h5py.File("data.h5", "r")["train/y"][:]
printed = float(re.search(r"120 train samples, train accuracy (\S+),", open("out.txt").read()).group(1))
assert train.shape == (120,) and (train == y).mean() == printed, ((train == y).mean(), printed)
print("ok: probabilities, values and the train split agree")
PY
# The newest checkpoint damaged: the previous one, and a line saying so.
size=$(stat -c %s run/checkpoints/step-00000020.h5)
printf '\xff\xfe\xfd\xfc' | dd of=run/checkpoints/step-00000020.h5 bs=1 seek=$((size / 2)) \
  conv=notrunc status=none
evaluate run --data data.h5
grep -q "step-00000010.h5 (step 10)" out.txt || fail "eval RUN_DIR did not fall back to step 10"
grep -q "passed over .*step-00000020.h5" err.txt || fail "no word of the damaged step 20"
# Regression: values of x-only data; classes refused.
evaluate reg --data x_only.h5 --predictions reg.npy
"$python" -c "import numpy as np; a = np.load('reg.npy'); assert a.dtype == np.float32 and a.shape == (45, 2), a.shape" ||
  fail "regression predictions"
for bad in "--outputs classes|a regression model, whose outputs are values" \
           "--split validation|the run held out no validation split"; do
  flags=${bad%%|*} text=${bad#*|}
  # shellcheck disable=SC2086
  "$mpiexec" -n "$n" "$ringtrain" eval reg --data reg.h5 $flags >out.txt 2>err.txt
  code=$?
  [[ $code -eq 2 ]] || fail "eval $flags: exit $code, expected 2"
  grep -qF "$text" err.txt || fail "eval $flags: no '$text'"
done
echo "ok: eval predicts from a run directory, on x-only data, as classes, probabilities, values"
