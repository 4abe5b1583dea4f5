"""The supervision loop: run attempts until the run finishes, keep the ledger and the summary.

Supervisor runs one fixed command (e.g. `mpiexec.mpich -n 2 ringtrain train ... --run-dir
RUN`) with `--resume auto` appended, relaunching it after each failure, up to max_restarts
failures. ElasticSupervisor (elastic.py) chooses each attempt's world instead, through the
hooks plan(), tick() and after().

SIGTERM/SIGINT sent to the supervisor are passed to mpiexec (whose ranks save and stop) and
end the supervision. Attempt i may get extra arguments (attempt_args[i]): tests inject faults
with them.
"""
import json
import os
import signal
import sys
import time

from . import accounting
from .attempt import Attempt
from .command import CommandError, check_command
from .records import latest_step


class Supervisor:
    def __init__(self, command, max_restarts=3, ledger=None, summary=None, attempt_args=None,
                 timeout_s=600.0, poll_s=0.005, stdout=None, stderr=None, quiet=False,
                 on_launch=None, before_launch=None, finalize_grace_s=30.0):
        self.command = list(command)
        self.run_dir = check_command(self.command)
        self.max_restarts = max_restarts
        self.ledger = ledger or os.path.join(self.run_dir, "restarts.jsonl")
        root, _ = os.path.splitext(self.ledger)
        self.summary_path = summary or root + "-summary.json"
        self.attempt_args = attempt_args or {}
        self.timeout_s, self.poll_s, self.finalize_grace_s = timeout_s, poll_s, finalize_grace_s
        self.stdout, self.stderr = stdout, stderr
        self.quiet = quiet
        self.on_launch = on_launch          # on_launch(i, proc): after attempt i started
        self.before_launch = before_launch  # before_launch(i): before attempt i starts
        self.metrics_path = os.path.join(self.run_dir, "metrics.jsonl")
        self.attempts = []
        self.stop_signal = None
        self.current = None
        self.failures = 0

    def say(self, text):
        if not self.quiet:
            print("supervise: " + text, file=sys.stderr, flush=True)

    # hooks for ElasticSupervisor ---------------------------------------------------------------
    def plan(self, i):
        """(command, world facts for the ledger) of attempt i; None: stop supervising."""
        return self.command + ["--resume", "auto"] + self.attempt_args.get(i, []), {}

    def tick(self, attempt, now):
        """Called while attempt runs, every poll."""

    def after(self, a):
        """After attempt `a` ended: True to launch another."""
        if a["finished"] or self.stop_signal is not None:
            return False
        self.failures += 1
        return self.failures <= self.max_restarts

    # one attempt --------------------------------------------------------------------------------
    def log_path(self, i):
        return None

    def run_attempt(self, i, command, world):
        self.say("attempt %d: launching from step %d: %s" % (
            i, latest_step(self.run_dir), " ".join(command)))
        if self.before_launch:
            self.before_launch(i)
        att = Attempt(i, command, self.run_dir, self.timeout_s, self.poll_s, self.log_path(i),
                      self.stdout, self.stderr, self.attempt_args.get(i, []), self.finalize_grace_s)
        try:
            att.start()
        except OSError as e:
            raise CommandError("cannot run %s: %s" % (command[0], e.strerror))
        self.current = att
        if self.on_launch:
            self.on_launch(i, att.proc)
        if self.stop_signal is not None:
            att.request_stop(signal.SIGTERM, "supervisor stopped")
        while att.poll(time.monotonic()):
            self.tick(att, time.monotonic())
            time.sleep(self.poll_s)
        self.current = None
        a = att.result()
        a.update(world)
        a["launch_unix"] = att.launch_unix
        a["log"] = att.log_path
        self.say("attempt %d: %s, exit %d after %.2f s, steps %d -> %d%s" % (
            i, a["ended"], a["exit_status"], a["end"] - a["launch"], a["step_restored"],
            a["step_reached"], " (ended early: %s)" % a["cut_short"] if a["cut_short"] else ""))
        return a

    # the whole supervision --------------------------------------------------------------------
    def run(self):
        self.t0, self.t0_unix = time.monotonic(), time.time()
        self.written = 0
        previous = {}
        for s in (signal.SIGTERM, signal.SIGINT):
            try:
                previous[s] = signal.signal(s, self._on_signal)
            except ValueError:  # not the main thread (used as a library)
                pass
        try:
            i = 0
            while True:
                planned = self.plan(i)
                if planned is None:
                    break
                a = self.run_attempt(i, *planned)
                if self.attempts:
                    prev = self.attempts[-1]
                    if not prev["finished"] and prev["ended"] != "grow":
                        prev["replaying_s"] = accounting.replay(prev, a["step_restored"])
                self.attempts.append(a)
                self.write_ledger(len(self.attempts) - 1)
                i += 1
                if not self.after(a):
                    break
            self.write_ledger(len(self.attempts))
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
        return self.summarise()

    def _on_signal(self, signum, frame):
        self.stop_signal = signum
        if self.current is not None:
            self.current.request_stop(signal.SIGTERM, "supervisor stopped")

    def write_ledger(self, upto):
        """Append ledger lines for attempts [written, upto): a line is written once the next
        attempt has started (its steps_lost needs the next attempt's step_restored)."""
        os.makedirs(os.path.dirname(os.path.abspath(self.ledger)), exist_ok=True)
        with open(self.ledger, "a") as f:
            while self.written < upto:
                line = accounting.ledger_line(self.attempts, self.written, self.t0)
                f.write(json.dumps(line) + "\n")
                self.written += 1

    def summarise(self):
        s = accounting.summary(self.attempts, self.t0, self.t0_unix, time.monotonic(),
                               self.command, self.run_dir, self.metrics_path)
        s.update(self.summary_extra())
        accounting.write_json(self.summary_path, s)
        for line in accounting.summary_lines(s):
            self.say(line)
        self.say("ledger %s, summary %s" % (self.ledger, self.summary_path))
        return s

    def summary_extra(self):
        return {}
