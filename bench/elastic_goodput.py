"""The goodput half of bench/elastic_bench.py (its docstring has the model): per round, the
uninterrupted runs on 3 and 2 hosts, then `elastic` and `wait` with the same failure step
and the same downtime, in alternating order."""
import json
import os
import shutil
import statistics

from elastic_rig import Loss, host_options, hostctl, parts, supervised, train_args


def step_times(run):
    return [r["step_s"] for r in map(json.loads, open(os.path.join(run, "metrics.jsonl")))
            if "step_s" in r and "loss" in r]


def save_costs(run):
    return [r["checkpoint_s"] for r in map(json.loads, open(os.path.join(run, "metrics.jsonl")))
            if "checkpoint_s" in r]


def uninterrupted(o, hosts, work, name, count):
    w = os.path.join(work, name)
    shutil.rmtree(w, ignore_errors=True)
    code, ledger, summary = supervised(w, host_options(o, hosts[:count], ["--no-grow"]), train_args(o))
    if code != 0:
        raise SystemExit("elastic_bench: the uninterrupted %d-host run failed (exit %d), see %s"
                         % (count, code, w))
    run = os.path.join(w, "run")
    return {"T": summary["wall_s"], "t": statistics.median(step_times(run)),
            "R": ledger[0]["first_step_s"], "C": statistics.median(save_costs(run) or [0.0])}


def failed_run(o, hosts, work, name, step, extra):
    w = os.path.join(work, name)
    shutil.rmtree(w, ignore_errors=True)
    loss = Loss(step, 2, "down", back_after_s=o.down_s)
    code, ledger, summary = supervised(w, host_options(o, hosts, extra), train_args(o), loss)
    if loss.back_unix is None:
        hostctl("up", 2)
    return {"exit": code, "T": summary.get("wall_s"), "worlds": [l["world_size"] for l in ledger],
            "ended": [l["ended"] for l in ledger], "parts": parts(loss, ledger, summary),
            "lost": ledger[0]["steps_lost"] if ledger else None}


def predict(o, ideal3, ideal2, elastic, step, lost):
    """Walls of `wait` and `elastic` by the model (elastic_bench.py's docstring)."""
    t3, t2, R3, R2, C = ideal3["t"], ideal2["t"], ideal3["R"], ideal2["R"], ideal3["C"]
    d, q = elastic["parts"]["detection"], elastic["parts"]["probing"]
    before = ideal3["T"] - (o.steps - step) * t3   # the uninterrupted run up to the loss
    todo = o.steps - step + lost                     # steps left after the loss, replay included
    back = o.down_s + o.probe_every / 2              # the host answers a probe, on average
    t_wait = before + back + R3 + todo * t3
    window = back - (d + q + R2)                     # time the small world trains
    if window <= 0:
        t_elastic = before + d + q + R2 + C + R3 + todo * t3
    elif todo * t2 <= window:
        t_elastic = before + d + q + R2 + todo * t2
    else:
        t_elastic = before + d + q + R2 + window + C + R3 + (todo - window / t2) * t3
    return {"wait": t_wait, "elastic": t_elastic}


def goodput_round(o, hosts, work, rng, i):
    step = rng.randint(o.checkpoint_every + 1, o.steps - o.checkpoint_every)
    ideal3 = uninterrupted(o, hosts, work, "ideal3", 3)
    ideal2 = uninterrupted(o, hosts, work, "ideal2", 2)
    cases = {"elastic": [], "wait": ["--min-hosts", "3", "--wait-for-hosts", "600"]}
    out = {"step": step, "ideal3": ideal3, "ideal2": ideal2}
    for name in (["elastic", "wait"] if i % 2 == 0 else ["wait", "elastic"]):
        out[name] = failed_run(o, hosts, work, name, step, cases[name])
        out[name]["goodput"] = ideal3["T"] / out[name]["T"] if out[name]["T"] else None
    if out["elastic"]["parts"] and out["elastic"]["lost"] is not None:
        predicted = predict(o, ideal3, ideal2, out["elastic"], step, out["elastic"]["lost"])
        out["predicted"] = {k: {"T": v, "goodput": ideal3["T"] / v} for k, v in predicted.items()}
        # hosts with cores of their own: 2 hosts take 3/2 of the 3-host step
        own = predict(o, ideal3, dict(ideal2, t=1.5 * ideal3["t"]), out["elastic"], step,
                      out["elastic"]["lost"])
        out["predicted_own_cores"] = {k: {"T": v, "goodput": ideal3["T"] / v} for k, v in own.items()}
    return out


def goodput(o, hosts, work, rng):
    rounds = []
    for i in range(o.rounds):
        r = goodput_round(o, hosts, work, rng, i)
        rounds.append(r)
        print("round %d: %s" % (i, json.dumps(r)), flush=True)
    good = [r for r in rounds if "predicted" in r and r["elastic"]["exit"] == 0 and r["wait"]["exit"] == 0]
    print("\n%d of %d rounds usable; medians (the machine is shared):" % (len(good), len(rounds)))
    print("%-8s %10s %10s %12s %14s %22s" % ("strategy", "wall s", "goodput", "model wall",
                                             "model goodput", "model, t2 = 1.5 t3"))
    med = lambda f: statistics.median(f(r) for r in good) if good else float("nan")
    table = {}
    for name in ("elastic", "wait"):
        table[name] = {"T": med(lambda r: r[name]["T"]), "goodput": med(lambda r: r[name]["goodput"]),
                       "model_T": med(lambda r: r["predicted"][name]["T"]),
                       "model_goodput": med(lambda r: r["predicted"][name]["goodput"]),
                       "own_cores_goodput": med(lambda r: r["predicted_own_cores"][name]["goodput"])}
        t = table[name]
        print("%-8s %10.2f %10.3f %12.2f %14.3f %22.3f" % (
            name, t["T"], t["goodput"], t["model_T"], t["model_goodput"], t["own_cores_goodput"]))
    ratios = [r["elastic"]["goodput"] / r["wait"]["goodput"] for r in good]
    print("uninterrupted 3-host wall %.2f s (median); t3 %.4f s, t2 %.4f s per step; worlds: %s" % (
        med(lambda r: r["ideal3"]["T"]), med(lambda r: r["ideal3"]["t"]), med(lambda r: r["ideal2"]["t"]),
        "; ".join("elastic %s, wait %s" % ("->".join(map(str, r["elastic"]["worlds"])),
                                          "->".join(map(str, r["wait"]["worlds"]))) for r in good)))
    if ratios:
        print("elastic goodput / wait goodput per round: %s; median %.2f" % (
            ", ".join("%.2f" % x for x in ratios), statistics.median(ratios)))
    return {"rounds": rounds, "medians": table, "ratios": ratios}
