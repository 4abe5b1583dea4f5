#!/usr/bin/python3
"""A/B of two ringtrain builds on the same training run, paired round by round.

This VM's speed drifts by up to 50 % within minutes, so two builds timed minutes apart say
little. Each round here runs build A and build B back to back (A first in odd rounds, B first
in even ones) on the same command, and the verdict is the median over rounds of the per-round
ratio B / A:

  mpiexec.mpich -n N BUILD train --no-eval --quiet --blas-threads 1 --global-batch 128
      --lr 0.01 --run-dir <tmp> FLAGS...

Per run: the median over metrics.jsonl windows (the first, cold one left out) of samples/s,
compute_s and comm_s of rank 0.

  /usr/bin/python3 bench/ab_train.py --a OLD/ringtrain --b build/ringtrain [--rounds 10]
      [--ranks 2] [--flags "--model mlp --steps 400 --log-every 50 --zero 1 --overlap off"]
      [--a-flags "--gemm openblas" --b-flags "--gemm own"]

--spans also records trace.json for every step and compares, span by span (forward and
backward of each layer, optimizer, waits), rank 0's main-thread time per step: a change to
one layer's kernels shows there even when the whole step's samples/s drowns it in drift.
--eval-every K evaluates on the test set every K steps instead of --no-eval; with --spans
the "evaluation" row is then one evaluation's time divided by K (ms per step).

--a-flags and --b-flags are added to one side's command only: with --a and --b the same
build, they compare two settings of one build. Copy build A somewhere first (OLD=$(mktemp -d); cp build/ringtrain "$OLD"/) before rebuilding B.
A benchmark program, not a test: every figure comes from this invocation.
"""
import argparse
import collections
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dp_speed  # noqa: E402  (run_ringtrain: one bounded job, its metrics.jsonl records)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="ringtrain executable A (the reference)")
    ap.add_argument("--b", required=True, help="ringtrain executable B (the candidate)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--flags", default="--model mlp --steps 400 --log-every 50")
    ap.add_argument("--a-flags", default="", help="flags for A's runs only")
    ap.add_argument("--b-flags", default="", help="flags for B's runs only")
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--eval-every", type=int, default=0,
                    help="evaluate every K steps (default: --no-eval)")
    ap.add_argument("--spans", action="store_true",
                    help="compare trace.json spans (rank 0, main thread, per step) too")
    dp_speed.add_openblas_env_arg(ap)
    args = ap.parse_args()
    for name in (args.a, args.b):
        if not os.access(name, os.X_OK):
            ap.error("%s is not an executable file" % name)
    if args.rounds < 1 or args.ranks < 1 or args.eval_every < 0:
        ap.error("--rounds and --ranks must be >= 1, --eval-every >= 0")
    return args


def run(args, build, side_flags, run_dir):
    evaluation = ["--eval-every", str(args.eval_every)] if args.eval_every else ["--no-eval"]
    command = [args.mpiexec, "-n", str(args.ranks), build, "train", "--checkpoint-every", "0"] + evaluation + [
               "--quiet", "--blas-threads", "1", "--global-batch", "128", "--lr", "0.01",
               "--run-dir", run_dir] + shlex.split(args.flags) + shlex.split(side_flags)
    if args.spans:
        command += ["--trace-steps", "10000"]  # every step of a run (the option's largest)
    try:
        _, records = dp_speed.run_ringtrain(args, command, run_dir)
    except (RuntimeError, OSError) as error:
        sys.exit("ab_train: %s" % error)
    windows = [w for w in records if "samples_per_s" in w][1:]
    if not windows:
        sys.exit("ab_train: %s logged fewer than two windows; raise --steps or lower "
                 "--log-every" % build)
    result = {key: statistics.median(w.get(key, 0.0) for w in windows)
              for key in ("samples_per_s", "compute_s", "comm_s")}
    if args.spans:
        result["spans"] = span_times(os.path.join(run_dir, "trace.json"))
    return result


def span_times(path):
    """Seconds per step of each span name on rank 0's main thread (pid 0, tid 0)."""
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    total = collections.defaultdict(float)
    steps = set()
    for e in events:
        if e.get("ph") == "X" and e.get("pid") == 0 and e.get("tid") == 0:
            total[e["name"]] += e["dur"] * 1e-6
            if "step" in e.get("args", {}):
                steps.add(e["args"]["step"])
    n = max(len(steps), 1)
    return {name: t / n for name, t in total.items()}


def main():
    args = parse_args()
    dp_speed.unpin_openblas_env(args)
    print("ab_train: A %s %s, B %s %s, N=%d, flags %s"
          % (args.a, args.a_flags, args.b, args.b_flags, args.ranks, args.flags))
    ratios = {"samples_per_s": [], "compute_s": [], "comm_s": []}
    spans = {"A": collections.defaultdict(list), "B": collections.defaultdict(list)}
    rates = {"A": [], "B": []}
    work = tempfile.mkdtemp(prefix="ab_train-")
    try:
        for r in range(1, args.rounds + 1):
            result = {}
            for side in ("A", "B") if r % 2 else ("B", "A"):
                run_dir = os.path.join(work, "%s-%d" % (side, r))
                result[side] = run(args, args.a if side == "A" else args.b,
                                   args.a_flags if side == "A" else args.b_flags, run_dir)
                shutil.rmtree(run_dir, ignore_errors=True)
                m = result[side]
                print("  round %2d %s  %8.0f samples/s  compute %6.2f ms  comm %6.2f ms"
                      % (r, side, m["samples_per_s"], m["compute_s"] * 1e3, m["comm_s"] * 1e3),
                      flush=True)
            for key in ratios:
                if result["A"][key] > 0:
                    ratios[key].append(result["B"][key] / result["A"][key])
            for side in rates:
                rates[side].append(result[side]["samples_per_s"])
                for name, t in result[side].get("spans", {}).items():
                    spans[side][name].append(t)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("samples/s: A %.0f, B %.0f (medians over rounds)"
          % (statistics.median(rates["A"]), statistics.median(rates["B"])))
    for key, label in (("samples_per_s", "samples/s"), ("compute_s", "compute"),
                       ("comm_s", "comm")):
        values = sorted(ratios[key])
        if values:
            print("B / A %-9s median %.3f  per round %s"
                  % (label, statistics.median(values), " ".join("%.2f" % v for v in values)))
    if args.spans:
        print("spans, rank 0 main thread, ms per step (median over rounds), largest first:")
        # Names of one side only (two settings with different steps, e.g. --reduction
        # exact against sum-scaled) are listed too, with "-" for the other side.
        def ms(side, name):
            return statistics.median(spans[side][name]) * 1e3 if name in spans[side] else None
        names = sorted(set(spans["A"]) | set(spans["B"]),
                       key=lambda k: -max(ms("A", k) or 0.0, ms("B", k) or 0.0))
        for name in names:
            a, b = ms("A", name), ms("B", name)
            if max(a or 0.0, b or 0.0) < 1e-2:
                continue
            ratio = "B/A %.2f" % (b / a) if a and b else ""
            print("  %-36s A %7s  B %7s  %s" % (name[:36], "-" if a is None else "%.3f" % a,
                                                "-" if b is None else "%.3f" % b, ratio))


if __name__ == "__main__":
    main()
