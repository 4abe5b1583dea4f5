#!/usr/bin/env bash
# check_data_digest.sh RINGTRAIN MPIEXEC N
# The data's digest guards a resume:
#  - a run on data.h5 records the digest in its manifest; a fresh run on changed.h5 (one
#    train value differs) records another
#  - resuming the first run on changed.h5 is refused as a checkpoint of another experiment:
#    exit 2, one line naming both digests and paths,
#    and the run directory's manifest.json, config.toml and metrics.jsonl are left as they were
#  - resuming it on the same arrays in a .npy folder (another layout and path, the same
#    names, dtypes, shapes and bytes) is accepted and ends bitwise equal to the run that
#    never stopped
# Skips (77) without numpy or h5py for Debian's python3.
set -u
ringtrain=$1 mpiexec=$2 n=$3
# shellcheck source=numpy_workdir.sh
source "$(dirname "$0")/numpy_workdir.sh"
fail() { echo "FAIL: $*"; [[ -f err.txt ]] && { echo "--- stderr"; cat err.txt; }; exit 1; }

"$python" - <<'PY' || fail "writing the datasets"
import os
import numpy as np, h5py
rng = np.random.default_rng(12)
arrays = {"train_x": rng.normal(size=(97, 5)).astype(np.float32),
          "train_y": rng.integers(0, 4, 97).astype(np.int64),
          "test_x": rng.normal(size=(31, 5)).astype(np.float32),
          "test_y": rng.integers(0, 4, 31).astype(np.int64)}
def write_h5(name, arrays):
    with h5py.File(name, "w") as f:
        for key, value in arrays.items():
            f[key.replace("_", "/")] = value
write_h5("data.h5", arrays)
os.makedirs("npy")
for key, value in arrays.items():
    np.save(f"npy/{key}.npy", value)
arrays["train_x"][50, 3] += 1.0
write_h5("changed.h5", arrays)
PY
run() { "$mpiexec" -n "$n" "$ringtrain" train --global-batch 8 --mlp-hidden 8 --eval-every 5 \
  --checkpoint-every 5 --quiet "$@"; }
digest() { "$python" -c "import json,sys; print(json.load(open(sys.argv[1]))['data']['digest'])" "$1"; }
run --data data.h5 --steps 10 --run-dir straight || fail "the uninterrupted run"
run --data data.h5 --steps 5 --run-dir stopped || fail "the run stopped at step 5"
run --data changed.h5 --steps 1 --run-dir other || fail "a run on changed.h5"
was=$(digest straight/manifest.json) is=$(digest other/manifest.json)
[[ ${#was} -eq 16 && ${#is} -eq 16 && $was != "$is" ]] || fail "digests '$was' and '$is'"

mkdir kept && cp stopped/manifest.json stopped/config.toml stopped/metrics.jsonl kept/
run --data changed.h5 --steps 10 --run-dir stopped --resume auto 2>err.txt
code=$?
[[ $code -eq 2 ]] || fail "resume on changed data: exit $code, expected 2"
[[ $(grep -c . err.txt) -eq 1 ]] || fail "the refusal took more than one line"
grep -q "a checkpoint of another experiment: the data's digest (--data) $was (.*data.h5) (this launch: $is (.*changed.h5))" err.txt ||
  fail "the refusal does not name both digests and paths"
for file in manifest.json config.toml metrics.jsonl; do
  cmp -s "kept/$file" "stopped/$file" || fail "the refused resume rewrote stopped/$file"
done
echo "ok: refused: $(cat err.txt)"

run --data npy --steps 10 --run-dir stopped --resume auto || fail "resume on the .npy copy"
"$ringtrain" inspect straight/checkpoints/step-00000010.h5 \
  --compare stopped/checkpoints/step-00000010.h5 --rtol 0 || fail "not bitwise the same"
echo "ok: the same arrays as .npy resume the HDF5 run (digest $was) to bitwise the same step 10"
