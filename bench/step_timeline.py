#!/usr/bin/python3
"""Where a training step's time goes, rank by rank: the median timeline of a run's trace.json.

Every span of a traced step (trace.json, written by `ringtrain train --trace-steps K`) is placed
relative to the step's first event on any rank (rank clocks are aligned to rank 0's in the
trace), and each span's start and end are the medians over the steps. Layer spans are merged
into "forward" and "backward" (first start to last end); a span that occurs several times in
a step (the two waits of ZeRO-1) is numbered in order. Rows are sorted by median start.

  /usr/bin/python3 bench/step_timeline.py RUN_DIR [--skip 10]

--skip leaves out the first traced steps (cold caches, first-touch page faults). A reading
aid, not a benchmark: it compares nothing.
"""
import argparse
import collections
import json
import os
import statistics
import sys


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", help="a run directory holding trace.json")
    ap.add_argument("--skip", type=int, default=10, help="first traced steps left out")
    args = ap.parse_args()
    if args.skip < 0:
        ap.error("--skip %d: give 0 or more steps" % args.skip)
    return args


def group(name):
    for phase in ("forward", "backward"):
        if name.startswith(phase + " "):
            return phase
    return name


def main():
    args = parse_args()
    path = os.path.join(args.run_dir, "trace.json")
    try:
        with open(path) as f:
            trace = json.load(f)
    except (OSError, ValueError) as error:
        sys.exit("step_timeline: cannot read %s: %s (run with --trace-steps K and --run-dir)"
                 % (path, error))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    by_step = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and "step" in e.get("args", {}):
            by_step[e["args"]["step"]].append(e)
    steps = sorted(by_step)[args.skip:]
    if not steps:
        sys.exit("step_timeline: %s holds %d traced steps; lower --skip or trace more steps"
                 % (path, len(by_step)))
    # (rank, lane, name) -> list of (start, end) in microseconds from the step's origin
    spans = collections.defaultdict(list)
    for step in steps:
        origin = min(e["ts"] for e in by_step[step])
        # (rank, lane, name) -> this step's intervals, in start order
        intervals = collections.defaultdict(list)
        for e in sorted(by_step[step], key=lambda e: e["ts"]):
            start = e["ts"] - origin
            intervals[(e["pid"], e["tid"], group(e["name"]))].append((start, start + e["dur"]))
        merged = {}
        for (rank, tid, name), found in intervals.items():
            if name in ("forward", "backward"):  # first start to last end
                merged[(rank, tid, name)] = (found[0][0], max(end for _, end in found))
            elif len(found) == 1:
                merged[(rank, tid, name)] = found[0]
            else:  # a name seen several times in the step: numbered in order
                for n, interval in enumerate(found, 1):
                    merged[(rank, tid, "%s #%d" % (name, n))] = interval
        for key, value in merged.items():
            spans[key].append(value)
    print("step_timeline: %s, steps %d..%d (%d steps, medians; 0 = the step's first event "
          "on any rank)" % (path, steps[0], steps[-1], len(steps)))
    for rank in sorted({k[0] for k in spans}):
        rows = []
        for (r, tid, name), values in spans.items():
            if r != rank:
                continue
            start = statistics.median(v[0] for v in values)
            end = statistics.median(v[1] for v in values)
            duration = statistics.median(v[1] - v[0] for v in values)
            lane = lanes.get((r, tid), "lane %d" % tid)
            rows.append((start, end, duration, lane, name, len(values)))
        print("rank %d" % rank)
        print("  %-34s %-22s %9s %9s %9s %6s" % ("span", "lane", "start us", "end us", "dur us",
                                                 "steps"))
        for start, end, duration, lane, name, count in sorted(rows):
            print("  %-34s %-22s %9.0f %9.0f %9.0f %6d"
                  % (name[:34], lane[:22], start, end, duration, count))


if __name__ == "__main__":
    main()
