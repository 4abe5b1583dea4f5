#!/usr/bin/python3
"""Scaling study: time to target = steps to target x time per step, for several N.

  weak    fixed local batch b: N ranks train global batch N*b, a different optimization
          (with --lr-scaling linear|sqrt and --warmup-steps, Goyal et al.)
  strong  fixed global batch B split over N ranks: the same optimization, faster steps

For every N of --ns and every seed of --seeds it runs

  mpiexec.mpich -n N ringtrain train --model M --global-batch B --lr LR --lr-scaling S
      --warmup-steps W --target-accuracy A --eval-every K --epochs E --seed s --run-dir DIR

and keeps the run directories. It writes, in --out:

  runs.csv      one row per run: mode, N, global and local batch, base and applied learning
                rate, seed, target reached, steps to target, mean step time, time to target,
                samples/s, efficiency
  summary.csv   one row per N: medians over seeds and [min, max] of steps, step time and
                time to target; efficiency of the medians
  *.png         accuracy against steps and against wall time (one line per run),
                time-to-target bars, step time and steps to target against N

Efficiency: weak: samples/s(N) / (N * samples/s(N_min)); strong: step time(N_min) /
(N/N_min * step time(N)); for time to target: TTT(N_min) / (N/N_min * TTT(N)).
On this 2-core machine N > 2 is oversubscribed: its step times measure time sharing.

  /usr/bin/python3 tools/scaling_study.py --mode weak --ns 1,2,4 --local-batch 64 \\
      --lr-scaling linear --seeds 0,1,2 --out runs/weak
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["weak", "strong"], required=True)
    ap.add_argument("--ns", default="1,2,4", help="comma-separated world sizes")
    ap.add_argument("--local-batch", type=int, default=64, help="weak: samples per rank")
    ap.add_argument("--global-batch", type=int, default=128, help="strong: samples per step")
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--lr", type=float, default=0.05, help="learning rate for global batch 128")
    ap.add_argument("--lr-scaling", default="none", choices=["none", "linear", "sqrt"])
    ap.add_argument("--warmup-steps", type=int, default=0)
    ap.add_argument("--target", type=float, default=0.88)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--epochs", type=float, default=30, help="budget: a run stops here at the latest")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--extra", default="", help="more ringtrain train flags, space-separated")
    ap.add_argument("--ringtrain", default=os.path.join(ROOT, "build", "ringtrain"))
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--out", required=True, help="folder for runs/, the CSVs and the plots")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    args = ap.parse_args()
    args.ns = [int(n) for n in args.ns.split(",") if n]
    args.seeds = [int(s) for s in args.seeds.split(",") if s]
    if not args.ns or min(args.ns) < 1 or not args.seeds:
        ap.error("--ns needs world sizes >= 1 and --seeds at least one seed")
    if args.mode == "strong" and any(args.global_batch < n for n in args.ns):
        ap.error("strong scaling: --global-batch %d is smaller than some N" % args.global_batch)
    if not os.access(args.ringtrain, os.X_OK):
        ap.error("no ringtrain executable at %s (build it, or pass --ringtrain)" % args.ringtrain)
    return args


def global_batch(args, n):
    return args.local_batch * n if args.mode == "weak" else args.global_batch


def run_one(args, n, seed):
    """Trains one configuration (or reuses a finished run directory); returns its record."""
    name = "n%d-b%d-seed%d" % (n, global_batch(args, n), seed)
    run_dir = os.path.join(args.out, "runs", name)
    manifest_path = os.path.join(run_dir, "manifest.json")
    done = os.path.exists(manifest_path) and json.load(open(manifest_path))["results"]["steps"] > 0
    if not done:
        cmd = [args.mpiexec, "-n", str(n), args.ringtrain, "train", "--checkpoint-every", "0", "--model", args.model,
               "--global-batch", str(global_batch(args, n)), "--lr", str(args.lr),
               "--lr-scaling", args.lr_scaling, "--warmup-steps", str(args.warmup_steps),
               "--target-accuracy", str(args.target), "--eval-every", str(args.eval_every),
               "--epochs", str(args.epochs), "--seed", str(seed), "--quiet",
               "--run-dir", run_dir] + args.extra.split()
        print("  " + " ".join(cmd), flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        if proc.returncode != 0:
            sys.exit("scaling_study: run %s failed (exit %d): %s"
                     % (name, proc.returncode, proc.stderr.strip()[-500:]))
    manifest = json.load(open(manifest_path))
    res = manifest["results"]
    # The split the target was met on: validation with --validation-fraction (--extra), else test.
    split, key = res.get("split", "test"), res.get("metric", "test_accuracy")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        evals = [m for m in map(json.loads, f) if key in m]
    return {"mode": args.mode, "n": n, "global_batch": global_batch(args, n),
            "local_batches": "+".join(str(b) for b in manifest["local_batches"]),
            "base_lr": args.lr, "lr": manifest["config"].get("lr"),
            "applied_lr": manifest.get("learning_rate_schedule", ""), "seed": seed,
            "target_reached": res["target_reached"],
            "steps_to_target": res["steps_to_target"] if res["target_reached"] else None,
            "mean_step_s": res["mean_step_s"], "samples_per_s": res["samples_per_s"],
            "time_to_target_s": res["time_to_target_s"] if res["target_reached"] else None,
            "split": split,
            "run_dir": run_dir, "evaluations": [(m["step"], m["wall_s"], m[key]) for m in evals]}


def median_range(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None, None
    return statistics.median(values), min(values), max(values)


def summarize(args, runs):
    rows = []
    for n in args.ns:
        mine = [r for r in runs if r["n"] == n]
        steps = median_range([r["steps_to_target"] for r in mine])
        step_s = median_range([r["mean_step_s"] for r in mine])
        ttt = median_range([r["time_to_target_s"] for r in mine])
        rate = median_range([r["samples_per_s"] for r in mine])
        rows.append({"mode": args.mode, "n": n, "global_batch": global_batch(args, n),
                     "seeds": len(mine), "reached": sum(r["target_reached"] for r in mine),
                     "steps_to_target_median": steps[0], "steps_min": steps[1], "steps_max": steps[2],
                     "mean_step_s_median": step_s[0], "step_s_min": step_s[1], "step_s_max": step_s[2],
                     "time_to_target_s_median": ttt[0], "ttt_min": ttt[1], "ttt_max": ttt[2],
                     "samples_per_s_median": rate[0]})
    base = rows[0]
    for row in rows:
        k = row["n"] / base["n"]
        if args.mode == "weak":
            row["efficiency"] = row["samples_per_s_median"] / (k * base["samples_per_s_median"])
        else:
            row["efficiency"] = base["mean_step_s_median"] / (k * row["mean_step_s_median"])
        both = row["time_to_target_s_median"] and base["time_to_target_s_median"]
        row["ttt_efficiency"] = base["time_to_target_s_median"] / (k * row["time_to_target_s_median"]) if both else None
    return rows


def write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: ("%.6g" % v if isinstance(v, float) else v) for k, v in row.items()})


def plot(args, runs, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for r in runs:
        c = colors[args.ns.index(r["n"]) % len(colors)]
        label = "N=%d, B=%d" % (r["n"], r["global_batch"]) if r["seed"] == args.seeds[0] else None
        steps, walls, accs = zip(*r["evaluations"]) if r["evaluations"] else ((), (), ())
        by_step.plot(steps, accs, color=c, alpha=0.8, label=label)
        by_time.plot(walls, accs, color=c, alpha=0.8, label=label)
    for ax, xlabel in ((by_step, "step"), (by_time, "wall time (s)")):
        ax.axhline(args.target, color="k", lw=0.8, ls="--")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test accuracy")
        ax.set_ylim(max(0.6, args.target - 0.15), min(1.0, args.target + 0.05))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("%s scaling, %s: accuracy against steps and wall time (one line per seed)" % (args.mode, args.model))
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "accuracy.png"), dpi=110)

    fig, (bars, step_ax, steps_ax) = plt.subplots(1, 3, figsize=(14, 4))
    labels = ["N=%d\nB=%d" % (r["n"], r["global_batch"]) for r in rows]
    med = [r["time_to_target_s_median"] or 0 for r in rows]
    err = [[(r["time_to_target_s_median"] or 0) - (r["ttt_min"] or 0) for r in rows],
           [(r["ttt_max"] or 0) - (r["time_to_target_s_median"] or 0) for r in rows]]
    bars.bar(labels, med, yerr=err, capsize=4, color=colors[0])
    bars.set_ylabel("time to target (s), median and range")
    ns = [r["n"] for r in rows]
    step_ax.plot(ns, [1e3 * r["mean_step_s_median"] for r in rows], "o-")
    step_ax.set_xlabel("N")
    step_ax.set_ylabel("mean step time (ms)")
    steps_ax.plot(ns, [r["steps_to_target_median"] or float("nan") for r in rows], "o-", color=colors[1])
    steps_ax.set_xlabel("N")
    steps_ax.set_ylabel("steps to target (median)")
    for ax in (step_ax, steps_ax):
        ax.set_xticks(ns)
        ax.grid(alpha=0.3)
    fig.suptitle("%s scaling: time to target = steps to target x time per step" % args.mode)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "time_to_target.png"), dpi=110)


def main():
    args = parse_args()
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    print("scaling_study: %s scaling of %s over N = %s, seeds %s, target %.3f (load %s)"
          % (args.mode, args.model, args.ns, args.seeds, args.target,
             open("/proc/loadavg").read().split()[:3]), flush=True)
    runs = []
    for seed in args.seeds:
        for n in args.ns:
            r = run_one(args, n, seed)
            runs.append(r)
            ttt = r["time_to_target_s"]
            print("  N=%d B=%d seed %d: steps to target %s (on the %s split), step %.2f ms, "
                  "time to target %s" % (n, r["global_batch"], seed, r["steps_to_target"],
                                         r["split"], 1e3 * r["mean_step_s"],
                                         "not reached" if ttt is None else "%.1f s" % ttt),
                  flush=True)
    rows = summarize(args, runs)
    write_csv(os.path.join(args.out, "runs.csv"), runs,
              ["mode", "n", "global_batch", "local_batches", "base_lr", "applied_lr", "seed",
               "target_reached", "steps_to_target", "mean_step_s", "time_to_target_s",
               "samples_per_s", "run_dir"])
    write_csv(os.path.join(args.out, "summary.csv"), rows, list(rows[0].keys()))
    print("%4s %6s %18s %16s %18s %11s %10s %8s" % ("N", "B", "steps [range]", "step ms",
                                                    "TTT s [range]", "samples/s", "efficiency", "TTT eff"))
    for r in rows:
        fmt_range = lambda m, lo, hi, f: "-" if m is None else (f % m) + " [" + (f % lo) + "-" + (f % hi) + "]"
        print("%4d %6d %18s %16s %18s %11.0f %10.2f %8s" % (
            r["n"], r["global_batch"],
            fmt_range(r["steps_to_target_median"], r["steps_min"], r["steps_max"], "%g"),
            "%.2f" % (1e3 * r["mean_step_s_median"]),
            fmt_range(r["time_to_target_s_median"], r["ttt_min"], r["ttt_max"], "%.1f"),
            r["samples_per_s_median"], r["efficiency"],
            "-" if r["ttt_efficiency"] is None else "%.2f" % r["ttt_efficiency"]))
    if not args.no_plots:
        plot(args, runs, rows)
        print("plots: %s/accuracy.png, %s/time_to_target.png" % (args.out, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
