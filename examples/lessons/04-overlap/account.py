#!/usr/bin/python3
"""Lesson 4: the step account of runs, from their metrics.jsonl and trace.json.

  account.py LABEL RUN_DIR [LABEL RUN_DIR ...]

For each run: medians over its logging windows after the first (cold) one, rank 0, of the
measured step time and of what the trainer accounts inside it: compute (forward, backward,
optimizer), comm (the sum of the buckets' ring intervals), exposed (time the step was
blocked on communication with no compute left to do). Then the two sums a reader is
tempted to make: compute + comm counts every overlapped microsecond twice; compute + exposed
is the step. Last, what one traced step of rank 0 holds, span by span.
"""
import json
import statistics
import sys


def windows(run_dir):
    with open(run_dir + "/metrics.jsonl") as f:
        records = [json.loads(line) for line in f if line.strip()]
    return [r for r in records if "step_s" in r and "exposed_s" in r][1:]


def med(ws, key):
    return statistics.median(w[key] for w in ws)


def traced_step(run_dir):
    """Rank 0's spans of the last traced step: {lane name: [(name, start_ms, dur_ms)]}."""
    with open(run_dir + "/trace.json") as f:
        events = json.load(f)["traceEvents"]
    lanes = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == 0}
    spans = [e for e in events
             if e["ph"] == "X" and e["pid"] == 0 and not e["name"].startswith("checkpoint")]
    last = max(e["args"].get("step", 0) for e in spans)
    spans = [e for e in spans if e["args"].get("step") == last]
    t0 = min(e["ts"] for e in spans)
    out = {}
    for e in sorted(spans, key=lambda e: e["ts"]):
        out.setdefault(lanes.get(e["tid"], str(e["tid"])), []).append(
            (e["name"], (e["ts"] - t0) / 1e3, e["dur"] / 1e3))
    return last, out


def main(argv):
    pairs = list(zip(argv[1::2], argv[2::2]))
    print("%-12s %9s %9s %9s %9s %10s   %15s %17s" % (
        "", "step ms", "compute", "comm", "exposed", "overlap", "compute+comm", "compute+exposed"))
    for label, run in pairs:
        ws = windows(run)
        step, compute, comm, exposed = (med(ws, k) for k in ("step_s", "compute_s", "comm_s", "exposed_s"))
        print("%-12s %9.2f %9.2f %9.2f %9.2f %9.0f%%   %9.2f (%3.0f%%) %10.2f (%3.0f%%)" % (
            label, 1e3 * step, 1e3 * compute, 1e3 * comm, 1e3 * exposed,
            100 * (1 - exposed / comm) if comm > 0 else 0,
            1e3 * (compute + comm), 100 * (compute + comm) / step,
            1e3 * (compute + exposed), 100 * (compute + exposed) / step))
    print("(overlap = 1 - exposed/comm; the percentages in brackets are of the measured step)")
    for label, run in pairs:
        ws = windows(run)
        step, compute, comm, exposed = (med(ws, k) for k in ("step_s", "compute_s", "comm_s", "exposed_s"))
        closes = abs(compute + exposed - step) <= 0.05 * step
        print("%s: compute + exposed is %sthe measured step (within 5 %%)%s" % (
            label, "" if closes else "NOT ", ": the account closes" if closes else ""))
    label, run = pairs[0]
    step, lanes = traced_step(run)
    print()
    print("%s, rank 0, traced step %d (ms from the step's first span):" % (label, step))
    for lane, spans in lanes.items():
        shown = [s for s in spans if not s[0].startswith("optimizer")]
        opt = [s for s in spans if s[0].startswith("optimizer")]
        print("  %s:" % lane)
        for name, start, dur in shown:
            print("    %8.2f  +%7.2f  %s" % (start, dur, name))
        if opt:
            print("    %8.2f  +%7.2f  optimizer (%d per-bucket pieces, %.2f ms in all)" % (
                opt[0][1], opt[-1][1] + opt[-1][2] - opt[0][1], len(opt), sum(s[2] for s in opt)))


if __name__ == "__main__":
    main(sys.argv)
