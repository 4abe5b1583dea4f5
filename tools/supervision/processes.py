"""Processes the supervisor starts: ending a whole mpiexec tree, exit statuses, and copying a
child's output to the terminal and to a log file at once (the log is what the supervisor
reads afterwards to find which host failed)."""
import os
import signal
import threading


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
    """Popen's returncode as a shell would report it: 128+N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


class Tee:
    """Copies a pipe (bytes) to `stream` (a binary file object, or None) and to the file at
    `log_path`, on a thread, until the pipe closes. `watch` (a compiled regex on text): the
    first line that matches is kept in `matched`."""

    def __init__(self, pipe, stream, log_path, watch=None):
        self.pipe, self.stream = pipe, stream
        self.log = open(log_path, "ab") if log_path else None
        self.watch, self.matched, self.partial = watch, None, b""
        self.thread = threading.Thread(target=self._copy, daemon=True)
        self.thread.start()

    def _look(self, chunk):
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()[-4096:]
        for line in lines:
            text = line.decode("utf-8", "replace")
            if self.matched is None and self.watch.search(text):
                self.matched = text.strip()[:200]

    def _copy(self):
        for chunk in iter(lambda: self.pipe.read1(65536), b""):
            if self.watch is not None:
                self._look(chunk)
            for out in (self.stream, self.log):
                if out is not None:
                    try:
                        out.write(chunk)
                        out.flush()
                    except (OSError, ValueError):
                        pass

    def close(self, timeout_s=5.0):
        """Waits for the pipe's end (bounded: a grandchild may hold it open) and closes the log."""
        self.thread.join(timeout_s)
        if self.log is not None:
            self.log.close()
