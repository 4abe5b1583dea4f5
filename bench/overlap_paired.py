#!/usr/bin/python3
"""What overlap buys, paired step by step: step time with overlap on against off.

Two runs timed seconds apart compare two machines on this VM, whose speed drifts by a third
within minutes. Here one run alternates: `--overlap alternate` starts the rings during
backward in even steps and after it in odd ones (the same buckets and sums, so the update is
bitwise the same: tests/train/overlap_test.cpp). Each metrics window of W steps then holds
W/2 steps of each mode, a few milliseconds apart, and reports their mean step times
(step_s_overlap_on, step_s_overlap_off). The verdict is the median over windows of the ratio
on / off of the ranks' mean step times; windows are counted after the first (cold) one.
Why the mean over ranks: a rank's step ends after its own update, so where one step ends and
the next begins differs a little between ranks, and a rank's split between the two modes with
it (every rank's on + off is the same wall time). Rank 0's ratio and the largest over the
ranks are printed beside it. Where the difference went: rank 0's
backward (which holds the polls, so the copies a ring makes during backward) and exposed
wait, each a median over windows of on minus off, and exposed / comm of the overlapped steps
(rank 0, and the most exposed rank).

  mpiexec.mpich -n N ringtrain train --model M --steps S --log-every W --overlap alternate
      --no-eval --quiet --blas-threads 1 --global-batch 128 --lr 0.01 --run-dir <tmp> FLAGS

  /usr/bin/python3 bench/overlap_paired.py [--model cnn] [--ranks 2] [--runs 3]
      [--steps 400] [--window 20] [--flags "--bucket-bytes 1048576"]

What it cannot see: an effect that lasts longer than a step (a mode that heats the caches
for the next step helps both). Benchmarks are programs, not timed tests: every figure comes
from this invocation.
"""
import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import dp_speed  # noqa: E402  (run_ringtrain, busy_cores, the OpenBLAS environment rule)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--window", type=int, default=20, help="--log-every: an even step count")
    ap.add_argument("--flags", default="", help="more ringtrain flags for every run")
    ap.add_argument("--ringtrain", default=os.path.join(ROOT, "build", "ringtrain"))
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--timeout", type=float, default=600.0)
    dp_speed.add_openblas_env_arg(ap)
    args = ap.parse_args()
    if args.window < 2 or args.window % 2:
        ap.error("--window %d: give an even number of steps (half of them per mode)" % args.window)
    if args.steps < 2 * args.window:
        ap.error("--steps %d: give at least two windows (2 x --window %d); the first is left out"
                 % (args.steps, args.window))
    if args.runs < 1 or args.ranks < 1:
        ap.error("--runs and --ranks must be at least 1")
    if not os.access(args.ringtrain, os.X_OK):
        ap.error("%s is not an executable file: build first (cmake --build build)"
                 % args.ringtrain)
    return args


def run_once(args):
    """One alternating run; returns its warm windows (metrics.jsonl records with both modes)."""
    run_dir = tempfile.mkdtemp(prefix="overlap-paired-%s-n%d-" % (args.model, args.ranks))
    cmd = [args.mpiexec, "-n", str(args.ranks), args.ringtrain, "train", "--checkpoint-every", "0", "--model", args.model,
           "--steps", str(args.steps), "--log-every", str(args.window), "--overlap", "alternate",
           "--no-eval", "--quiet", "--blas-threads", "1", "--global-batch", "128", "--lr", "0.01",
           "--trace-steps", "0", "--run-dir", run_dir] + args.flags.split()
    try:
        _, records = dp_speed.run_ringtrain(args, cmd, run_dir)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    windows = [w for w in records if "step_s_overlap_on" in w][1:]
    if not windows:
        raise RuntimeError("%s: no warm window with both modes' step times" % " ".join(cmd))
    return windows


def figures(windows):
    """Per window: on/off of the ranks' mean step times, rank 0's and the largest over ranks,
    the mean step times, on minus off of rank 0's backward and exposed wait, exposed / comm
    with overlap (rank 0 and the largest over ranks)."""
    out = []
    for w in windows:
        pr = w["per_rank"]
        on = statistics.mean(pr["step_s_overlap_on"])
        off = statistics.mean(pr["step_s_overlap_off"])
        out.append({
            "ratio": on / off,
            "rank0": w["step_s_overlap_on"] / w["step_s_overlap_off"],
            "worst": max(on / off for on, off in zip(pr["step_s_overlap_on"],
                                                      pr["step_s_overlap_off"])),
            "on": on, "off": off,
            "d_backward": w["backward_s_overlap_on"] - w["backward_s_overlap_off"],
            "d_exposed": w["exposed_s_overlap_on"] - w["exposed_s_overlap_off"],
            "share": w["exposed_s_overlap_on"] / w["comm_s_overlap_on"],
            "share_worst": max(e / c for e, c in zip(pr["exposed_s_overlap_on"],
                                                     pr["comm_s_overlap_on"])),
        })
    return out


def med(rows, key):
    return statistics.median(r[key] for r in rows)


def main():
    args = parse_args()
    dp_speed.unpin_openblas_env(args)
    print("overlap_paired: %s UTC, %d cores, load %s, %s, %s N=%d, %d runs of %d steps, "
          "windows of %d steps, flags '%s'" % (
              datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M:%S"), os.cpu_count(),
              dp_speed.load1(), args.ringtrain, args.model, args.ranks, args.runs, args.steps,
              args.window, args.flags))
    rows = []
    for r in range(1, args.runs + 1):
        run = figures(run_once(args))
        rows += run
        ratios = [x["ratio"] for x in run]
        print("  run %d: %2d windows, step on %6.2f ms off %6.2f ms (medians), on/off median "
              "%.3f [%.3f-%.3f], on shorter in %d of %d; backward %+.2f ms, exposed %+.2f ms" % (
                  r, len(run), 1e3 * med(run, "on"), 1e3 * med(run, "off"), med(run, "ratio"),
                  min(ratios), max(ratios), sum(x < 1.0 for x in ratios), len(ratios),
                  1e3 * med(run, "d_backward"), 1e3 * med(run, "d_exposed")))
    ratios = [x["ratio"] for x in rows]
    quart = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    print("%s N=%d: step with overlap / step without (means over ranks), median over %d windows: "
          "%.3f (quartiles %.3f-%.3f); overlap shorter in %d of %d windows; rank 0 %.3f, most "
          "slowed rank %.3f; step on %.2f ms, off %.2f ms (medians)" % (
              args.model, args.ranks, len(ratios), statistics.median(ratios), quart[0],
              quart[2], sum(x < 1.0 for x in ratios), len(ratios), med(rows, "rank0"),
              med(rows, "worst"), 1e3 * med(rows, "on"), 1e3 * med(rows, "off")))
    print("where it went (rank 0, on minus off, medians): backward %+.2f ms (its polls run the "
          "rings' copies), exposed wait %+.2f ms; exposed / comm with overlap %.0f %% (most "
          "exposed rank %.0f %%)" % (
              1e3 * med(rows, "d_backward"), 1e3 * med(rows, "d_exposed"),
              100 * med(rows, "share"), 100 * med(rows, "share_worst")))
    print("load at end %s" % dp_speed.load1())


if __name__ == "__main__":
    main()
