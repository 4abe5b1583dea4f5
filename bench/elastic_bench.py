#!/usr/bin/python3
"""Elastic supervision on the emulated cluster: what losing a host costs, paired against the
alternatives in the same invocation. Run inside tools/netns-cluster with 3 hosts:

  tools/netns-cluster --hosts 3 run /usr/bin/python3 bench/elastic_bench.py recovery \
      --ringtrain build/ringtrain --rounds 5 --json bench/results/elastic-recovery-DATE.json
  tools/netns-cluster --hosts 3 run /usr/bin/python3 bench/elastic_bench.py goodput \
      --ringtrain build/ringtrain --rounds 5 --json bench/results/elastic-goodput-DATE.json

recovery  Per round, in alternating order: (a) the supervisor over 3 hosts loses host 2 at
          step --loss-step (`down`: its processes die, then its link; mpiexec sees the
          connections close) and shrinks to 2 hosts; (b) the same job under a plain relaunch
          (the supervisor with one fixed mpiexec command) whose rank 2 is killed at the same
          step, the host staying up; (c) with --cut-watchdog W, the same loss as (a) but
          silent (`cut`: link first), detected by the ranks' watchdog (--watchdog-s W).
          Time from the loss to the first completed step of the next world, in parts:
            detection  loss -> the failed mpiexec has exited (seen by the supervisor)
            probing    that exit -> the next mpiexec starts (probes, decision)
            launch     -> the next world's "resumed_from" record (MPI start-up, data, restore)
            resume     -> its first completed step
goodput   Per round, one failure step drawn from --seed for both strategies: host 2 is lost
          at that step and comes back --down-s later. `elastic`: the supervisor shrinks to 2
          hosts and grows back (probes every --probe-every); `wait`: --min-hosts 3, so it waits,
          probing, and relaunches on 3 hosts when the host answers. Beside them, the
          uninterrupted runs on 3 and on 2 hosts give the model's inputs; goodput = wall of
          the uninterrupted 3-host run / wall of the run. The model (bench/README-elastic.md),
          with B = the uninterrupted run's time up to the loss, M = steps left after it (the L
          lost ones included), H = D + P/2 (the host answers a probe, on average) and the
          small world's training time w = H - (d + q + R2):
            T_wait    = B + H + R3 + M t3
            T_elastic = B + d + q + R2 + M t2                        if M t2 <= w
                      = B + d + q + R2 + w + C + R3 + (M - w/t2) t3  otherwise
          t3, t2: median step on 3 and 2 hosts; R3, R2: launch -> first step of those runs;
          C: their median save; d, q: the elastic run's detection and probing; D: --down-s;
          P: --probe-every.
The machine is shared: read the medians and the per-round ratios, not one round.
"""
import argparse
import json
import os
import random
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elastic_rig import Loss, host_options, hostctl, parts, setup, supervised, train_args  # noqa: E402


def recovery_cases(o, hosts):
    """name -> (supervisor options, training command, the loss, the rank it kills)."""
    cases = {
        "elastic": (host_options(o, hosts, ["--no-grow"]), train_args(o), "down", None),
        "plain": (["--finalize-grace", "2", "--timeout-per-attempt", "300"], [os.environ["RT_MPIEXEC"], "-n", "3"] + train_args(o),
                  "rank", 2),
    }
    if o.cut_watchdog:
        cases["silent"] = (host_options(o, hosts, ["--no-grow"]),
                           train_args(o) + ["--watchdog-s", str(o.cut_watchdog)], "cut", None)
    return cases


def recovery_round(o, hosts, work, order):
    out = {}
    for name, (options, train, mode, rank) in sorted(recovery_cases(o, hosts).items(),
                                                     key=lambda c: order.index(c[0])):
        w = os.path.join(work, name)
        shutil.rmtree(w, ignore_errors=True)
        loss = Loss(o.loss_step, 2, mode)
        code, ledger, summary = supervised(w, options, train, loss, rank)
        out[name] = {"exit": code, "parts": parts(loss, ledger, summary),
                     "worlds": [l.get("world_size") for l in ledger]}
        if mode != "rank":
            hostctl("up", 2)
    return out


def median_parts(rounds, name):
    keys = ("detection", "probing", "launch", "resume", "total")
    got = [r[name]["parts"] for r in rounds if r.get(name, {}).get("parts")]
    return {k: statistics.median(p[k] for p in got) for k in keys} if got else None, len(got)


def recovery(o, hosts, work):
    rounds = []
    for i in range(o.rounds):
        order = ["elastic", "plain", "silent"] if i % 2 == 0 else ["silent", "plain", "elastic"]
        r = recovery_round(o, hosts, work, order)
        rounds.append(r)
        print("round %d: %s" % (i, json.dumps(r)), flush=True)
    table = {}
    print("\nmedians over rounds (seconds), loss at step %d:" % o.loss_step)
    print("%-9s %6s %10s %8s %8s %8s %8s" % ("case", "rounds", "detection", "probing", "launch",
                                             "resume", "total"))
    for name in ("elastic", "plain", "silent"):
        m, n = median_parts(rounds, name)
        if m:
            table[name] = m
            print("%-9s %6d %10.3f %8.3f %8.3f %8.3f %8.3f" % (
                name, n, m["detection"], m["probing"], m["launch"], m["resume"], m["total"]))
    ratios = [r["elastic"]["parts"]["total"] / r["plain"]["parts"]["total"] for r in rounds
              if r["elastic"]["parts"] and r["plain"]["parts"]]
    if ratios:
        print("elastic / plain relaunch, per round: %s; median %.2f (target < 2)" % (
            ", ".join("%.2f" % x for x in ratios), statistics.median(ratios)))
    return {"rounds": rounds, "medians": table, "ratios": ratios}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=["recovery", "goodput"])
    p.add_argument("--ringtrain", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "build", "ringtrain"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--hidden", type=int, default=128, help="mlp hidden width (default 128)")
    p.add_argument("--reduction", default="exact", choices=["exact", "sum-scaled"])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--log-every", type=int, default=5)
    p.add_argument("--loss-step", type=int, default=23,
                   help="recovery: not a logged step (a metrics line's gather is not watched)")
    p.add_argument("--cut-watchdog", type=float, default=0.0, metavar="W",
                   help="recovery: also the silent loss, detected by --watchdog-s W")
    p.add_argument("--probe-every", type=float, default=1.0)
    p.add_argument("--down-s", type=float, default=10.0, help="goodput: the host returns after")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--work-dir", help="keep the runs here (default: a temporary directory)")
    o = p.parse_args(argv)
    hosts, work = setup(o, "elastic_bench")
    print("elastic_bench %s: %s; hosts %s; work %s" % (o.what, " ".join(train_args(o)), hosts, work))
    if o.what == "recovery":
        result = recovery(o, hosts, work)
    else:
        from elastic_goodput import goodput  # noqa: E402
        result = goodput(o, hosts, work, random.Random(o.seed))
    if o.json:
        with open(o.json, "w") as f:
            json.dump({"args": vars(o), **result}, f, indent=1)
    if not o.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
