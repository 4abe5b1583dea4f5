"""The run directory as ringtrain leaves it, read by the supervisor: the newest checkpoint
(checkpoints/LATEST), the records of metrics.jsonl, and a watcher that stamps each record an
attempt writes with the time the supervisor first saw it (metrics.jsonl carries no clock).

Records: a *step record* has "step" and "loss" (and "step_s", the mean step time of its
logging window); a *save record* has "checkpoint_s" (and "reason": "signal" when SIGTERM or
SIGUSR1 made ringtrain save and stop); a resume writes {"step", "resumed_from"} first.
"""
import json
import os


def find_run_dir(command):
    """The value of --run-dir in the training command, or None."""
    for i, arg in enumerate(command):
        if arg == "--run-dir":
            if i + 1 >= len(command):
                return ""
            return command[i + 1]
        if arg.startswith("--run-dir="):
            return arg.split("=", 1)[1]
    return None


def checkpoint_name_step(name):
    """'step-00000040.h5' -> 40; anything else -> None."""
    if name.startswith("step-") and name.endswith(".h5") and name[5:-3].isdigit():
        return int(name[5:-3])
    return None


def latest_step(run_dir):
    """Step of the checkpoint named by RUN/checkpoints/LATEST, 0 if there is none or it is garbage."""
    try:
        with open(os.path.join(run_dir, "checkpoints", "LATEST")) as f:
            name = f.read(256).strip()
    except OSError:
        return 0
    return checkpoint_name_step(name) or 0


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
        lines = data.split(b"\n")[:-1]  # the part after the last newline is incomplete (or empty)
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
