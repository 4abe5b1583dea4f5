"""One attempt: launch the command, follow metrics.jsonl while it runs, stop it when asked or
when it runs out of time, and describe what happened (the dict the ledger is made from).

Times are time.monotonic() seconds. From the records the attempt wrote, stamped when first
seen (records.MetricsWatcher), for its first step record seen at t with window mean step_s
over n steps:  training start S = t - n*step_s - (checkpoint_s of saves seen before it), first
completed step F = S + step_s; R = when its {"resumed_from"} record was seen (ranks up, data
loaded, checkpoint restored).

How an attempt ends ("ended"):
  finished   exit 0, not timed out, not stopped by a signal: the run is done
  grow       the supervisor sent SIGUSR1 to move to a larger world; the ranks saved and stopped
  stopped    the supervisor itself got SIGTERM/SIGINT and passed it on
  failed     anything else (a rank died, a host was lost, a timeout: exit_status 124)
Two ways an attempt is ended early (its tree killed):
  unreachable  its output says the launcher could not reach a host (probe.CONNECTION_FAILED):
               hydra would wait for that host's proxy until its timeout. Counts as failed.
  finalize hang  the ranks wrote their results (manifest.json's results.wall_s > 0, written by
               this attempt) but the job has not exited finalize_grace_s later: MPI_Finalize
               over UCX TCP sometimes hangs (bench/README-cluster.md). Judged by what the ranks
               wrote, as if it had exited 0.
"""
import json
import os
import signal
import subprocess
import sys
import time

from .probe import CONNECTION_FAILED
from .processes import Tee, kill_tree, status_of
from .records import MetricsWatcher, is_save_record, is_step_record, latest_step, read_records

GRACE_S = 10.0
MANIFEST_POLL_S = 0.25


class Attempt:
    def __init__(self, index, command, run_dir, timeout_s, poll_s=0.005, log_path=None,
                 stdout=None, stderr=None, extra_args=(), finalize_grace_s=30.0):
        self.index, self.command, self.run_dir = index, list(command), run_dir
        self.timeout_s, self.poll_s = timeout_s, poll_s
        self.log_path, self.stdout, self.stderr = log_path, stdout, stderr
        self.extra_args = list(extra_args)
        self.metrics_path = os.path.join(run_dir, "metrics.jsonl")
        self.proc = None
        self.stop_request = None   # (signal, why) once the supervisor asked the job to stop
        self.stop_sent_at = None
        self.timed_out = False
        self.finalize_grace_s = finalize_grace_s
        self.results_at = None      # when the ranks' results were first seen in manifest.json
        self.manifest_checked = 0.0
        self.cut_short = None       # "unreachable: LINE" or "finalize hang" when ended early

    def start(self):
        self.restored = latest_step(self.run_dir)
        self.watcher = MetricsWatcher(self.metrics_path, read_records(self.metrics_path))
        env = dict(os.environ)
        env.setdefault("MPIEXEC_TIMEOUT", str(int(self.timeout_s + 2 * GRACE_S)))  # hydra's own bound
        tee = self.log_path is not None and self.stdout is None and self.stderr is None
        if tee:
            os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        self.manifest_before = self.manifest_key()
        self.launch, self.launch_unix = time.monotonic(), time.time()
        self.proc = subprocess.Popen(self.command, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE if tee else self.stdout,
                                     stderr=subprocess.PIPE if tee else self.stderr)
        self.tees = [Tee(self.proc.stdout, sys.stdout.buffer, self.log_path, CONNECTION_FAILED),
                     Tee(self.proc.stderr, sys.stderr.buffer, self.log_path, CONNECTION_FAILED)
                     ] if tee else []

    def request_stop(self, signum, why):
        """Ask the job to stop (mpiexec forwards the signal to every rank); once only."""
        if self.stop_request is None and self.proc.poll() is None:
            self.stop_request = (signum, why)
            self.proc.send_signal(signum)
            self.stop_sent_at = time.monotonic()

    def training(self):
        """True once this attempt has written a step record (the ranks' signal handlers exist)."""
        return any(is_step_record(r) for r, _ in self.watcher.new_records())

    def poll(self, now):
        """Follows the attempt; False once it has ended."""
        self.watcher.poll(now)
        if self.proc.poll() is not None:
            return False
        unreachable = next((t.matched for t in self.tees if t.matched), None)
        if unreachable is not None or self.hangs_after_results(now):
            self.cut_short = "unreachable: " + unreachable if unreachable else "finalize hang"
            kill_tree(self.proc)
            self.proc.wait()
            return False
        if not self.timed_out and now - self.launch > self.timeout_s:
            self.timed_out = True
            self.proc.send_signal(signal.SIGTERM)
            self.stop_sent_at = now
        if self.stop_sent_at is not None and now - self.stop_sent_at > GRACE_S:
            kill_tree(self.proc)
            self.proc.wait()
            return False
        return True

    def manifest_key(self):
        """(inode, mtime, size) of manifest.json, None if absent: which version of it this is."""
        try:
            st = os.stat(os.path.join(self.run_dir, "manifest.json"))
            return st.st_ino, st.st_mtime_ns, st.st_size
        except OSError:
            return None

    def hangs_after_results(self, now):
        """True once the ranks wrote their results (a manifest.json other than the one found at
        the launch, with results.wall_s > 0) finalize_grace_s ago and still run."""
        if self.results_at is None and now - self.manifest_checked >= MANIFEST_POLL_S:
            self.manifest_checked = now
            if self.manifest_key() not in (None, self.manifest_before):
                try:
                    with open(os.path.join(self.run_dir, "manifest.json")) as f:
                        results = json.load(f).get("results") or {}
                    if float(results.get("wall_s") or 0) > 0:
                        self.results_at = now
                except (OSError, ValueError, TypeError, AttributeError):
                    pass
        return self.results_at is not None and now - self.results_at > self.finalize_grace_s

    def result(self):
        """The attempt as a dict, once poll() returned False."""
        end = time.monotonic()
        for t in self.tees:
            t.close()
        self.watcher.poll(end)
        new = self.watcher.new_records()
        status = 0 if self.cut_short == "finalize hang" else status_of(self.proc.returncode)
        signal_stop = any(r.get("reason") == "signal" for r, _ in new if is_save_record(r))
        ended = self.ending(status, signal_stop)
        if self.timed_out:
            status = 124
        elif ended in ("failed", "stopped") and status == 0:  # a stop is not a success
            status = 143 if self.stop_request is None else 128 + self.stop_request[0]
        restored = self.restored
        resumed = [(r, t) for r, t in new if "resumed_from" in r]
        if resumed:  # the step ringtrain actually resumed from; LATEST before the launch was a guess
            restored = int(resumed[0][0]["step"])
        steps = [r["step"] for r in read_records(self.metrics_path) if "step" in r]
        a = {"attempt": self.index, "launch": self.launch, "end": end, "exit_status": status,
             "returncode": self.proc.returncode, "timed_out": self.timed_out,
             "finished": ended == "finished", "ended": ended, "signal_stop": signal_stop,
             "extra_args": self.extra_args, "step_restored": restored,
             "step_reached": max([restored] + steps[-1:] + [latest_step(self.run_dir)]),
             "R": resumed[0][1] if resumed else None, "new": new, "cut_short": self.cut_short}
        analyse(a)
        return a

    def ending(self, status, signal_stop):
        """mpiexec's own status after a forwarded signal is unreliable: the ranks' save record
        with reason "signal" says whether they stopped on it."""
        asked = self.stop_request[0] if self.stop_request is not None else None
        if asked is not None and asked != signal.SIGUSR1:
            return "stopped"
        if status == 0 and not self.timed_out and not signal_stop:
            return "finished"  # also when the run ended before a SIGUSR1 took effect
        if asked == signal.SIGUSR1 and signal_stop and not self.timed_out:
            return "grow"
        return "failed"


def analyse(a):
    """Training start S, first completed step F, saving in this attempt (module docstring)."""
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
