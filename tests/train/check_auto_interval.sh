#!/usr/bin/env bash
# check_auto_interval.sh RINGTRAIN MPIEXEC N
# `--checkpoint-every auto --mtbf MU`: the first save (after --log-every steps) measures C,
# the interval is τ = √(2·C·μ) in steps of the measured step time, the plan is printed
# (C, μ, τ, steps, predicted overhead C/τ + τ/(2μ)) and recorded in metrics.jsonl, and the
# saves that follow are one interval apart until a drifted cost re-plans.
# A. The hidden hooks fix what the plan sees: C = 1 ms for three saves, then 10 ms; step
#    time 1 ms; μ = 32 ms. τ = √(2·0.001·0.032) = 8 ms = 8 steps; the fourth save's cost
#    drifts (10x > 1.5x): τ = √(2·0.01·0.032) = 25.3 ms = 25 steps. Saves after steps 5, 13,
#    21, 29, 54, 79, ..., 179 and the end save at 200, in metrics.jsonl and in checkpoints/.
# B. Nothing hooked: the plan uses the measured save cost agreed over ranks (the slowest
#    rank's, so at least rank 0's own) and the measured step time. These vary from run to
#    run, so the check is consistency: the recorded plan is the Young/Daly arithmetic of its
#    recorded C, μ and step time, and the printed line says the same.
# C. As A, but the saves after steps 5 and 18 fail (--test-fail-save-steps): each is retried
#    one interval later (5 steps before any plan, then the plan's 8), so durable saves come
#    after steps 10, 26, 34, 42 (the fourth durable save drifts: 25 steps) and at the end, 60.
# Synchronous saves throughout (--checkpoint-async off): the step at which a save's cost or
# failure is known is then fixed, which these exact schedules need.
set -u
ringtrain=$1 mpiexec=$2 n=$3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; for f in *.log; do echo "--- $f"; tail -8 "$f"; done; exit 1; }
export MPIEXEC_TIMEOUT=120
run=(--model mlp --mlp-hidden 64 --global-batch 32 --no-eval --log-every 5 --keep 1000
     --checkpoint-every auto --checkpoint-async off)
"$mpiexec" -n "$n" "$ringtrain" train "${run[@]}" --steps 200 --mtbf 0.032 --test-step-s 0.001 \
  --test-save-cost-s 0.001,0.001,0.001,0.01 --run-dir A >a.log 2>&1 || fail "run A failed"
# Run B gives one host's MTBF: on this one host the job's is the same, 0.5 s.
"$mpiexec" -n "$n" "$ringtrain" train "${run[@]}" --steps 30 --node-mtbf 0.5 \
  --run-dir B >b.log 2>&1 || fail "run B failed"
grep -q "job MTBF mu = node MTBF 0.5 s / 1 host = 0.5 s" b.log || fail "no job MTBF line"
"$mpiexec" -n "$n" "$ringtrain" train "${run[@]}" --steps 60 --mtbf 0.032 --test-step-s 0.001 \
  --test-save-cost-s 0.001,0.001,0.001,0.01 --test-fail-save-steps 5,18 --run-dir C >c.log 2>&1 ||
  fail "run C failed"

python3 - <<'EOF' || fail "see above"
import json, math, os, re, sys

def records(run):
    return [json.loads(line) for line in open(f"{run}/metrics.jsonl")]

def check(ok, what):
    if not ok:
        print("FAIL:", what)
        sys.exit(1)

def check_plan(plan, mtbf):
    c, tau, s, k = plan["cost_s"], plan["tau_s"], plan["step_s"], plan["every_steps"]
    check(plan["mtbf_s"] == mtbf, f"plan mtbf {plan['mtbf_s']} != {mtbf}")
    check(math.isclose(tau, math.sqrt(2 * c * mtbf), rel_tol=1e-12), f"tau {tau} != sqrt(2 C mu)")
    check(k == max(1, math.floor(tau / s + 0.5)), f"{k} steps != round(tau {tau} / step {s})")
    check(math.isclose(plan["predicted_overhead"], c / tau + tau / (2 * mtbf), rel_tol=1e-12),
          "predicted overhead != C/tau + tau/(2 mu)")

def printed_plans(log):
    pattern = (r"save cost C = (\S+) s, MTBF mu = (\S+) s, tau = sqrt\(2 C mu\) = (\S+) s = "
               r"(\d+) steps of (\S+) s; predicted overhead C/tau \+ tau/\(2 mu\) = (\S+) %")
    return [tuple(float(x) for x in m) for m in re.findall(pattern, open(log).read())]

def same_as_printed(plan, shown):
    expect = (plan["cost_s"], plan["mtbf_s"], plan["tau_s"], plan["every_steps"], plan["step_s"],
              100 * plan["predicted_overhead"])
    return all(math.isclose(a, b, rel_tol=1e-3) for a, b in zip(expect, shown))

# --- run A: hooked cost and step time ---
a = records("A")
plans = [(r["step"], r["interval_plan"]) for r in a if "interval_plan" in r]
saves = [r for r in a if "checkpoint_s" in r]
print("A plans:", [(p, q["cost_s"], q["step_s"], q["tau_s"], q["every_steps"]) for p, q in plans])
print("A saves:", [r["step"] for r in saves])
expected = [5, 13, 21, 29, 54, 79, 104, 129, 154, 179, 200]
check([(p, q["cost_s"], q["step_s"], q["every_steps"]) for p, q in plans] ==
      [(5, 0.001, 0.001, 8), (29, 0.01, 0.001, 25)], "plans differ from the hand-computed ones")
for _, plan in plans:
    check_plan(plan, 0.032)
check([r["agreed_cost_s"] for r in saves] == [0.001] * 3 + [0.01] * (len(saves) - 3),
      "the saves did not plan with the hooked costs")
check([r["step"] for r in saves] == expected, f"saves at {[r['step'] for r in saves]}, expected {expected}")
check(all(r["reason"] == "interval" for r in saves[:-1]) and saves[-1]["reason"] == "end", "reasons")
check(all(r["checkpoint_s"] > 0 for r in saves), "a save without its measured cost")
files = sorted(int(f[5:13]) for f in os.listdir("A/checkpoints") if f.endswith(".h5"))
check(files == expected, f"checkpoints/ holds steps {files}, expected {expected}")
shown = printed_plans("a.log")
check(len(shown) == 2 and all(same_as_printed(p, s) for (_, p), s in zip(plans, shown)),
      f"printed plans {shown} differ from the recorded ones")

# --- run B: measured cost and step time ---
b = records("B")
check([r["job_mtbf"] for r in b if "job_mtbf" in r] == [{"node_mtbf_s": 0.5, "hosts": 1, "mtbf_s": 0.5}],
      "run B does not record the job MTBF derived from --node-mtbf")
plans = [(r["step"], r["interval_plan"]) for r in b if "interval_plan" in r]
saves = [r for r in b if "checkpoint_s" in r]
print("B plans:", [(p, q["cost_s"], q["step_s"], q["tau_s"], q["every_steps"]) for p, q in plans])
print("B saves:", [r["step"] for r in saves])
check(len(plans) >= 1 and plans[0][0] == 5 == saves[0]["step"], "no plan at the first save")
for _, plan in plans:
    check_plan(plan, 0.5)
by_step = {r["step"]: r for r in saves}
for p, plan in plans:
    check(plan["cost_s"] == by_step[p]["agreed_cost_s"] >= by_step[p]["checkpoint_s"] > 0,
          f"the plan at step {p} does not use the agreed measured cost of its save")
    check(plan["step_s"] > 0, "no measured step time")
# each save is one interval of the plan in force after the previous save (or the end save)
every = None
for prev, this in zip(saves, saves[1:]):
    every = dict(plans).get(prev["step"], {}).get("every_steps", every)
    check(this["step"] == prev["step"] + every or this["reason"] == "end",
          f"save at {this['step']} is not {every} steps after {prev['step']}")
check(len(printed_plans("b.log")) == len(plans) and
      all(same_as_printed(p, s) for (_, p), s in zip(plans, printed_plans("b.log"))),
      "plans printed and recorded differ")
# --- run C: failed saves are retried one interval later ---
c = records("C")
failed = [r["step"] for r in c if "save_failed" in r]
durable = [r["step"] for r in c if "checkpoint_s" in r and "save_failed" not in r]
plans = [(r["step"], r["interval_plan"]["every_steps"]) for r in c if "interval_plan" in r]
print("C failed:", failed, "durable:", durable, "plans:", plans)
check(failed == [5, 18], f"failed saves at {failed}, expected [5, 18]")
check(durable == [10, 26, 34, 42, 60], f"durable saves at {durable}, expected [10, 26, 34, 42, 60]")
check(plans == [(10, 8), (42, 25)], f"plans {plans}, expected [(10, 8), (42, 25)]")
print("ok")
EOF
echo "ok: $(grep -m1 -o 'checkpoint interval.*' a.log)"
