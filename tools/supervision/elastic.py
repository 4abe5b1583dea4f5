"""Supervision over a list of hosts: lose a host, finish on the others, take it back when it
returns. The supervisor starts mpiexec itself on the current world:

  start     every host is probed; those that answer form the first world.
  failure   the attempt's evidence (diagnosis.py) and a probe of every host of its world
            decide who is set aside (worlds.HostBook); the next attempt runs on the rest, the
            same global batch re-split over its ranks, with --resume auto.
  too few   below --min-hosts the supervisor probes the hosts set aside every probe_every s
            until enough answer or wait_s has passed; then it stops with the step the run
            can resume from (exit status 3).
  grow      while an attempt trains, hosts set aside (not for flapping) are probed every
            probe_every s in the background; when one answers it rejoins the world, the job
            gets SIGUSR1 (ringtrain saves at the next step boundary and exits), and the next
            attempt runs on the larger world. grow=False keeps the smaller world.
Only failures count against max_restarts; a stop to grow does not.
"""
import os
import signal
import threading
import time

from .diagnosis import diagnose, read_tail
from .hosts import rank_hosts
from .probe import probe_hosts
from .records import latest_step
from .supervisor import Supervisor
from .worlds import HostBook

EXIT_TOO_FEW_HOSTS = 3


def names(hosts):
    return [h.name for h in hosts]


class ElasticSupervisor(Supervisor):
    def __init__(self, train, hosts, mpiexec, min_hosts=1, flap_limit=3, probe_every_s=30.0,
                 probe_timeout_s=5.0, grow=True, wait_s=600.0, **options):
        super().__init__(train.base, **options)
        self.train = train
        self.book = HostBook(hosts, flap_limit)
        self.mpiexec = list(mpiexec)
        self.min_hosts, self.grow = min_hosts, grow
        self.probe_every_s, self.probe_timeout_s, self.wait_s = probe_every_s, probe_timeout_s, wait_s
        self.why = "start"
        self.world_now = []
        self.grow_probe = None      # (thread, results dict) of the background probe
        self.last_grow_probe = None
        self.gave_up = None

    def log_path(self, i):
        return os.path.join(self.run_dir, "logs", "attempt-%d.log" % i)

    # choosing the world --------------------------------------------------------------------
    def plan(self, i):
        if i == 0:
            self.probe_and_set_aside(names(self.book.hosts), "start")
        world = self.book.world()
        if len(world) < self.min_hosts:
            world = self.wait_for_hosts()
            if world is None:
                return None
        ranks = sum(h.slots for h in world)
        split = self.train.split(ranks)
        self.world_now = world
        facts = {"hosts": ["%s:%d" % h for h in world], "world_size": ranks,
                 "local_batches": split, "why": self.why}
        self.say("world of attempt %d: %d host(s), %d rank(s), local batches %s (%s)" % (
            i, len(world), ranks, ",".join(map(str, split)), self.why))
        return self.train.for_world(self.mpiexec, world, split, self.attempt_args.get(i, [])), facts

    def probe_and_set_aside(self, host_names, when):
        """Probes the hosts; those that do not answer are set aside. Returns the probes."""
        probes = probe_hosts(self.mpiexec, host_names, self.probe_timeout_s)
        silent = [n for n in host_names if not probes[n].answered]
        for n in silent:
            self.say("%s: host %s did not answer its probe (%s): set aside" % (
                when, n, probes[n].detail))
        if silent:
            self.book.judge_failure(host_names, set(), {n: p.answered for n, p in probes.items()})
            self.why = "%s: %s did not answer %s probe" % (
                "start without" if when == "start" else "shrink", ",".join(silent),
                "its" if len(silent) == 1 else "their")
        return probes

    def wait_for_hosts(self):
        """Below --min-hosts: probe the hosts set aside until enough answer or time is up."""
        world = self.book.world()
        back = self.book.returnable()
        deadline = time.monotonic() + self.wait_s
        self.say("%d host(s) left (%s), below --min-hosts %d: probing %s every %g s for up to "
                 "%g s" % (len(world), ",".join(names(world)) or "none", self.min_hosts,
                           ",".join(names(back)) or "nothing (no host may return)",
                           self.probe_every_s, self.wait_s))
        while back and self.stop_signal is None and time.monotonic() < deadline:
            self.sleep_until(min(deadline, time.monotonic() + self.probe_every_s))
            answered = self.take_back_answering(back)
            world, back = self.book.world(), self.book.returnable()
            if len(world) >= self.min_hosts:
                self.why = "back to --min-hosts: %s answered" % ",".join(answered)
                return world
        if self.stop_signal is not None:
            return None
        step = latest_step(self.run_dir)
        self.gave_up = ("only %d host(s) answer (%s), below --min-hosts %d, after waiting %g s; "
                        "the run can resume from step %d (%s): run the same command again when "
                        "hosts return" % (
                            len(world), ",".join(names(world)) or "none", self.min_hosts,
                            self.wait_s, step, os.path.join(self.run_dir, "checkpoints",
                                                            "step-%08d.h5" % step)
                            if step else "no checkpoint yet: from the start"))
        self.say("error: " + self.gave_up)
        return None

    def sleep_until(self, t):
        while self.stop_signal is None and time.monotonic() < t:
            time.sleep(min(0.05, max(0.0, t - time.monotonic())))

    def take_back_answering(self, hosts):
        """Probes `hosts`; those that answer rejoin the world. Returns their names."""
        probes = probe_hosts(self.mpiexec, names(hosts), self.probe_timeout_s)
        answered = [n for n in names(hosts) if probes[n].answered]
        for n in answered:
            self.book.take_back(n)
            self.say("host %s answered its probe: back in the world" % n)
        return answered

    # growing back while an attempt trains ---------------------------------------------------
    def tick(self, attempt, now):
        if not self.grow or attempt.stop_request is not None:
            return
        if self.grow_probe is not None:
            thread, found = self.grow_probe
            if thread.is_alive():
                return
            self.grow_probe = None
            answered = [n for n, p in found.items() if p.answered]
            for n in answered:
                self.book.take_back(n)
                self.say("host %s answered its probe: growing back" % n)
            if answered:
                self.why = "grow: %s answered %s probe" % (
                    ",".join(answered), "its" if len(answered) == 1 else "their")
        if len(self.book.world()) > len(self.world_now):
            if attempt.training():
                attempt.request_stop(signal.SIGUSR1, "grow")
            return
        back = self.book.returnable()
        due = self.last_grow_probe is None or now - self.last_grow_probe >= self.probe_every_s
        if back and due:
            self.last_grow_probe = now
            found = {}
            thread = threading.Thread(target=lambda: found.update(
                probe_hosts(self.mpiexec, names(back), self.probe_timeout_s)), daemon=True)
            thread.start()
            self.grow_probe = (thread, found)

    # after an attempt ---------------------------------------------------------------------------
    def after(self, a):
        world = names(self.world_now)
        if self.grow_probe is not None:  # a probe still running belongs to the old world
            self.grow_probe[0].join()
            self.grow_probe = None
        if a["ended"] in ("finished", "grow"):
            self.book.judge_clean_end(world)
            return a["ended"] == "grow" and self.stop_signal is None
        if self.stop_signal is not None:
            return False
        self.failures += 1
        found = diagnose(read_tail(a["log"]) if a["log"] else "", self.run_dir,
                         a["launch_unix"], rank_hosts(self.world_now))
        probes = probe_hosts(self.mpiexec, world, self.probe_timeout_s)
        aside = self.book.judge_failure(world, set(found["blamed"]),
                                        {n: p.answered for n, p in probes.items()})
        found["probes"] = {n: {"answered": p.answered, "seconds": round(p.seconds, 4),
                               "detail": p.detail} for n, p in probes.items()}
        found["set_aside"] = [list(x) for x in aside]
        a["failure"] = found
        for n, reason in aside:
            self.say("host %s set aside: %s" % (n, reason))
        self.why = self.describe_failure(found, aside)
        if self.failures > self.max_restarts:
            self.say("%d failure(s), more than --max-restarts %d: giving up" % (
                self.failures, self.max_restarts))
            return False
        return True

    def describe_failure(self, found, aside):
        if aside:
            return "shrink: " + "; ".join("%s %s" % (n, r) for n, r in aside)
        if found["blamed"]:
            return "relaunch after a failure on %s (probes answered; strike %s)" % (
                ",".join(found["blamed"]),
                ",".join(str(self.book.strikes[n]) for n in found["blamed"]))
        return "relaunch after a failure pinned on no host (every probe answered)"

    def summary_extra(self):
        extra = {"set_aside": {n: a.reason for n, a in self.book.aside.items()}}
        if self.gave_up is not None:
            extra.update({"exit_status": EXIT_TOO_FEW_HOSTS, "finished": False,
                          "gave_up": self.gave_up})
        return extra
