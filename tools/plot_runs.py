#!/usr/bin/python3
"""Training curves of ringtrain runs side by side: the training loss and the evaluated metric
(test accuracy for class labels, test MSE for regression) against step, and with --wall also
the metric against wall time; one line per run directory, from each run's metrics.jsonl.

    /usr/bin/python3 tools/plot_runs.py runs/a runs/b -l "sum-scaled" -l "mean-of-means" \\
        -o curves.png [--title TEXT] [--wall] [--print]

A resumed run appends to its metrics.jsonl: each launch begins with a record
{"resumed_from": FILE, "step": S}. The steps after S that the previous launch had logged
(after its last checkpoint, before it died) are computed and logged again; ringtrain drops
the earlier records of them when it resumes, files of older versions still hold both, and
each step is drawn once, from the launch whose result was kept. Each launch's wall clock
starts at 0: its wall times are continued from the last wall time the previous launch
recorded (the time after a launch's last record and between launches is not in the files,
so it is not counted).

--print writes the curves as text (step, value and wall time per logged line) so a lesson or
a test can read them without a picture. Needs matplotlib for the PNG (python3-matplotlib).
"""
import argparse
import json
import os
import sys

# metric key in metrics.jsonl -> (axis label, drawn on a log scale)
# (a run with --validation-fraction picks its best on the validation split: its manifest's
# results name that metric; the test set's records then carry "at": "best" | "end")
METRICS = {"test_accuracy": ("test accuracy", False), "test_mse": ("test MSE", True),
           "validation_accuracy": ("validation accuracy", False),
           "validation_mse": ("validation MSE", True)}


def metric_label(key):
    return METRICS.get(key, (key.replace("_", " "), False))[0]


def read_json(path, run_dir):
    try:
        with open(path) as f:
            if path.endswith(".jsonl"):
                return [json.loads(line) for line in f if line.strip()]
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("plot_runs: cannot read %s: %s (is %s a ringtrain run directory?)" % (path, e, run_dir))


def launches_of(records):
    """The records split into launches: a record with "resumed_from" begins a new one."""
    launches = []
    for r in records:
        if "resumed_from" in r or not launches:
            launches.append([])
        launches[-1].append(r)
    return launches


def merge_launches(launches):
    """One record per logged step and kind: a launch that resumed at step S replaces what the
    earlier launches logged after S; its wall_s values are shifted by the wall time the
    launches before it ran (the last one each recorded)."""
    kept, offset_s = [], 0.0
    for launch in launches:
        start = launch[0].get("step", 0) if "resumed_from" in launch[0] else 0
        kept = [r for r in kept if r.get("step", 0) <= start]
        walls = [r["wall_s"] for r in launch if "wall_s" in r]
        kept += [dict(r, wall_s=r["wall_s"] + offset_s) if "wall_s" in r else r for r in launch]
        offset_s += walls[-1] if walls else 0.0
    return kept


class Run:
    """One run directory: loss [(step, loss)], evaluations [(step, wall_s, value)] of its
    metric (metric_key), its manifest and how many launches wrote it."""

    def __init__(self, run_dir):
        launches = launches_of(read_json(os.path.join(run_dir, "metrics.jsonl"), run_dir))
        records = merge_launches(launches)
        manifest_path = os.path.join(run_dir, "manifest.json")
        self.manifest = read_json(manifest_path, run_dir) if os.path.exists(manifest_path) else {}
        self.launches = len(launches)
        self.metric_key = self.manifest.get("results", {}).get("metric") or next(
            (k for r in records for k in METRICS if k in r), None)
        self.loss = [(r["step"], r["loss"]) for r in records if "loss" in r]
        self.evaluations = [(r["step"], r.get("wall_s", 0.0), r[self.metric_key])
                            for r in records if self.metric_key in r]

    def summary(self, label):
        m = self.manifest
        final_loss = "final loss %.4f" % self.loss[-1][1] if self.loss else "no loss logged"
        final_metric = ("final %s %.4g" % (metric_label(self.metric_key), self.evaluations[-1][2])
                        if self.evaluations else "no evaluation")
        return "%s: N=%s, local batches %s, reduction %s, %d launch(es): %s, %s" % (
            label, m.get("world_size"), m.get("local_batches"),
            m.get("reduction", {}).get("convention"), self.launches, final_loss, final_metric)


def print_runs(labels, runs):
    for label, run in zip(labels, runs):
        print(run.summary(label))
        for step, value in run.loss:
            print("  %s loss step %d %.5f" % (label, step, value))
        for step, wall_s, value in run.evaluations:
            print("  %s %s step %d %.5g wall %.6f s" % (label, run.metric_key, step, value, wall_s))


def draw(labels, runs, output, title, wall):
    """The PNG: training loss, then per metric one panel against step (and one against wall
    time with --wall). Returns the panels' names."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = list(dict.fromkeys(r.metric_key for r in runs if r.evaluations))
    panels = [("training loss (window mean)", "step", None, False)]
    for key in keys:
        panels.append((metric_label(key), "step", key, False))
        if wall:
            panels.append((metric_label(key), "wall time (s)", key, True))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (ylabel, xlabel, key, against_wall) in zip(axes[0], panels):
        for label, run in zip(labels, runs):
            if key is None and run.loss:
                ax.plot(*zip(*run.loss), label=label)
            elif key is not None and run.metric_key == key and run.evaluations:
                steps, walls, values = zip(*run.evaluations)
                ax.plot(walls if against_wall else steps, values, marker="o", ms=3, label=label)
        if key is not None and METRICS.get(key, ("", False))[1]:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    return ["%s against %s" % (p[0], p[1]) for p in panels]


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Example: " + __doc__.split("\n\n")[1].strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="ringtrain run directories")
    ap.add_argument("-l", "--label", action="append", default=[], help="one per run, in order")
    ap.add_argument("-o", "--output", help="PNG to write")
    ap.add_argument("--title", default="")
    ap.add_argument("--wall", action="store_true", help="also plot the metric against wall time")
    ap.add_argument("--print", action="store_true", help="print the curves as text")
    args = ap.parse_args()
    if args.label and len(args.label) != len(args.runs):
        ap.error("give one --label per run (%d runs, %d labels)" % (len(args.runs), len(args.label)))
    labels = args.label or [os.path.basename(os.path.normpath(r)) for r in args.runs]
    runs = [Run(r) for r in args.runs]
    if args.print:
        print_runs(labels, runs)
    if args.output:
        panels = draw(labels, runs, args.output, args.title, args.wall)
        print("wrote %s: %s" % (args.output, "; ".join(panels)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
