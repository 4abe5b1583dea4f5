#!/usr/bin/python3
"""Elastic campaign: K trials, each a supervised run on the emulated cluster that loses a host
(or a flapping rank) at a random step, checked against an uninterrupted reference.

  tools/netns-cluster --hosts 3 run /usr/bin/python3 bench/elastic_campaign.py \
      --ringtrain build/ringtrain --trials 20 --seed 1 > bench/results/elastic-campaign-DATE.txt

Job: mlp (hidden 64), global batch 48, --steps 30, checkpoints every 5, a metrics line every
step. The trials cycle through five scenarios; the step, the host and the timings are drawn
from --seed:
  shrink-exact    3 hosts x 1 rank, --reduction exact (micro-batch 8): host 1 or 2 lost
                  (`down`) after step s -> 2 hosts. Bitwise equal to one process.
  grow-exact      the same, and the host comes back while the 2-host world waits after a
                  random later step (until the supervisor decides to grow) -> 3 hosts again.
                  Bitwise equal to one process.
  hier-default    2 hosts x 2 ranks, --collective hierarchical, default reduction: host 1 lost
                  -> host 0's 2 ranks. Within 1e-5 of the uninterrupted 2 x 2 run.
  flap-exact      3 hosts x 1 rank, exact, --flap-limit 2: rank 1 or 2 kills itself after a
                  random step in attempts 0 and 1 (its host answers probes) -> set aside.
                  Bitwise equal to one process.
  shrink-default  3 hosts x 1 rank, default reduction (the ring): host 1 or 2 lost -> 2 hosts.
                  Within 1e-5 of the uninterrupted 3-host run.
Bitwise: h5diff finds /model /optimizer /schedule /data /rng of the final checkpoints equal
and the logged (step, loss) records are equal. Within 1e-5: `ringtrain inspect --compare
--rtol 1e-5` on every group and every logged loss within 1e-5 (relative).
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elastic_rig import Loss, compare, hostctl, setup, supervised  # noqa: E402

STEPS = 30
SCENARIOS = ("shrink-exact", "grow-exact", "hier-default", "flap-exact", "shrink-default")


def job(o, exact, extra=()):
    return ([o.ringtrain, "train", "--model", "mlp", "--mlp-hidden", "64", "--global-batch", "48",
             "--steps", str(STEPS), "--no-eval", "--log-every", "1", "--checkpoint-every", "5",
             "--blas-threads", "1", "--quiet", "--run-dir", "run"]
            + (["--reduction", "exact", "--exact-micro-batch", "8"] if exact else []) + list(extra))


def supervisor_options(hosts, slots=1, extra=()):
    return ["--hosts", ",".join("%s:%d" % (h, slots) for h in hosts), "--mpiexec",
            os.environ["RT_LAUNCH"], "--probe-timeout", "5", "--probe-every", "0.5",
            "--finalize-grace", "2", "--timeout-per-attempt", "300"] + list(extra)


def references(o, hosts, work):
    """The uninterrupted runs each scenario is compared with: {name: run directory}."""
    refs = {}
    one = os.path.join(work, "ref-one-process")
    subprocess.run(job(o, True), cwd=_fresh(one), check=True, stdout=subprocess.DEVNULL)
    refs["one"] = os.path.join(one, "run")
    for name, options, extra in [("three", supervisor_options(hosts), []),
                                 ("hier", supervisor_options(hosts[:2], 2),
                                  ["--collective", "hierarchical"])]:
        w = os.path.join(work, "ref-" + name)
        code, _, _ = supervised(_fresh(w), options + ["--no-grow"], job(o, False, extra))
        if code != 0:
            raise SystemExit("elastic_campaign: the %s reference failed (exit %d), see %s" % (name, code, w))
        refs[name] = os.path.join(w, "run")
    return refs


def _fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def trial(o, hosts, refs, w, scenario, rng):
    """(verdict ok, what happened, detail)."""
    step = rng.randint(1, STEPS - 1)
    host = rng.choice([1, 2])
    if scenario == "flap-exact":
        first = rng.randint(1, STEPS - 6)
        second = rng.randint(first // 5 * 5 + 1, STEPS - 1)
        kills = ["--attempt-args", "0", "--test-kill-rank %d --test-kill-step %d" % (host, first),
                 "--attempt-args", "1", "--test-kill-rank %d --test-kill-step %d" % (host, second)]
        what = "rank %d dies after steps %d and %d" % (host, first, second)
        code, ledger, _ = supervised(w, supervisor_options(hosts, 1, ["--flap-limit", "2"] + kills),
                                     job(o, True))
        ref, rtol = refs["one"], 0
    else:
        hier = scenario == "hier-default"
        host = 1 if hier else host
        back = rng.randint(step, STEPS - 1) if scenario == "grow-exact" else None
        loss = Loss(step, host, "down", then_pause=back)
        what = "host %d lost after step %d%s" % (host, step, ", back at %d" % back if back else "")
        options = supervisor_options(hosts[:2], 2) if hier else supervisor_options(hosts)
        exact = scenario.endswith("exact")
        code, ledger, _ = supervised(w, options, job(o, exact, ["--collective", "hierarchical"]
                                                      if hier else []), loss)
        hostctl("up", host)
        ref = refs["one"] if exact else refs["hier" if hier else "three"]
        rtol = 0 if exact else 1e-5
    worlds = "->".join(str(l.get("world_size")) for l in ledger)
    if code != 0:
        return False, what, "supervisor exit %d, worlds %s" % (code, worlds)
    ok, detail = compare(o.ringtrain, os.path.join(w, "run"), ref, STEPS, rtol)
    return ok, what, "worlds %s: %s" % (worlds, detail)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ringtrain", default="build/ringtrain")
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--work-dir", help="keep the trials here (default: a temporary directory)")
    o = p.parse_args(argv)
    hosts, work = setup(o, "elastic_campaign")
    rng = random.Random(o.seed)
    start = time.monotonic()
    print("elastic campaign: %d trials, seed %d, %s" % (o.trials, o.seed, " ".join(job(o, True))), flush=True)
    refs = references(o, hosts, work)
    passed = {}
    for t in range(o.trials):
        scenario = SCENARIOS[t % len(SCENARIOS)]
        w = _fresh(os.path.join(work, "trial-%02d" % t))
        t0 = time.monotonic()
        ok, what, detail = trial(o, hosts, refs, w, scenario, rng)
        passed.setdefault(scenario, []).append(ok)
        print("trial %2d %-15s %-40s %s: %s (%.1f s)" % (t, scenario, what, "PASS" if ok else "FAIL",
                                                        detail, time.monotonic() - t0), flush=True)
        if ok and not o.work_dir:
            shutil.rmtree(w, ignore_errors=True)
    print("\nby scenario: " + ", ".join("%s %d/%d" % (s, sum(v), len(v)) for s, v in passed.items()))
    total = sum(sum(v) for v in passed.values())
    print("total: %d/%d bitwise (exact) or within 1e-5 (default), %.0f s" % (
        total, o.trials, time.monotonic() - start))
    if not o.work_dir and total == o.trials:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if total == o.trials else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
