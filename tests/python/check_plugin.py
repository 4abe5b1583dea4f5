#!/usr/bin/env python3
"""check_plugin.py MPIEXEC N: ringtrain's pytest plugin under mpiexec (plugin_fixture/):
  - a test that fails on the last rank alone fails in rank 0's report, with that rank's
    message, and the other test passes: "1 failed, 1 passed", printed once;
  - a test that hangs ends the job after RINGTRAIN_TEST_TIMEOUT seconds with a traceback
    (the first rank whose timer fires prints its stack, then mpiexec ends the others), and a
    non-zero exit."""

import os
import subprocess
import sys

mpiexec, n = sys.argv[1], sys.argv[2]
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plugin_fixture")
command = [mpiexec, "-n", n, "/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", here]
problems = []

done = subprocess.run(command, capture_output=True, text=True, timeout=120)
last = int(n) - 1
if done.returncode == 0:
    problems.append("a failing rank left the run green")
if done.stdout.count("1 failed, 1 passed") != 1:
    problems.append("rank 0's report should say '1 failed, 1 passed' once")
if int(n) > 1 and f"rank {last} of {n}:" not in done.stdout:
    problems.append(f"rank 0's report does not carry rank {last}'s failure")
if f"the last rank ({last}) disagrees" not in done.stdout:
    problems.append("the failing assertion's message is missing from the report")

env = dict(os.environ, RINGTRAIN_FIXTURE_HANG="1", RINGTRAIN_TEST_TIMEOUT="2")
hang = subprocess.run(command + ["-k", "hangs"], capture_output=True, text=True, timeout=120, env=env)
if hang.returncode == 0:
    problems.append("a hanging test passed")
if "Timeout (0:00:02)!" not in hang.stderr or "most recent call first" not in hang.stderr:
    problems.append("the hang's traceback (faulthandler) is missing")

if problems:
    print("FAIL: " + "; ".join(problems))
    print(done.stdout[-2000:], done.stderr[-1000:], hang.stderr[-1500:])
    sys.exit(1)
print(f"ok: N={n}: the last rank's failure in rank 0's report; the hang ended with its traceback")
