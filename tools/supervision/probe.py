"""Can a host run a rank? A bounded probe: a one-rank job of `true` on that host alone,
`MPIEXEC -hosts HOST -n 1 true`, through the same launcher as the training job (so it
tests what a rank needs: the launcher reaches the host, the host's proxy connects back to
mpiexec, a process starts there). Every host is probed at once.

A probe answers when it exits 0. It has not answered when it exits otherwise, when it has not
ended within the timeout (it is then killed with its tree), or as soon as its output reports a
failed connection ("unable to connect", "Network is unreachable", "No route to host", ...):
hydra's mpiexec does not end when a proxy or ssh fails to connect, it waits for the proxy
until its own timeout, so that message is the earliest sign.

A probe that a signal ends (mpiexec killed by SIGPIPE when a connection left from the failed
job breaks under it) says nothing about the host: it is started once more, within the same
timeout, and only the second one decides.
"""
import collections
import os
import re
import subprocess
import time

from .processes import kill_tree

Probe = collections.namedtuple("Probe", "host answered seconds detail")

POLL_S = 0.01
CONNECTION_FAILED = re.compile(
    r"unable to connect|Network is unreachable|No route to host|Connection refused|"
    r"Connection timed out|Could not resolve hostname|Name or service not known")


def probe_command(mpiexec, host_name):
    return list(mpiexec) + ["-hosts", host_name, "-n", "1", "true"]


def first_line(text, pattern=None):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    if pattern is not None:
        lines = [l for l in lines if pattern.search(l)]
    return lines[0][:200] if lines else ""


class Running:
    """One probe in flight: its process and the output read so far (non-blocking)."""

    def __init__(self, mpiexec, name, env):
        self.proc = subprocess.Popen(probe_command(mpiexec, name), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.output = b""

    def read(self):
        try:
            while True:
                chunk = self.proc.stdout.read(65536)
                if not chunk:
                    break
                if len(self.output) < 65536:  # enough to find the reason; the rest is dropped
                    self.output += chunk
        except (BlockingIOError, OSError, ValueError):
            pass
        return self.output.decode("utf-8", "replace")

    def end(self):
        if self.proc.poll() is None:
            kill_tree(self.proc)
        self.proc.wait()
        self.proc.stdout.close()


def outcome(name, run, elapsed, timeout_s):
    """Probe(...) if this probe is decided, else None."""
    text = run.read()
    code = run.proc.poll()
    if code == 0:
        return Probe(name, True, elapsed, "")
    if code is not None:
        return Probe(name, False, elapsed, "exit %d%s" % (code, ": " + first_line(text) if text else ""))
    failed = first_line(text, CONNECTION_FAILED)
    if failed:
        return Probe(name, False, elapsed, failed)
    if elapsed > timeout_s:
        return Probe(name, False, elapsed, "no answer within %.1f s" % timeout_s)
    return None


def probe_hosts(mpiexec, names, timeout_s):
    """{name: Probe} for every host in `names`, all probed in parallel, within timeout_s."""
    env = dict(os.environ, MPIEXEC_TIMEOUT=str(max(1, int(timeout_s) + 1)))
    start = time.monotonic()
    running, out = {}, {}
    for name in names:
        try:
            running[name] = Running(mpiexec, name, env)
        except OSError as e:
            out[name] = Probe(name, False, 0.0, "cannot run %s: %s" % (mpiexec[0], e.strerror))
    retried = set()
    while running:
        elapsed = time.monotonic() - start
        for name, run in list(running.items()):
            decided = outcome(name, run, elapsed, timeout_s)
            if decided is None:
                continue
            run.end()
            killed_by_signal = run.proc.returncode is not None and run.proc.returncode < 0
            if killed_by_signal and not decided.answered and name not in retried:
                retried.add(name)  # one more try: a signal says nothing about the host
                running[name] = Running(mpiexec, name, env)
                continue
            out[name] = decided
            del running[name]
        if running:
            time.sleep(POLL_S)
    return out
