#!/usr/bin/python3
"""Lesson 7: the checkpoint interval. Measure the save cost C, inject failures with exponential
inter-arrival times of mean MU under the supervisor, and compare the goodput at tau/4 .. 4 tau
with the Young/Daly optimum tau = sqrt(2 C MU) and with what the model predicts.

  interval_study.py --ringtrain BUILD/ringtrain --out DIR [--mu S] [--work S]
                    [--factors 0.25,0.5,1,2,4] [--seed K] [--mpiexec mpiexec.mpich]

1. Calibration: one run of mlp at N=2 with a save every 50 steps. C = median checkpoint_s of its
   saves, s = median step_s of its logging windows.
2. tau = sqrt(2 C MU); for each factor f, a save every K = round(f tau / s) steps.
3. For each K: tools/supervise.py relaunches `ringtrain train --steps W/s --checkpoint-every K`
   with --resume auto after every failure. A failure injector SIGKILLs one rank (chosen at
   random) at times drawn from an exponential distribution of mean MU, measured from the
   supervisor's start. Every K sees the same failure times (the same seed): common random
   numbers, so the runs differ by the interval and not by their luck.
4. The model (first order, Young 1974; Daly 2006): a failure costs the restart R and, on
   average, half an interval of lost work; saves cost C each. With useful work W,
     wall = (W (1 + C/tau) + startup) / (1 - (tau/2 + R) / MU),   goodput = W / wall,
   where R (relaunch to first step) and the start-up are measured from the supervisor's ledger.
   Overhead C/tau + tau/(2 MU) is smallest at tau = sqrt(2 C MU).

Prints one line per interval (saves, failures, the supervisor's account, measured and
predicted goodput) and writes DIR/interval_study.json; DIR/goodput.png if matplotlib is there.
"""
import argparse
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
SUPERVISE = os.path.join(TOP, "tools", "supervise.py")


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def ringtrain_ranks(run_dir):
    """pids of this run's ringtrain processes (the ranks), from /proc."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if (len(argv) > 2 and argv[0].endswith(b"ringtrain") and argv[1] == b"train"
                and run_dir.encode() in argv):
            pids.append(int(name))
    return pids


class FailureInjector(threading.Thread):
    """SIGKILLs one rank of the run at exponential inter-arrival times of mean mu (seconds)."""

    def __init__(self, run_dir, mu, seed):
        super().__init__(daemon=True)
        self.run_dir, self.mu = run_dir, mu
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.kills, self.missed = [], 0  # missed: the failure came while no rank was running

    def run(self):
        t0 = time.monotonic()
        at = 0.0
        while True:
            at += self.rng.expovariate(1.0 / self.mu)
            if self.stop.wait(max(0.0, t0 + at - time.monotonic())):  # the failure process
                return
            pids = ringtrain_ranks(self.run_dir)
            if not pids:
                self.missed += 1
                continue
            victim = self.rng.choice(sorted(pids))
            try:
                os.kill(victim, signal.SIGKILL)
                self.kills.append(round(at, 3))
            except ProcessLookupError:
                self.missed += 1


def train_command(o, run_dir, steps, every):
    return [o.mpiexec, "-n", "2", o.ringtrain, "train", "--steps", str(steps),
            "--checkpoint-every", str(every), "--no-eval", "--log-every", "10", "--quiet",
            "--run-dir", run_dir]


def calibrate(o):
    run_dir = os.path.join(o.out, "calibrate")
    steps = max(200, int(o.calibration_steps))
    subprocess.run(train_command(o, run_dir, steps, 50), check=True, stdout=subprocess.DEVNULL)
    records = read_jsonl(os.path.join(run_dir, "metrics.jsonl"))
    saves = [r["checkpoint_s"] for r in records if "checkpoint_s" in r]
    steps_s = [r["step_s"] for r in records if "step_s" in r][1:]  # the first window is cold
    return statistics.median(saves), statistics.median(steps_s), len(saves)


def supervised_run(o, factor, tau, save_cost, step_s, total_steps):
    every = max(1, round(factor * tau / step_s))
    run_dir = os.path.join(o.out, "tau-x%g" % factor)
    injector = FailureInjector(run_dir, o.mu, o.seed)
    command = [sys.executable, SUPERVISE, "--max-restarts", "1000", "--quiet", "--"] + \
        train_command(o, run_dir, total_steps, every)
    injector.start()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    injector.stop.set()
    injector.join()
    if done.returncode != 0:
        sys.exit("interval_study: the supervised run at %g tau did not finish (exit %d); see %s"
                 % (factor, done.returncode, run_dir))
    summary = json.load(open(os.path.join(run_dir, "restarts-summary.json")))
    ledger = read_jsonl(os.path.join(run_dir, "restarts.jsonl"))
    latencies = [a["restart_latency_s"] for a in ledger if a.get("restart_latency_s") is not None]
    return {"factor": factor, "every_steps": every, "tau_s": every * step_s,
            "failures_injected": len(injector.kills), "failures_missed": injector.missed,
            "restarts": summary["restarts"],
            "restart_latency_s": statistics.median(latencies) if latencies else None,
            **{k: summary[k] for k in ("wall_s", "useful_s", "saving_s", "restarting_s",
                                        "startup_s", "replaying_s", "other_s", "goodput",
                                        "steps_lost")}}


def predict(run, save_cost, mu, restart_s):
    """First-order model of the run's goodput (see the docstring)."""
    tau, work = run["tau_s"], run["useful_s"]
    denominator = 1.0 - (tau / 2.0 + restart_s) / mu
    if denominator <= 0:
        return 0.0
    wall = (work * (1.0 + save_cost / tau) + run["startup_s"]) / denominator
    return work / wall


def plot(o, runs, tau):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    x = [r["tau_s"] for r in runs]
    ax.plot(x, [100 * r["goodput"] for r in runs], "o-", label="measured (supervisor)")
    ax.plot(x, [100 * r["predicted_goodput"] for r in runs], "s--", label="first-order model")
    ax.axvline(tau, color="grey", linestyle=":", label="Young/Daly tau = sqrt(2 C mu)")
    ax.set_xscale("log")
    ax.set_xlabel("checkpoint interval (s of compute)")
    ax.set_ylabel("goodput (%)")
    ax.set_title("mlp N=2, failures every %.0f s on average" % o.mu)
    ax.legend()
    fig.tight_layout()
    path = os.path.join(o.out, "goodput.png")
    fig.savefig(path, dpi=120)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ringtrain", required=True)
    p.add_argument("--mpiexec", default="mpiexec.mpich")
    p.add_argument("--out", required=True)
    p.add_argument("--mu", type=float, default=20.0, help="mean time between failures, s")
    p.add_argument("--work", type=float, default=60.0, help="useful compute per run, s")
    p.add_argument("--factors", default="0.25,0.5,1,2,4", help="intervals as multiples of tau")
    p.add_argument("--seed", type=int, default=1, help="seed of the failure times")
    p.add_argument("--calibration-steps", type=int, default=400)
    o = p.parse_args()
    os.makedirs(o.out, exist_ok=True)
    factors = [float(f) for f in o.factors.split(",")]

    save_cost, step_s, saves = calibrate(o)
    tau = math.sqrt(2.0 * save_cost * o.mu)
    total_steps = max(100, round(o.work / step_s))
    print("calibration: save cost C = %.4f s (median of %d saves), step %.2f ms" %
          (save_cost, saves, 1e3 * step_s))
    print("Young/Daly: tau = sqrt(2 C mu) = sqrt(2 x %.4f x %.1f) = %.2f s = %d steps; "
          "predicted overhead C/tau + tau/(2 mu) = %.2f %%" %
          (save_cost, o.mu, tau, round(tau / step_s),
           100 * (save_cost / tau + tau / (2 * o.mu))))
    print("each run: %d steps (%.0f s of compute), failures at exponential times of mean %.0f s "
          "(seed %d, the same for every interval)" % (total_steps, o.work, o.mu, o.seed))
    runs = []
    for f in factors:
        runs.append(supervised_run(o, f, tau, save_cost, step_s, total_steps))
    # R: the median relaunch-to-first-step over all runs (one machine, one number)
    latencies = [r["restart_latency_s"] for r in runs if r["restart_latency_s"] is not None]
    restart_s = statistics.median(latencies) if latencies else 0.0
    print("restart R (relaunch -> first step, median over all restarts) = %.2f s" % restart_s)
    print()
    print(" interval   every  fail-  goodput  model   saving  replay  restart  wall")
    print("  x tau     steps  ures     (%)     (%)     (s)     (s)      (s)    (s)")
    for r in runs:
        r["predicted_goodput"] = predict(r, save_cost, o.mu, restart_s)
        print("  %5.2f  %7d %5d   %6.1f  %6.1f  %7.2f %7.2f  %7.2f %6.1f" % (
            r["factor"], r["every_steps"], r["restarts"], 100 * r["goodput"],
            100 * r["predicted_goodput"], r["saving_s"], r["replaying_s"], r["restarting_s"],
            r["wall_s"]))
    best = max(runs, key=lambda r: r["goodput"])
    print()
    print("all %d supervised runs finished, after %d failures in all" % (
        len(runs), sum(r["restarts"] for r in runs)))
    print("best measured goodput at %g x tau (%.1f %%); the model's optimum is 1 x tau" %
          (best["factor"], 100 * best["goodput"]))
    result = {"save_cost_s": save_cost, "step_s": step_s, "mu_s": o.mu, "tau_s": tau,
              "restart_s": restart_s, "total_steps": total_steps, "seed": o.seed, "runs": runs}
    with open(os.path.join(o.out, "interval_study.json"), "w") as f:
        json.dump(result, f, indent=2)
    png = plot(o, runs, tau)
    if png:
        print("plot: %s" % png)


if __name__ == "__main__":
    main()
