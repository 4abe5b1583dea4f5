"""pytest under mpiexec without mpi4py: the same tests on every rank, rank 0 reports.

pytest-mpi needs mpi4py, which Debian builds on Open MPI; this plugin does the little a grader
needs with ringtrain's own communicator. Load it from a conftest.py:

    pytest_plugins = ["ringtrain.pytest_plugin"]

and run ``mpiexec.mpich -n N /usr/bin/python3 -m pytest``. Then:

- every rank collects and runs the same tests in the same order;
- after each phase of a test (setup, call, teardown) the ranks agree on its outcome: a phase
  that failed on any rank fails on every rank (so no rank goes on into a collective the others
  left), and rank 0's report carries every failing rank's message ("rank 1: ...");
- only rank 0 prints pytest's report; a failing rank also writes one line to stderr at once,
  so a failure shows even if the ranks never meet again;
- a test that runs longer than RINGTRAIN_TEST_TIMEOUT seconds (default 120) ends the process
  with every thread's traceback (faulthandler), and mpiexec ends the job: a hang fails.
"""

import faulthandler
import os
import sys

import numpy as np
import pytest

from . import mpi


def gather_text(comm, text):
    """Every rank's `text`, in rank order, on every rank. Collective."""
    data = np.frombuffer(text.encode("utf-8", "replace"), dtype=np.uint8)
    lengths = comm.allgather(np.array([data.size], dtype=np.int64))[:, 0]
    padded = np.zeros(max(int(lengths.max()), 1), dtype=np.uint8)
    padded[:data.size] = data
    rows = comm.allgather(padded)
    return [bytes(rows[r, :lengths[r]]).decode("utf-8", "replace") for r in range(comm.size)]


def _terminal_stderr(config):
    """A file on the stderr pytest started with. During a test pytest's fd capture puts a
    temporary file on fd 2, which a process ended by faulthandler never shows; its capture
    keeps the original fd (pytest 7: targetfd_save), else fd 2 is all there is."""
    capman = config.pluginmanager.getplugin("capturemanager")
    err = getattr(getattr(capman, "_global_capturing", None), "err", None)
    return os.fdopen(os.dup(getattr(err, "targetfd_save", 2)), "w")


@pytest.hookimpl(trylast=True)  # after pytest's terminal reporter exists
def pytest_configure(config):
    comm = mpi.world()
    config.stash[_COMM] = comm
    config.stash[_STDERR] = _terminal_stderr(config)
    if comm.rank != 0:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            config.pluginmanager.unregister(reporter)


_COMM = pytest.StashKey()
_STDERR = pytest.StashKey()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    timeout = float(os.environ.get("RINGTRAIN_TEST_TIMEOUT", "120"))
    stderr = item.config.stash[_STDERR]
    faulthandler.dump_traceback_later(timeout, exit=True, file=stderr)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    comm = item.config.stash[_COMM]
    mine = report.longreprtext if report.failed else ""
    if report.failed and comm.rank != 0:
        first = call.excinfo.exconly().splitlines()[0] if call.excinfo else "failed"
        sys.stderr.write(f"\nrank {comm.rank}: {item.nodeid} ({call.when}) failed: {first}\n")
        sys.stderr.flush()
    texts = gather_text(comm, "F" + mine if report.failed else "P")
    failed = [(r, t[1:]) for r, t in enumerate(texts) if t.startswith("F")]
    if not failed:
        return
    report.outcome = "failed"
    if comm.size > 1:
        report.longrepr = "\n".join(f"rank {r} of {comm.size}:\n{t}" for r, t in failed)
