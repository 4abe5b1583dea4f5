#!/usr/bin/python3
"""What a second core can give: the two-core ceiling, and each way of using it against it.

Two independent one-thread processes share nothing but the machine (memory bandwidth, caches,
the hypervisor's scheduling of the two vCPUs) and never wait for each other: their summed
samples/s is the most any configuration can reach on the same two cores. Per round, order
rotating, `ringtrain train` (global batch 128, no evaluation) as:

  alone    one process, --blas-threads 1                        (1x1)
  pair     two such processes started together                 (the ceiling)
  threads  one process, --blas-threads 2                        (1x2)
  ranks    mpiexec -n 2, --blas-threads 1: the ring included    (2x1)

and per round each configuration's share of the ceiling (samples/s / the pair's sum) and the
pair's gain over one process alone. samples/s of a run: the median of its logged windows after
the first (metrics.jsonl; for `ranks`, rank 0's, which covers the whole job's samples).

Noise: before each run the driver waits up to --wait-quiet s for the rest of the machine to use
fewer than --max-others cores, and measures what it used during the run (machine busy time
minus ours, dp_speed.measured); a run disturbed beyond --max-others is repeated up to --retries
times and the least disturbed attempt kept. Every line says what the others used.

--spans records trace.json for the last `--trace-steps` steps of every run and prints, per
configuration, rank 0's main-thread time per step by phase (data, forward, loss, backward,
optimizer, the wait for communication, the rest of the step) and the rings' own spans, which
overlap the others; --layers adds one line per layer's forward and backward.

    /usr/bin/python3 bench/two_cores_ceiling.py --rounds 5 --spans --json bench/results/two-cores-<date>.json
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dp_speed  # noqa: E402  (load1, busy_cores, measured: the noise accounting of the other benchmarks)

MODELS = {"mlp": {"steps": 800, "log_every": 50}, "cnn": {"steps": 120, "log_every": 10}}
ARMS = ("alone", "pair", "threads", "ranks")
# ranks and threads of each configuration's processes
SHAPES = {"alone": (1, 1), "pair": (1, 1), "threads": (1, 2), "ranks": (2, 1)}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ringtrain", default=os.path.join(os.path.dirname(HERE), "build", "ringtrain"))
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--arms", default=",".join(ARMS), help="configurations, of " + ",".join(ARMS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--flags", default="", help="more flags for every run")
    ap.add_argument("--ranks-flags", default="", help="more flags for the ranks runs only (e.g. --zero 1)")
    ap.add_argument("--spans", action="store_true", help="phases per step from trace.json")
    ap.add_argument("--trace-steps", type=int, default=200, help="steps traced per run with --spans")
    ap.add_argument("--layers", action="store_true", help="with --spans: every layer's spans too")
    ap.add_argument("--max-others", type=float, default=0.3)
    ap.add_argument("--wait-quiet", type=float, default=60)
    ap.add_argument("--retries", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json", help="write every round here")
    args = ap.parse_args()
    for m in args.models.split(","):
        if m not in MODELS:
            ap.error(f"--models: '{m}' is not one of {', '.join(MODELS)}")
    args.arm_list = args.arms.split(",")
    for a in args.arm_list:
        if a not in ARMS:
            ap.error(f"--arms: '{a}' is not one of {', '.join(ARMS)}")
    if "pair" not in args.arm_list:
        ap.error("--arms must include pair: it is the ceiling every share is taken of")
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    if not os.access(args.ringtrain, os.X_OK):
        ap.error(f"no ringtrain executable at {args.ringtrain}")
    return args


def command(args, model, arm, run_dir):
    plan = MODELS[model]
    ranks, threads = SHAPES[arm]
    cmd = [args.mpiexec, "-n", str(ranks), args.ringtrain, "train", "--checkpoint-every", "0", "--model", model, "--no-eval", "--quiet",
           "--global-batch", "128", "--steps", str(plan["steps"]), "--log-every", str(plan["log_every"]),
           "--blas-threads", str(threads), "--run-dir", run_dir] + args.flags.split()
    if arm == "ranks":
        cmd += args.ranks_flags.split()
    if args.spans:
        cmd += ["--trace-steps", str(min(args.trace_steps, plan["steps"]))]
    return cmd


def samples_per_s(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        windows = [json.loads(line) for line in f if line.strip()]
    rates = [w["samples_per_s"] for w in windows if "samples_per_s" in w][1:]
    if not rates:
        sys.exit(f"two_cores_ceiling: {run_dir} logged fewer than two windows")
    return statistics.median(rates)


def phases(run_dir, layers):
    """ms per traced step on rank 0's main thread, by phase; 'ring' sums the rings' own spans,
    which overlap the rest; 'rest of the step': the step's time (from its first span to the
    next step's first) minus the phases."""
    with open(os.path.join(run_dir, "trace.json")) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    total = collections.defaultdict(float)
    bounds = {}  # step -> (first start, last end) of its main-thread spans, ms
    for e in events:
        if e.get("ph") != "X" or e.get("pid") != 0 or "step" not in e.get("args", {}):
            continue
        name, dur = e["name"], e["dur"] * 1e-3
        if name == "checkpoint save":  # the run's last save, not a step's
            continue
        if e.get("tid") == 0:
            step, t0 = e["args"]["step"], e["ts"] * 1e-3
            first, last = bounds.get(step, (t0, t0 + dur))
            bounds[step] = (min(first, t0), max(last, t0 + dur))
            head = name.split(" ")[0]
            total[head if head in ("forward", "backward") else name] += dur
            if layers and head in ("forward", "backward"):
                total["  " + name] += dur
        elif name.startswith("ring bucket"):
            total["ring (overlaps the above)"] += dur
    n = max(len(bounds), 1)
    out = {k: v / n for k, v in total.items()}
    # A step's time: from the start of its first span to the start of the next step's first
    # (the last traced step ends with its last span).
    starts = sorted((first, last) for first, last in bounds.values())
    span_ms = sum((starts[i + 1][0] if i + 1 < len(starts) else starts[i][1]) - starts[i][0]
                  for i in range(len(starts)))
    main = sum(v for k, v in out.items() if not k.startswith(" ") and not k.startswith("ring"))
    out["step"] = span_ms / n
    out["rest of the step"] = out["step"] - main
    return out


def launch(args, model, arm, tmp, name):
    run_dir = os.path.join(tmp, name)
    env = dict(os.environ, MPIEXEC_TIMEOUT=str(int(args.timeout)))
    proc = subprocess.Popen(command(args, model, arm, run_dir), stdin=subprocess.DEVNULL, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, run_dir


def finish(procs):
    """Waits for every (process, run_dir); returns the run directories."""
    for proc, run_dir in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            sys.exit(f"two_cores_ceiling: a run failed (exit {proc.returncode}): {err[-600:]}")
    return [run_dir for _, run_dir in procs]


def wait_quiet(args):
    deadline = time.monotonic() + args.wait_quiet
    while dp_speed.busy_cores() > args.max_others and time.monotonic() < deadline:
        time.sleep(1)


def run_arm(args, model, arm, tmp):
    """The arm's samples/s (a list: one per process), phases (or None) and the others' cores."""
    best = None
    for attempt in range(args.retries + 1):
        wait_quiet(args)
        names = ["a", "b"] if arm == "pair" else ["a"]
        dirs, others, _ = dp_speed.measured(
            lambda: finish([launch(args, model, arm, tmp, f"{arm}-{attempt}-{n}") for n in names]))
        got = {"rates": [samples_per_s(d) for d in dirs], "others": others,
               "phases": phases(dirs[0], args.layers) if args.spans else None}
        if best is None or others < best["others"]:
            best = got
        if others <= args.max_others:
            break
    return best


def one_round(args, model, index):
    arms = args.arm_list
    shift = index % len(arms)
    order = arms[shift:] + arms[:shift]
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        for arm in order:
            got[arm] = run_arm(args, model, arm, tmp)
    ceiling = sum(got["pair"]["rates"])
    result = {"order": order, "ceiling": ceiling, "arms": got, "share": {}}
    for arm in arms:
        result["share"][arm] = sum(got[arm]["rates"]) / ceiling
    if "alone" in got:
        result["pair_over_alone"] = ceiling / got["alone"]["rates"][0]
    return result


def spread(values):
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def print_phases(model, rounds, arms):
    names = []
    for r in rounds:
        for arm in arms:
            for k in r["arms"][arm]["phases"]:
                if k not in names:
                    names.append(k)
    order = ["data", "forward", "loss", "backward", "optimizer", "wait for communication",
             "rest of the step", "step"]

    def rank(name):  # a layer's line ("  forward layers.0.linear") under its phase
        phase = name.split()[0] if name.startswith(" ") else name
        return (order.index(phase) if phase in order else len(order), name.startswith(" "), name)
    names.sort(key=rank)
    print(f"\n{model}: rank 0's main thread, ms per step (median over rounds); with --layers each layer too")
    print("| phase | " + " | ".join(arms) + " |")
    print("|---|" + "---:|" * len(arms))
    for k in names:
        cells = []
        for arm in arms:
            v = [r["arms"][arm]["phases"].get(k, 0.0) for r in rounds]
            cells.append(f"{statistics.median(v):.3f}")
        print(f"| {k} | " + " | ".join(cells) + " |")


def main():
    args = parse_args()
    doc = {"load1_start": dp_speed.load1(), "rounds": args.rounds, "flags": args.flags,
           "ranks_flags": args.ranks_flags, "models": {}}
    print(f"two_cores_ceiling: load {doc['load1_start']}, {args.rounds} rounds, {args.ringtrain}, "
          f"flags '{args.flags}', ranks flags '{args.ranks_flags}'")
    arms = args.arm_list
    others = [a for a in arms if a != "pair"]
    for model in args.models.split(","):
        rounds = []
        for i in range(args.rounds):
            r = one_round(args, model, i)
            rounds.append(r)
            line = ", ".join(f"{a} {'+'.join(f'{x:.0f}' for x in r['arms'][a]['rates'])}"
                             f" (others {r['arms'][a]['others']:.2f})" for a in r["order"])
            shares = ", ".join(f"{a} {r['share'][a]:.2f}" for a in others)
            print(f"  {model} round {i + 1}: {line}; of the ceiling: {shares}", file=sys.stderr, flush=True)
        med = lambda f: statistics.median(f(r) for r in rounds)  # noqa: E731
        print(f"\n| {model} | samples/s (median) | of the ceiling: median (range) |")
        print("|---|---:|---:|")
        for a in arms:
            cell = spread([r["share"][a] for r in rounds])
            print(f"| {a} | {med(lambda r: sum(r['arms'][a]['rates'])):,.0f} | {cell} |")
        if "alone" in arms:
            print(f"pair over alone: {spread([r['pair_over_alone'] for r in rounds])}; others used at most "
                  f"{max(r['arms'][a]['others'] for r in rounds for a in arms):.2f} cores in a kept run")
        if args.spans:
            print_phases(model, rounds, arms)
        doc["models"][model] = rounds
    doc["load1_end"] = dp_speed.load1()
    print(f"load at the end {doc['load1_end']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
