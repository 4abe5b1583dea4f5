#!/usr/bin/env bash
# check_eval.sh RINGTRAIN MPIEXEC N
# `ringtrain eval` at N ranks on the checkpoint of a short run at N ranks:
#  - the run trains a hand-written spec (linear, batchnorm, relu, linear) on an HDF5 dataset
#    written here (301 train, 203 test samples: N does not divide them); the spec file is
#    deleted before eval, so the model can only come from the checkpoint
#  - eval prints the test accuracy and loss of the run's final evaluation record in
#    metrics.jsonl, exactly (the same doubles)
#  - its predictions file parses with NumPy as int64 of shape (203,), and the fraction that
#    equals the test labels is the printed accuracy
#  - bad input: a missing checkpoint, a corrupt one, data of another sample shape: exit 2,
#    one line on stderr, and no predictions file (nor its temporary) is left behind
# Skips (77) without numpy or h5py for Debian's python3.
set -u
ringtrain=$1 mpiexec=$2 n=$3
# shellcheck source=numpy_workdir.sh
source "$(dirname "$0")/numpy_workdir.sh"
fail() { echo "FAIL: $*"; for f in out.txt err.txt; do [[ -f $f ]] && { echo "--- $f"; cat $f; }; done; exit 1; }

"$python" - <<'PY' || fail "writing the datasets"
import numpy as np, h5py
rng = np.random.default_rng(29)
def split(n, features):
    y = rng.integers(0, 3, n)
    x = rng.normal(size=(n, features)).astype(np.float32)
    x[:, 0] += 0.8 * y  # learnable, but not perfectly: accuracy lands between 0 and 1
    x[:, 1] -= 0.5 * y
    return x, y.astype(np.int64)
for name, features in (("data.h5", 6), ("wide.h5", 7)):
    with h5py.File(name, "w") as f:
        for s, count in (("train", 301), ("test", 203)):
            f[s + "/x"], f[s + "/y"] = split(count, features)
PY
cat >spec.toml <<'TOML'
[[layers]]
type = "linear"
out = 16
[[layers]]
type = "batchnorm"
[[layers]]
type = "relu"
[[layers]]
type = "linear"
out = "classes"
TOML
"$mpiexec" -n "$n" "$ringtrain" train --data data.h5 --model spec.toml --global-batch 16 \
  --steps 25 --eval-every 10 --run-dir run --quiet || fail "training"
rm spec.toml
checkpoint=run/checkpoints/step-00000025.h5
[[ -f $checkpoint ]] || fail "no checkpoint at step 25"

"$mpiexec" -n "$n" "$ringtrain" eval "$checkpoint" --data data.h5 --predictions pred.npy \
  >out.txt 2>err.txt || fail "eval exit $?"
"$python" - <<'PY' || fail "eval does not reproduce the run's final evaluation"
import json, re
import numpy as np, h5py
records = [json.loads(l) for l in open("run/metrics.jsonl")]
final = [r for r in records if "test_accuracy" in r][-1]
assert final["step"] == 25, final
out = open("out.txt").read()
accuracy = float(re.search(r"test accuracy (\S+),", out).group(1))
loss = float(re.search(r"test loss (\S+?)[;\n]", out).group(1))
assert accuracy == final["test_accuracy"], (accuracy, final)
assert loss == final["test_loss"], (loss, final)
assert 0.0 < accuracy < 1.0, accuracy  # a metric that could come out otherwise
pred = np.load("pred.npy")
assert pred.dtype == np.int64 and pred.shape == (203,), (pred.dtype, pred.shape)
y = h5py.File("data.h5", "r")["test/y"][:]
assert ((pred >= 0) & (pred < 3)).all(), pred
assert (pred == y).sum() / len(y) == accuracy, ((pred == y).mean(), accuracy)
print(f"ok: eval reproduces step 25: accuracy {accuracy}, loss {loss}; predictions agree")
PY

# Bad input: exit 2, one line, nothing written.
refuse() {  # refuse NAME TEXT ARGS...
  local name=$1 text=$2; shift 2
  rm -f pred.npy pred.npy.tmp
  "$mpiexec" -n "$n" "$ringtrain" eval "$@" --predictions pred.npy >out.txt 2>err.txt
  local code=$?
  [[ $code -eq 2 ]] || fail "$name: exit $code, expected 2"
  [[ $(grep -c . err.txt) -eq 1 ]] || fail "$name: the error took more than one line"
  grep -qF -- "$text" err.txt || fail "$name: stderr lacks '$text'"
  [[ ! -e pred.npy && ! -e pred.npy.tmp ]] || fail "$name: a predictions file was written"
  echo "ok: $name: $(cat err.txt)"
}
refuse "a missing checkpoint" "missing.h5" missing.h5 --data data.h5
cp "$checkpoint" corrupt.h5
size=$(stat -c %s corrupt.h5)
printf '\xff\xfe\xfd\xfc' | dd of=corrupt.h5 bs=1 seek=$((size / 2)) conv=notrunc status=none
refuse "a corrupt checkpoint" "corrupt.h5" corrupt.h5 --data data.h5
refuse "data of another sample shape" "holds samples of shape (7), but the model in" \
  "$checkpoint" --data wide.h5
