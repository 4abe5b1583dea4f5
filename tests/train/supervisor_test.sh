#!/usr/bin/env bash
# supervisor_test.sh RINGTRAIN MPIEXEC SUPERVISE_PY
# tools/supervise.py under two injected rank deaths: attempt 0 loses rank 1 after step 15,
# attempt 1 loses rank 0 inside the save at step 30, after its rename and before LATEST moves
# (checkpoints every 10 of 40 steps). Passes iff the run finishes (exit 0), the ledger shows
# 3 attempts / 2 restarts with the exact steps, and the final checkpoint (h5diff of /model
# /optimizer /schedule /data /rng) and every logged loss equal those of one uninterrupted run.
# Also checks the supervisor's command-line errors and that it gives up with the failure's
# status when restarts run out.
#
# Expected ledger, derived: --log-every 1, and --test-kill-step S raises SIGKILL after step S's
# update but before step S's metrics line, so the last logged step is S-1; a save runs after
# its step's metrics line:
#   attempt 0: restored 0  (none),  reached 14, next restores 10 -> steps_lost 4
#   attempt 1: restored 10,         reached 30, next restores 30 -> steps_lost 0
#   attempt 2: restored 30,         reached 40, finished           -> steps_lost null
# (The work actually redone is 5 steps, 11..15; the killed step leaves no line.) Attempt 2
# resumes from step-00000030.h5 although LATEST still names step 20: the ledger must take
# the step ringtrain resumed from (its "resumed_from" record), not LATEST's, or it would
# count 10 steps lost.
set -u
ringtrain=$1 mpiexec=$2 supervise=$3
py=/usr/bin/python3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; for f in *.txt; do echo "--- $f"; tail -30 "$f"; done; exit 1; }
# Synchronous saves (--checkpoint-async off): the derivation above needs each save durable
# when its step's line is written.
args=(--model mlp --mlp-hidden 64 --global-batch 32 --steps 40 --no-eval --log-every 1
      --checkpoint-every 10 --checkpoint-async off --quiet)
export MPIEXEC_TIMEOUT=120
start=$(date +%s)

# 1. command-line errors: exit 2 and a message that says what to fix
expect_usage() {  # TEXT ARGS...
  local text=$1; shift
  "$py" "$supervise" "$@" >usage.txt 2>&1; local code=$?
  [[ $code -eq 2 ]] || fail "supervise $*: exit $code, expected 2"
  grep -qF -- "$text" usage.txt || fail "supervise $*: message lacks '$text'"
}
expect_usage "missing '--'" "$mpiexec" -n 2 "$ringtrain" train --run-dir x
expect_usage "no --run-dir" -- "$mpiexec" -n 2 "$ringtrain" train
expect_usage "already has --resume" -- "$mpiexec" -n 2 "$ringtrain" train --run-dir x --resume auto
expect_usage "attempts are numbered 0..1" --max-restarts 1 --attempt-args 2 "--seed 1" -- \
  "$mpiexec" -n 2 "$ringtrain" train --run-dir x
expect_usage "not an executable" -- no-such-launcher-xyz train --run-dir x
rm -f usage.txt

# 2. the uninterrupted reference
"$mpiexec" -n 2 "$ringtrain" train "${args[@]}" --run-dir ref >ref.txt 2>&1 || fail "reference run failed"

# 3. the supervised run with two injected failures
"$py" "$supervise" --max-restarts 3 --timeout-per-attempt 120 --ledger sup/ledger.jsonl \
  --attempt-args 0 "--test-kill-rank 1 --test-kill-step 15" \
  --attempt-args 1 "--test-crash-phase 2 --test-crash-step 30" \
  -- "$mpiexec" -n 2 "$ringtrain" train "${args[@]}" --run-dir sup >sup.txt 2>&1
code=$?
[[ $code -eq 0 ]] || fail "supervised run: exit $code, expected 0"
"$py" - <<'PY' || fail "ledger or summary not as derived"
import json, sys
ledger = [json.loads(l) for l in open("sup/ledger.jsonl")]
summary = json.load(open("sup/ledger-summary.json"))
got = [(a["attempt"], a["exit_status"] != 0, a["finished"], a["step_restored"], a["step_reached"],
        a["steps_lost"]) for a in ledger]
want = [(0, True, False, 0, 14, 4), (1, True, False, 10, 30, 0), (2, False, True, 30, 40, None)]
ok = got == want
ok &= all(a["restart_latency_s"] is not None and a["restart_latency_s"] > 0 for a in ledger[:2])
ok &= (summary["attempts"], summary["restarts"], summary["finished"], summary["exit_status"],
       summary["steps_lost"]) == (3, 2, True, 0, 4)
ok &= 0 < summary["goodput"] < 1
parts = sum(summary[k] for k in ("useful_s", "saving_s", "restarting_s", "replaying_s", "other_s"))
ok &= abs(parts - summary["wall_s"]) < 1e-3
if not ok:
    print("ledger:", *ledger, "want:", want, "summary:", summary, sep="\n")
    sys.exit(1)
PY

# 4. bitwise the same final state, the same losses
for g in model optimizer schedule data rng; do
  h5diff ref/checkpoints/step-00000040.h5 sup/checkpoints/step-00000040.h5 /$g /$g >diff.txt 2>&1 ||
    fail "final checkpoint differs from the uninterrupted run in /$g: $(head -5 diff.txt)"
done
"$py" - <<'PY' || fail "metrics.jsonl losses differ from the uninterrupted run"
import json
def losses(path):
    return [(r["step"], r["loss"]) for r in map(json.loads, open(path)) if "loss" in r]
a, b = losses("ref/metrics.jsonl"), losses("sup/metrics.jsonl")
if a != b or len(a) != 40:
    print("reference:", a, "supervised:", b, sep="\n")
    raise SystemExit(1)
PY

# 5. out of restarts: the supervisor gives up with the failure's status (mpiexec: 9)
"$py" "$supervise" --max-restarts 0 --attempt-args 0 "--test-kill-rank 1 --test-kill-step 5" \
  -- "$mpiexec" -n 2 "$ringtrain" train "${args[@]}" --run-dir giveup >giveup.txt 2>&1
code=$?
[[ $code -eq 9 ]] || fail "out of restarts: exit $code, expected 9"
[[ $(wc -l <giveup/restarts.jsonl) -eq 1 ]] || fail "out of restarts: ledger should hold 1 attempt"

echo "ok: supervised run with 2 rank kills finished bitwise equal to the uninterrupted run" \
     "(3 attempts, steps lost 4+0 by the ledger) after $(( $(date +%s) - start )) s"
