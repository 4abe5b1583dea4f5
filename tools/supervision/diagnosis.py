"""What a failed attempt left behind that names a host: evidence for the set-aside policy.

  banner    mpiexec's "BAD TERMINATION ... PID p RUNNING AT HOST ... EXIT CODE: c" when a
            rank process died (a signal, an exit without MPI_Finalize): that host is blamed.
  errors    "ringtrain: rank R of N: error: ..." (a rank that failed alone): R's host is blamed.
  peers     an MPI error stack of a call to or from world rank P that failed ("MPI_Isend(buf=...,
            count=8, MPI_BYTE, 2, tag, MPI_COMM_WORLD, ...) failed ... Endpoint timeout"): the
            caller is a victim and P's host is blamed, when no banner names a host (MPICH does
            not always print the banner before a victim's abort ends the job).
  watchdog  RUN/watchdog-rank<R>.txt written during the attempt: rank R was stuck in a phase
            of a step, waiting for a peer that died or hangs. R is a victim, not blamed; its
            report (rank, step, phase, host) goes into the ledger.
A host lost with its link (its processes gone, no FIN) leaves none of these: mpiexec ends
the job with a process-manager error, or the watchdog fires. The probes (probe.py) find it.
Ranks fill the world's hosts in order (hosts.rank_hosts), which maps a rank to its host.
"""
import os
import re

BANNER = re.compile(r"PID (\d+) RUNNING AT (\S+)\s*\n=\s*EXIT CODE: (-?\d+)")
RANK_ERROR = re.compile(r"^ringtrain: rank (\d+) of \d+: error: (.*)$", re.MULTILINE)
WATCHDOG = re.compile(r"rank (\d+): watchdog: stuck in '([^']*)' of step (\d+)")
WATCHDOG_FILE = re.compile(r"watchdog-rank(\d+)\.txt$")
PEER = re.compile(r"MPI_(?:I?[sS]end|I?[rR]ecv)\(buf=[^,]+, count=\d+, \w+, (\d+), -?\d+, MPI_COMM_WORLD")
MAX_LOG_BYTES = 1 << 20


def read_tail(path, limit=MAX_LOG_BYTES):
    """The last `limit` bytes of a file as text ('' if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def host_of(rank, rank_hosts):
    return rank_hosts[rank] if 0 <= rank < len(rank_hosts) else None


def watchdog_reports(run_dir, since_unix, rank_hosts):
    """[{rank, step, phase, host}] from the watchdog files written at or after since_unix."""
    out = []
    try:
        names = sorted(os.listdir(run_dir))
    except OSError:
        return out
    for name in names:
        if not WATCHDOG_FILE.fullmatch(name):
            continue
        path = os.path.join(run_dir, name)
        try:
            if os.stat(path).st_mtime < since_unix:
                continue
        except OSError:
            continue
        m = WATCHDOG.search(read_tail(path, 4096))
        if m:
            rank = int(m.group(1))
            out.append({"rank": rank, "step": int(m.group(3)), "phase": m.group(2),
                        "host": host_of(rank, rank_hosts)})
    return out


def diagnose(log_text, run_dir, since_unix, rank_hosts):
    """{"blamed": [hosts], "banner": [...], "errors": [...], "peers": [...], "watchdog": [...]}"""
    banner = [{"pid": int(p), "host": h, "exit_code": int(c)} for p, h, c in BANNER.findall(log_text)]
    errors = [{"rank": int(r), "host": host_of(int(r), rank_hosts), "message": m[:200]}
              for r, m in RANK_ERROR.findall(log_text)]
    peers = [{"rank": int(r), "host": host_of(int(r), rank_hosts)} for r in PEER.findall(log_text)]
    watchdog = watchdog_reports(run_dir, since_unix, rank_hosts)
    victims = {w["host"] for w in watchdog}
    suspects = [b["host"] for b in banner if b["host"] not in victims] + [e["host"] for e in errors]
    if not banner:
        suspects += [p["host"] for p in peers]
    blamed = []
    for h in suspects:
        if h is not None and h in rank_hosts and h not in blamed:
            blamed.append(h)
    return {"blamed": blamed, "banner": banner, "errors": errors, "peers": peers,
            "watchdog": watchdog}
