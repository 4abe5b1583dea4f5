#!/usr/bin/python3
"""Run a ringtrain job, relaunch it with `--resume auto` when it fails, keep a restart ledger.

Usage:
  tools/supervise.py [--max-restarts R] [--ledger FILE] [--summary FILE]
                     [--attempt-args I "ARGS"]... [--timeout-per-attempt S] [--quiet]
                     -- mpiexec.mpich -n 2 build/ringtrain train ... --run-dir RUN

Every attempt runs the command with `--resume auto` appended (the first one too, so this
supervisor can itself be restarted and carries on from the newest checkpoint).
`--attempt-args I "ARGS"` appends ARGS (split like a shell would) to attempt I only (0-based);
tests use it to inject faults into chosen attempts. An attempt *finished the run* when it exits
0, did not time out and did not stop on a signal (a `"reason": "signal"` checkpoint record, which
ringtrain writes when SIGTERM/SIGUSR1 made it save and exit 0). Anything else is a failure and
is relaunched, up to R times (default 3). Each attempt is bounded by --timeout-per-attempt
(default 600 s): then mpiexec gets SIGTERM (forwarded to the ranks, which save and exit), and
SIGKILL for it and its descendants 10 s later; the attempt counts as failed with status 124.
SIGTERM/SIGINT sent to the supervisor are forwarded to mpiexec and end the supervision.

Exit status: 0 if the run finished; otherwise the last failure's status (mpiexec's exit code,
128+signal if it died of a signal, 124 after a timeout); 2 for a bad command line.

Ledger (default RUN/restarts.jsonl, appended to): one JSON line per attempt, written once the
next attempt has started its training (or when supervision ends), with
  attempt, start_s, end_s          seconds since the supervisor started (launch, process exit)
  exit_status, timed_out, finished, extra_args
  step_restored    step of the checkpoint the attempt resumed from (0: none), from the
                   {"step", "resumed_from"} record ringtrain writes after its resume; if the
                   attempt died before writing it, the step of checkpoints/LATEST before the
                   launch. (ringtrain takes the newest file that verifies, which is not always
                   LATEST's: a crash between a save's rename and LATEST leaves it unnamed, and
                   a file that fails to verify is passed over.)
  step_reached     the last "step" in metrics.jsonl after the attempt (read before the next
                   attempt truncates it), or LATEST's step if larger (a save whose record was
                   never written). A lower bound on the work done: steps completed after the
                   last metrics line leave no trace (a `--test-kill-step S` kill fires after
                   step S's update but before its metrics line, so with --log-every 1 the
                   ledger shows S-1).
  steps_lost       step_reached - the step_restored of the next attempt (null for the last)
  restart_latency_s  this attempt's exit -> the next attempt's first completed step (null if
                   it never completed one), from process timing as below.
  first_step_s, restarting_s, replaying_s, saving_s: this attempt's share of the summary.

How times are measured. metrics.jsonl records carry no clock, so while an attempt runs the
supervisor polls metrics.jsonl (every --poll-s, default 5 ms) and stamps each new record with
the time it first saw it (error: the poll period plus page-cache latency). A step record holds
`step_s`, the mean step time over its logging window of n steps (save and evaluation time are
excluded by ringtrain), so for an attempt's first step record seen at t:
  training start  S = t - n*step_s - (checkpoint_s of any save records seen before it),
  first completed step F = S + step_s.
Summary (printed, and written as JSON to --summary, default next to the ledger):
  wall        supervisor start -> end.
  useful      time in steps that survive: over the step records of the final metrics.jsonl
              written during this supervision, sum of step_s * (steps in its window).
  saving      sum of checkpoint_s over every save record seen, in any attempt (saves that were
              later lost included; a save cut short by a crash leaves no record and lands in
              replaying or other).
  restarting  sum over attempts of launch -> training start S (process start-up, MPI init, data
              loading, checkpoint restore). The first attempt's share is start-up and is also
              reported apart as `startup_s`. An attempt that never wrote a step record counts
              whole (launch -> exit) as restarting, including any unlogged steps it did.
  replaying   time spent on steps later lost: for a failed attempt whose successor restores
              step r, exit time - the time its last record with step <= r was seen (or - S if
              it saved nothing the successor uses), minus the checkpoint_s of save records seen
              after that point (already in saving). It includes the unlogged tail and the
              failure detection (mpiexec ends the job 5-25 ms after a rank dies).
  other       wall - useful - saving - restarting - replaying: logging and replica checks
              between windows, evaluation, shutdown after the last step, supervisor gaps.
  goodput     useful / wall.
"""
import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

GRACE_S = 10.0


class UsageError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# the run directory as ringtrain leaves it

def find_run_dir(command):
    """The value of --run-dir in the training command (the supervisor needs it to resume)."""
    for i, arg in enumerate(command):
        if arg == "--run-dir":
            if i + 1 >= len(command):
                raise UsageError("--run-dir at the end of the command has no value")
            return command[i + 1]
        if arg.startswith("--run-dir="):
            return arg.split("=", 1)[1]
    return None


def latest_step(run_dir):
    """Step of the checkpoint named by RUN/checkpoints/LATEST, 0 if there is none or it is garbage."""
    try:
        with open(os.path.join(run_dir, "checkpoints", "LATEST")) as f:
            name = f.read(256).strip()
    except OSError:
        return 0
    if name.startswith("step-") and name.endswith(".h5") and name[5:-3].isdigit():
        return int(name[5:-3])
    return 0


def read_records(path):
    """All complete JSON lines of a metrics file ([] if it does not exist)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return []
    out = []
    for line in data.split(b"\n")[:-1]:  # after the last newline: empty, or a line being written
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def is_step_record(r):
    return isinstance(r, dict) and "loss" in r and "step" in r


def is_save_record(r):
    return isinstance(r, dict) and "checkpoint_s" in r


class MetricsWatcher:
    """Follows metrics.jsonl during one attempt and stamps each record this attempt wrote with the
    time it was first seen. At launch the file holds `snapshot`; the attempt may rewrite it once
    (truncate_metrics_after: a prefix of the snapshot, by rename) and then appends."""

    def __init__(self, path, snapshot):
        self.path = path
        self.snapshot = snapshot
        self.key = None       # (inode, size) last read
        self.lines = []       # raw complete lines currently in the file
        self.stamps = []      # time first seen, per line
        self.new_from = len(snapshot)

    def poll(self, now):
        try:
            st = os.stat(self.path)
        except OSError:
            return
        key = (st.st_ino, st.st_size)
        if key == self.key:
            return
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except OSError:
            return
        self.key = key
        lines = data.split(b"\n")
        lines = lines[:-1]  # the part after the last newline is incomplete (or empty)
        stamps = []
        for i, line in enumerate(lines):
            same = i < len(self.lines) and self.lines[i] == line
            stamps.append(self.stamps[i] if same else now)
        self.lines, self.stamps = lines, stamps

    def new_records(self):
        """[(record, t_seen)] this attempt wrote: what follows the longest common prefix with the
        snapshot (the attempt keeps a prefix of the old file and only appends after it)."""
        parsed = []
        for line, t in zip(self.lines, self.stamps):
            try:
                parsed.append((json.loads(line), t))
            except ValueError:
                parsed.append((None, t))
        k = 0
        while k < len(parsed) and k < len(self.snapshot) and parsed[k][0] == self.snapshot[k]:
            k += 1
        return [(r, t) for r, t in parsed[k:] if isinstance(r, dict)]


# ---------------------------------------------------------------------------------------------
# processes

def descendants(pid):
    """Pids of all descendants of pid, from /proc (children before grandchildren)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(0), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(proc):
    """SIGKILL mpiexec and every process below it (hydra proxies set their own sessions, so a
    process group kill would miss the ranks)."""
    pids = descendants(proc.pid)
    for pid in [proc.pid] + pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def status_of(returncode):
    return 128 - returncode if returncode < 0 else returncode


# ---------------------------------------------------------------------------------------------

class Supervisor:
    def __init__(self, command, max_restarts=3, ledger=None, summary=None, attempt_args=None,
                 timeout_s=600.0, poll_s=0.005, stdout=None, stderr=None, quiet=False,
                 on_launch=None, before_launch=None):
        self.command = list(command)
        self.run_dir = find_run_dir(self.command)
        if self.run_dir is None:
            raise UsageError("the command has no --run-dir RUN: the supervisor needs the run "
                             "directory to resume from (add --run-dir to the ringtrain command)")
        if any(a == "--resume" or a.startswith("--resume=") for a in self.command):
            raise UsageError("the command already has --resume: the supervisor appends "
                             "'--resume auto' to every attempt itself; remove it")
        self.max_restarts = max_restarts
        self.ledger = ledger or os.path.join(self.run_dir, "restarts.jsonl")
        root, _ = os.path.splitext(self.ledger)
        self.summary_path = summary or root + "-summary.json"
        self.attempt_args = attempt_args or {}
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.stdout, self.stderr = stdout, stderr
        self.quiet = quiet
        self.on_launch = on_launch
        self.before_launch = before_launch  # before_launch(i): called before attempt i starts
        self.metrics_path = os.path.join(self.run_dir, "metrics.jsonl")
        self.attempts = []
        self.stop_signal = None
        self.proc = None

    def say(self, text):
        if not self.quiet:
            print("supervise: " + text, file=sys.stderr, flush=True)

    # one attempt -----------------------------------------------------------------------------
    def run_attempt(self, i):
        extra = list(self.attempt_args.get(i, []))
        restored = latest_step(self.run_dir)
        snapshot = read_records(self.metrics_path)
        watcher = MetricsWatcher(self.metrics_path, snapshot)
        cmd = self.command + ["--resume", "auto"] + extra
        env = dict(os.environ)
        env.setdefault("MPIEXEC_TIMEOUT", str(int(self.timeout_s + 2 * GRACE_S)))  # hydra's own bound
        self.say("attempt %d: launching from step %d: %s" % (i, restored, shlex.join(cmd)))
        if self.before_launch:
            self.before_launch(i)
        launch = time.monotonic()
        try:
            proc = subprocess.Popen(cmd, stdout=self.stdout, stderr=self.stderr, env=env)
        except OSError as e:
            raise UsageError("cannot run %s: %s" % (cmd[0], e.strerror))
        self.proc = proc
        if self.on_launch:
            self.on_launch(i, proc)
        timed_out = False
        term_sent_at = None
        while True:
            now = time.monotonic()
            watcher.poll(now)
            if proc.poll() is not None:
                break
            if self.stop_signal is not None and term_sent_at is None:
                proc.send_signal(signal.SIGTERM)
                term_sent_at = now
            if not timed_out and now - launch > self.timeout_s:
                timed_out = True
                self.say("attempt %d: no exit after %.0f s: SIGTERM to mpiexec" % (i, self.timeout_s))
                proc.send_signal(signal.SIGTERM)
                term_sent_at = now
            if term_sent_at is not None and now - term_sent_at > GRACE_S:
                self.say("attempt %d: still running %.0f s after SIGTERM: SIGKILL" % (i, GRACE_S))
                kill_tree(proc)
                proc.wait()
                break
            time.sleep(self.poll_s)
        end = time.monotonic()
        self.proc = None
        watcher.poll(end)
        new = watcher.new_records()
        status = status_of(proc.returncode)
        signal_stop = any(r.get("reason") == "signal" for r, _ in new if is_save_record(r))
        finished = status == 0 and not timed_out and not signal_stop and self.stop_signal is None
        if timed_out:
            status = 124
        elif status == 0 and not finished:
            status = 143 if self.stop_signal is None else 128 + self.stop_signal
        # ringtrain records the step it actually resumed from; LATEST before the launch was a guess
        resumed = [r for r, _ in new if "resumed_from" in r]
        if resumed:
            restored = int(resumed[0]["step"])
        steps = [r["step"] for r in read_records(self.metrics_path) if "step" in r]
        reached = max([restored] + steps[-1:] + [latest_step(self.run_dir)])
        a = {"attempt": i, "launch": launch, "end": end, "exit_status": status,
             "returncode": proc.returncode, "timed_out": timed_out, "finished": finished,
             "signal_stop": signal_stop, "extra_args": extra, "step_restored": restored,
             "step_reached": reached, "new": new}
        self.analyse(a)
        self.say("attempt %d: exit %d%s after %.2f s, steps %d -> %d" % (
            i, status, " (finished)" if finished else "", end - launch, restored, reached))
        return a

    def analyse(self, a):
        """Training start S, first completed step F, saving in this attempt (see the docstring)."""
        new = a["new"]
        a["saving_s"] = sum(float(r["checkpoint_s"]) for r, _ in new if is_save_record(r))
        a["S"] = a["F"] = None
        save_before = 0.0
        for r, t in new:
            if is_save_record(r):
                save_before += float(r["checkpoint_s"])
            elif is_step_record(r) and "step_s" in r:
                n = max(1, int(r["step"]) - a["step_restored"])
                d = float(r["step_s"])
                a["S"] = max(a["launch"], t - n * d - save_before)
                a["F"] = a["S"] + d
                break
        a["restarting_s"] = (a["S"] if a["S"] is not None else a["end"]) - a["launch"]
        a["replaying_s"] = 0.0

    def replay(self, a, next_restored):
        """Time the failed attempt `a` spent on work its successor (restoring next_restored) redoes."""
        if a["S"] is None:
            return 0.0
        anchor = a["S"]
        if next_restored > a["step_restored"]:
            for r, t in a["new"]:
                if int(r.get("step", -1)) <= next_restored:
                    anchor = t
        later_saves = sum(float(r["checkpoint_s"]) for r, t in a["new"]
                          if is_save_record(r) and t > anchor)
        return max(0.0, a["end"] - anchor - later_saves)

    def ledger_line(self, i):
        a = self.attempts[i]
        nxt = self.attempts[i + 1] if i + 1 < len(self.attempts) else None
        return {
            "attempt": a["attempt"],
            "start_s": round(a["launch"] - self.t0, 4),
            "end_s": round(a["end"] - self.t0, 4),
            "exit_status": a["exit_status"],
            "timed_out": a["timed_out"],
            "finished": a["finished"],
            "extra_args": a["extra_args"],
            "step_restored": a["step_restored"],
            "step_reached": a["step_reached"],
            "steps_lost": (a["step_reached"] - nxt["step_restored"]) if nxt else None,
            "restart_latency_s": (round(nxt["F"] - a["end"], 4)
                                  if nxt and nxt["F"] is not None else None),
            "first_step_s": round(a["F"] - a["launch"], 4) if a["F"] is not None else None,
            "restarting_s": round(a["restarting_s"], 4),
            "replaying_s": round(a["replaying_s"], 4),
            "saving_s": round(a["saving_s"], 4),
        }

    def write_ledger(self, upto):
        """Append ledger lines for attempts [written, upto)."""
        os.makedirs(os.path.dirname(os.path.abspath(self.ledger)), exist_ok=True)
        with open(self.ledger, "a") as f:
            while self.written < upto:
                f.write(json.dumps(self.ledger_line(self.written)) + "\n")
                self.written += 1

    # the whole supervision -------------------------------------------------------------------
    def run(self):
        self.t0 = time.monotonic()
        self.t0_unix = time.time()
        self.written = 0
        previous = {}
        for s in (signal.SIGTERM, signal.SIGINT):
            try:
                previous[s] = signal.signal(s, self._on_signal)
            except ValueError:  # not the main thread (used as a library)
                pass
        try:
            for i in range(self.max_restarts + 1):
                a = self.run_attempt(i)
                if self.attempts:
                    prev = self.attempts[-1]
                    prev["replaying_s"] = self.replay(prev, a["step_restored"])
                self.attempts.append(a)
                self.write_ledger(len(self.attempts) - 1)
                if a["finished"] or self.stop_signal is not None:
                    break
            self.write_ledger(len(self.attempts))
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
        return self.summarise()

    def _on_signal(self, signum, frame):
        self.stop_signal = signum
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def summarise(self):
        t_end = time.monotonic()
        wall = t_end - self.t0
        first_restored = self.attempts[0]["step_restored"] if self.attempts else 0
        useful, prev_step = 0.0, 0
        for r in read_records(self.metrics_path):
            if is_step_record(r) and "step_s" in r:
                step = int(r["step"])
                if step > first_restored:
                    useful += float(r["step_s"]) * max(1, step - prev_step)
                prev_step = step
        saving = sum(a["saving_s"] for a in self.attempts)
        restarting = sum(a["restarting_s"] for a in self.attempts)
        replaying = sum(a["replaying_s"] for a in self.attempts)
        last = self.attempts[-1] if self.attempts else None
        finished = bool(last and last["finished"])
        s = {
            "command": self.command,
            "run_dir": self.run_dir,
            "started_unix": round(self.t0_unix, 3),
            "finished": finished,
            "exit_status": 0 if finished else (last["exit_status"] if last else 1),
            "attempts": len(self.attempts),
            "restarts": max(0, len(self.attempts) - 1),
            "final_step": last["step_reached"] if last else 0,
            "wall_s": round(wall, 4),
            "useful_s": round(useful, 4),
            "saving_s": round(saving, 4),
            "restarting_s": round(restarting, 4),
            "startup_s": round(self.attempts[0]["restarting_s"], 4) if self.attempts else 0.0,
            "replaying_s": round(replaying, 4),
            "other_s": round(wall - useful - saving - restarting - replaying, 4),
            "goodput": round(useful / wall, 6) if wall > 0 else 0.0,
            "steps_lost": sum(self.ledger_line(i)["steps_lost"] or 0 for i in range(len(self.attempts))),
        }
        with open(self.summary_path, "w") as f:
            json.dump(s, f, indent=2)
            f.write("\n")
        if not self.quiet:
            pct = lambda x: 100.0 * x / wall if wall > 0 else 0.0
            print("supervise: %s after %d attempt(s) (%d restart(s)), %d steps lost, wall %.2f s" % (
                "finished" if finished else "NOT finished (exit %d)" % s["exit_status"],
                s["attempts"], s["restarts"], s["steps_lost"], wall), file=sys.stderr)
            print("supervise: goodput %.1f %% (steps that survive %.3f s); saving %.3f s (%.1f %%), "
                  "restarting %.3f s (%.1f %%, start-up %.3f s of it), replaying %.3f s (%.1f %%), "
                  "other %.3f s (%.1f %%)" % (
                      100 * s["goodput"], useful, saving, pct(saving), restarting, pct(restarting),
                      s["startup_s"], replaying, pct(replaying), s["other_s"], pct(s["other_s"])),
                  file=sys.stderr)
            print("supervise: ledger %s, summary %s" % (self.ledger, self.summary_path),
                  file=sys.stderr, flush=True)
        return s


# ---------------------------------------------------------------------------------------------

def parse_command_line(argv):
    if "--" not in argv:
        raise UsageError("missing '--' before the training command, e.g. "
                         "tools/supervise.py --max-restarts 3 -- mpiexec.mpich -n 2 "
                         "build/ringtrain train --run-dir RUN")
    cut = argv.index("--")
    own, command = argv[:cut], argv[cut + 1:]
    p = argparse.ArgumentParser(
        prog="supervise.py", description="relaunch a ringtrain job with --resume auto until it finishes",
        usage="%(prog)s [options] -- mpiexec ... ringtrain train ... --run-dir RUN")
    p.add_argument("--max-restarts", type=int, default=3, metavar="R",
                   help="relaunches after failures (default 3)")
    p.add_argument("--ledger", metavar="FILE", help="restart ledger, JSON lines (default RUN/restarts.jsonl)")
    p.add_argument("--summary", metavar="FILE", help="summary JSON (default: the ledger's name + -summary.json)")
    p.add_argument("--attempt-args", nargs=2, action="append", default=[], metavar=("I", "ARGS"),
                   help="extra arguments for attempt I only (0-based), e.g. --attempt-args 0 "
                        "'--test-kill-rank 1 --test-kill-step 15'")
    p.add_argument("--timeout-per-attempt", type=float, default=600.0, metavar="S",
                   help="SIGTERM an attempt after S seconds, SIGKILL 10 s later (default 600)")
    p.add_argument("--poll-s", type=float, default=0.005, help="metrics polling period (default 0.005)")
    p.add_argument("--quiet", action="store_true", help="no supervisor messages on stderr")
    try:
        o = p.parse_args(own)
    except SystemExit as e:
        if e.code == 0:
            raise
        raise UsageError("bad supervisor options (see above)")
    if o.max_restarts < 0:
        raise UsageError("--max-restarts must be >= 0, got %d" % o.max_restarts)
    if o.timeout_per_attempt <= 0:
        raise UsageError("--timeout-per-attempt must be > 0")
    if o.poll_s <= 0:
        raise UsageError("--poll-s must be > 0")
    attempt_args = {}
    for index, text in o.attempt_args:
        try:
            i = int(index)
        except ValueError:
            raise UsageError("--attempt-args: attempt index '%s' is not an integer" % index)
        if i < 0 or i > o.max_restarts:
            raise UsageError("--attempt-args %d: attempts are numbered 0..%d with --max-restarts %d"
                             % (i, o.max_restarts, o.max_restarts))
        try:
            attempt_args.setdefault(i, []).extend(shlex.split(text))
        except ValueError as e:
            raise UsageError("--attempt-args %d '%s': %s" % (i, text, e))
    if not command:
        raise UsageError("no training command after '--'")
    if shutil.which(command[0]) is None:
        raise UsageError("'%s' (the first word of the command) is not an executable on PATH" % command[0])
    return o, command, attempt_args


def main(argv):
    try:
        o, command, attempt_args = parse_command_line(argv)
        sup = Supervisor(command, max_restarts=o.max_restarts, ledger=o.ledger, summary=o.summary,
                         attempt_args=attempt_args, timeout_s=o.timeout_per_attempt,
                         poll_s=o.poll_s, quiet=o.quiet)
        summary = sup.run()
    except UsageError as e:
        print("supervise: error: %s" % e, file=sys.stderr)
        return 2
    return summary["exit_status"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
