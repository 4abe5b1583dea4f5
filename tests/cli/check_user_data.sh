#!/usr/bin/env bash
# check_user_data.sh RINGTRAIN MPIEXEC DATA_DIR
# `ringtrain train --data DATA_DIR` on a .npy folder at N=2 trains, its manifest records the
# data's path, layout, sample shape, classes and each array's dtype and shape, and a run
# stopped at step 3 (mid-epoch: 8 samples, batch 4) resumes to bitwise the same step 6.
set -eu
ringtrain=$1 mpiexec=$2 data=$3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
run() { "$mpiexec" -n 2 "$ringtrain" train --data "$data" --global-batch 4 --mlp-hidden 8 \
  --eval-every 3 --checkpoint-every 3 --quiet "$@"; }
run --steps 6 --run-dir "$work/run"
run --steps 3 --run-dir "$work/stopped"
run --steps 6 --run-dir "$work/stopped" --resume auto
"$ringtrain" inspect "$work/run/checkpoints/step-00000006.h5" \
  --compare "$work/stopped/checkpoints/step-00000006.h5" --rtol 0
python3 - "$work/run/manifest.json" "$data" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["data"]
want = {"path": sys.argv[2], "layout": "npy", "sample_shape": [4], "classes": 3}
for key, value in want.items():
    assert d[key] == value, f"{key}: {d[key]!r}, expected {value!r}"
arrays = {a["name"]: a for a in d["arrays"]}
assert arrays["train/x"]["dtype"] == "float32" and arrays["train/x"]["shape"] == [8, 4], arrays
assert arrays["test/y"]["dtype"] == "int64" and arrays["test/y"]["shape"] == [4], arrays
assert arrays["train/x"]["mapped"] is True, arrays
print("ok:", json.dumps(d))
PY
