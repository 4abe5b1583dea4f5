#!/usr/bin/python3
"""Blocking time of a save with --checkpoint-async on against off, paired, and the step time
while the background write runs (or, with --compare zero-gather, of the two ways an
asynchronous --zero 1 save brings the shards to rank 0).

Each round runs, for each model, the same training twice (in alternating order), once with
synchronous and once with asynchronous saves:

  mpiexec.mpich -n N ringtrain train --model M --steps S --checkpoint-every K --log-every L
                --no-eval --quiet --blas-threads 1 --global-batch 128 --optimizer adamw
                --checkpoint-async off|on --run-dir <tmp>

From metrics.jsonl:
  blocking   `blocking_s` of the periodic saves, median per run: the time the training loop
             stood still (async: the snapshot, plus any wait for the previous save).
  persist    `persist_s` of the asynchronous saves: snapshot to durable commit.
  step time  `step_s` of the logging windows of L steps. "after a save": the window right after
             each periodic save, which the background write overlaps (L is chosen so that it
             lasts about as long as the write); "quiet": the other windows (not the first).
  lost       what a save costs the run: blocking + L x (step after a save - quiet step), the
             stall plus the slowdown of the window the background write overlaps (for a
             synchronous save the second term is noise around 0).
The ratio async/sync is taken per round and the median of the rounds is reported, so slow
drift of the machine cancels. --report FILE prints the figures of an earlier --json again.

--compare zero-gather: both runs of a round use --zero 1 --checkpoint-async on, the baseline
("sync" in the report) with --zero-gather snapshot (the shards gathered inside the
snapshot), the other ("async") with --zero-gather writer (sent to rank 0's writer thread).

  /usr/bin/python3 bench/checkpoint/async_blocking.py [--ringtrain build/ringtrain]
      [--models mlp,cnn] [--ranks 2] [--rounds 5] [--compare async|zero-gather]
      [--json FILE] [--report FILE]

Benchmarks are programs, not timed tests; run it alone on the machine.
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

# Steps, save interval and logging window per model (steps of the default batch of 128).
PLAN = {"mlp": {"steps": 240, "every": 40, "log_every": 10},
        "cnn": {"steps": 96, "every": 16, "log_every": 4},
        "cnn-bn": {"steps": 96, "every": 16, "log_every": 4}}

# The two sides of a round: "off" is the baseline, "on" the candidate.
SIDES = {"async": {"off": ["--checkpoint-async", "off"], "on": ["--checkpoint-async", "on"]},
         "zero-gather": {
             "off": ["--checkpoint-async", "on", "--zero", "1", "--zero-gather", "snapshot"],
             "on": ["--checkpoint-async", "on", "--zero", "1", "--zero-gather", "writer"]}}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ringtrain", default="build/ringtrain")
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compare", choices=sorted(SIDES), default="async")
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--report", help="print the figures of an earlier --json and exit")
    return ap.parse_args()


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(o, model, mode, scratch):
    p = PLAN[model]
    run_dir = os.path.join(scratch, "%s-%s" % (model, mode))
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [o.mpiexec, "-n", str(o.ranks), o.ringtrain, "train", "--model", model,
           "--steps", str(p["steps"]), "--checkpoint-every", str(p["every"]),
           "--log-every", str(p["log_every"]), "--no-eval", "--quiet", "--blas-threads", "1",
           "--global-batch", "128", "--optimizer", "adamw", *SIDES[o.compare][mode],
           "--run-dir", run_dir]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit("run failed (exit %d): %s\n%s" % (done.returncode, " ".join(cmd),
                                                           done.stdout[-2000:]))
    records = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    saves = [r for r in records if r.get("reason") == "interval"]
    save_steps = {r["step"] for r in saves}
    windows = [r for r in records if "step_s" in r][1:]
    after = [w["step_s"] for w in windows if w["step"] - p["log_every"] in save_steps]
    quiet = [w["step_s"] for w in windows if w["step"] - p["log_every"] not in save_steps]
    shutil.rmtree(run_dir, ignore_errors=True)
    return {"command": " ".join(cmd), "saves": len(saves),
            "blocking_s": statistics.median(r["blocking_s"] for r in saves),
            "persist_s": statistics.median(r["persist_s"] for r in saves),
            "step_after_save_s": statistics.median(after), "step_quiet_s": statistics.median(quiet)}


def lost_per_save(model, run):
    """Blocking time plus the slowdown of the window after the save, seconds."""
    window = PLAN[model]["log_every"]
    return run["blocking_s"] + window * (run["step_after_save_s"] - run["step_quiet_s"])


def report(model, rounds):
    ratio = [r["on"]["blocking_s"] / r["off"]["blocking_s"] for r in rounds]
    lost_ratio = [lost_per_save(model, r["on"]) / lost_per_save(model, r["off"]) for r in rounds]
    step_ratio = [r["on"]["step_after_save_s"] / r["off"]["step_after_save_s"] for r in rounds]
    quiet_ratio = [r["on"]["step_quiet_s"] / r["off"]["step_quiet_s"] for r in rounds]
    med = lambda xs: statistics.median(xs)
    print("\n%s, %d rounds (%d periodic saves per run): %s" % (
        model, len(rounds), rounds[0]["on"]["saves"], rounds[0]["on"]["command"]))
    for i, r in enumerate(rounds):
        print("  round %d: blocking sync %.4f s, async %.4f s (ratio %.3f); persist async %.4f s, "
              "sync %.4f s; step after a save sync %.4f s, async %.4f s" % (
                  i + 1, r["off"]["blocking_s"], r["on"]["blocking_s"], ratio[i],
                  r["on"]["persist_s"], r["off"]["persist_s"], r["off"]["step_after_save_s"],
                  r["on"]["step_after_save_s"]))
    summary = {"blocking_ratio_median": med(ratio),
               "blocking_sync_s_median": med(r["off"]["blocking_s"] for r in rounds),
               "blocking_async_s_median": med(r["on"]["blocking_s"] for r in rounds),
               "persist_async_s_median": med(r["on"]["persist_s"] for r in rounds),
               "step_after_save_ratio_median": med(step_ratio),
               "step_quiet_ratio_median": med(quiet_ratio),
               "lost_sync_s_median": med(lost_per_save(model, r["off"]) for r in rounds),
               "lost_async_s_median": med(lost_per_save(model, r["on"]) for r in rounds),
               "lost_ratio_median": med(lost_ratio)}
    print("  median blocking async/sync = %.3f (sync %.4f s, async %.4f s); async persist "
          "%.4f s; step time in the window after a save, async/sync = %.3f (other windows "
          "%.3f)" % (summary["blocking_ratio_median"], summary["blocking_sync_s_median"],
                     summary["blocking_async_s_median"], summary["persist_async_s_median"],
                     summary["step_after_save_ratio_median"], summary["step_quiet_ratio_median"]))
    print("  time a save costs the run (blocking + %d x (step after a save - quiet step)): sync "
          "%.4f s, async %.4f s, async/sync = %.3f (median of rounds)" % (
              PLAN[model]["log_every"], summary["lost_sync_s_median"],
              summary["lost_async_s_median"], summary["lost_ratio_median"]))
    return summary


def main():
    o = parse_args()
    if o.report:
        with open(o.report) as f:
            for model, result in json.load(f)["results"].items():
                report(model, result["rounds"])
        return 0
    o.ringtrain = os.path.abspath(o.ringtrain)
    scratch = tempfile.mkdtemp(prefix="async_blocking-")
    print("async_blocking  %s  N=%d  ringtrain %s  compare %s" % (
        datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), o.ranks, o.ringtrain, o.compare))
    if o.compare == "zero-gather":
        print("sync = --zero 1 --checkpoint-async on --zero-gather snapshot, "
              "async = the same with --zero-gather writer")
    print("load average at start: %s" % load_average())
    results = {}
    for model in o.models.split(","):
        rounds = []
        for i in range(o.rounds):
            order = ["off", "on"] if i % 2 == 0 else ["on", "off"]
            rounds.append({mode: run(o, model, mode, scratch) for mode in order})
        results[model] = {"rounds": rounds, "summary": report(model, rounds)}
    print("\nload average at end: %s" % load_average())
    shutil.rmtree(scratch, ignore_errors=True)
    if o.json:
        with open(o.json, "w") as f:
            json.dump({"date": datetime.datetime.now().isoformat(), "ranks": o.ranks,
                       "compare": o.compare, "sides": SIDES[o.compare], "results": results},
                      f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
