#!/usr/bin/python3
"""Lesson 3: the bucket sweep. The same training with gradient buckets capped from 16 KiB to the
whole model, overlap on and off; per cap the buckets, the collectives per step, and medians of
the measured step, the communication (sum of the rings' intervals) and the exposed wait, next
to the alpha-beta model's time for the rings alone.

  bucket_sweep.py --ringtrain BUILD/ringtrain --out DIR [--model mlp] [--ranks 2]
                  [--steps 100] [--caps 16K,64K,...,whole] [--mpiexec mpiexec.mpich]

The model charges every bucket of M_k bytes one ring, t_k = 2(N-1) alpha + 2(N-1)/N M_k / B,
with the alpha and B the trainer used for its default cap (manifest gradient_buckets.ring_fit):
many small buckets pay many startups 2(N-1) alpha, one big bucket pays one; but a bucket's ring
can only start when backward has written its last gradient, and one bucket for the whole
model starts after backward ends, with nothing left to hide it behind.
"""
import argparse
import json
import os
import statistics
import subprocess

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
WHOLE = 1 << 30  # a cap above any model here: one bucket


def parse_cap(text):
    if text == "whole":
        return WHOLE
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def label(cap):
    if cap >= WHOLE:
        return "whole"
    for unit in "MK":
        if cap % UNITS[unit] == 0:
            return "%d%s" % (cap // UNITS[unit], unit)
    return str(cap)


def run(o, cap, overlap):
    run_dir = os.path.join(o.out, "%s-%s-overlap-%s" % (o.model, label(cap), overlap))
    subprocess.run([o.mpiexec, "-n", str(o.ranks), o.ringtrain, "train", "--checkpoint-every", "0", "--model", o.model,
                    "--steps", str(o.steps), "--no-eval", "--log-every", str(max(1, o.steps // 5)),
                    "--trace-steps", "0", "--quiet", "--bucket-bytes", str(cap),
                    "--overlap", overlap, "--run-dir", run_dir], check=True)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        windows = [json.loads(l) for l in f if '"exposed_s"' in l][1:]  # the first is cold
    buckets = json.load(open(os.path.join(run_dir, "manifest.json")))["gradient_buckets"]
    med = lambda k: statistics.median(w[k] for w in windows)
    return {"cap": cap, "overlap": overlap, "buckets": buckets["count"],
            "bytes": buckets["bytes"], "fit": buckets["ring_fit"],
            "collectives": med("collectives"), "step_s": med("step_s"),
            "comm_s": med("comm_s"), "exposed_s": med("exposed_s")}


def model_time(r, n):
    a, b = r["fit"]["alpha_s"], r["fit"]["bandwidth_Bps"]
    return sum(2 * (n - 1) * a + 2 * (n - 1) / n * m / b for m in r["bytes"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ringtrain", required=True)
    p.add_argument("--mpiexec", default="mpiexec.mpich")
    p.add_argument("--out", required=True)
    p.add_argument("--model", default="mlp")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--caps", default="16K,64K,256K,1M,4M,whole")
    o = p.parse_args()
    os.makedirs(o.out, exist_ok=True)
    rows = []
    for cap in map(parse_cap, o.caps.split(",")):
        for overlap in ("on", "off"):
            rows.append(run(o, cap, overlap))
    fit = rows[0]["fit"]
    print("%s at N=%d, %d steps per run; ring fit alpha = %.2f us, B = %.2f GB/s (%s)" % (
        o.model, o.ranks, o.steps, 1e6 * fit["alpha_s"], fit["bandwidth_Bps"] / 1e9, fit["source"]))
    print()
    print("%-6s %7s %-8s %11s %9s %9s %9s %14s" % (
        "cap", "buckets", "overlap", "coll./step", "step ms", "comm ms", "exposed", "model rings ms"))
    for r in rows:
        print("%-6s %7d %-8s %11.0f %9.2f %9.2f %9.2f %14.2f" % (
            label(r["cap"]), r["buckets"], r["overlap"], r["collectives"], 1e3 * r["step_s"],
            1e3 * r["comm_s"], 1e3 * r["exposed_s"], 1e3 * model_time(r, o.ranks)))
    on = [r for r in rows if r["overlap"] == "on"]
    best = min(on, key=lambda r: r["step_s"])
    print()
    print("fastest step with overlap: cap %s (%d buckets, %.2f ms)" % (
        label(best["cap"]), best["buckets"], 1e3 * best["step_s"]))
    with open(os.path.join(o.out, "bucket_sweep.json"), "w") as f:
        json.dump({"model": o.model, "ranks": o.ranks, "steps": o.steps, "rows": rows}, f, indent=1)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    x = list(range(len(on)))
    for overlap, style in (("on", "o-"), ("off", "s--")):
        rs = [r for r in rows if r["overlap"] == overlap]
        ax.plot(x, [1e3 * r["step_s"] for r in rs], style, label="step, overlap " + overlap)
    ax.plot(x, [1e3 * r["exposed_s"] for r in on], "^-", label="exposed wait, overlap on")
    ax.plot(x, [1e3 * model_time(r, o.ranks) for r in on], ":", label="model: the rings alone")
    ax.set_xticks(x, ["%s\n(%d)" % (label(r["cap"]), r["buckets"]) for r in on])
    ax.set_xlabel("bucket cap (buckets)")
    ax.set_ylabel("ms per step")
    ax.set_title("%s, N=%d" % (o.model, o.ranks))
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(o.out, "bucket_sweep.png"), dpi=120)
    print("plot: %s" % os.path.join(o.out, "bucket_sweep.png"))


if __name__ == "__main__":
    main()
