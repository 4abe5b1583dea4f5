#!/usr/bin/env bash
# check_data_memory_limit.sh RINGTRAIN MPIEXEC N
# --data-memory-limit below the data's in-memory size (x as floats + labels as int32):
#  - contiguous.h5 (unfiltered: mapped) trains with the limit; the manifest says train/x and
#    test/x are mapped; its checkpoint equals bitwise that of the same arrays in chunked.h5
#    (gzip: read into memory) trained without a limit
#  - chunked.h5 with the limit is refused: exit 2, one line naming the file and the limit,
#    no run directory
# Skips (77) without numpy or h5py for Debian's python3.
set -u
ringtrain=$1 mpiexec=$2 n=$3
# shellcheck source=numpy_workdir.sh
source "$(dirname "$0")/numpy_workdir.sh"
fail() { echo "FAIL: $*"; [[ -f err.txt ]] && { echo "--- stderr"; cat err.txt; }; exit 1; }

"$python" - <<'PY' || fail "writing the datasets"
import numpy as np, h5py
rng = np.random.default_rng(3)
arrays = {"train/x": rng.random((120, 1, 6, 6), dtype=np.float32),
          "train/y": rng.integers(0, 5, 120).astype(np.int64),
          "test/x": rng.random((41, 1, 6, 6), dtype=np.float32),
          "test/y": rng.integers(0, 5, 41).astype(np.int64)}
with h5py.File("contiguous.h5", "w") as f:
    for k, v in arrays.items():
        f[k] = v
with h5py.File("chunked.h5", "w") as f:
    for k, v in arrays.items():
        f.create_dataset(k, data=v, chunks=True, compression="gzip")
PY
# In memory: (120 + 41) * 36 floats * 4 + (120 + 41) labels * 4 = 23828 bytes; labels alone 644.
limit=4096
run() { "$mpiexec" -n "$n" "$ringtrain" train --global-batch 8 --mlp-hidden 8 --steps 12 \
  --eval-every 6 --quiet "$@"; }
run --data contiguous.h5 --data-memory-limit $limit --run-dir mapped || fail "contiguous.h5 with the limit"
run --data chunked.h5 --run-dir in_memory || fail "chunked.h5 without a limit"
"$python" - <<'PY' || fail "the manifests do not say mapped / in memory"
import json
for run, mapped in (("mapped", True), ("in_memory", False)):
    arrays = {a["name"]: a for a in json.load(open(f"{run}/manifest.json"))["data"]["arrays"]}
    assert arrays["train/x"]["mapped"] is mapped and arrays["test/x"]["mapped"] is mapped, (run, arrays)
PY
"$ringtrain" inspect mapped/checkpoints/step-00000012.h5 \
  --compare in_memory/checkpoints/step-00000012.h5 --rtol 0 || fail "mapped and in-memory differ"
cmp <(grep test_accuracy mapped/metrics.jsonl | sed 's/"wall_s":[^,}]*//') \
    <(grep test_accuracy in_memory/metrics.jsonl | sed 's/"wall_s":[^,}]*//') ||
  fail "the evaluations differ"
echo "ok: mapped under --data-memory-limit $limit = in memory, bitwise"

run --data chunked.h5 --data-memory-limit $limit --run-dir refused 2>err.txt
code=$?
[[ $code -eq 2 ]] || fail "chunked.h5 with the limit: exit $code, expected 2"
[[ $(grep -c . err.txt) -eq 1 ]] || fail "the refusal took more than one line"
grep -q "chunked.h5.*--data-memory-limit $limit bytes" err.txt || fail "the refusal names neither file nor limit"
[[ ! -e refused ]] || fail "a run directory was written"
echo "ok: refused: $(cat err.txt)"
