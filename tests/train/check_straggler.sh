#!/usr/bin/env bash
# check_straggler.sh RINGTRAIN MPIEXEC N MODE SLOW -- TRAIN_ARGS...
# --local-batches auto against a slow rank does not change the experiment:
# 1. reference: TRAIN_ARGS at N ranks, the near-equal split, no slow rank
# 2. adapted: the same with --local-batches auto --test-slow-rank SLOW (e.g. 1:3, or 1:3@8:0
#    for a slow rank that moves to rank 0 from step 8)
# 3. the adapted run did re-split: a `rebalance` record whose new split is not the near-equal
#    one, and a window in which the ranks computed other than the near-equal split's samples
#    (so the comparison cannot pass vacuously); with a moving slow rank, also a re-split
#    after the move that gives the new slow rank less than it had then
#    (--test-ignore-core-wait: on a machine shared with other jobs, one rank may wait for its
#    core more than the others at times, and the split would be held)
# 4. MODE bitwise: /model /optimizer /schedule /data /rng bitwise equal (h5diff) and the same
#    losses in metrics.jsonl (--reduction exact); MODE a tolerance (1e-5 for the default
#    reduction): every array within it, relative (`ringtrain inspect --compare`, only the
#    groups COMPARE_GROUPS names if set), and every logged loss
set -u
ringtrain=$1 mpiexec=$2 n=$3 mode=$4 slow=$5; shift 5
[[ "$1" == "--" ]] && shift
export MPIEXEC_TIMEOUT=120
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; tail -n 5 ./*.log; exit 1; }
"$mpiexec" -n "$n" "$ringtrain" train "$@" --quiet --run-dir A >a.log 2>&1 || fail "reference run failed"
"$mpiexec" -n "$n" "$ringtrain" train "$@" --quiet --run-dir B --local-batches auto \
  --test-slow-rank "$slow" --test-ignore-core-wait >b.log 2>&1 || fail "adapted run failed"
python3 - "$slow" <<'EOF' || fail "the adapted run did not re-split as the slow rank asks"
import json, sys
slow = sys.argv[1]
even = json.load(open("A/manifest.json"))["local_batches"]
records = [json.loads(line) for line in open("B/metrics.jsonl")]
splits = [(r["step"], r["rebalance"]["new_split"]) for r in records if "rebalance" in r]
print("re-splits:", splits)
assert any(s != even for _, s in splits), f"no re-split away from {even}"
# The samples the ranks computed in each window (from the step): the split was applied.
windows = [r["rebalance_window"] for r in records if "rebalance_window" in r]
steps_per_window = windows and round(sum(windows[0]["samples"]) / sum(even))
assert any(w["samples"] != [b * steps_per_window for b in even] for w in windows), \
    "every window computed the near-equal split's samples: no re-split was applied"
rank = int(slow.split(":")[0])
first = next(s for _, s in splits if s != even)
assert first[rank] < even[rank], f"the slow rank {rank} did not lose samples: {first}"
if "@" in slow:
    at, to = (int(x) for x in slow.split("@")[1].split(":"))
    at_move = ([even] + [s for step, s in splits if step <= at])[-1]
    after = [s for step, s in splits if step > at]
    assert any(s[to] < at_move[to] for s in after), \
        f"rank {to} did not lose samples after step {at} (it had {at_move[to]})"
EOF
last=$(cat A/checkpoints/LATEST)
[[ $(cat B/checkpoints/LATEST) == "$last" ]] || fail "the adapted run ends at $(cat B/checkpoints/LATEST), not $last"
if [[ $mode == bitwise ]]; then
  for g in model optimizer schedule data rng; do
    h5diff "A/checkpoints/$last" "B/checkpoints/$last" "/$g" "/$g" >/dev/null || fail "/$g differs"
  done
  cmp <(grep -o '"loss":[^,]*' A/metrics.jsonl) <(grep -o '"loss":[^,]*' B/metrics.jsonl) ||
    fail "losses in metrics.jsonl differ"
else
  # shellcheck disable=SC2086
  "$ringtrain" inspect "B/checkpoints/$last" --compare "A/checkpoints/$last" --rtol "$mode" \
    ${COMPARE_GROUPS:+--groups $COMPARE_GROUPS} ||
    fail "the adapted run differs from the reference beyond $mode"
  python3 - "$mode" <<'EOF' || fail "logged losses differ beyond $mode"
import json, sys
rtol = float(sys.argv[1])
def losses(d):
    return [json.loads(l)["loss"] for l in open(d + "/metrics.jsonl") if '"loss"' in l]
a, b = losses("A"), losses("B")
assert len(a) == len(b) and a, (len(a), len(b))
for x, y in zip(a, b):
    assert abs(x - y) <= rtol * abs(x), (x, y)
EOF
fi
echo "ok: $(grep -c '"rebalance"' B/metrics.jsonl) re-splits; final $last $mode"
