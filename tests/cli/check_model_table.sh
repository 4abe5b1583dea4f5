#!/usr/bin/env bash
# check_model_table.sh RINGTRAIN MPIEXEC SPEC DATA_DIR
# `ringtrain model SPEC` prints the same layer table as the banner of `ringtrain train --model
# SPEC` on data of that sample shape; the run's manifest records the spec (its canonical TOML
# reads back to the file's layers), each layer's shape and parameters, and their sum.
set -eu
ringtrain=$1 mpiexec=$2 spec=$3 data=$4
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$ringtrain" model "$spec" --input 4 --classes 3 >"$work/table.txt"
"$mpiexec" -n 2 "$ringtrain" train --model "$spec" --data "$data" --global-batch 4 --steps 2 \
  --no-eval --run-dir "$work/run" >"$work/banner.txt"
# Every line of the table but its title, indented, in the banner.
tail -n +2 "$work/table.txt" | while IFS= read -r line; do
  grep -qxF -- "    $line" "$work/banner.txt" || { echo "FAIL: banner lacks '$line'"; cat "$work/banner.txt"; exit 1; }
done
python3 - "$work/run/manifest.json" "$spec" "$work/table.txt" <<'PY'
import json, sys, tomllib
m = json.load(open(sys.argv[1]))
model = m["model"]
assert model["name"] == sys.argv[2], model["name"]
written = tomllib.load(open(sys.argv[2], "rb"))["layers"]
recorded = tomllib.loads(model["spec"])["layers"]
assert [l["type"] for l in recorded] == [l["type"] for l in written], recorded
for r, w in zip(recorded, written):
    for key, value in w.items():
        assert r[key] == value, (key, r, w)
assert len(model["layers"]) == len(written), model["layers"]
total = sum(l["parameters"] for l in model["layers"])
assert total == m["parameters"], (total, m["parameters"])
table_total = int(open(sys.argv[3]).read().splitlines()[-1].split()[-1])
assert table_total == total, (table_total, total)
print("ok:", len(written), "layers,", total, "parameters")
PY
