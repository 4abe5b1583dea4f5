#!/usr/bin/python3
"""What the default periodic saves cost the README's command, paired against saves at the end only.

The README's first command, `mpiexec.mpich -n 2 build/ringtrain train`, saves by default
(--checkpoint-every auto: the first save measures the cost C, then every tau = sqrt(2 C mu),
mu one day unless given; docs/checkpoints.md). This program runs that command and the same
command with --checkpoint-every 0 (a save at the end only) back to back, alternating which
goes first from round to round, and prints per round the wall time of each launch (mpiexec
started to mpiexec ended: start-up, data, training, evaluations, saves), their ratio, and the
medians. The verdict is the median over rounds of default / end-only.

  /usr/bin/python3 bench/default_saves_overhead.py [--rounds 4] [--ranks 2] [--flags "--epochs 2"]

For the default runs it also prints, from metrics.jsonl, the steps that saved and the plan
(C, mu, tau in seconds and in steps): the interval the default gave for this run. Each run has
its own run directory in a temporary folder, removed afterwards. A benchmark program, not a
test: every figure comes from this invocation.
"""
import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ringtrain", default=os.path.join(ROOT, "build", "ringtrain"))
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--flags", default="", help="more flags for both sides (default: none, the "
                    "README's command as it is)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per launch")
    return ap.parse_args()


def launch(args, extra, folder):
    """One launch into its own run directory; returns (wall seconds, metrics.jsonl records)."""
    run_dir = os.path.join(folder, "run")
    cmd = ([args.mpiexec, "-n", str(args.ranks), args.ringtrain, "train", "--run-dir", run_dir]
           + shlex.split(args.flags) + extra)
    t0 = time.perf_counter()
    with open(os.path.join(folder, "out.log"), "w") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=args.timeout,
                              env=dict(os.environ, MPIEXEC_TIMEOUT=str(int(args.timeout))))
    wall_s = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit("default_saves_overhead: %s exited %d; see %s"
                 % (" ".join(cmd), done.returncode, os.path.join(folder, "out.log")))
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    return wall_s, records


def save_summary(records):
    """The steps that saved (with why) and the last plan, from a default run's metrics.jsonl."""
    saves = ["%d %s%s" % (r["step"], r["reason"], " async" if r.get("async") else "")
             for r in records if "checkpoint_s" in r]
    blocking = sum(r["blocking_s"] for r in records if "checkpoint_s" in r)
    plans = [r["interval_plan"] for r in records if "interval_plan" in r]
    plan = ("C %.4g s, mu %.6g s (%s), tau %.4g s = %d steps of %.4g s"
            % (plans[-1]["cost_s"], plans[-1]["mtbf_s"], plans[-1].get("mtbf_source", "?"),
               plans[-1]["tau_s"], plans[-1]["every_steps"], plans[-1]["step_s"])
            if plans else "no plan (no periodic save)")
    steps = max((r["step"] for r in records if "step" in r), default=0)
    return "saves after steps [%s] of %d, blocking %.3f s in all; plan: %s" % (
        ", ".join(saves), steps, blocking, plan)


def main():
    args = parse_args()
    sides = {"default": [], "end-only": ["--checkpoint-every", "0"]}
    walls = {name: [] for name in sides}
    ratios = []
    print("command: %s -n %d %s train %s   vs   the same + --checkpoint-every 0"
          % (args.mpiexec, args.ranks, args.ringtrain, args.flags))
    print("load average at start: %.2f %.2f %.2f" % os.getloadavg(), flush=True)
    print("%5s  %12s  %12s  %8s" % ("round", "default s", "end-only s", "ratio"))
    summaries = []
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(list(sides)))
        wall = {}
        for name in order:
            folder = tempfile.mkdtemp(prefix="default-saves-")
            try:
                wall[name], records = launch(args, sides[name], folder)
                if name == "default":
                    summaries.append(save_summary(records))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            walls[name].append(wall[name])
        ratios.append(wall["default"] / wall["end-only"])
        print("%5d  %12.2f  %12.2f  %8.4f   (%s first)"
              % (r + 1, wall["default"], wall["end-only"], ratios[-1], order[0]), flush=True)
    med = {name: statistics.median(v) for name, v in walls.items()}
    print("median %12.2f  %12.2f  %8.4f   (median of the per-round ratios)"
          % (med["default"], med["end-only"], statistics.median(ratios)))
    print("ratio of the medians: %.4f" % (med["default"] / med["end-only"]))
    print("load average at end: %.2f %.2f %.2f" % os.getloadavg())
    print("the default runs' saves:")
    for i, s in enumerate(summaries):
        print("  round %d: %s" % (i + 1, s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
