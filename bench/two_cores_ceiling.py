#!/usr/bin/python3
"""What a second core can give one rank here: the ceiling of thread scaling, measured.

A rank with 2 threads can at best do what two independent one-thread processes do on the same
two cores: they share nothing but the machine (memory bandwidth, caches, the hypervisor's
scheduling of the two vCPUs) and never wait for each other. Per round, order rotating:

  alone    one `ringtrain train --blas-threads 1` process
  pair     two such processes started together (different run directories)
  threads  one process with --blas-threads 2

and per round the ratios
  ceiling  = (samples/s of the pair's two processes, summed) / alone
  scaling  = threads / alone        (the target is >= 1.8)
  of which = scaling / ceiling      (how much of the machine's ceiling the threads reach)

samples/s of a run: the median of its logged windows after the first (metrics.jsonl).
Run with nothing else runnable on the machine: a second core that is busy elsewhere makes both
ratios meaningless.

    /usr/bin/python3 bench/two_cores_ceiling.py --rounds 5 --json bench/results/two-cores-<date>.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dp_speed  # noqa: E402  (load1: the noise accounting of the other benchmarks)

MODELS = {"mlp": {"steps": 800, "log_every": 50}, "cnn": {"steps": 120, "log_every": 10}}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ringtrain", default=os.path.join(os.path.dirname(HERE), "build", "ringtrain"))
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", help="write every round here")
    args = ap.parse_args()
    for m in args.models.split(","):
        if m not in MODELS:
            ap.error(f"--models: '{m}' is not one of {', '.join(MODELS)}")
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    return args


def command(args, model, threads, run_dir):
    plan = MODELS[model]
    return [args.mpiexec, "-n", "1", args.ringtrain, "train", "--model", model, "--no-eval", "--quiet",
            "--global-batch", "128", "--steps", str(plan["steps"]), "--log-every", str(plan["log_every"]),
            "--blas-threads", str(threads), "--run-dir", run_dir]


def samples_per_s(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        windows = [json.loads(line) for line in f]
    rates = [w["samples_per_s"] for w in windows if "samples_per_s" in w][1:]
    if not rates:
        sys.exit(f"two_cores_ceiling: {run_dir} logged fewer than two windows")
    return statistics.median(rates)


def launch(args, model, threads, tmp, name):
    run_dir = os.path.join(tmp, name)
    proc = subprocess.Popen(command(args, model, threads, run_dir), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, run_dir


def finish(procs):
    """Waits for every (process, run_dir); returns the samples/s of each."""
    rates = []
    for proc, run_dir in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            sys.exit(f"two_cores_ceiling: a run failed (exit {proc.returncode}): {err[-600:]}")
        rates.append(samples_per_s(run_dir))
    return rates


def one_round(args, model, index):
    arms = ["alone", "pair", "threads"]
    shift = index % len(arms)
    order = arms[shift:] + arms[:shift]
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        for arm in order:
            if arm == "alone":
                got["alone"] = finish([launch(args, model, 1, tmp, "alone")])[0]
            elif arm == "threads":
                got["threads"] = finish([launch(args, model, 2, tmp, "threads")])[0]
            else:
                got["pair"] = finish([launch(args, model, 1, tmp, "pair-a"), launch(args, model, 1, tmp, "pair-b")])
    ceiling = sum(got["pair"]) / got["alone"]
    scaling = got["threads"] / got["alone"]
    return dict(got, order=order, ceiling=ceiling, scaling=scaling, of_ceiling=scaling / ceiling)


def spread(values):
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def main():
    args = parse_args()
    doc = {"load1_start": dp_speed.load1(), "rounds": args.rounds, "models": {}}
    print(f"two_cores_ceiling: load {doc['load1_start']}, {args.rounds} rounds, {args.ringtrain}")
    print("| model | alone samples/s | pair, summed | 2 threads | ceiling: pair / alone | scaling: 2 threads / alone "
          "| scaling / ceiling |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for model in args.models.split(","):
        rounds = []
        for i in range(args.rounds):
            r = one_round(args, model, i)
            rounds.append(r)
            print(f"  {model} round {i + 1}: alone {r['alone']:.0f}, pair {r['pair'][0]:.0f} + {r['pair'][1]:.0f}, "
                  f"threads {r['threads']:.0f}: ceiling {r['ceiling']:.2f}, scaling {r['scaling']:.2f}",
                  file=sys.stderr, flush=True)
        med = lambda f: statistics.median(f(r) for r in rounds)  # noqa: E731
        print(f"| {model} | {med(lambda r: r['alone']):,.0f} | {med(lambda r: sum(r['pair'])):,.0f} | "
              f"{med(lambda r: r['threads']):,.0f} | {spread([r['ceiling'] for r in rounds])} | "
              f"{spread([r['scaling'] for r in rounds])} | {spread([r['of_ceiling'] for r in rounds])} |")
        doc["models"][model] = rounds
    doc["load1_end"] = dp_speed.load1()
    print(f"load at the end {doc['load1_end']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
