#!/usr/bin/python3
"""Time to target of two variants of one recipe, seed by seed: fp32 against bf16 on the wire
(--compare wire), or sum-scaled against --reduction exact (--compare reduction).

For each seed, two runs of the mlp on Fashion-MNIST at N=2 (SGD momentum 0.9, lr 0.05,
global batch 128, the defaults), alternating which goes first, each for a fixed number of
epochs with the test set evaluated every --eval-every steps:

  mpiexec.mpich -n 2 ringtrain train --wire fp32|bf16 --seed S --epochs 15 --eval-every 100
      --quiet --run-dir <tmp> [--flags ...]
  (--compare reduction: --reduction sum-scaled|exact instead of --wire)

Read from each run's metrics.jsonl: steps to target (the first evaluation with test accuracy
>= --target, default 0.88; with --flags "--validation-fraction F", validation accuracy, and
each line says which split) and the test accuracy after the last epoch. With the same seed
both runs start from the same weights and see the same batches; only the rounding of the
gradient's sum differs (bf16 with error feedback, see collectives/bf16.hpp; or the exact
sum, see framework/train/exact_step.hpp).

Printed: one line per run, then per variant the median [min-max] of steps to target and of
the final accuracy, and the checks: the second variant's median of steps to target lies
within the first's range, and its final accuracy >= --final (default 0.883) for the median
and for every seed (for --compare wire, the checks of bench/README-cluster.md, "bf16 on the wire: time to
target").

  /usr/bin/python3 bench/paired_time_to_target.py [--compare wire|reduction]
      [--seeds 0,...,6] [--epochs 15] [--json FILE]

A benchmark program, not a test: every figure comes from this invocation. Steps to target do
not depend on the machine's load (the run is the same computation); seconds do, and are
printed for information only.
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

# --compare: the flag that differs between the two runs of a seed, and its two values.
VARIANTS = {"wire": ("--wire", ("fp32", "bf16")),
            "reduction": ("--reduction", ("sum-scaled", "exact"))}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ringtrain", default=os.path.join(os.path.dirname(HERE), "build", "ringtrain"))
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--compare", choices=sorted(VARIANTS), default="wire")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--seeds", default="0,1,2,3,4,5,6")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--target", type=float, default=0.88)
    ap.add_argument("--final", type=float, default=0.883)
    ap.add_argument("--flags", default="", help="more flags for both variants")
    ap.add_argument("--json", help="write every run's figures here")
    return ap.parse_args()


def run_once(args, variant, seed, workdir):
    run_dir = os.path.join(workdir, f"{variant}-{seed}")
    flag = VARIANTS[args.compare][0]
    cmd = [args.mpiexec, "-n", str(args.ranks), args.ringtrain, "train", "--checkpoint-every", "0", flag, variant,
           "--seed", str(seed), "--epochs", str(args.epochs), "--eval-every",
           str(args.eval_every), "--quiet", "--run-dir", run_dir] + args.flags.split()
    subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL)
    with open(os.path.join(run_dir, "manifest.json")) as f:
        results = json.load(f)["results"]
    # The split the run picks its best and meets targets on: validation with
    # --validation-fraction (--flags), else the test set.
    split, key = results.get("split", "test"), results.get("metric", "test_accuracy")
    evals = []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            if key in record:
                evals.append((record["step"], record[key]))
    reached = [step for step, accuracy in evals if accuracy >= args.target]
    shutil.rmtree(run_dir)
    return {"variant": variant, "seed": seed, "split": split,
            "steps_to_target": reached[0] if reached else None,
            "final_accuracy": results.get("final_test_accuracy", evals[-1][1]),
            "steps": results["steps"], "wall_s": results.get("wall_s")}


def summary(values):
    return f"{statistics.median(values):.4g} [{min(values):.4g}-{max(values):.4g}]"


def main():
    args = parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    first, second = VARIANTS[args.compare][1]
    runs = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as workdir:
        for i, seed in enumerate(seeds):
            order = [first, second] if i % 2 == 0 else [second, first]
            for variant in order:
                run = run_once(args, variant, seed, workdir)
                runs.append(run)
                print(f"seed {seed} {variant}: steps to {args.target} {run['steps_to_target']} "
                      f"(on {run['split']}), test accuracy after {args.epochs} epochs "
                      f"{run['final_accuracy']:.4f}, "
                      f"{run['wall_s']:.1f} s", flush=True)
    by = {v: [r for r in runs if r["variant"] == v] for v in (first, second)}
    for variant, rs in by.items():
        steps = [r["steps_to_target"] for r in rs]
        finals = [r["final_accuracy"] for r in rs]
        missed = steps.count(None)
        reached = [s for s in steps if s is not None]
        print(f"{variant}: steps to target {summary(reached) if reached else 'never'}"
              f"{f' ({missed} seeds never reached it)' if missed else ''}; "
              f"final accuracy {summary(finals)}")
    base = [r["steps_to_target"] for r in by[first] if r["steps_to_target"] is not None]
    other = [r["steps_to_target"] for r in by[second]]
    other_final = [r["final_accuracy"] for r in by[second]]
    within = None not in other and base and min(base) <= statistics.median(other) <= max(base)
    final_ok = statistics.median(other_final) >= args.final
    every_ok = min(other_final) >= args.final
    print(f"{second} median steps to target within the {first} range: {'yes' if within else 'NO'}")
    print(f"{second} final accuracy >= {args.final}: median {'yes' if final_ok else 'NO'}, "
          f"every seed {'yes' if every_ok else 'NO'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "runs": runs}, f, indent=1)
    return 0 if within and final_ok else 1


if __name__ == "__main__":
    sys.exit(main())
