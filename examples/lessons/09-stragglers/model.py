"""Lesson 9's table: for the even split and for the split auto settled on, the step time the
model t = max_r(b_r / s_r) + comm predicts beside the one measured.

  model.py EVEN_RUN AUTO_RUN

s_r and comm are what the auto run measured (its last `rebalance` record: the smoothed
compute speeds in samples/s and the communication per step); the measured step time is the
median over metrics.jsonl windows of rank 0's step_s, in the even run after its first two
windows, in the auto run after its last re-split.
"""
import json
import statistics
import sys


def records(run):
    with open(run + "/metrics.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def median_step_s(recs, after_step):
    steps = [r["step_s"] for r in recs if "step_s" in r and r["step"] > after_step]
    return statistics.median(steps) if steps else float("nan")


def model_s(split, speeds, comm):
    return max(b / s for b, s in zip(split, speeds) if b > 0) + comm


def main():
    even_recs, auto_recs = records(sys.argv[1]), records(sys.argv[2])
    moves = [r for r in auto_recs if "rebalance" in r]
    if not moves:
        sys.exit("the auto run never re-split: no `rebalance` record in its metrics.jsonl")
    last = moves[-1]["rebalance"]
    speeds, comm = last["planned_speeds"], last["comm_s"]
    windows = [r["step"] for r in even_recs if "step_s" in r]
    even_split = moves[0]["rebalance"]["old_split"]
    rows = [("even", even_split, median_step_s(even_recs, windows[1] if len(windows) > 2 else 0)),
            ("auto", last["new_split"], median_step_s(auto_recs, moves[-1]["step"]))]
    print("rank speeds s_r measured: %s samples/s; comm %.2f ms per step" %
          (", ".join("%.0f" % s for s in speeds), comm * 1e3))
    print("%-5s %-10s %9s %12s %10s" % ("split", "b_r", "model ms", "measured ms", "meas/model"))
    for name, split, measured in rows:
        predicted = model_s(split, speeds, comm)
        print("%-5s %-10s %9.2f %12.2f %10.2f" % (name, ",".join(map(str, split)),
                                                 predicted * 1e3, measured * 1e3,
                                                 measured / predicted))
    ideal = sum(even_split) / sum(speeds) + comm
    print("ideal split (b_r proportional to s_r): model %.2f ms" % (ideal * 1e3))
    print("auto / even, samples per second: measured %.2fx, model %.2fx" %
          (rows[0][2] / rows[1][2], model_s(even_split, speeds, comm) /
           model_s(last["new_split"], speeds, comm)))


if __name__ == "__main__":
    main()
