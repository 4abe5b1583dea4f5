#!/usr/bin/python3
"""Plots for gradient overlap.

  sweep     step time and exposed communication against the bucket cap, overlap on and
            off, measured and predicted, from `bench/overlap_sweep.py --json FILE`
  timeline  one step of a run's trace.json: one row per rank and lane (compute spans of
            forward, backward, optimizer and waits; one lane per bucket ring)

    /usr/bin/python3 tools/plot_overlap.py sweep bench/results/overlap-<date>.json -o sweep.png
    /usr/bin/python3 tools/plot_overlap.py timeline runs/x/trace.json --step 5 -o step.png

Needs matplotlib (python3-matplotlib); a tool, not a dependency of ringtrain itself.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

WHOLE = 1 << 30


def cap_label(nbytes):
    if nbytes >= WHOLE:
        return "whole"
    if nbytes >= 1 << 20:
        return f"{nbytes / (1 << 20):g} MiB"
    return f"{nbytes / 1024:g} KiB"


def plot_sweep(path, out):
    with open(path) as f:
        doc = json.load(f)
    rows = [r for r in doc["summary"] if r["cap"]]  # the default appears under its own cap
    groups = sorted({(r["model"], r["ranks"]) for r in rows})
    fig, axes = plt.subplots(2, len(groups), figsize=(5.2 * len(groups), 7), squeeze=False)
    for col, (model, n) in enumerate(groups):
        sel = sorted((r for r in rows if r["model"] == model and r["ranks"] == n),
                     key=lambda r: r["cap"])
        x = list(range(len(sel)))
        step_ax, exp_ax = axes[0][col], axes[1][col]
        step_ax.plot(x, [r["step_on_s"] * 1e3 for r in sel], "o-", label="overlap on")
        step_ax.plot(x, [r["step_off_s"] * 1e3 for r in sel], "s-", label="overlap off")
        step_ax.plot(x, [r["pred_step_on_s"] * 1e3 for r in sel], "o:", color="C0",
                     label="on, alpha-B prediction")
        step_ax.plot(x, [r["pred_step_off_s"] * 1e3 for r in sel], "s:", color="C1",
                     label="off, alpha-B prediction")
        default = [r for r in doc["summary"] if r["model"] == model and r["ranks"] == n
                   and r["cap"] == 0]
        if default:
            caps = [r["cap"] for r in sel]
            if default[0]["cap_bytes"] in caps:
                step_ax.axvline(caps.index(default[0]["cap_bytes"]), color="grey", ls="--",
                                lw=0.8, label="default rule")
        step_ax.set_title(f"{model}, N={n}: step time")
        step_ax.set_ylabel("ms per step")
        exp_ax.plot(x, [r["exposed_on_s"] * 1e3 for r in sel], "o-", label="exposed, rank 0")
        exp_ax.plot(x, [r["max_exposed_on_s"] * 1e3 for r in sel], "^-",
                    label="exposed, most exposed rank")
        exp_ax.plot(x, [r["comm_on_s"] * 1e3 for r in sel], "d-", label="comm (sum of intervals)")
        exp_ax.plot(x, [r["pred_exposed_s"] * 1e3 for r in sel], "o:", color="C0",
                    label="exposed, prediction")
        exp_ax.set_title(f"{model}, N={n}: overlap on, communication")
        exp_ax.set_ylabel("ms per step")
        for ax in (step_ax, exp_ax):
            ax.set_xticks(x)
            ax.set_xticklabels([cap_label(r["cap"]) for r in sel], rotation=30)
            ax.set_xlabel("bucket cap")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle(f"bucket sweep, {doc['started'][:16]}")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_timeline(path, step, out):
    with open(path) as f:
        trace = json.load(f)
    events = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["args"].get("step") == step]
    if not events:
        raise SystemExit(f"no events of step {step} in {path}")
    lanes = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "thread_name":
            lanes[(e["pid"], e["tid"])] = e["args"]["name"]
    t0 = min(e["ts"] for e in events)
    rows = sorted({(e["pid"], e["tid"]) for e in events})
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(rows) + 1.5))
    colours = {"forward": "C0", "backward": "C1", "optimizer": "C2", "wait": "C3",
               "ring": "C4", "agree": "C5", "data": "C7", "loss": "C7"}
    for y, row in enumerate(rows):
        for e in events:
            if (e["pid"], e["tid"]) != row:
                continue
            kind = e["name"].split()[0]
            ax.barh(y, e["dur"] / 1e3, left=(e["ts"] - t0) / 1e3, height=0.7,
                    color=colours.get(kind, "C8"), edgecolor="white", linewidth=0.3)
            if e["dur"] / 1e3 > 0.04 * max(1e-9, (max(x["ts"] + x["dur"] for x in events) - t0) / 1e3):
                label = e["name"].replace("backward ", "bw ").replace("forward ", "fw ")
                ax.text((e["ts"] - t0 + e["dur"] / 2) / 1e3, y, label, ha="center", va="center",
                        fontsize=6)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"rank {p}: {lanes.get((p, t), t)}" for p, t in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"ms since the start of step {step} (rank 0's clock)")
    ax.set_title(f"step {step}: {path}")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    ax.legend(handles, colours.keys(), fontsize=7, ncol=len(colours), loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("sweep")
    s.add_argument("json")
    s.add_argument("-o", "--output", default="overlap-sweep.png")
    t = sub.add_parser("timeline")
    t.add_argument("trace")
    t.add_argument("--step", type=int, default=5)
    t.add_argument("-o", "--output", default="overlap-step.png")
    args = ap.parse_args()
    if args.what == "sweep":
        plot_sweep(args.json, args.output)
    else:
        plot_timeline(args.trace, args.step, args.output)
    print(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
