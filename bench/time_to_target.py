#!/usr/bin/python3
"""Time to target: ringtrain at N=2 against PyTorch with the same recipe.

Both train the mlp (784-1024-1024-10, ReLU) on Fashion-MNIST with SGD momentum 0.9, lr 0.05,
batch 128, evaluate on the full test set every --eval-every steps and stop at the first
evaluation with test accuracy >= --target (default 0.88). With --ours-flags
"--validation-fraction F" ringtrain meets the target on its validation split instead; each
run's line says which split (read from the run's manifest). For each seed, one run of each, in
alternating order:

  ours     mpiexec.mpich -n 2 ringtrain train --target-accuracy 0.88 --eval-every 100
           --epochs 30 --seed S --quiet --run-dir <tmp>        (2 ranks x 1 BLAS thread)
  pytorch  /usr/bin/python3 bench/peers/torch_time_to_target.py --threads 2 --seed S
           (1 process x 2 threads)

Both use the machine's two cores, the same OpenBLAS kernels (OPENBLAS_CORETYPE, as
dp_speed.py sets it) and count evaluation in the time to target. The seeds differ in what
they mean (initialisation and data order are each side's own), so steps to target are
compared as distributions: medians and ranges over seeds. Prints one line per run, then:

  steps to target: ours median [min-max], pytorch median [min-max]
  time to target:  ours median, pytorch median, ratio ours / pytorch (target <= 0.7)

  /usr/bin/python3 bench/time_to_target.py [--seeds 0,1,2] [--ours-flags "--zero 1"] [--json FILE]

A benchmark program, not a test: the ratio comes from one invocation.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dp_speed  # noqa: E402  (busy_cores, measured, blas_kernels)

PEER = os.path.join(HERE, "peers", "torch_time_to_target.py")
TARGET_RATIO = 0.7


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ringtrain", default=os.path.join(os.path.dirname(HERE), "build", "ringtrain"))
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--target", type=float, default=0.88)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--ours-flags", default="",
                    help="extra ringtrain train flags that leave the computation bitwise the same "
                         "(e.g. '--zero 1 --overlap off'), recorded in the JSON")
    ap.add_argument("--json", help="write every run and the summary here")
    dp_speed.add_openblas_env_arg(ap)
    args = ap.parse_args()
    args.seeds = [int(s) for s in args.seeds.split(",") if s]
    return args


def run_ours(args, seed):
    run_dir = tempfile.mkdtemp(prefix="ttt-ours-")
    cmd = [args.mpiexec, "-n", "2", args.ringtrain, "train", "--checkpoint-every", "0", "--target-accuracy", str(args.target),
           "--eval-every", str(args.eval_every), "--epochs", "30", "--seed", str(seed),
           "--blas-threads", "1", "--quiet", "--run-dir", run_dir] + args.ours_flags.split()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        if proc.returncode != 0:
            raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), proc.returncode, proc.stderr[-400:]))
        with open(os.path.join(run_dir, "manifest.json")) as f:
            res = json.load(f)["results"]
        # The split the target was met on: validation with --validation-fraction, else test.
        split, key = res.get("split", "test"), res.get("metric", "test_accuracy")
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            evals = [[m["step"], m[key]] for m in map(json.loads, f) if key in m]
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    return {"impl": "ours", "seed": seed, "split": split, "target_reached": res["target_reached"],
            "steps_to_target": res["steps_to_target"] if res["target_reached"] else None,
            "time_to_target_s": res["time_to_target_s"] if res["target_reached"] else None,
            "mean_step_s": res["mean_step_s"], "wall_s": res["wall_s"], "evaluations": evals}


def run_pytorch(args, seed):
    cmd = ["/usr/bin/python3", PEER, "--threads", "2", "--seed", str(seed), "--target",
           str(args.target), "--eval-every", str(args.eval_every)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), proc.returncode, proc.stderr[-400:]))
    return json.loads([l for l in proc.stdout.splitlines() if l.startswith("{")][-1])


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return "none reached the target"
    return "%g [%g-%g]" % (statistics.median(values), min(values), max(values))


def main():
    args = parse_args()
    kernels = dp_speed.blas_kernels(args)
    print("time_to_target: target %.3f, eval every %d steps, seeds %s; ringtrain flags [%s]; %s; "
          "OPENBLAS_CORETYPE=%s, OPENBLAS_THREAD_TIMEOUT=%s for both; load %s" % (
              args.target, args.eval_every, args.seeds, args.ours_flags, kernels,
              os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
              os.environ.get("OPENBLAS_THREAD_TIMEOUT", "(unset)"),
              open("/proc/loadavg").read().split()[:3]), flush=True)
    runs = []
    for k, seed in enumerate(args.seeds):
        order = [run_ours, run_pytorch] if k % 2 == 0 else [run_pytorch, run_ours]
        for fn in order:
            rec, others, wall = dp_speed.measured(lambda: fn(args, seed))
            rec["others_busy_cores"] = others
            runs.append(rec)
            reached = rec["time_to_target_s"] is not None
            print("  seed %d  %-7s steps to target %6s (on %s)  time to target %7s  mean step "
                  "%.2f ms  (others %.2f cores)" % (seed, rec["impl"], rec["steps_to_target"],
                                                    rec.get("split", "test"),
                                                    "%.1f s" % rec["time_to_target_s"] if reached
                                                    else "-", 1e3 * rec["mean_step_s"], others),
                  flush=True)
    by = {impl: [r for r in runs if r["impl"] == impl] for impl in ("ours", "pytorch")}
    steps = {i: [r["steps_to_target"] for r in rs] for i, rs in by.items()}
    ttt = {i: [r["time_to_target_s"] for r in rs if r["time_to_target_s"] is not None]
           for i, rs in by.items()}
    print("steps to target: ours %s, pytorch %s (median [min-max] over seeds)"
          % (spread(steps["ours"]), spread(steps["pytorch"])))
    summary = {"steps_ours": steps["ours"], "steps_pytorch": steps["pytorch"]}
    if ttt["ours"] and ttt["pytorch"]:
        ratio = statistics.median(ttt["ours"]) / statistics.median(ttt["pytorch"])
        summary["time_ratio"] = ratio
        print("time to target: ours %.1f s, pytorch %.1f s (medians): ours / pytorch = %.2f, "
              "target <= %.2f: %s" % (statistics.median(ttt["ours"]), statistics.median(ttt["pytorch"]),
                                     ratio, TARGET_RATIO, "PASS" if ratio <= TARGET_RATIO else "MISS"))
    # Per step, evaluations included (time to target / steps to target): what the ratio would
    # be at equal steps, free of which seed happened to need fewer steps on which side.
    per_step = {i: [r["time_to_target_s"] / r["steps_to_target"] for r in rs
                    if r["time_to_target_s"] is not None] for i, rs in by.items()}
    if per_step["ours"] and per_step["pytorch"]:
        ratio = statistics.median(per_step["ours"]) / statistics.median(per_step["pytorch"])
        summary["per_step_ratio"] = ratio
        print("per step, evaluations included: ours %.2f ms, pytorch %.2f ms (medians): "
              "ours / pytorch = %.2f" % (1e3 * statistics.median(per_step["ours"]),
                                         1e3 * statistics.median(per_step["pytorch"]), ratio))
    # The mean over seeds (ratio of mean times to target): every seed counts, where each median
    # above picks one seed per side, and the seeds do not pair up across the two programs.
    if ttt["ours"] and ttt["pytorch"]:
        means = {i: statistics.fmean(t) for i, t in ttt.items()}
        summary["mean_time_ratio"] = means["ours"] / means["pytorch"]
        print("time to target, mean over seeds: ours %.1f s, pytorch %.1f s: ours / pytorch = %.2f"
              % (means["ours"], means["pytorch"], summary["mean_time_ratio"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "time_to_target", "target": args.target,
                       "ours_flags": args.ours_flags,
                       "eval_every": args.eval_every, "blas_kernels": kernels,
                       "openblas_thread_timeout": os.environ.get("OPENBLAS_THREAD_TIMEOUT"),
                       "runs": runs, "summary": summary}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
