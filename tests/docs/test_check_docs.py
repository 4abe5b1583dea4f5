#!/usr/bin/env python3
"""check_docs.py reports each kind of case it exists for, by file and line, and nothing else.

fixtures/bad/ holds one file per case (a launcher outside the repository in front of a
command or in a usage text, a scratch folder of one machine, a home folder, words about
sessions and helpers, an issue number in a heading and as #N, a private tool in a command,
a link to a missing file, to a missing heading, and outside the repository);
fixtures/bad.expected is the report the check must print for them, line for line.
fixtures/good/ holds what must pass: upstream references such as pytorch/pytorch#71303,
mkdtemp templates, system paths, English uses of "issues" and "duplicates", links with
anchors to repeated and decorated headings, links inside code.
Each bad file is also checked alone in an empty folder: it must fail by itself.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_docs  # noqa: E402

FIXTURES = os.path.join(HERE, "fixtures")
BAD = os.path.join(FIXTURES, "bad")
GOOD = os.path.join(FIXTURES, "good")


def expected_report():
    with open(os.path.join(FIXTURES, "bad.expected"), encoding="utf-8") as f:
        return [line for line in f.read().splitlines() if line]


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def check_each_bad_file_alone(expected):
    files = check_docs.project_files(BAD)
    if len(files) < 15:
        fail("expected a fixture file per case, found %d" % len(files))
    for rel in files:
        mine = [line for line in expected if line.startswith(rel + ":")]
        if not mine:
            fail("%s: no expected finding in bad.expected" % rel)
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            shutil.copy(os.path.join(BAD, rel), os.path.join(root, rel))
            got = check_docs.check(root)
        if got != mine:
            fail("%s alone: reported %s, expected %s" % (rel, got, mine))
    return len(files)


def check_command_line(expected):
    script = os.path.join(HERE, "check_docs.py")
    bad = subprocess.run([sys.executable, script, BAD], capture_output=True, text=True)
    if bad.returncode != 1:
        fail("check_docs.py on fixtures/bad exited %d, expected 1" % bad.returncode)
    lines = bad.stdout.splitlines()
    if lines[:-1] != expected or "The rule: " not in lines[-1]:
        fail("check_docs.py on fixtures/bad printed:\n" + bad.stdout)
    good = subprocess.run([sys.executable, script, GOOD], capture_output=True, text=True)
    if good.returncode != 0:
        fail("check_docs.py on fixtures/good exited %d:\n%s" % (good.returncode, good.stdout))


def main():
    expected = expected_report()
    got = check_docs.check(GOOD)
    if got:
        fail("fixtures/good reported:\n" + "\n".join(got))
    got = check_docs.check(BAD)
    if got != expected:
        fail("fixtures/bad reported:\n%s\nexpected:\n%s" % ("\n".join(got), "\n".join(expected)))
    files = check_each_bad_file_alone(expected)
    check_command_line(expected)
    print("check_docs: %d bad fixture files each reported by file and line; the good one passes"
          % files)


if __name__ == "__main__":
    main()
