#!/usr/bin/python3
"""Unequal ranks: the even split against --local-batches auto, paired round by round.

One rank made slower at computing (`--test-slow-rank R:F`: F times the compute, done as real
work) holds every synchronous step back. With `--local-batches auto` the ranks re-split the
same global batch every --rebalance-every steps in proportion to their measured speeds. Each
round runs the even split and auto back to back (which first alternates by round) on the same
command:

  mpiexec.mpich -n N ringtrain train --model M --steps S --log-every K --rebalance-every K
      --no-eval --blas-threads 1 --global-batch 128 --checkpoint-every 0
      --test-slow-rank R:F [--local-batches auto] --run-dir <tmp>

A run's speed is the median over its metrics.jsonl windows after the first `--settle`
windows (auto's adaptation, and the cold start of both) of samples/s. Printed per scenario:
the median over rounds of auto / even, and auto / ideal, where the ideal is the model with
the auto run's own measurements:

  t_ideal = B / sum_r s_r + (t_auto - max_r b_r / s_r)

s_r the speeds of its last window (samples / compute seconds at the split b it ran), t_auto
its step time: the ideal split balances the compute exactly and keeps the rest of the step
(the sum, the update, the loading) as measured. auto / ideal says how far the chosen split is
from balanced, not what the rest of the step costs.

Scenarios (--scenarios, comma-separated):
  slow2    N = 2, rank 1 slowed 2x; mlp and cnn (--models)
  slow3    N = 3, rank 1 slowed 1.5x; mlp
  equal    N = 2, no slow rank; mlp: what auto costs when ranks are equal
  adapt    N = 2, mlp, auto only: rank 1 slowed 2x from the start, moving to rank 0 at step
           --move-at; windows until the split is within 10 % of its new steady state
  shared   N = 2, mlp, ranks bound to cores, a CPU-bound process on rank 1's core: the
           core-wait notice, and auto / even

  /usr/bin/python3 bench/straggler_bench.py [--ringtrain build/ringtrain] [--rounds 5]
      [--scenarios slow2,slow3,equal,adapt,shared] [--models mlp,cnn]

A benchmark program, not a test: every figure comes from this invocation.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import dp_speed  # noqa: E402  (run_ringtrain, busy_cores, the OpenBLAS environment rule)

GLOBAL_BATCH = 128
# Steps and window (log and rebalance cadence) per model: mlp steps are ~4x shorter.
PLAN = {"mlp": (300, 20), "cnn": (120, 10)}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ringtrain", default=os.path.join(ROOT, "build", "ringtrain"))
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scenarios", default="slow2,slow3,equal,adapt,shared")
    ap.add_argument("--models", default="mlp,cnn", help="models of the slow2 scenario")
    ap.add_argument("--settle", type=int, default=4,
                    help="windows left out at the start of every run (adaptation, cold start)")
    ap.add_argument("--move-at", type=int, default=200, help="adapt: the step the slow rank moves")
    ap.add_argument("--timeout", type=float, default=600)
    dp_speed.add_openblas_env_arg(ap)
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    if not os.access(args.ringtrain, os.X_OK):
        ap.error("no ringtrain executable at %s (build it or pass --ringtrain)" % args.ringtrain)
    return args


def train(args, ranks, model, flags, run_dir, mpi_flags=()):
    """One bounded run; returns (manifest, metrics.jsonl records, rank 0's stdout+stderr)."""
    steps, window = PLAN[model]
    cmd = [args.mpiexec, "-n", str(ranks), *mpi_flags, args.ringtrain, "train", "--model", model,
           "--steps", str(steps), "--log-every", str(window), "--rebalance-every", str(window),
           "--no-eval", "--blas-threads", "1", "--global-batch", str(GLOBAL_BATCH),
           "--checkpoint-every", "0", "--run-dir", run_dir, *flags]
    return dp_speed.run_ringtrain_logged(args, cmd, run_dir)


def steady_speed(records, settle):
    """Median samples/s over the windows after the first `settle`."""
    windows = [r for r in records if "samples_per_s" in r]
    if len(windows) <= settle:
        raise RuntimeError("%d windows, %d to settle: raise the steps" % (len(windows), settle))
    return statistics.median(r["samples_per_s"] for r in windows[settle:])


def rebalances(records):
    return [r for r in records if "rebalance" in r]


def ideal_speed(auto_records, auto_speed):
    """samples/s of the model's ideal split (the docstring's t_ideal)."""
    windows = [r["rebalance_window"] for r in auto_records if "rebalance_window" in r]
    if not windows:
        return float("nan")
    speeds, split = windows[-1]["window_speeds"], windows[-1]["split"]
    t_auto = GLOBAL_BATCH / auto_speed
    t_rest = t_auto - max(b / s for b, s in zip(split, speeds) if b > 0)
    return GLOBAL_BATCH / (GLOBAL_BATCH / sum(speeds) + max(0.0, t_rest))


def paired(args, ranks, model, slow, label, mpi_flags=(), around=None):
    """Rounds of even and auto back to back; prints the medians; returns the per-round rows."""
    slow_flags = ["--test-slow-rank", slow] if slow else []
    rows = []
    for rnd in range(args.rounds):
        order = ["even", "auto"] if rnd % 2 == 0 else ["auto", "even"]
        out = {}
        for side in order:
            work = tempfile.mkdtemp(prefix="straggler-")
            try:
                flags = slow_flags + (["--local-batches", "auto"] if side == "auto" else [])
                run = lambda: train(args, ranks, model, flags, os.path.join(work, "r"), mpi_flags)
                _, records, log = (around(run) if around else run())
                out[side] = (steady_speed(records, args.settle), records, log)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        even, auto = out["even"][0], out["auto"][0]
        ideal = ideal_speed(out["auto"][1], auto) if slow else float("nan")
        split = rebalances(out["auto"][1])
        rows.append({"even": even, "auto": auto, "ideal": ideal, "log": out["auto"][2],
                     "split": split[-1]["rebalance"]["new_split"] if split else None})
        print("  round %d: even %7.0f  auto %7.0f samples/s  auto/even %.3f  auto/ideal %.3f  "
              "split %s" % (rnd + 1, even, auto, auto / even, auto / ideal, rows[-1]["split"]),
              flush=True)
    med = lambda key: statistics.median(r[key] for r in rows)
    ratio = statistics.median(r["auto"] / r["even"] for r in rows)
    vs_ideal = statistics.median(r["auto"] / r["ideal"] for r in rows)
    print("%s: median even %.0f, auto %.0f, ideal %.0f samples/s; auto/even %.3f "
          "[%.3f..%.3f], auto/ideal %.3f" %
          (label, med("even"), med("auto"), med("ideal"), ratio,
           min(r["auto"] / r["even"] for r in rows), max(r["auto"] / r["even"] for r in rows),
           vs_ideal), flush=True)
    return rows


def adapt(args):
    """Auto only: the slow rank moves at --move-at; windows until the split settles."""
    steps, window = PLAN["mlp"]
    for rnd in range(args.rounds):
        work = tempfile.mkdtemp(prefix="straggler-")
        try:
            slow = "1:2@%d:0" % args.move_at
            _, records, _ = train(args, 2, "mlp", ["--test-slow-rank", slow, "--local-batches",
                                                   "auto"], os.path.join(work, "r"))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print("  round %d: %s" % (rnd + 1, settle_report(records, args.move_at, window, steps)))


def settle_report(records, move_at, window, steps):
    """Rank 0's share after the start and after the move: the windows until it is within 10 %
    of the share it holds at the end of each phase."""
    history = [(r["step"], r["rebalance"]["new_split"][0]) for r in rebalances(records)]

    def share_at(step):
        b0 = GLOBAL_BATCH // 2
        for s, b in history:
            if s <= step:
                b0 = b
        return b0

    parts = []
    for start, end in ((0, move_at), (move_at, steps)):
        final = share_at(end - 1)
        settled = next((s for s in range(start, end, window)
                        if abs(share_at(s) - final) <= 0.1 * final), None)
        windows = None if settled is None else max(0, (settled - start) // window)
        parts.append("from step %d: rank 0 settles at %d samples after %s windows" %
                     (start, final, windows))
    return "; ".join(parts)


def shared_core(args):
    """A CPU-bound process on core 1, ranks bound to cores: the notice, and auto / even."""
    def with_hog(run):
        hog = subprocess.Popen(["taskset", "-c", "1", sys.executable, "-c", "while True: pass"])
        try:
            return run()
        finally:
            hog.kill()
            hog.wait()
    rows = paired(args, 2, "mlp", None, "shared core (N=2 mlp, a busy process on core 1)",
                  mpi_flags=("-bind-to", "core"), around=with_hog)
    notices = [line for line in rows[-1]["log"].splitlines() if "waits for its core" in line]
    print("  notice: %s" % (notices[0].strip() if notices else "NONE"))


def main():
    args = parse_args()
    dp_speed.unpin_openblas_env(args)
    scenarios = [s for s in args.scenarios.split(",") if s]
    print("straggler benchmark, %d rounds, load before %.2f, cores others use %.2f" %
          (args.rounds, dp_speed.load1(), dp_speed.busy_cores()), flush=True)
    for scenario in scenarios:
        if scenario == "slow2":
            for model in [m for m in args.models.split(",") if m]:
                paired(args, 2, model, "1:2", "N=2 %s, rank 1 slowed 2x" % model)
        elif scenario == "slow3":
            paired(args, 3, "mlp", "1:1.5", "N=3 mlp, rank 1 slowed 1.5x")
        elif scenario == "equal":
            paired(args, 2, "mlp", None, "N=2 mlp, no slow rank")
        elif scenario == "adapt":
            adapt(args)
        elif scenario == "shared":
            shared_core(args)
        else:
            sys.exit("unknown scenario %r (slow2, slow3, equal, adapt, shared)" % scenario)
    print("load after %.2f" % dp_speed.load1())


if __name__ == "__main__":
    main()
