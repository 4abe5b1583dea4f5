#!/usr/bin/python3
"""Bucket-size sweep: step time, collectives per step, communication and exposed
time of ringtrain with --overlap on and off, for bucket caps from 16 KiB to the whole model,
next to what the alpha-B model predicts from the measured per-layer backward times.

For each model and rank count, each round runs every (cap, overlap) pair back to back, in an
order that rotates from round to round:

  mpiexec.mpich -n N ringtrain train --model M --steps S --no-eval --quiet --blas-threads 1
      --global-batch 128 --lr 0.01 --log-every S/4 --trace-steps T --run-dir <tmp>
      --bucket-bytes C --overlap on|off --zero 0   (C = "default": no --bucket-bytes)

(--zero 0: the model below is one allreduce per bucket and every rank's whole update; the
default from 2 ranks on, ZeRO-1, splits each ring around the shard's update.)

Figures (medians over rounds) come from metrics.jsonl, windows after the first (cold) one,
rank 0 (and the largest exposed share over ranks): step_s (measured per step), comm_s (sum of the step's collective
intervals), exposed_s (time blocked on communication with no compute left), collectives per
step; and samples/s from manifest.json.

The prediction. From the overlap-off run of the same cap: forward F, optimizer O and the
per-layer backward durations b_i (trace.json, median over the traced steps after the first
two, rank 0). The ring's alpha-B fit is the one the trainer used (manifest gradient_buckets
.ring_fit). Bucket k (M_k bytes) is ready when backward has finished the layer that writes
its last gradient; rings run one at a time (one link), each t(M) = 2(N-1)a + 2(N-1)/N M/B.
  off: step = F + sum b_i + sum_k t(M_k) + t(4 B) + O
  on:  backward ends at F + sum b_i; the 4-byte agreement follows the last reduce-scatter
       (half a ring); then the buckets are updated in the order their rings end (bucket k
       takes O M_k / M), waiting only when the next one is not there: that wait is the
       predicted exposed time.
The model charges the ring nothing on the compute side: with 2 ranks on 2 cores the copies
of a ring run on the cores that compute (inside the MPI calls of the polls between layers),
so measured steps with overlap are longer than predicted by about the copy time.

  /usr/bin/python3 bench/overlap_sweep.py [--models mlp,cnn] [--ranks 2] [--rounds 2]
      [--caps 16K,64K,256K,1M,4M,16M,whole] [--keep-traces DIR] [--json FILE]

Benchmarks are programs, not timed tests: every figure comes from this invocation.
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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import dp_speed  # noqa: E402  (busy_cores, measured, run_ringtrain: the same noise control)

DEFAULT_STEPS = {"mlp": 200, "cnn": 16}
WHOLE = 1 << 30  # a cap larger than any model: one bucket


def parse_size(text):
    if text == "whole":
        return WHOLE
    if text == "default":
        return 0
    scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
    return int(text[:-1] if scale > 1 else text) * scale


def human(nbytes):
    if nbytes == 0:
        return "default"
    if nbytes >= WHOLE:
        return "whole"
    if nbytes >= 1024 * 1024:
        return "%g MiB" % (nbytes / 1048576)
    return "%g KiB" % (nbytes / 1024)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--ranks", default="2", help="comma-separated rank counts, e.g. 2,4")
    ap.add_argument("--caps", default="16K,64K,256K,1M,4M,16M,whole")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", default="", help="per model, e.g. mlp=200,cnn=16 (default)")
    ap.add_argument("--trace-steps", type=int, default=8)
    ap.add_argument("--ring-driver", default="layers", help="--ring-driver of ringtrain")
    ap.add_argument("--extra", default="", help="more ringtrain flags for every run")
    ap.add_argument("--ringtrain", default=os.path.join(ROOT, "build", "ringtrain"))
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--timeout", type=float, default=240.0)
    ap.add_argument("--max-others", type=float, default=0.25)
    ap.add_argument("--retries", type=int, default=1)
    ap.add_argument("--keep-traces", default="",
                    help="keep each run's trace.json, manifest.json and metrics.jsonl here, "
                         "in <model>-n<N>-<cap>-<on|off>-r<round>/ (for tools/plot_overlap.py)")
    ap.add_argument("--json", default="")
    dp_speed.add_openblas_env_arg(ap)
    args = ap.parse_args()
    args.models = [m for m in args.models.split(",") if m]
    args.ranks = [int(n) for n in args.ranks.split(",") if n]
    # The default cap (0) always runs, first; a cap named twice runs once.
    caps = [0] + [parse_size(c) for c in args.caps.split(",") if c]
    args.caps = list(dict.fromkeys(caps))
    steps = dict(DEFAULT_STEPS)
    for item in filter(None, args.steps.split(",")):
        name, _, value = item.partition("=")
        steps[name] = int(value)
    args.steps = steps
    for m in args.models:
        if m not in DEFAULT_STEPS:
            ap.error("unknown model %r" % m)
    if not os.access(args.ringtrain, os.X_OK):
        ap.error("no ringtrain at %s" % args.ringtrain)
    return args


def trace_times(path):
    """Rank 0's per-layer backward medians, forward and optimizer per step (traced steps
    after the first two), from trace.json."""
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X" and e["pid"] == 0]
    steps = sorted({e["args"]["step"] for e in events if "step" in e["args"]})[2:]
    per_step = {s: {} for s in steps}
    for e in events:
        s = e["args"].get("step")
        if s in per_step:
            per_step[s][e["name"]] = per_step[s].get(e["name"], 0.0) + e["dur"] * 1e-6
    if not per_step:
        return None
    names = set().union(*per_step.values())
    med = {n: statistics.median(per_step[s].get(n, 0.0) for s in steps) for n in names}
    backward = {}
    for n, v in med.items():
        if n.startswith("backward layers."):
            backward[int(n.split(".")[1])] = v
    forward = sum(v for n, v in med.items() if n.startswith("forward ") or n in ("loss", "data"))
    return {"backward_by_layer": backward, "forward_s": forward,
            "optimizer_s": med.get("optimizer", 0.0)}


def ring_s(fit, n, nbytes):
    return 2 * (n - 1) * fit["alpha_s"] + 2 * (n - 1) / n * nbytes / fit["bandwidth_Bps"]


def predict(times, buckets, fit, n):
    """(step off, step on, exposed on) from the alpha-B model and measured layer times."""
    back = times["backward_by_layer"]
    t = times["forward_s"]
    ready = {}
    for layer in sorted(back, reverse=True):
        t += back[layer]
        ready[layer] = t
    backward_end = t
    sizes, layers = buckets["bytes"], buckets["ready_after_layer"]
    total = float(sum(sizes)) or 1.0
    rings = [ring_s(fit, n, m) for m in sizes]
    off = backward_end + sum(rings) + ring_s(fit, n, 4) + times["optimizer_s"]
    # Rings one at a time; the agreement can start once every bucket's reduce-scatter (half
    # its ring) is done, and no bucket is updated before it ends.
    link, ends, agree = 0.0, [], 0.0
    for k, m in enumerate(sizes):
        start = max(link, ready.get(layers[k], backward_end))
        link = start + rings[k]
        ends.append((link, m))
        agree = max(agree, start + rings[k] / 2)
    agree = max(agree, backward_end) + ring_s(fit, n, 4)
    cursor, exposed = backward_end, 0.0
    for end, m in sorted(ends):
        available = max(end, agree)
        if available > cursor:
            exposed += available - cursor
            cursor = available
        cursor += times["optimizer_s"] * m / total
    return off, cursor, exposed


def keep(args, run_dir, model, n, cap, overlap, rnd):
    if not args.keep_traces:
        return
    dest = os.path.join(args.keep_traces, "%s-n%d-%s-%s-r%d" % (
        model, n, human(cap).replace(" ", ""), overlap, rnd))
    os.makedirs(dest, exist_ok=True)
    for name in ("trace.json", "manifest.json", "metrics.jsonl"):
        shutil.copy(os.path.join(run_dir, name), dest)


def run_once(args, model, n, cap, overlap, rnd):
    steps = args.steps[model]
    run_dir = tempfile.mkdtemp(prefix="overlap-%s-n%d-" % (model, n))
    cmd = [args.mpiexec, "-n", str(n), args.ringtrain, "train", "--checkpoint-every", "0", "--model", model, "--steps",
           str(steps), "--no-eval", "--quiet", "--blas-threads", "1", "--global-batch", "128",
           "--lr", "0.01", "--log-every", str(max(1, steps // 4)), "--trace-steps",
           str(args.trace_steps), "--run-dir", run_dir, "--overlap", overlap, "--ring-driver",
           args.ring_driver, "--zero", "0"] + (["--bucket-bytes", str(cap)] if cap else []) + args.extra.split()
    try:
        manifest, records = dp_speed.run_ringtrain(args, cmd, run_dir)
        windows = [w for w in records if "step_s" in w][1:]  # leave out the cold first window
        times = trace_times(os.path.join(run_dir, "trace.json"))
        keep(args, run_dir, model, n, cap, overlap, rnd)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    if not windows:
        raise RuntimeError("no metrics windows after the first: raise --steps")

    def mean(key, rank=None):
        if rank is None:
            return statistics.mean(w[key] for w in windows)
        return statistics.mean(w["per_rank"][key][rank] for w in windows)

    return {"model": model, "ranks": n, "cap": cap, "overlap": overlap,
            "samples_per_s": manifest["results"]["samples_per_s"],
            "step_s": mean("step_s"), "comm_s": mean("comm_s"), "exposed_s": mean("exposed_s"),
            "compute_s": mean("compute_s"), "collectives": mean("collectives"),
            "max_exposed_s": max(mean("exposed_s", r) for r in range(n)),
            "max_exposed_share": max(mean("exposed_s", r) / mean("comm_s", r)
                                     for r in range(n) if mean("comm_s", r) > 0) if n > 1 else 0,
            "buckets": manifest["gradient_buckets"], "times": times}


def main():
    args = parse_args()
    started = datetime.datetime.now().astimezone()
    kernels = dp_speed.blas_kernels(args)
    print("overlap_sweep: %s, %d cores, load %s, ringtrain %s; %s" % (
        started.strftime("%Y-%m-%d %H:%M:%S %Z"), os.cpu_count(),
        open("/proc/loadavg").read().split()[:3], args.ringtrain, kernels), flush=True)
    runs = []
    for model in args.models:
        for n in args.ranks:
            configs = [(cap, ov) for cap in args.caps for ov in ("on", "off")]
            for rnd in range(args.rounds):
                shift = (rnd * 3) % len(configs)
                for cap, ov in configs[shift:] + configs[:shift]:
                    attempts = []
                    for _ in range(args.retries + 1):
                        before = dp_speed.busy_cores()
                        deadline = time.monotonic() + 30
                        while before > args.max_others and time.monotonic() < deadline:
                            time.sleep(2)
                            before = dp_speed.busy_cores()
                        try:
                            rec, others, wall = dp_speed.measured(
                                lambda: run_once(args, model, n, cap, ov, rnd + 1))
                        except (RuntimeError, subprocess.TimeoutExpired, KeyError,
                                ValueError) as e:
                            print("  %s N=%d %s %s FAILED: %s" % (model, n, human(cap), ov,
                                                                 str(e)[-300:]), flush=True)
                            continue
                        rec.update({"round": rnd + 1, "others_busy_cores_during": others,
                                    "run_s": wall})
                        attempts.append(rec)
                        if others <= args.max_others:
                            break
                    if not attempts:
                        continue
                    rec = min(attempts, key=lambda r: r["others_busy_cores_during"])
                    runs.append(rec)
                    print("  round %d %s N=%d cap %-8s overlap %-3s step %7.2f ms comm %6.2f "
                          "exposed %6.2f collectives %3.0f (others %.2f cores)" % (
                              rnd + 1, model, n, human(cap), ov, rec["step_s"] * 1e3,
                              rec["comm_s"] * 1e3, rec["exposed_s"] * 1e3, rec["collectives"],
                              others), flush=True)

    summary = []
    for model in args.models:
        for n in args.ranks:
            print()
            print("%s, N=%d (rank 0; medians over rounds; ms per step)" % (model, n))
            print("%-9s %7s %5s | %8s %8s %6s | %7s %8s %7s %7s | %8s %8s %8s" % (
                "cap", "buckets", "coll", "step on", "step off", "on/off", "comm on",
                "exposed", "exp/com", "max e/c", "pred on", "pred off", "pred exp"))
            default_cap = None
            for cap in args.caps:
                sel = {ov: [r for r in runs if r["model"] == model and r["ranks"] == n
                            and r["cap"] == cap and r["overlap"] == ov] for ov in ("on", "off")}
                if not sel["on"] or not sel["off"]:
                    continue
                med = {ov: {k: statistics.median(r[k] for r in sel[ov])
                            for k in ("step_s", "comm_s", "exposed_s", "collectives",
                                      "samples_per_s", "max_exposed_s", "max_exposed_share")}
                       for ov in sel}
                buckets = sel["on"][0]["buckets"]
                if cap == 0:
                    default_cap = buckets["cap_bytes"]
                off_times = [r["times"] for r in sel["off"] if r["times"]]
                pred = [predict(t, buckets, buckets["ring_fit"], n) for t in off_times]
                p_off = statistics.median(p[0] for p in pred) if pred else float("nan")
                p_on = statistics.median(p[1] for p in pred) if pred else float("nan")
                p_exp = statistics.median(p[2] for p in pred) if pred else float("nan")
                on, off = med["on"], med["off"]
                row = {"model": model, "ranks": n, "cap": cap, "cap_bytes": buckets["cap_bytes"],
                       "buckets": buckets["count"], "collectives": on["collectives"],
                       "step_on_s": on["step_s"], "step_off_s": off["step_s"],
                       "comm_on_s": on["comm_s"], "exposed_on_s": on["exposed_s"],
                       "max_exposed_on_s": on["max_exposed_s"],
                       "max_exposed_share_on": on["max_exposed_share"],
                       "comm_off_s": off["comm_s"],
                       "samples_per_s_on": on["samples_per_s"],
                       "samples_per_s_off": off["samples_per_s"],
                       "pred_step_on_s": p_on, "pred_step_off_s": p_off, "pred_exposed_s": p_exp}
                summary.append(row)
                print("%-9s %7d %5.0f | %8.2f %8.2f %6.3f | %7.2f %8.2f %6.0f%% %6.0f%% | "
                      "%8.2f %8.2f %8.2f" % (
                          human(cap) if cap else "default", buckets["count"], on["collectives"],
                          on["step_s"] * 1e3, off["step_s"] * 1e3, on["step_s"] / off["step_s"],
                          on["comm_s"] * 1e3, on["exposed_s"] * 1e3,
                          100 * on["exposed_s"] / on["comm_s"] if on["comm_s"] else 0,
                          100 * on["max_exposed_share"], p_on * 1e3, p_off * 1e3, p_exp * 1e3))
            rows = [r for r in summary if r["model"] == model and r["ranks"] == n and r["cap"]]
            if rows and default_cap:
                best = min(rows, key=lambda r: r["step_on_s"])
                print("default rule: %s (%s)" % (human(default_cap), [
                    r for r in runs if r["model"] == model and r["ranks"] == n and
                    r["cap"] == 0][0]["buckets"]["cap_reason"]))
                print("measured best with overlap on: cap %s, %.2f ms per step (default %s: "
                      "%.2f ms)" % (human(best["cap"]), best["step_on_s"] * 1e3,
                                    human(default_cap), [r for r in summary if r["model"] == model
                                                         and r["ranks"] == n and r["cap"] == 0][0]
                                    ["step_on_s"] * 1e3))
    print()
    print("coll = collectives per step (buckets + the 1-float agreement); exp/com = exposed / "
          "comm of rank 0; max e/c = the largest exposed / comm over the ranks; load at end %s" %
          open("/proc/loadavg").read().split()[:3])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "overlap_sweep", "started": started.isoformat(),
                       "command": " ".join([sys.executable] + sys.argv), "blas": kernels,
                       "summary": summary, "runs": runs}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
