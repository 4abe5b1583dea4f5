#!/usr/bin/python3
"""Lesson 7: the checkpoint interval. Measure the save cost C, inject failures with exponential
inter-arrival times of mean MU under the supervisor, and compare the goodput at tau/4 .. 4 tau
with the Young/Daly optimum tau = sqrt(2 C MU) and with what the model predicts.

  interval_study.py --ringtrain BUILD/ringtrain --out DIR [--mu S] [--work S]
                    [--factors 0.25,0.5,1,2,4] [--seed K] [--mpiexec mpiexec.mpich]
                    [--checkpoint-async off|on|both]

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
5. Asynchronous saves (--checkpoint-async on; "both" runs the study for each mode): C is the
   blocking time of a save (the snapshot) and L the persist latency (snapshot to durable
   commit, median persist_s). A failure in the first L seconds after a snapshot finds that
   save not yet durable and loses a whole interval more, so the expected loss per failure is
   tau/2 + L: overhead C/tau + (tau/2 + L)/MU, still smallest at tau = sqrt(2 C MU), kept
   >= L (one save in flight at a time), and
     wall = (W (1 + C/tau) + startup) / (1 - (tau/2 + L + R) / MU).

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


def train_command(o, run_dir, steps, every, mode):
    return [o.mpiexec, "-n", "2", o.ringtrain, "train", "--steps", str(steps),
            "--checkpoint-every", str(every), "--checkpoint-async", mode, "--no-eval",
            "--log-every", "10", "--quiet", "--run-dir", run_dir]


def calibrate(o, mode):
    """Median blocking time C and persist latency L of the periodic saves, and step time s."""
    run_dir = os.path.join(o.out, "calibrate-" + mode)
    steps = max(200, int(o.calibration_steps))
    subprocess.run(train_command(o, run_dir, steps, 50, mode), check=True,
                   stdout=subprocess.DEVNULL)
    records = read_jsonl(os.path.join(run_dir, "metrics.jsonl"))
    saves = [r for r in records if r.get("reason") == "interval" and "save_failed" not in r]
    steps_s = [r["step_s"] for r in records if "step_s" in r][1:]  # the first window is cold
    latency = statistics.median(r["persist_s"] for r in saves) if mode == "on" else 0.0
    return (statistics.median(r["blocking_s"] for r in saves), latency,
            statistics.median(steps_s), len(saves))


def supervised_run(o, mode, factor, tau, step_s, total_steps):
    every = max(1, round(factor * tau / step_s))
    run_dir = os.path.join(o.out, "%s-tau-x%g" % ("async" if mode == "on" else "sync", factor))
    injector = FailureInjector(run_dir, o.mu, o.seed)
    command = [sys.executable, SUPERVISE, "--max-restarts", "1000", "--quiet", "--"] + \
        train_command(o, run_dir, total_steps, every, mode)
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


def predict(run, save_cost, latency, mu, restart_s):
    """First-order model of the run's goodput (see the docstring)."""
    tau, work = run["tau_s"], run["useful_s"]
    denominator = 1.0 - (tau / 2.0 + latency + restart_s) / mu
    if denominator <= 0:
        return 0.0
    wall = (work * (1.0 + save_cost / tau) + run["startup_s"]) / denominator
    return work / wall


def plot(o, studies):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 5.0))
    for study, color in zip(studies, ("tab:blue", "tab:orange")):
        name = "async" if study["mode"] == "on" else "sync"
        runs = study["runs"]
        x = [r["tau_s"] for r in runs]
        ax.plot(x, [100 * r["goodput"] for r in runs], "o-", color=color,
                label="%s: measured (supervisor)" % name)
        ax.plot(x, [100 * r["predicted_goodput"] for r in runs], "s--", color=color,
                label="%s: first-order model" % name)
        ax.axvline(study["tau_s"], color=color, linestyle=":",
                   label="%s: Young/Daly tau" % name)
    ax.set_xscale("log")
    ax.set_xlabel("checkpoint interval (s of compute)")
    ax.set_ylabel("goodput (%)")
    ax.set_title("mlp N=2, failures every %.0f s on average" % o.mu)
    ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.14))
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
    p.add_argument("--checkpoint-async", choices=("off", "on", "both"), default="both",
                   help="synchronous saves, asynchronous ones, or a study of each")
    o = p.parse_args()
    os.makedirs(o.out, exist_ok=True)
    factors = [float(f) for f in o.factors.split(",")]

    studies = [study(o, mode, factors)
               for mode in (["off", "on"] if o.checkpoint_async == "both" else [o.checkpoint_async])]
    if len(studies) == 2:
        print()
        for st in studies:
            best = max(st["runs"], key=lambda r: r["goodput"])
            print("%-5s C = %.4f s, L = %.4f s, tau = %.2f s: best goodput %.1f %% at %g x tau "
                  "(model %.1f %% there)" % (
                      "async" if st["mode"] == "on" else "sync", st["save_cost_s"],
                      st["latency_s"], st["tau_s"], 100 * best["goodput"], best["factor"],
                      100 * best["predicted_goodput"]))
    with open(os.path.join(o.out, "interval_study.json"), "w") as f:
        json.dump({"mu_s": o.mu, "seed": o.seed, "studies": studies}, f, indent=2)
    png = plot(o, studies)
    if png:
        print("plot: %s" % png)


def study(o, mode, factors):
    """Calibration and the supervised runs at each factor of tau, for one --checkpoint-async."""
    save_cost, latency, step_s, saves = calibrate(o, mode)
    tau = max(math.sqrt(2.0 * save_cost * o.mu), latency)
    total_steps = max(100, round(o.work / step_s))
    print("\n--checkpoint-async %s" % mode)
    print("calibration: save blocks C = %.4f s (median of %d saves), persist latency L = %.4f s, "
          "step %.2f ms" % (save_cost, saves, latency, 1e3 * step_s))
    print("Young/Daly: tau = max(sqrt(2 C mu), L) = max(sqrt(2 x %.4f x %.1f), %.4f) = %.2f s = "
          "%d steps; predicted overhead C/tau + (tau/2 + L)/mu = %.2f %%" %
          (save_cost, o.mu, latency, tau, round(tau / step_s),
           100 * (save_cost / tau + (tau / 2 + latency) / o.mu)))
    print("each run: %d steps (%.0f s of compute), failures at exponential times of mean %.0f s "
          "(seed %d, the same for every interval)" % (total_steps, o.work, o.mu, o.seed))
    runs = [supervised_run(o, mode, f, tau, step_s, total_steps) for f in factors]
    # R: the median relaunch-to-first-step over all runs (one machine, one number)
    latencies = [r["restart_latency_s"] for r in runs if r["restart_latency_s"] is not None]
    restart_s = statistics.median(latencies) if latencies else 0.0
    print("restart R (relaunch -> first step, median over all restarts) = %.2f s" % restart_s)
    print()
    print(" interval   every  fail-  goodput  model   saving  replay  restart  wall")
    print("  x tau     steps  ures     (%)     (%)     (s)     (s)      (s)    (s)")
    for r in runs:
        r["predicted_goodput"] = predict(r, save_cost, latency, o.mu, restart_s)
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
    return {"mode": mode, "save_cost_s": save_cost, "latency_s": latency, "step_s": step_s,
            "tau_s": tau, "restart_s": restart_s, "total_steps": total_steps, "runs": runs}


if __name__ == "__main__":
    main()
