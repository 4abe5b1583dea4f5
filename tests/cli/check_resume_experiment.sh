#!/usr/bin/env bash
# check_resume_experiment.sh RINGTRAIN MPIEXEC DATA_DIR
# A resume continues the same experiment or refuses (experiment.hpp), beyond the model and the
# optimizer (check_hostile_resume.sh):
#  - refused, exit 2, each differing setting named with both values, the run directory
#    unchanged: --seed, --global-batch and --validation-fraction at once; under --reduction
#    exact its --exact-micro-batch; a longer --steps under --schedule cosine (its horizon) and
#    under --schedule step without --step-size
#  - allowed, applied and recorded: another N, --log-every and --steps (constant schedule)
#    give a metrics.jsonl record {"resume": {"changed": {key: [old, new], ...}}} with exactly
#    those keys, the new cadence is used, and tools/plot_runs.py reads the run; a changed
#    --exact-micro-batch without --reduction exact is allowed and recorded too
set -u
ringtrain=$1 mpiexec=$2 data=$3
plot_runs=$(cd "$(dirname "$0")/../../tools" && pwd)/plot_runs.py
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
export MPIEXEC_TIMEOUT=60
run=(--data "$data" --mlp-hidden 8 --global-batch 4 --checkpoint-every 10 --eval-every 10)
train() { local n=$1; shift; timeout -k 5 60 "$mpiexec" -n "$n" "$ringtrain" train "${run[@]}" "$@"; }
snapshot() { find "$1" -type f -exec md5sum {} + | sort; find "$1" | sort; }
# refused DIR TEXT ARGS...: the resume exits 2 with TEXT in its output and DIR is untouched.
refused() {
  local dir=$1 text=$2; shift 2
  snapshot "$dir" >before.txt
  train 2 --run-dir "$dir" --resume auto "$@" >refused.log 2>&1
  local got=$?
  [[ $got == 2 ]] || fail "$* exited $got, expected 2: $(cat refused.log)"
  grep -qF -- "$text" refused.log || fail "$*: no '$text' in: $(cat refused.log)"
  snapshot "$dir" >after.txt
  cmp -s before.txt after.txt || fail "$* changed $dir: $(diff before.txt after.txt)"
}

train 2 --run-dir A --steps 20 --log-every 5 --validation-fraction 0.25 --seed 3 >a.log 2>&1 ||
  fail "run A: $(cat a.log)"
refused A "--validation-fraction 0.25 (this launch: 0.5), --seed 3 (this launch: 4), --global-batch 4 (this launch: 2)" \
  --steps 20 --validation-fraction 0.5 --seed 4 --global-batch 2
train 2 --run-dir E --steps 20 --reduction exact --exact-micro-batch 2 >e.log 2>&1 || fail "run E: $(cat e.log)"
refused E "--exact-micro-batch 2 (this launch: 1)" --steps 20 --reduction exact --exact-micro-batch 1
train 2 --run-dir C --steps 20 --schedule cosine >c.log 2>&1 || fail "run C: $(cat c.log)"
refused C "the schedule's horizon in steps (cosine: the run's length; step without --step-size: a third of it), from --steps or --epochs 20 (this launch: 40)" \
  --steps 40 --schedule cosine
train 2 --run-dir S --steps 21 --schedule step >s.log 2>&1 || fail "run S: $(cat s.log)"
refused S "from --steps or --epochs 7 (this launch: 10)" --steps 30 --schedule step
# The same budget: the same schedule, accepted (nothing left to run).
train 2 --run-dir C --resume auto --steps 20 --schedule cosine >c2.log 2>&1 || fail "$(cat c2.log)"

# Allowed: N 2 -> 1, --log-every 5 -> 10, --steps 20 -> 40, --exact-micro-batch 16 -> 8.
train 1 --run-dir A --resume auto --steps 40 --log-every 10 --validation-fraction 0.25 --seed 3 \
  --exact-micro-batch 8 >resume.log 2>&1 || fail "the allowed resume: $(cat resume.log)"
grep -qF -- "changed since: --exact-micro-batch 16 -> 8, --log-every 5 -> 10, --steps 20 -> 40, world_size 2 -> 1" \
  resume.log || fail "the resume's line: $(cat resume.log)"
/usr/bin/python3 - <<'PY' || fail "the resume record"
import json
records = [json.loads(l) for l in open("A/metrics.jsonl")]
resumes = [r for r in records if "resume" in r]
assert len(resumes) == 1 and resumes[0]["step"] == 20, resumes
changed = resumes[0]["resume"]["changed"]
assert changed == {"log-every": [5, 10], "steps": [20, 40], "world_size": [2, 1],
                   "exact-micro-batch": [16, 8]}, changed
after = [r["step"] for r in records[records.index(resumes[0]):] if "loss" in r]
assert after == [30, 40], after  # the new cadence, applied
assert json.load(open("A/manifest.json"))["results"]["steps"] == 40
PY
/usr/bin/python3 "$plot_runs" A --print >plot.txt 2>&1 || fail "plot_runs.py: $(cat plot.txt)"
grep -q "2 launch(es)" plot.txt || fail "plot_runs.py: $(cat plot.txt)"
echo "ok: refusals named both values; $(grep -o "changed since.*" resume.log)"
