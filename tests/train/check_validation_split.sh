#!/usr/bin/env bash
# check_validation_split.sh RINGTRAIN MPIEXEC N
# --validation-fraction at N ranks, on an HDF5 dataset written here (400 train, 150 test):
#  - F = 0.25 holds 100 samples out of train (10 steps of 30 per epoch, not 14); every
#    periodic evaluation is of the validation split ("split": "validation"), and the test set
#    is evaluated exactly at each new best validation step ("at": "best") and at the end
#    ("at": "end"); the manifest's results name the split, the best step, the validation best
#    and final, and the test set's values at the best step and at the end, from those records
#  - --target T (a validation accuracy the first run reached midway) stops the run at the first
#    evaluation whose validation accuracy is >= T (the same bits as the first run), and the
#    test set is evaluated there; the closing line says the target was met on validation
#  - `ringtrain eval RUN --split validation` draws the same held-out samples: the validation
#    accuracy of the run's last record
#  - the same run stopped at step 40 and resumed to 60 reports the same best step and values
#  - F = 0: every evaluation is of the test set, the results say "split": "test", the best and
#    the target are the test set's, and the closing line says so
# Skips (77) without numpy or h5py for Debian's python3.
set -u
ringtrain=$1 mpiexec=$2 n=$3
# shellcheck source=numpy_workdir.sh
source "$(dirname "$0")/numpy_workdir.sh"
fail() { echo "FAIL: $*"; for f in ./*.log; do [[ -f $f ]] && { echo "--- $f"; tail -5 "$f"; }; done; exit 1; }
export MPIEXEC_TIMEOUT=60

"$python" - <<'PY' || fail "writing the dataset"
import numpy as np, h5py
rng = np.random.default_rng(54)
def split(n):
    y = rng.integers(0, 3, n)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    x[:, 0] += 0.7 * y  # learnable, not perfectly: accuracies rise and wobble below 1
    x[:, 1] -= 0.4 * y
    return x, y.astype(np.int64)
with h5py.File("data.h5", "w") as f:
    for s, count in (("train", 400), ("test", 150)):
        f[s + "/x"], f[s + "/y"] = split(count)
PY
run=(--data data.h5 --mlp-hidden 8 --global-batch 30 --lr 0.02 --eval-every 5 --log-every 5)
train() { timeout -k 5 60 "$mpiexec" -n "$n" "$ringtrain" train "${run[@]}" "$@"; }

train --run-dir V --validation-fraction 0.25 --steps 60 >v.log 2>&1 || fail "the run with validation failed"
train --run-dir T --validation-fraction 0.25 --steps 60 --target "$("$python" - <<'PY'
import json
evals = [r for r in map(json.loads, open("V/metrics.jsonl")) if r.get("split") == "validation"]
print(repr(evals[len(evals) // 2]["validation_accuracy"]))  # reached midway, maybe earlier
PY
)" >t.log 2>&1 || fail "the run with a target failed"
train --run-dir P --steps 60 >p.log 2>&1 || fail "the run without validation failed"
# The V run in two launches: stopped at step 40 (its end then), resumed to 60.
train --run-dir R --validation-fraction 0.25 --steps 40 >r1.log 2>&1 || fail "R's first launch"
train --run-dir R --validation-fraction 0.25 --steps 60 --resume auto >r2.log 2>&1 || fail "R's resume"
"$mpiexec" -n "$n" "$ringtrain" eval V --data data.h5 --split validation >eval.log 2>&1 ||
  fail "eval --split validation failed"

"$python" - "$n" <<'PY' || fail "the records"
import json, re, sys
def load(run):
    records = list(map(json.loads, open(run + "/metrics.jsonl")))
    return records, json.load(open(run + "/manifest.json"))

def check_validated(run, steps):
    records, manifest = load(run)
    r = manifest["results"]
    assert manifest["steps_per_epoch"] == 10, manifest["steps_per_epoch"]  # 300 of 400 trained
    assert manifest["target"]["split"] == "validation", manifest["target"]
    assert "validation split" in manifest["target"]["metric"], manifest["target"]
    evals = [e for e in records if "split" in e]
    val = [e for e in evals if e["split"] == "validation"]
    test = [e for e in evals if e["split"] == "test"]
    assert [e["step"] for e in val] == list(range(5, steps + 1, 5)), val
    assert all("test_accuracy" not in e and "at" not in e for e in val), val
    assert all("validation_accuracy" not in e for e in test), test
    # The test set exactly at each strictly better validation value, and at the end.
    best, best_steps = -1.0, []
    for e in val:
        if e["validation_accuracy"] > best:
            best, best_step = e["validation_accuracy"], e["step"]
            best_steps.append(e["step"])
    at_best = [e for e in test if e["at"] == "best"]
    at_end = [e for e in test if e["at"] == "end"]
    assert [e["step"] for e in at_best] == best_steps, (at_best, best_steps)
    assert [e["step"] for e in at_end] == [steps], at_end
    assert r["split"] == "validation" and r["metric"] == "validation_accuracy", r
    assert r["best_validation_accuracy"] == best and r["best_step"] == best_step, (r, best)
    assert r["final_validation_accuracy"] == val[-1]["validation_accuracy"], r
    assert r["best_test_accuracy"] == at_best[-1]["test_accuracy"], r
    assert r["final_test_accuracy"] == at_end[0]["test_accuracy"], r
    return val, r

val, r = check_validated("V", 60)
assert not r["target_reached"], r
# Resumed at step 40: the same best step and the same values (the best step, 35 here, and the
# test set's value there found in the first launch's records).
rr = json.load(open("R/manifest.json"))["results"]
keys = ("best_step", "best_validation_accuracy", "best_test_accuracy", "final_test_accuracy",
        "final_validation_accuracy", "steps")
assert {k: rr[k] for k in keys} == {k: r[k] for k in keys}, (rr, r)
# The target: met at the first validation evaluation >= T, and the run stopped there.
target = json.load(open("T/manifest.json"))["config"]["target"]
first = next(e["step"] for e in val if e["validation_accuracy"] >= target)
val_t, r_t = check_validated("T", first)
assert r_t["target_reached"] and r_t["steps_to_target"] == first and r_t["steps"] == first, r_t
assert val_t == [dict(e, wall_s=t["wall_s"]) for e, t in zip(val, val_t)], (val, val_t)
closing = open("t.log").read()
assert f"target {target} reached at step {first} (on the validation split)" in closing, closing
assert "test accuracy" in closing and "at the end" in closing, closing

# eval --split validation: the same held-out samples.
printed = float(re.search(r"validation accuracy ([0-9.e-]+),", open("eval.log").read()).group(1))
assert printed == val[-1]["validation_accuracy"], (printed, val[-1])

# Without validation: the test set for everything, and the output says so.
records, manifest = load("P")
evals = [e for e in records if "split" in e]
assert evals and all(e["split"] == "test" and "at" not in e for e in evals), evals
rp = manifest["results"]
assert rp["split"] == "test" and rp["metric"] == "test_accuracy", rp
assert rp["best_test_accuracy"] == max(e["test_accuracy"] for e in evals), rp
assert manifest["target"]["split"] == "test" and manifest["steps_per_epoch"] == 14, manifest
assert "best and target on the test set: no validation split" in open("p.log").read()
print(f"ok: N={sys.argv[1]}: best validation {r['best_validation_accuracy']} at step "
      f"{r['best_step']}, test there {r['best_test_accuracy']}; target {target} met at step {first}")
PY
