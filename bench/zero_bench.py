#!/usr/bin/python3
"""ZeRO-1 benchmark: ringtrain --zero 0 against --zero 1, AdamW, on mlp and cnn at
N = 2 and N = 4 ranks x 1 BLAS thread, global batch 128, in one invocation.

Each round runs, for every (model, N), both contenders back to back, in an order that
alternates from round to round so machine noise falls on both alike:

  mpiexec.mpich -n N ringtrain train --model M --optimizer adamw --lr 0.001 --steps S
      --no-eval --quiet --blas-threads 1 --global-batch 128 --log-every S/6 --zero Z

Figures, per run:
  step time      median of step_s over the steady metrics.jsonl windows (the first window,
                 with the cold first steps, is left out); rank 0's view
  peak RSS       peak_rss_bytes of the last metrics window (VmHWM of every rank, before the
                 end-of-run checkpoint, whose gather of the full optimizer state is not
                 training memory); the largest rank's value is compared
  state bytes    manifest.json optimizer_state.bytes_per_rank (exact, not measured)

Printed: medians over rounds, ratios zero1/zero0, and the targets (bench/README-zero.md) with PASS/MISS:
  - optimizer-state bytes per rank within one chunk of 1/N of --zero 0's: the largest
    rank's bytes minus unsharded/N must be at most one element per bucket and state tensor
    (far less than one chunk);
  - step time at N = 2 no worse than --zero 0 (ratio of medians <= 1.00).
N = 4 runs oversubscribe the 2 cores: its step times are reported, not judged.

  /usr/bin/python3 bench/zero_bench.py [--models mlp,cnn] [--ranks 2,4] [--rounds 3]
                                       [--json FILE]
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dp_speed  # noqa: E402  (run_ringtrain: one bounded run, its manifest and metrics)

ROOT = os.path.dirname(HERE)
DEFAULT_STEPS = {"mlp": 240, "cnn": 36}
LOG_WINDOWS = 6


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ringtrain", default=os.path.join(ROOT, "build", "ringtrain"))
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds per single run")
    ap.add_argument("--json", default="", help="write all measurements and the summary here")
    args = ap.parse_args()
    args.models = [m for m in args.models.split(",") if m]
    for m in args.models:
        if m not in DEFAULT_STEPS:
            ap.error("unknown model %r (mlp, cnn)" % m)
    args.ranks = [int(n) for n in args.ranks.split(",") if n]
    if args.rounds < 1 or any(n < 1 for n in args.ranks):
        ap.error("--rounds and --ranks must be >= 1")
    if not os.access(args.ringtrain, os.X_OK):
        ap.error("no ringtrain executable at %s (build it or pass --ringtrain)" % args.ringtrain)
    return args


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def run(args, model, ranks, zero):
    steps = DEFAULT_STEPS[model]
    log_every = max(1, steps // LOG_WINDOWS)
    run_dir = tempfile.mkdtemp(prefix="zero_bench-%s-n%d-z%d-" % (model, ranks, zero))
    cmd = [args.mpiexec, "-n", str(ranks), args.ringtrain, "train", "--checkpoint-every", "0", "--model", model,
           "--optimizer", "adamw", "--lr", "0.001", "--steps", str(steps), "--no-eval",
           "--quiet", "--blas-threads", "1", "--global-batch", "128",
           "--log-every", str(log_every), "--trace-steps", "0", "--zero", str(zero),
           "--run-dir", run_dir]
    try:
        manifest, windows = dp_speed.run_ringtrain(args, cmd, run_dir)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    windows = [w for w in windows if "step_s" in w]
    state = manifest["optimizer_state"]
    return {
        "step_s": statistics.median(w["step_s"] for w in windows[1:]),
        "exposed_s": statistics.median(w["exposed_s"] for w in windows[1:]),
        "optimizer_s": statistics.median(w["optimizer_s"] for w in windows[1:]),
        "peak_rss_bytes": windows[-1]["peak_rss_bytes"],
        "state_bytes": state["bytes_per_rank"],
        "unsharded_bytes": state["unsharded_bytes"],
        "buckets": manifest["gradient_buckets"]["count"],
        "parameters": manifest["parameters"],
        "steps": steps,
        "windows": len(windows),
    }


def main():
    args = parse_args()
    started = datetime.datetime.now().astimezone()
    load_start = loadavg()
    print("zero_bench: %s, %d cores, load %s at start, %s" % (
        started.strftime("%Y-%m-%d %H:%M:%S %Z"), os.cpu_count(), " ".join(load_start),
        args.ringtrain), flush=True)
    runs = []
    for rnd in range(args.rounds):
        for model in args.models:
            for ranks in args.ranks:
                order = [0, 1] if rnd % 2 == 0 else [1, 0]
                for zero in order:
                    rec = run(args, model, ranks, zero)
                    rec.update({"round": rnd + 1, "model": model, "ranks": ranks, "zero": zero})
                    runs.append(rec)
                    print("  round %d  %-3s N=%d  --zero %d  step %7.2f ms  (optimizer %.2f ms,"
                          " exposed %.2f ms)  peak RSS max %.1f MiB  state %s B/rank" % (
                              rnd + 1, model, ranks, zero, rec["step_s"] * 1e3,
                              rec["optimizer_s"] * 1e3, rec["exposed_s"] * 1e3,
                              max(rec["peak_rss_bytes"]) / 2**20,
                              "/".join(str(b) for b in rec["state_bytes"])), flush=True)

    summary = []
    print()
    print("%-4s %2s  %11s %11s %7s  %11s %11s %10s  %12s %12s  %s" % (
        "model", "N", "step z0 ms", "step z1 ms", "ratio", "RSS z0 MiB", "RSS z1 MiB",
        "saved MiB", "state z0 B", "state z1 B", "verdicts"))
    for model in args.models:
        for ranks in args.ranks:
            def pick(zero):
                return [r for r in runs if r["model"] == model and r["ranks"] == ranks
                        and r["zero"] == zero]
            z0, z1 = pick(0), pick(1)
            step0 = statistics.median(r["step_s"] for r in z0)
            step1 = statistics.median(r["step_s"] for r in z1)
            rss0 = statistics.median(max(r["peak_rss_bytes"]) for r in z0)
            rss1 = statistics.median(max(r["peak_rss_bytes"]) for r in z1)
            state0, state1 = max(z0[0]["state_bytes"]), max(z1[0]["state_bytes"])
            unsharded = z1[0]["unsharded_bytes"]
            slack = 2 * z1[0]["buckets"] * 4  # one float per bucket and AdamW state tensor
            state_ok = state0 == unsharded and state1 - unsharded / ranks <= slack
            per_round = [a["step_s"] / b["step_s"] for a in z1 for b in z0
                         if a["round"] == b["round"]]
            s = {"model": model, "ranks": ranks, "step_s_zero0": step0, "step_s_zero1": step1,
                 "step_ratio": step1 / step0, "step_ratio_per_round": per_round,
                 "peak_rss_max_zero0": rss0, "peak_rss_max_zero1": rss1,
                 "peak_rss_saved_bytes": rss0 - rss1, "state_bytes_zero0": state0,
                 "state_bytes_zero1": state1, "state_ratio": state1 / state0,
                 "state_bytes_ideal": unsharded / ranks, "state_slack_bytes": slack,
                 "verdict_state": "PASS" if state_ok else "MISS"}
            verdicts = "state %s (%.4f of z0, 1/N = %.4f)" % (s["verdict_state"],
                                                              s["state_ratio"], 1 / ranks)
            if ranks == 2:
                s["verdict_step"] = "PASS" if s["step_ratio"] <= 1.0 else "MISS"
                verdicts += "; step %s" % s["verdict_step"]
            summary.append(s)
            print("%-4s %2d  %11.2f %11.2f %7.3f  %11.1f %11.1f %10.1f  %12d %12d  %s" % (
                model, ranks, step0 * 1e3, step1 * 1e3, s["step_ratio"], rss0 / 2**20,
                rss1 / 2**20, (rss0 - rss1) / 2**20, state0, state1, verdicts))
            print("       step ratio per round: %s" % " ".join("%.3f" % x for x in per_round))
    load_end = loadavg()
    print("zero_bench: load %s at start, %s at end" % (" ".join(load_start), " ".join(load_end)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"started": started.isoformat(), "load_start": load_start,
                       "load_end": load_end, "runs": runs, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
