#!/usr/bin/python3
"""Kill campaign: kill a rank at a random moment, resume with --resume auto, check the result is
bitwise the run that was never interrupted.

Usage:
  tools/kill_campaign.py [--trials K] [--seed S] [--ranks N] [--work-dir DIR] [--keep-all]
                         [--ringtrain build/ringtrain] [--mpiexec mpiexec.mpich]
                         [--checkpoint-async on|off]

Config of every run (small and fast, ~1 s per launch here):
  train --model mlp --mlp-hidden 64 --global-batch 32 --steps 40 --no-eval --log-every 5
        --checkpoint-every 10 --quiet            (--keep 3, the default)
One uninterrupted reference run is made first. Then each trial gets a fresh run directory and
one fault, its kind drawn uniformly from three:
  kill-step   --test-kill-rank r --test-kill-step s: rank r (uniform) SIGKILLs itself after
              step s (uniform 1..40).
  crash-phase --test-crash-phase k --test-crash-step s: rank 0 SIGKILLs itself in phase k
              (uniform 1..5) of the save at step s: s uniform over the saves 10,20,30,40 for
              k=1..4; s=40 for k=5 (phase 5 is "during prune", and with --keep 3 only the 4th
              save prunes anything).
  external    SIGKILL from outside to rank r (uniform): a ringtrain process below the mpiexec
              of the trial (found through /proc, rank from its PMI_RANK), at a moment drawn with
              probability 1/2 each from two windows:
                life      delay after the launch = u * the life of an uninterrupted run
                          (start-up, ~0.8 s of the ~1 s here, dominates);
                training  delay after the trial's own first metrics line (step 5) = u * the
                          time an uninterrupted run lives after that line (steps 6..40, the
                          saves, shut-down): anchored on the trial's progress because start-up
                          time varies more between runs than training lasts;
              u is uniform in [0, 1); the durations are the medians of the reference and the
              latest clean launches from step 0 (attempts that finished), since the machine's
              load (shared, 2 cores) moves them by tens of percent.
              If the rank is not spawned yet it is killed as soon as it is; if the job has
              already ended, the trial has no fault (reported apart).
The fault goes into attempt 0; tools/supervise.py then relaunches with --resume auto until the
run finishes (at most --max-restarts). A trial *resumed bitwise* when: the supervised run
finished, LATEST names step-00000040.h5, h5diff finds /model /optimizer /schedule /data /rng
equal to the reference's final checkpoint, and the (step, loss) records of metrics.jsonl equal
the reference's, same steps in the same order, no more, no less. Also checked, reported apart
and not part of the verdict: manifest.json results.steps == 40.

With --checkpoint-async on every run (reference included) writes its periodic saves in the
background; the phases of crash-phase then happen on rank 0's writer thread while training
goes on (the end save, step 40, stays synchronous). A trial's kill "landed during a persist"
when the killed attempt had taken the snapshot of a save (its metrics.jsonl has the
{"save_started": "async"} record) and LATEST did not name that save yet when the attempt
ended: it is counted and marked per trial.

Passing trial directories are deleted unless --keep-all; failing ones (and those whose manifest
is off) are kept for inspection.
--seed fixes every random draw (fault kinds, ranks, steps, delays); where an external kill
lands still depends on timing.
"""
import argparse
import collections
import datetime
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import supervise  # noqa: E402

STEPS = 40
SAVE_EVERY = 10
GROUPS = ("model", "optimizer", "schedule", "data", "rng")


def train_args(log_every, checkpoint_async):
    return ["--model", "mlp", "--mlp-hidden", "64", "--global-batch", "32", "--steps", str(STEPS),
            "--no-eval", "--log-every", str(log_every), "--checkpoint-every", str(SAVE_EVERY),
            "--checkpoint-async", checkpoint_async, "--quiet"]


def persist_in_flight(run_dir):
    """The step of the asynchronous save whose background write a killed attempt left
    unfinished (snapshot taken, LATEST not moved to it yet), or None."""
    records = supervise.read_records(os.path.join(run_dir, "metrics.jsonl"))
    started = [r["step"] for r in records if r.get("save_started") == "async"]
    if not started:
        return None
    return started[-1] if (supervise.latest_step(run_dir) or 0) < started[-1] else None


def losses(run_dir):
    return [(r["step"], r["loss"]) for r in supervise.read_records(os.path.join(run_dir, "metrics.jsonl"))
            if "loss" in r]


def h5_differences(a, b):
    """Groups that differ between two checkpoint files ([] if all five are equal)."""
    bad = []
    for g in GROUPS:
        p = subprocess.run(["h5diff", a, b, "/" + g, "/" + g], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            bad.append((g, p.returncode, p.stdout.strip().splitlines()[:3]))
    return bad


def is_ringtrain(pid):
    """True if process `pid` runs a ringtrain executable. Its comm is no guide: ringtrain may
    re-exec itself through /proc/self/exe (blas.cpp), which makes the comm "exe"."""
    try:
        return os.path.basename(os.readlink("/proc/%d/exe" % pid)) == "ringtrain"
    except OSError:
        return False


def rank_processes(mpiexec_pid):
    """{rank: pid} of the ringtrain processes below this mpiexec."""
    out = {}
    for pid in supervise.descendants(mpiexec_pid):
        try:
            if not is_ringtrain(pid):
                continue
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        for item in env:
            if item.startswith(b"PMI_RANK="):
                out[int(item[9:])] = pid
    return out


class ExternalKiller:
    """Kills rank `rank` of the first attempt `delay` seconds after its launch (or after its
    first metrics line)."""

    def __init__(self, rank, delay, run_dir, anchor_on_first_line):
        self.rank, self.delay, self.run_dir = rank, delay, run_dir
        self.anchor_on_first_line = anchor_on_first_line
        self.result = {"killed": False}

    def on_launch(self, attempt, proc):
        if attempt == 0:
            threading.Thread(target=self._run, args=(proc,), daemon=True).start()

    def _run(self, proc):
        launch = time.monotonic()
        pid = None
        while pid is None:  # the rank's pid, as soon as hydra has spawned it
            if proc.poll() is not None:
                self.result["landed"] = "after exit"
                return
            pid = rank_processes(proc.pid).get(self.rank)
            if pid is None:
                time.sleep(0.001)
        if self.anchor_on_first_line:
            metrics = os.path.join(self.run_dir, "metrics.jsonl")
            while True:
                if proc.poll() is not None:
                    self.result["landed"] = "after exit"
                    return
                try:
                    if os.path.getsize(metrics) > 0:
                        break
                except OSError:
                    pass
                time.sleep(0.0005)
            launch = time.monotonic()
        rest = self.delay - (time.monotonic() - launch)
        if rest > 0:
            time.sleep(rest)
        alive = is_ringtrain(pid) and proc.poll() is None
        if not alive:
            self.result["landed"] = "after exit"
            return
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            self.result["landed"] = "after exit"
            return
        at = time.monotonic() - launch
        records = supervise.read_records(os.path.join(self.run_dir, "metrics.jsonl"))
        steps = [r["step"] for r in records if "loss" in r]
        last = steps[-1] if steps else 0
        ended = any(r.get("reason") == "end" for r in records)
        self.result.update(
            killed=True, at_s=round(at, 4), last_logged_step=last,
            latest=supervise.latest_step(self.run_dir),
            landed="after the end save" if ended else
                   "start-up (no step line yet)" if not steps else
                   "step %d-%d" % (last - last % SAVE_EVERY, last - last % SAVE_EVERY + SAVE_EVERY - 1)
                   if last < STEPS else "step 40, before the end save's line")


def draw_fault(rng, ranks):
    kind = rng.choice(["kill-step", "crash-phase", "external"])
    if kind == "kill-step":
        r, s = rng.randrange(ranks), rng.randint(1, STEPS)
        return {"kind": kind, "rank": r, "step": s,
                "args": ["--test-kill-rank", str(r), "--test-kill-step", str(s)]}
    if kind == "crash-phase":
        k = rng.randint(1, 5)
        s = STEPS if k == 5 else rng.choice(range(SAVE_EVERY, STEPS + 1, SAVE_EVERY))
        return {"kind": kind, "phase": k, "step": s,
                "args": ["--test-crash-phase", str(k), "--test-crash-step", str(s)]}
    r = rng.randrange(ranks)
    window = "life" if rng.random() < 0.5 else "training"
    return {"kind": kind, "rank": r, "window": window, "u": rng.random(), "args": []}


def describe(f):
    if f["kind"] == "kill-step":
        return "kill-step rank %d after step %d" % (f["rank"], f["step"])
    if f["kind"] == "crash-phase":
        return "crash-phase %d at save %d" % (f["phase"], f["step"])
    text = "external SIGKILL rank %d %.3f s after %s" % (
        f["rank"], f["delay"], "launch" if f["window"] == "life" else "step 5's line")
    if "kill" in f:
        text += " (last line: step %d)" % f["kill"]["last_logged_step"]
    return text


def category(f, ext):
    """Breakdown key of a trial."""
    if f["kind"] == "kill-step":
        return "kill-step, step %s" % ("1-10 (before the 1st save)" if f["step"] <= SAVE_EVERY
                                       else "11-40")
    if f["kind"] == "crash-phase":
        return "crash-phase %d" % f["phase"]
    return "external, landed: %s" % (ext.get("landed") if ext else "?")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--work-dir", help="where trial directories go (default: kill_campaign-<seed>-<time> "
                                      "in the system's temporary folder, $TMPDIR if set)")
    p.add_argument("--keep-all", action="store_true", help="keep passing trial directories too")
    p.add_argument("--ringtrain", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "..", "build", "ringtrain"))
    p.add_argument("--mpiexec", default="mpiexec.mpich")
    p.add_argument("--log-every", type=int, default=5)
    p.add_argument("--max-restarts", type=int, default=4)
    p.add_argument("--timeout-per-attempt", type=float, default=120.0)
    p.add_argument("--checkpoint-async", choices=("on", "off"), default="on",
                   help="write periodic saves in the background (ringtrain's flag and default)")
    o = p.parse_args(argv)
    if o.trials < 1 or o.ranks < 1:
        p.error("--trials and --ranks must be >= 1")
    for tool in (o.mpiexec, "h5diff"):
        if shutil.which(tool) is None:
            p.error("'%s' is not on PATH" % tool)
    ringtrain = os.path.abspath(o.ringtrain)
    if not os.access(ringtrain, os.X_OK):
        p.error("no ringtrain executable at %s (build it: cmake --build build --target ringtrain)" % ringtrain)
    default_work = "kill_campaign-%d-%s" % (o.seed, datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    work = os.path.abspath(o.work_dir or os.path.join(tempfile.gettempdir(), default_work))
    os.makedirs(work, exist_ok=True)
    args = train_args(o.log_every, o.checkpoint_async)
    base = [o.mpiexec, "-n", str(o.ranks), ringtrain, "train"] + args
    print("kill campaign: %d trials, seed %d, %d ranks, work dir %s" % (o.trials, o.seed, o.ranks, work))
    print("config: %s" % " ".join(args))
    t_start = time.monotonic()

    # the one uninterrupted reference, through the supervisor for its timing
    ref_dir = os.path.join(work, "reference")
    shutil.rmtree(ref_dir, ignore_errors=True)
    with open(os.path.join(work, "reference.txt"), "w") as out:
        sup = supervise.Supervisor(base + ["--run-dir", ref_dir], max_restarts=0, quiet=True,
                                   stdout=out, stderr=subprocess.STDOUT,
                                   timeout_s=o.timeout_per_attempt)
        s = sup.run()
    if not s["finished"]:
        print("reference run failed (exit %d): see %s/reference.txt" % (s["exit_status"], work))
        return 1
    a = sup.attempts[0]
    ref_life = a["end"] - a["launch"]
    first_line = min(t for r, t in a["new"] if "loss" in r)
    lives = collections.deque([ref_life], maxlen=15)
    after_first = collections.deque([a["end"] - first_line], maxlen=15)
    ref_ckpt = os.path.join(ref_dir, "checkpoints", "step-%08d.h5" % STEPS)
    ref_losses = losses(ref_dir)
    print("reference: %.3f s (first metrics line at %.3f s), %d loss records, final %s"
          % (ref_life, first_line - a["launch"], len(ref_losses), ref_ckpt))

    rng = random.Random(o.seed)
    tally = collections.Counter()
    by_cat = collections.defaultdict(collections.Counter)
    manifest_bad = []
    failures = []
    during_persist = []
    for t in range(o.trials):
        fault = draw_fault(rng, o.ranks)
        if fault["kind"] == "external":
            span = statistics.median(lives if fault["window"] == "life" else after_first)
            fault["delay"] = round(fault["u"] * span, 4)
        tdir = os.path.join(work, "trial-%04d" % t)
        shutil.rmtree(tdir, ignore_errors=True)
        os.makedirs(tdir)
        run_dir = os.path.join(tdir, "run")
        killer = ExternalKiller(fault["rank"], fault["delay"], run_dir, fault["window"] == "training") \
            if fault["kind"] == "external" else None
        probe = {}

        def before_launch(i, run_dir=run_dir, probe=probe):
            if i == 1:  # the files as the killed attempt left them
                probe["persist"] = persist_in_flight(run_dir)

        t0 = time.monotonic()
        with open(os.path.join(tdir, "output.txt"), "w") as out:
            sup = supervise.Supervisor(
                base + ["--run-dir", run_dir], max_restarts=o.max_restarts, quiet=True,
                attempt_args={0: fault["args"]} if fault["args"] else {},
                ledger=os.path.join(tdir, "ledger.jsonl"), stdout=out, stderr=subprocess.STDOUT,
                timeout_s=o.timeout_per_attempt, on_launch=killer.on_launch if killer else None,
                before_launch=before_launch)
            s = sup.run()
        for x in sup.attempts:  # clean launches from step 0 keep the timing estimates current
            if x["finished"] and x["step_restored"] == 0:
                lines = [t for r, t in x["new"] if "loss" in r]
                lives.append(x["end"] - x["launch"])
                if lines:
                    after_first.append(x["end"] - min(lines))
        ext = killer.result if killer else None
        if ext is not None and ext.get("killed"):
            fault["kill"] = ext
        if probe.get("persist") is not None:
            fault["during_persist_of_step"] = probe["persist"]
            during_persist.append(t)
        with open(os.path.join(tdir, "fault.json"), "w") as f:
            json.dump(fault, f, indent=2)
        fired = sup.attempts[0]["exit_status"] != 0
        restored = [x["step_restored"] for x in sup.attempts]
        problems = []
        if not s["finished"]:
            problems.append("run did not finish (exit %d after %d attempts)" % (s["exit_status"], s["attempts"]))
        latest = supervise.latest_step(run_dir)
        final = os.path.join(run_dir, "checkpoints", "step-%08d.h5" % STEPS)
        if latest != STEPS:
            problems.append("LATEST names step %d, not %d" % (latest, STEPS))
        if os.path.exists(final):
            for g, rc, lines in h5_differences(ref_ckpt, final):
                problems.append("/%s differs (h5diff exit %d: %s)" % (g, rc, " | ".join(lines)))
        else:
            problems.append("no final checkpoint %s" % final)
        got = losses(run_dir)
        if got != ref_losses:
            steps = [st for st, _ in got]
            dup = sorted({st for st in steps if steps.count(st) > 1})
            differ = [st for (st, l), (rs, rl) in zip(got, ref_losses) if st == rs and l != rl]
            problems.append("metrics losses differ: %d records vs %d%s%s" % (
                len(got), len(ref_losses), ", duplicated steps %s" % dup if dup else "",
                ", different losses at steps %s" % differ[:5] if differ else ""))
        try:
            with open(os.path.join(run_dir, "manifest.json")) as f:
                msteps = json.load(f)["results"]["steps"]
        except (OSError, ValueError, KeyError):
            msteps = None
        if msteps != STEPS:
            manifest_bad.append(t)
        cat = category(fault, ext)
        if not fired:
            cat = fault["kind"] + (", killed while exiting (mpiexec exit 0)" if ext and ext.get("killed")
                                   else ", fault did not fire")
        verdict = "bitwise" if not problems else "FAIL"
        tally[verdict] += 1
        by_cat[cat][verdict] += 1
        print("trial %04d %-70s attempts %d restored %-12s %.1f s: %s%s%s%s" % (
            t, describe(fault), s["attempts"], ",".join(map(str, restored)), time.monotonic() - t0,
            verdict, "" if fired else " (no fault fired)",
            "" if msteps == STEPS else " [manifest results.steps=%s]" % msteps,
            " [during the persist of step %d]" % probe["persist"] if t in during_persist else ""),
            flush=True)
        for pr in problems:
            print("    " + pr, flush=True)
        if problems:
            failures.append((t, tdir, problems))
        elif not o.keep_all and msteps == STEPS:
            shutil.rmtree(tdir)

    elapsed = time.monotonic() - t_start
    print()
    print("breakdown by fault kind (bitwise/trials):")
    for cat in sorted(by_cat):
        c = by_cat[cat]
        print("  %-48s %3d/%-3d" % (cat, c["bitwise"], c["bitwise"] + c["FAIL"]))
    if manifest_bad:
        print("manifest.json results.steps != %d in %d trial(s) (not part of the verdict): %s" % (
            STEPS, len(manifest_bad), " ".join("%04d" % t for t in manifest_bad)))
    if failures:
        print("failing trial directories kept: %s" % " ".join(d for _, d, _ in failures))
    if o.checkpoint_async == "on":
        print("kills that landed during a persist (snapshot taken, LATEST not moved yet): %d "
              "trials, %d of them resumed bitwise" % (
                  len(during_persist), sum(1 for t in during_persist
                                           if t not in {f for f, _, _ in failures})))
    print("time: %.1f s (%.2f s per trial)" % (elapsed, elapsed / o.trials))
    print("%d/%d resumed bitwise" % (tally["bitwise"], o.trials))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
