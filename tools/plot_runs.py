#!/usr/bin/python3
"""Training curves of ringtrain runs side by side: loss and test accuracy against step (and,
with --wall, against wall time), one line per run directory, from each run's metrics.jsonl.

    /usr/bin/python3 tools/plot_runs.py runs/a runs/b -l "sum-scaled" -l "mean-of-means" \
        -o curves.png [--title TEXT] [--wall] [--print]

--print also writes the curves as text (step, loss, accuracy per logged line) so a lesson or
a test can read them without a picture. Needs matplotlib for the PNG (python3-matplotlib).
"""
import argparse
import json
import os
import sys


def read_run(run_dir):
    """(loss points [(step, loss)], accuracy points [(step, wall_s, accuracy)], manifest)."""
    path = os.path.join(run_dir, "metrics.jsonl")
    try:
        with open(path) as f:
            lines = [json.loads(l) for l in f if l.strip()]
    except OSError as e:
        sys.exit("plot_runs: cannot read %s: %s (is %s a ringtrain run directory?)" % (path, e, run_dir))
    loss = [(m["step"], m["loss"]) for m in lines if "loss" in m]
    accuracy = [(m["step"], m.get("wall_s", 0.0), m["test_accuracy"]) for m in lines if "test_accuracy" in m]
    manifest = {}
    if os.path.exists(os.path.join(run_dir, "manifest.json")):
        with open(os.path.join(run_dir, "manifest.json")) as f:
            manifest = json.load(f)
    return loss, accuracy, manifest


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="ringtrain run directories")
    ap.add_argument("-l", "--label", action="append", default=[], help="one per run, in order")
    ap.add_argument("-o", "--output", help="PNG to write")
    ap.add_argument("--title", default="")
    ap.add_argument("--wall", action="store_true", help="also plot accuracy against wall time")
    ap.add_argument("--print", action="store_true", help="print the curves as text")
    args = ap.parse_args()
    if args.label and len(args.label) != len(args.runs):
        ap.error("give one --label per run (%d runs, %d labels)" % (len(args.runs), len(args.label)))
    labels = args.label or [os.path.basename(os.path.normpath(r)) for r in args.runs]
    data = [read_run(r) for r in args.runs]

    if args.print:
        for label, (loss, accuracy, manifest) in zip(labels, data):
            final = accuracy[-1][2] if accuracy else float("nan")
            print("%s: N=%s, local batches %s, reduction %s: final loss %.4f, final test accuracy %.4f"
                  % (label, manifest.get("world_size"), manifest.get("local_batches"),
                     manifest.get("reduction", {}).get("convention"),
                     loss[-1][1] if loss else float("nan"), final))
            for step, value in loss:
                print("  %s loss step %d %.5f" % (label, step, value))
            for step, _, value in accuracy:
                print("  %s accuracy step %d %.4f" % (label, step, value))
    if not args.output:
        return 0
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    evaluated = any(accuracy for _, accuracy, _ in data)  # runs with --no-eval: loss alone
    panels = (3 if args.wall else 2) if evaluated else 1
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4), squeeze=False)
    axes = axes[0]
    for label, (loss, accuracy, _) in zip(labels, data):
        if loss:
            axes[0].plot(*zip(*loss), label=label)
        if accuracy:
            steps, walls, accs = zip(*accuracy)
            axes[1].plot(steps, accs, marker="o", ms=3, label=label)
            if args.wall:
                axes[2].plot(walls, accs, marker="o", ms=3, label=label)
    axes[0].set_ylabel("training loss (window mean)")
    if evaluated:
        axes[1].set_ylabel("test accuracy")
    for ax in axes[:2]:
        ax.set_xlabel("step")
    if args.wall and evaluated:
        axes[2].set_xlabel("wall time (s)")
        axes[2].set_ylabel("test accuracy")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print("wrote %s" % args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
