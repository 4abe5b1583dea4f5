#!/usr/bin/python3
"""Data-parallel speed benchmark: ringtrain N=2 x 1 thread against PyTorch DDP
(gloo) 2 x 1 thread, and against ringtrain N=1 x 1 thread, global batch 128.

For each model, each round runs three contenders back to back, in an order that rotates
from round to round so that machine noise falls on all of them alike:

  ours-N2   mpiexec.mpich -n 2 ringtrain train --model M --steps W+R*S --no-eval --quiet
            --blas-threads 1 --global-batch 128 --lr 0.01 --log-every gcd(W,S) --run-dir <tmp>
  ours-N1   the same with -n 1
  ddp       /usr/bin/python3 bench/peers/torch_ddp_speed.py --model M   (2 ranks x 1 thread)

Both sides are timed by the same rule, the peer's (W, S, R) = its DEFAULT_STEPS (mlp: 10
warm-up steps, then 7 repeats of 30 steps; cnn: 3, then 5 of 8): W untimed warm-up steps,
then R repeats of S steps, each timed by the wall clock; the figure is global batch / the
median repeat's time per step. Ours takes its repeats from the wall-clock windows of
metrics.jsonl (samples/s per window, every gcd(W, S) steps; consecutive windows make one
repeat). That wall clock covers everything between two metrics lines, including the periodic
replica check, which the peer does not have. ringtrain's whole-run figure
(`results.samples_per_s` of manifest.json: the mean over all steps, the cold first steps
included) is printed and saved beside it. The table shows medians over the rounds and ratios
of medians, with the targets (bench/README-dp.md) and PASS/MISS. From metrics.jsonl of the N=2 runs it also
reports compute_s and comm_s per step (rank 0's view; comm_s is the time spent in the
gradient all-reduce, including waiting for the other rank), over the timed repeats.

Other processes may share the machine. Before each run the driver waits (up to
--wait-quiet s) until the rest of the machine uses under --max-others cores; during the run it
measures what others used (/proc/stat busy time minus our children's CPU time) and re-runs a
disturbed run up to --retries times, keeping the least disturbed attempt. Every kept run's
figure is printed and saved (--json). A failed run is reported and left out of the medians.

  /usr/bin/python3 bench/dp_speed.py [--models mlp,cnn] [--rounds 3] [--ours-flags "..."]
      [--json FILE]

Benchmarks are programs, not timed tests: the ratios come from one invocation.
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DDP_PEER = os.path.join(HERE, "peers", "torch_ddp_speed.py")
sys.path.insert(0, os.path.join(HERE, "peers"))
from torch_ddp_speed import DEFAULT_STEPS as PROTOCOL  # noqa: E402  (W, S, R) per model; imports no torch
TORCH_PYTHON = "/usr/bin/python3"

# Targets (bench/README-dp.md). ours-N2 / DDP: mlp only; ours-N2 / ours-N1: every model.
TARGET_VS_DDP_BEFORE_OVERLAP = {"mlp": 2.5}
TARGET_VS_DDP_WITH_OVERLAP = {"mlp": 3.0}
TARGET_VS_N1 = 1.3


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="mlp,cnn", help="comma-separated: mlp, cnn")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ringtrain", default=os.path.join(ROOT, "build", "ringtrain"))
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--global-batch", type=int, default=128)
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds per single run")
    ap.add_argument("--wait-quiet", type=float, default=30.0,
                    help="before each run, wait up to this many seconds for the rest of the "
                         "machine to use less than --max-others cores")
    ap.add_argument("--max-others", type=float, default=0.25,
                    help="CPU cores other processes may use during a run before it is "
                         "considered disturbed (measured from /proc/stat minus our children)")
    ap.add_argument("--retries", type=int, default=2,
                    help="re-runs of a disturbed run; the least disturbed attempt is kept")
    ap.add_argument("--keep-runs", default="", help="keep ringtrain run directories here")
    ap.add_argument("--ours-flags", default="",
                    help="extra ringtrain train flags for both of our contenders, ones that keep "
                         "the computation bitwise the same (e.g. '--zero 1 --overlap off')")
    ap.add_argument("--json", default="", help="write all measurements and the summary here")
    add_openblas_env_arg(ap)
    args = ap.parse_args()
    args.models = [m for m in args.models.split(",") if m]
    for m in args.models:
        if m not in PROTOCOL:
            ap.error("unknown model %r (mlp, cnn)" % m)
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    if not os.access(args.ringtrain, os.X_OK):
        ap.error("no ringtrain executable at %s (build it or pass --ringtrain)" % args.ringtrain)
    return args


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


TICK = os.sysconf("SC_CLK_TCK")


def cpu_busy_s():
    """Busy CPU seconds of the whole machine so far (all cores, /proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / TICK


def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def busy_cores(seconds=0.5):
    """CPU cores busy over a short idle interval of ours: what the rest of the machine uses."""
    b0, t0 = cpu_busy_s(), time.monotonic()
    time.sleep(seconds)
    return round((cpu_busy_s() - b0) / (time.monotonic() - t0), 2)


def measured(fn):
    """Run fn(); return its result, and the cores others used meanwhile (busy minus ours)."""
    b0, c0, t0 = cpu_busy_s(), children_cpu_s(), time.monotonic()
    rec = fn()
    wall = time.monotonic() - t0
    others = ((cpu_busy_s() - b0) - (children_cpu_s() - c0)) / wall
    return rec, round(max(0.0, others), 2), round(wall, 2)


def ringtrain_supports(ringtrain, flag):
    out = subprocess.run([ringtrain, "train", "--help"], capture_output=True, text=True, timeout=30)
    return flag in out.stdout


def run_ringtrain(args, cmd, run_dir):
    """Run one ringtrain job (bounded by MPIEXEC_TIMEOUT and --timeout) that writes run_dir;
    return its manifest.json and its metrics.jsonl records."""
    manifest, records, _ = run_ringtrain_logged(args, cmd, run_dir)
    return manifest, records


def run_ringtrain_logged(args, cmd, run_dir):
    """run_ringtrain, and what the job printed (stdout, then stderr) as a third value."""
    env = dict(os.environ, MPIEXEC_TIMEOUT=str(int(args.timeout)))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout + 15, env=env)
    if proc.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), proc.returncode,
                                                 proc.stderr.strip()[-500:]))
    with open(os.path.join(run_dir, "manifest.json")) as f:
        manifest = json.load(f)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return manifest, records, proc.stdout + proc.stderr


def timed_repeats(windows, warmup, steps, repeats, log_every, global_batch):
    """The peer's timing rule applied to our metrics.jsonl: leave out the first `warmup` steps,
    then make `repeats` repeats of `steps` steps from consecutive windows of `log_every` steps;
    return each repeat's wall-clock time per step (a window's wall time is its steps' samples
    divided by its samples/s)."""
    timed = [w for w in windows if "samples_per_s" in w and w["step"] > warmup]
    per_repeat = steps // log_every
    if len(timed) < repeats * per_repeat or any(w["step"] % log_every for w in timed):
        raise RuntimeError("metrics.jsonl has %d windows after step %d, %d repeats of %d "
                           "windows were expected" % (len(timed), warmup, repeats, per_repeat))
    out = []
    for r in range(repeats):
        chunk = timed[r * per_repeat:(r + 1) * per_repeat]
        wall = sum(log_every * global_batch / w["samples_per_s"] for w in chunk)
        out.append(wall / steps)
    return out


def run_ours(args, model, ranks, keep_dir):
    warmup, steps_per_repeat, repeats = PROTOCOL[model]
    steps = warmup + repeats * steps_per_repeat
    log_every = math.gcd(warmup, steps_per_repeat)
    run_dir = tempfile.mkdtemp(prefix="dp_speed-%s-n%d-" % (model, ranks))
    cmd = [args.mpiexec, "-n", str(ranks), args.ringtrain, "train", "--checkpoint-every", "0", "--model", model,
           "--steps", str(steps), "--no-eval", "--quiet", "--blas-threads", "1",
           "--global-batch", str(args.global_batch), "--lr", "0.01",
           "--log-every", str(log_every), "--run-dir", run_dir] + args.ours_flags.split()
    try:
        manifest, windows = run_ringtrain(args, cmd, run_dir)
    finally:
        if keep_dir:
            dest = os.path.join(keep_dir, os.path.basename(run_dir))
            shutil.copytree(run_dir, dest)
        shutil.rmtree(run_dir, ignore_errors=True)
    res = manifest["results"]
    if manifest.get("world_size") != ranks or manifest.get("blas_threads") != 1 \
            or res.get("steps") != steps:
        raise RuntimeError("unexpected manifest for %s: world_size %s, blas_threads %s, steps %s"
                           % (cmd, manifest.get("world_size"), manifest.get("blas_threads"),
                              res.get("steps")))
    repeat_step_s = timed_repeats(windows, warmup, steps_per_repeat, repeats, log_every,
                                  args.global_batch)
    median_step_s = statistics.median(repeat_step_s)
    timed = [w for w in windows if "step_s" in w and w["step"] > warmup]
    rec = {"samples_per_s": args.global_batch / median_step_s, "mean_step_s": median_step_s,
           "repeat_step_s": repeat_step_s, "whole_run_samples_per_s": res["samples_per_s"],
           "whole_run_mean_step_s": res["mean_step_s"], "wall_s": res["wall_s"],
           "steps": steps, "warmup": warmup, "repeats": repeats,
           "steps_per_repeat": steps_per_repeat, "log_every": log_every}
    rec["compute_s"] = statistics.mean(w["compute_s"] for w in timed)
    rec["comm_s"] = statistics.mean(w["comm_s"] for w in timed)
    rec["comm_fraction"] = rec["comm_s"] / (rec["compute_s"] + rec["comm_s"])
    if all("exposed_s" in w for w in timed):  # ringtrain with overlap
        # comm_s is then the sum of the step's collective intervals, which overlap
        # compute; exposed_s is what communication added to the step.
        rec["exposed_s"] = statistics.mean(w["exposed_s"] for w in timed)
        rec["exposed_fraction"] = rec["exposed_s"] / statistics.mean(w["step_s"] for w in timed)
    rec["windows"] = [{k: w.get(k) for k in ("step", "step_s", "samples_per_s", "compute_s",
                                             "comm_s", "exposed_s")}
                      for w in windows if "step_s" in w]
    return rec


# OpenBLAS settings that an environment may carry and that pin its kernels and blocking,
# which can slow a step markedly (bench/README-dp.md, "OpenBLAS pins in the environment").
# Every contender gets the same setting.
OPENBLAS_PINS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def add_openblas_env_arg(ap):
    ap.add_argument("--keep-openblas-env", action="store_true",
                    help="keep %s from the environment (default: unset them, so OpenBLAS, "
                         "or ringtrain, picks the kernels for this CPU, the same for every "
                         "contender)" % " and ".join(OPENBLAS_PINS))


def unpin_openblas_env(args):
    """Removes OPENBLAS_PINS from this process's environment (inherited by every contender)
    unless --keep-openblas-env, saying so."""
    if getattr(args, "keep_openblas_env", False):
        return
    for name in OPENBLAS_PINS:
        if name in os.environ:
            print("bench: unsetting %s=%s from the environment for every contender "
                  "(--keep-openblas-env keeps it)" % (name, os.environ.pop(name)), flush=True)


def blas_kernels(args):
    """The OpenBLAS kernels ringtrain runs with here (from a one-step run's manifest). Unless
    --keep-openblas-env, OPENBLAS_PINS are first removed from the environment (printed).
    When ringtrain had to choose the kernels (OpenBLAS took the CPU for an older one, see
    blas.hpp), the same OPENBLAS_CORETYPE is exported to every contender, so PyTorch gets the
    same kernels; so is the OPENBLAS_THREAD_TIMEOUT that ringtrain sets (idle OpenBLAS
    threads sleep)."""
    unpin_openblas_env(args)
    run_dir = tempfile.mkdtemp(prefix="dp_speed-probe-")
    try:
        subprocess.run([args.ringtrain, "train", "--steps", "1", "--no-eval", "--quiet",
                        "--run-dir", run_dir], check=True, capture_output=True, timeout=120)
        with open(os.path.join(run_dir, "manifest.json")) as f:
            report = json.load(f).get("blas_kernels", "unknown")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    if "set by ringtrain" in report and "OPENBLAS_CORETYPE" not in os.environ:
        os.environ["OPENBLAS_CORETYPE"] = report.split()[2]
    timeout = re.search(r"OPENBLAS_THREAD_TIMEOUT=(\d+)", report)
    if timeout and "OPENBLAS_THREAD_TIMEOUT" not in os.environ:
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = timeout.group(1)
    return report


def run_ddp(args, model):
    cmd = [TORCH_PYTHON, DDP_PEER, "--model", model, "--world-size", "2", "--threads", "1",
           "--global-batch", str(args.global_batch), "--timeout", str(args.timeout - 10)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout + 15)
    if proc.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), proc.returncode,
                                                 proc.stderr.strip()[-500:]))
    line = [l for l in proc.stdout.splitlines() if l.startswith("{")][-1]
    res = json.loads(line)
    return {"samples_per_s": res["samples_per_s_median"], "mean_step_s": res["step_s_median"],
            "peer": res}


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def verdict(value, target):
    if target is None or value is None:
        return ""
    return "PASS" if value >= target else "MISS"


def main():
    args = parse_args()
    contenders = ["ours-N2", "ours-N1", "ddp"]
    has_overlap = ringtrain_supports(args.ringtrain, "--overlap")
    with open(args.ringtrain, "rb") as f:
        binary_sha = hashlib.sha256(f.read()).hexdigest()[:16]
    started = datetime.datetime.now().astimezone()

    if args.wait_quiet > 0:
        deadline = time.monotonic() + args.wait_quiet
        while load1() >= 1.0 and time.monotonic() < deadline:
            time.sleep(10)
    kernels = blas_kernels(args)
    print("dp_speed: %s, %d cores, load %s at start, ringtrain %s (sha256 %s), overlap flag %s"
          % (started.strftime("%Y-%m-%d %H:%M:%S %Z"), os.cpu_count(),
             open("/proc/loadavg").read().split()[:3], args.ringtrain, binary_sha,
             "present" if has_overlap else "absent (all-reduce after backward)"), flush=True)
    print("dp_speed: %s; every contender runs with OPENBLAS_CORETYPE=%s, "
          "OPENBLAS_THREAD_TIMEOUT=%s; our extra flags [%s]"
          % (kernels, os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
             os.environ.get("OPENBLAS_THREAD_TIMEOUT", "(unset)"), args.ours_flags), flush=True)
    if load1() > 1.0:
        print("dp_speed: WARNING: 1-minute load %.2f > 1 at start: other work shares the 2 cores"
              % load1(), flush=True)

    runs = []  # every kept measurement
    failures = []  # runs that failed (error, timeout); reported, not fatal
    for rnd in range(args.rounds):
        for mi, model in enumerate(args.models):
            shift = (rnd + mi) % len(contenders)
            for who in contenders[shift:] + contenders[:shift]:
                def once():
                    if who == "ddp":
                        return run_ddp(args, model)
                    return run_ours(args, model, 2 if who == "ours-N2" else 1, args.keep_runs)
                attempts = []
                for attempt in range(args.retries + 1):
                    deadline = time.monotonic() + args.wait_quiet
                    before = busy_cores()
                    while before > args.max_others and time.monotonic() < deadline:
                        time.sleep(2)
                        before = busy_cores()
                    try:
                        rec, others, wall = measured(once)
                    except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError,
                            IndexError, OSError) as e:
                        print("  round %d  %-4s %-8s FAILED: %s" % (rnd + 1, model, who,
                                                                    str(e)[-300:]), flush=True)
                        failures.append({"round": rnd + 1, "model": model, "contender": who,
                                         "error": str(e)[-1000:]})
                        continue
                    rec.update({"round": rnd + 1, "model": model, "contender": who,
                                "attempt": attempt + 1, "others_busy_cores_before": before,
                                "others_busy_cores_during": others, "run_s": wall})
                    attempts.append(rec)
                    if others <= args.max_others:
                        break
                    print("  round %d  %-4s %-8s disturbed: others used %.2f cores (%.1f "
                          "samples/s)%s" % (rnd + 1, model, who, others, rec["samples_per_s"],
                                            ", again" if attempt < args.retries else ""),
                          flush=True)
                if not attempts:
                    continue  # every attempt failed; the medians use the other rounds
                rec = min(attempts, key=lambda r: r["others_busy_cores_during"])
                rec["attempts"] = len(attempts)
                runs.append(rec)
                others = rec["others_busy_cores_during"]
                extra = ""
                if "exposed_s" in rec and who == "ours-N2":
                    extra = "  compute %.2f ms  comm %.2f ms  exposed %.2f ms" % (
                        rec["compute_s"] * 1e3, rec["comm_s"] * 1e3, rec["exposed_s"] * 1e3)
                elif "comm_fraction" in rec and who == "ours-N2":
                    extra = "  compute %.2f ms  comm %.2f ms (%.0f%%)" % (
                        rec["compute_s"] * 1e3, rec["comm_s"] * 1e3, 100 * rec["comm_fraction"])
                print("  round %d  %-4s %-8s %8.1f samples/s  step %7.2f ms  "
                      "(others %.2f cores)%s" % (rnd + 1, model, who, rec["samples_per_s"],
                                                      rec["mean_step_s"] * 1e3, others, extra),
                      flush=True)

    if not runs:
        raise RuntimeError("every run failed: %s" % failures[-1]["error"] if failures else "no runs")
    summary = {}
    for model in args.models:
        def pick(who, key="samples_per_s"):
            return [r.get(key) for r in runs if r["model"] == model and r["contender"] == who]

        def by_round(who):
            return {r["round"]: r["samples_per_s"] for r in runs
                    if r["model"] == model and r["contender"] == who}

        def per_round(a, b):
            ra, rb = by_round(a), by_round(b)
            return [ra[k] / rb[k] for k in sorted(ra) if k in rb]

        def ratio(a, b):
            return a / b if a and b else None

        n2, n1, ddp = med(pick("ours-N2")), med(pick("ours-N1")), med(pick("ddp"))
        per_round_ddp = per_round("ours-N2", "ddp")
        per_round_n1 = per_round("ours-N2", "ours-N1")
        overlapping = has_overlap and not re.search(r"--overlap[= ]+off\b", args.ours_flags)
        target_ddp = (TARGET_VS_DDP_WITH_OVERLAP if overlapping
                      else TARGET_VS_DDP_BEFORE_OVERLAP).get(model)
        s = {
            "ours_n2_samples_per_s": n2, "ours_n1_samples_per_s": n1, "ddp_samples_per_s": ddp,
            "ours_n2_whole_run_samples_per_s": med(pick("ours-N2", "whole_run_samples_per_s")),
            "ours_n1_whole_run_samples_per_s": med(pick("ours-N1", "whole_run_samples_per_s")),
            "ratio_n2_vs_ddp": ratio(n2, ddp), "ratio_n2_vs_n1": ratio(n2, n1),
            "ratio_n2_vs_ddp_per_round": per_round_ddp, "ratio_n2_vs_n1_per_round": per_round_n1,
            "target_vs_ddp": target_ddp,
            "target_vs_ddp_with_overlap": TARGET_VS_DDP_WITH_OVERLAP.get(model),
            "target_vs_n1": TARGET_VS_N1,
            "n2_compute_s": med(pick("ours-N2", "compute_s")),
            "n2_comm_s": med(pick("ours-N2", "comm_s")),
            "n2_comm_fraction": med(pick("ours-N2", "comm_fraction")),
            "n2_exposed_s": med(pick("ours-N2", "exposed_s")),
            "n1_compute_s": med(pick("ours-N1", "compute_s")),
        }
        s["verdict_vs_ddp"] = verdict(s["ratio_n2_vs_ddp"], target_ddp)
        s["verdict_vs_ddp_with_overlap"] = verdict(s["ratio_n2_vs_ddp"],
                                                   s["target_vs_ddp_with_overlap"])
        s["verdict_vs_n1"] = verdict(s["ratio_n2_vs_n1"], TARGET_VS_N1)
        summary[model] = s

    def fmt_ratio(value, target, per_round, verdict_text):
        if value is None:
            return "n/a"
        t = ("%.1fx" % target) if target else "-"
        rng = "[%4.2f-%4.2f]" % (min(per_round), max(per_round)) if per_round else "[   n/a   ]"
        return "%5.2fx %s %5s %4s" % (value, rng, t, verdict_text or "")

    def fmt_num(value):
        return "%11.1f" % value if value is not None else "%11s" % "n/a"

    print()
    print("medians over %d round(s); samples/s = global batch %d / the median repeat's step time "
          "(both sides: W warm-up steps, then R repeats of S steps: %s); [min-max] of per-round "
          "ratios" % (args.rounds, args.global_batch,
                      ", ".join("%s W=%d S=%d R=%d" % ((m,) + PROTOCOL[m]) for m in args.models)))
    print("%-5s %11s %11s %11s | %-31s | %-31s" % (
        "model", "ours N=2x1", "ours N=1x1", "DDP 2x1", "N=2 / DDP  [range] target",
        "N=2 / N=1  [range] target"))
    for model, s in summary.items():
        print("%-5s %s %s %s | %-31s | %-31s" % (
            model, fmt_num(s["ours_n2_samples_per_s"]), fmt_num(s["ours_n1_samples_per_s"]),
            fmt_num(s["ddp_samples_per_s"]),
            fmt_ratio(s["ratio_n2_vs_ddp"], s["target_vs_ddp"], s["ratio_n2_vs_ddp_per_round"],
                      s["verdict_vs_ddp"]),
            fmt_ratio(s["ratio_n2_vs_n1"], TARGET_VS_N1, s["ratio_n2_vs_n1_per_round"],
                      s["verdict_vs_n1"])))
    for model, s in summary.items():
        if s.get("target_vs_ddp_with_overlap") and not has_overlap and s["ratio_n2_vs_ddp"]:
            print("%-5s overlap target %.1fx vs DDP: %.2fx now (%s; ringtrain has no overlap yet)"
                  % (model, s["target_vs_ddp_with_overlap"], s["ratio_n2_vs_ddp"],
                     s["verdict_vs_ddp_with_overlap"]))
    for model, s in summary.items():
        whole = s["ours_n2_whole_run_samples_per_s"]
        if whole and s["ddp_samples_per_s"]:
            print("%-5s ours N=2 over the whole run (manifest mean, cold first steps included): "
                  "%.1f samples/s, %.2fx DDP" % (model, whole, whole / s["ddp_samples_per_s"]))
    if failures:
        print("%d run(s) FAILED and are left out of the medians (see --json)" % len(failures))
    print()
    print("ringtrain N=2 step split (rank 0, metrics.jsonl windows of the timed repeats; medians):")
    for model, s in summary.items():
        if s["n2_comm_s"] is None:
            continue
        if s["n2_exposed_s"] is not None:
            print("%-5s compute %7.2f ms  comm (sum of collective intervals, overlapping "
                  "compute) %7.2f ms  exposed %7.2f ms   (N=1 compute %7.2f ms; whole run N=2 %.1f "
                  "/ N=1 %.1f samples/s)" % (
                      model, s["n2_compute_s"] * 1e3, s["n2_comm_s"] * 1e3,
                      s["n2_exposed_s"] * 1e3, (s["n1_compute_s"] or 0) * 1e3,
                      s["ours_n2_whole_run_samples_per_s"] or 0,
                      s["ours_n1_whole_run_samples_per_s"] or 0))
            continue
        print("%-5s compute %7.2f ms  comm %7.2f ms  comm share %4.1f%%   "
              "(N=1 compute %7.2f ms; whole run N=2 %.1f / N=1 %.1f samples/s)" % (
                  model, s["n2_compute_s"] * 1e3, s["n2_comm_s"] * 1e3,
                  100 * s["n2_comm_fraction"], (s["n1_compute_s"] or 0) * 1e3,
                  s["ours_n2_whole_run_samples_per_s"] or 0,
                  s["ours_n1_whole_run_samples_per_s"] or 0))
    disturbed = [r for r in runs if r["others_busy_cores_during"] > args.max_others]
    print("other processes during the kept runs: median %.2f cores, max %.2f; %d of %d kept "
          "runs above %.2f cores (disturbed); load at end %s" % (
              med([r["others_busy_cores_during"] for r in runs]),
              max(r["others_busy_cores_during"] for r in runs), len(disturbed), len(runs),
              args.max_others, open("/proc/loadavg").read().split()[:3]))

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "dp_speed", "started": started.isoformat(),
                       "command": " ".join([sys.executable] + sys.argv),
                       "cores": os.cpu_count(), "rounds": args.rounds,
                       "global_batch": args.global_batch, "protocol": {m: PROTOCOL[m] for m in args.models},
                       "ringtrain": args.ringtrain, "ringtrain_sha256_16": binary_sha,
                       "ours_flags": args.ours_flags,
                       "ringtrain_overlap_flag": has_overlap, "blas_kernels": kernels,
                       "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
                       "openblas_thread_timeout": os.environ.get("OPENBLAS_THREAD_TIMEOUT"),
                       "max_others": args.max_others, "retries": args.retries,
                       "disturbed_runs": len(disturbed), "failures": failures,
                       "summary": summary, "runs": runs}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print("dp_speed: %s" % e, file=sys.stderr)
        sys.exit(1)
