#!/usr/bin/env bash
# check_numpy_dtypes.sh RINGTRAIN MPIEXEC
# NumPy's and scikit-learn's dtypes train as they are, written by NumPy and h5py themselves:
#  - x float64 with int64 labels (scikit-learn's default), as .npy and as HDF5, trains at N=2
#    to bitwise the same model as the same arrays converted by NumPy (astype(np.float32),
#    labels astype(np.int32)): the conversion rounds as NumPy rounds
#  - x float16 with bool labels, and x int16 with uint8 labels: the same against NumPy's own
#    conversion to float32 and int32
#  - regression y float64 (n, 2): the same against y.astype(np.float32)
#  - the manifest records each conversion and that converted x is not mapped
#  - a float64 value beyond float32's range: exit 2, one line naming the file and position
# Skips (77) without numpy or h5py for Debian's python3.
set -u
ringtrain=$1 mpiexec=$2
# shellcheck source=numpy_workdir.sh
source "$(dirname "$0")/numpy_workdir.sh"
fail() { echo "FAIL: $*"; [[ -f err.txt ]] && { echo "--- stderr"; cat err.txt; }; exit 1; }

"$python" - <<'PY' || fail "writing the datasets"
import os
import numpy as np, h5py
rng = np.random.default_rng(54)
def save(folder, arrays, h5=None):
    os.makedirs(folder)
    for key, value in arrays.items():
        np.save(f"{folder}/{key}.npy", value)
    if h5:
        with h5py.File(h5, "w") as f:
            for key, value in arrays.items():
                f[key.replace("_", "/")] = value
def split(n, x_of, y_of):
    return x_of(rng.normal(size=(n, 6)) * 10), y_of(rng.integers(0, 2, n))
cases = {  # name: (x conversion, y conversion)
    "f64": (lambda x: x, lambda y: y.astype(np.int64)),
    "f16": (lambda x: x.astype(np.float16), lambda y: y.astype(bool)),
    "i16": (lambda x: np.round(x).astype(np.int16), lambda y: y.astype(np.uint8)),
}
for name, (x_of, y_of) in cases.items():
    (tx, ty), (sx, sy) = split(90, x_of, y_of), split(30, x_of, y_of)
    save(name, {"train_x": tx, "train_y": ty, "test_x": sx, "test_y": sy}, f"{name}.h5")
    save(name + "_np", {"train_x": tx.astype(np.float32), "train_y": ty.astype(np.int32),
                        "test_x": sx.astype(np.float32), "test_y": sy.astype(np.int32)})
tx, sx = rng.normal(size=(90, 6)), rng.normal(size=(30, 6))
ty, sy = tx[:, :2] * 3.0 + 0.1, sx[:, :2] * 3.0 + 0.1
save("reg", {"train_x": tx, "train_y": ty, "test_x": sx, "test_y": sy})
save("reg_np", {k: v.astype(np.float32) for k, v in
                {"train_x": tx, "train_y": ty, "test_x": sx, "test_y": sy}.items()})
big = tx.copy(); big[4, 3] = 1e39
save("big", {"train_x": big, "train_y": ty, "test_x": sx, "test_y": sy})
PY
run() { "$mpiexec" -n 2 "$ringtrain" train --global-batch 10 --mlp-hidden 8 --steps 12 \
  --eval-every 6 --checkpoint-every 0 --quiet "$@"; }
same() {  # same RUN_A RUN_B: the final models are bitwise equal
  "$ringtrain" inspect "$1/checkpoints/step-00000012.h5" --compare \
    "$2/checkpoints/step-00000012.h5" --rtol 0 --groups model >/dev/null || fail "$1 and $2 differ"
}
for name in f64 f16 i16 reg; do
  run --data "$name" --run-dir "run_$name" 2>err.txt || fail "training on $name"
  run --data "${name}_np" --run-dir "run_${name}_np" 2>err.txt || fail "training on ${name}_np"
  same "run_$name" "run_${name}_np"
done
for name in f64 f16 i16; do
  run --data "$name.h5" --run-dir "run_${name}_h5" 2>err.txt || fail "training on $name.h5"
  same "run_${name}_h5" "run_${name}_np"
done
"$python" - <<'PY' || fail "the manifests' conversions"
import json
def arrays(run):
    return {a["name"]: a for a in json.load(open(f"{run}/manifest.json"))["data"]["arrays"]}
want = {
    "run_f64": ("float64", "float64 rounded to float32 (to nearest)", "int64 to int32 class labels"),
    "run_f16_h5": ("float16", "float16 to float32 (exact)",
                   "bool to int32 class labels (false 0, true 1)"),
    "run_i16": ("int16", "int16 values to float32 (exact)", "uint8 to int32 class labels"),
    "run_reg": ("float64", "float64 rounded to float32 (to nearest)",
                "float64 rounded to float32 (to nearest)"),
}
for run, (dtype, x, y) in want.items():
    a = arrays(run)
    assert a["train/x"]["dtype"] == dtype and a["train/x"]["conversion"] == x, (run, a["train/x"])
    assert a["train/x"]["mapped"] is False, (run, a["train/x"])
    assert a["test/y"]["conversion"] == y, (run, a["test/y"])
a = arrays("run_f64_np")
assert a["train/x"]["conversion"] == "none" and a["train/x"]["mapped"] is True, a["train/x"]
PY
run --data big --run-dir run_big 2>err.txt
code=$?
[[ $code -eq 2 ]] || fail "a float64 beyond float32's range: exit $code, expected 2"
grep -q "big/train_x.npy: 1e+39 at sample 4, element 3: x is beyond float32's range" err.txt ||
  fail "the message does not name the file and position"
[[ $(wc -l <err.txt) -eq 1 ]] || fail "more than one line"
echo "ok: float64, float16, int16, bool, uint8 and float64 targets train as NumPy converts them"
