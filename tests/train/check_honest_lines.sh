#!/usr/bin/env bash
# check_honest_lines.sh RINGTRAIN MPIEXEC
# What the output says is what happened:
# 1. Evaluations every 5 steps, metrics lines every 100: the evaluation lines before the first
#    metrics line show a loss (the open window's mean so far), never nan.
# 2. "done: N steps in W s, S samples/s": N is this launch's steps and S = N x global batch / W,
#    with N and W as manifest.json records them (launch_steps, wall_s).
# 3. After a resume at step 10 of 20: "done: 10 steps ... (steps 11-20, resumed at step 10)";
#    the manifest holds steps 20 and launch_steps 10.
set -u
ringtrain=$1 mpiexec=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; tail -8 ./*.log; exit 1; }
args=(--model mlp --mlp-hidden 32 --global-batch 32 --steps 20 --eval-every 5 --log-every 100)
export MPIEXEC_TIMEOUT=120

"$mpiexec" -n 2 "$ringtrain" train "${args[@]}" --run-dir A </dev/null >a.log 2>&1 ||
  fail "run failed"
evals=$(grep -c '^step .* test accuracy' a.log)
((evals >= 3)) || fail "expected the evaluation lines of steps 5, 10, 15: found $evals"
grep '^step .* test accuracy' a.log | grep -qi nan && fail "an evaluation line shows nan"

# Checks the done line of log $1 against manifest $2; $3: the expected launch steps.
check_done() {
  python3 - "$1" "$2" "$3" <<'EOF' || fail "the done line of $1 does not add up"
import json, re, sys
log, manifest, expected = sys.argv[1], sys.argv[2], int(sys.argv[3])
line = [l for l in open(log) if l.startswith("done: ")][-1]
m = re.match(r"done: (\d+) steps in [0-9.]+ s.*?, (\d+) samples/s", line)
r = json.load(open(manifest))["results"]
assert m, line
steps, rate = int(m.group(1)), int(m.group(2))
assert steps == expected == r["launch_steps"], (line, r)
want = r["launch_steps"] * 32 / r["wall_s"]  # --global-batch 32
assert abs(rate - want) <= 1, (line, want)
EOF
}
check_done a.log A/manifest.json 20

"$mpiexec" -n 2 "$ringtrain" train "${args[@]/20/10}" --run-dir B </dev/null >b1.log 2>&1 ||
  fail "first half failed"
"$mpiexec" -n 2 "$ringtrain" train "${args[@]}" --run-dir B --resume auto </dev/null >b2.log 2>&1 ||
  fail "resume failed"
grep -q "^done: 10 steps in .* (steps 11-20, resumed at step 10)" b2.log ||
  fail "the resumed done line: $(grep '^done' b2.log)"
check_done b2.log B/manifest.json 10
python3 -c "import json,sys; r=json.load(open('B/manifest.json'))['results']; \
sys.exit(r['steps'] != 20 or r['launch_steps'] != 10)" || fail "manifest steps after the resume"
echo "ok: no nan before the first metrics line; done lines add up, also after a resume"
