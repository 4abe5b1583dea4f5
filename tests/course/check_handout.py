#!/usr/bin/env python3
"""check_handout.py MPIEXEC N COURSE_DIR

The untouched handout, graded at N ranks: every grader test fails, and for each of the five
tasks the report carries the handout's message saying what is missing ("task k (...) is not
implemented: ..."). Exit 0 when that holds."""

import os
import re
import subprocess
import sys

mpiexec, n, course = sys.argv[1], sys.argv[2], sys.argv[3]
env = dict(os.environ)
env.pop("COURSE_SOLUTION", None)
done = subprocess.run([mpiexec, "-n", n, "/usr/bin/python3", "-m", "pytest", "-q",
                       "-p", "no:cacheprovider", "tests"], cwd=course, env=env,
                      capture_output=True, text=True, timeout=240)
report = done.stdout + done.stderr
problems = []
if done.returncode == 0:
    problems.append("the untouched handout passed")
summary = re.search(r"(\d+) failed(?:, (\d+) passed)? in", done.stdout)
if not summary or summary.group(2):
    problems.append("expected every test to fail, got: " + (summary.group(0) if summary else "no summary"))
for task in range(1, 6):
    if not re.search(rf"NotImplementedError: task {task} \(\w+\) is not implemented: \w", report):
        problems.append(f"no message for task {task}")
if problems:
    print("FAIL: " + "; ".join(problems) + "\n" + report[-3000:])
    sys.exit(1)
print(f"ok: {summary.group(0)}; each task's message present")
