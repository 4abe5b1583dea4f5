#!/usr/bin/python3
"""Blocking time per checkpoint save at the Young/Daly interval, as a share of step time.

For each model, one training run at N ranks saves every --every steps:

  mpiexec.mpich -n N ringtrain train --model M --steps S --checkpoint-every K --no-eval
                --quiet --blas-threads 1 --global-batch 128 --run-dir <tmp>

and its metrics.jsonl gives
  C   the blocking time of one save: `checkpoint_s` of the periodic saves (rank 0's clock;
      every rank waits for rank 0's commit, so all block about as long), median. A save is
      capture of the state into the tree, HDF5 write with checksums, fsync, agreement of the
      ranks, rename, directory fsync, LATEST (temp file, fsync, rename, directory fsync) and
      pruning beyond --keep.
  s   the step time: `step_s` of the logging windows (saves excluded), median, leaving out
      the first window (cold first steps).
For each MTBF mu the Young/Daly interval is tau = sqrt(2 C mu) of useful compute = tau/s
steps, and a save every tau costs C/tau of the time: the blocking time per save amortised
over the steps of one interval, as a percentage of the step time. The predicted total
overhead adds the expected replay, tau/(2 mu). The checkpoint's size (payload and file) is
printed next to C with the bandwidth it implies.

  /usr/bin/python3 bench/checkpoint/save_blocking.py [--ringtrain build/ringtrain]
      [--models mlp,cnn] [--ranks 2] [--mtbf 3600,21600] [--json FILE]

Benchmarks are programs, not timed tests; run it alone on the machine (nothing else
running).
"""
import argparse
import datetime
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# steps and save interval per model: about ten saves and ten logging windows per run
PLAN = {"mlp": {"steps": 300, "every": 30, "log_every": 25},
        "cnn": {"steps": 60, "every": 6, "log_every": 5},
        "cnn-bn": {"steps": 60, "every": 6, "log_every": 5}}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ringtrain", default=os.path.join(ROOT, "build", "ringtrain"))
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--mtbf", default="3600,21600", help="comma-separated MTBFs in seconds")
    ap.add_argument("--dir", help="scratch directory (default: a temporary one, removed)")
    ap.add_argument("--json", help="write the figures here too")
    return ap.parse_args()


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_model(o, model, scratch):
    p = PLAN[model]
    run_dir = os.path.join(scratch, model)
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [o.mpiexec, "-n", str(o.ranks), o.ringtrain, "train", "--model", model,
           "--steps", str(p["steps"]), "--checkpoint-every", str(p["every"]),
           "--log-every", str(p["log_every"]), "--no-eval", "--quiet", "--blas-threads", "1",
           "--global-batch", "128", "--run-dir", run_dir]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        raise SystemExit("run failed (exit %d): %s\n%s" % (done.returncode, " ".join(cmd),
                                                           done.stdout[-2000:]))
    records = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    saves = [r["checkpoint_s"] for r in records if r.get("reason") == "interval"]
    steps = [r["step_s"] for r in records if "step_s" in r][1:]
    ckpt = os.path.join(run_dir, "checkpoints", "step-%08d.h5" % p["steps"])
    inspect = subprocess.run([o.ringtrain, "inspect", ckpt, "--verify"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    with open(os.path.join(run_dir, "manifest.json")) as f:
        manifest = json.load(f)
    return {"model": model, "command": " ".join(cmd), "saves": len(saves),
            "C_s": statistics.median(saves), "C_min_s": min(saves), "C_max_s": max(saves),
            "step_s": statistics.median(steps), "file_bytes": os.path.getsize(ckpt),
            "parameters": manifest["parameters"], "verify_ok": inspect.returncode == 0}


def main():
    o = parse_args()
    o.ringtrain = os.path.abspath(o.ringtrain)
    mtbfs = [float(x) for x in o.mtbf.split(",")]
    scratch = o.dir or tempfile.mkdtemp(prefix="save_blocking-")
    os.makedirs(scratch, exist_ok=True)
    print("save_blocking  %s  N=%d  ringtrain %s  scratch %s" % (
        datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), o.ranks, o.ringtrain, scratch))
    print("load average at start: %s" % load_average())
    results = []
    for model in o.models.split(","):
        r = run_model(o, model, scratch)
        results.append(r)
        print("\n%s: %s" % (model, r["command"]))
        print("  %d parameters, checkpoint file %.1f MB (verify %s); %d periodic saves: C median "
              "%.4f s (min %.4f, max %.4f) = %.2f GB/s of file; step time s median %.4f s; "
              "one save = %.2f steps" % (
                  r["parameters"], r["file_bytes"] / 1e6, "ok" if r["verify_ok"] else "FAILED",
                  r["saves"], r["C_s"], r["C_min_s"], r["C_max_s"],
                  r["file_bytes"] / r["C_s"] / 1e9, r["step_s"], r["C_s"] / r["step_s"]))
        r["young_daly"] = []
        for mu in mtbfs:
            tau = math.sqrt(2 * r["C_s"] * mu)
            yd = {"mtbf_s": mu, "tau_s": tau, "every_steps": max(1, round(tau / r["step_s"])),
                  "blocking_per_step_pct": 100 * r["C_s"] / tau,
                  "predicted_overhead_pct": 100 * (r["C_s"] / tau + tau / (2 * mu))}
            r["young_daly"].append(yd)
            print("  MTBF %6.0f s (%4.1f h): tau = sqrt(2 C mu) = %6.1f s = every %6d steps; "
                  "blocking per save = %.4f%% of step time per step (C/tau); predicted overhead "
                  "C/tau + tau/(2 mu) = %.3f%%" % (
                      mu, mu / 3600, tau, yd["every_steps"], yd["blocking_per_step_pct"],
                      yd["predicted_overhead_pct"]))
    print("\nload average at end: %s" % load_average())
    if o.json:
        with open(o.json, "w") as f:
            json.dump({"date": datetime.datetime.now().isoformat(), "ranks": o.ranks,
                       "results": results}, f, indent=2)
    if not o.dir:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if all(r["verify_ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
