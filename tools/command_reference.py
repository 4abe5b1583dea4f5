#!/usr/bin/env python3
"""Writes docs/commands.md, the command reference, from the built program's own --help.

  tools/command_reference.py build/ringtrain > docs/commands.md     write the page
  tools/command_reference.py build/ringtrain --check docs/commands.md   exit 1 if it differs

The option table lives in the code (cli/*.cpp, CLI11): each subcommand's --help prints it
with defaults and descriptions. This script runs `ringtrain --help`, follows the
"Subcommands:" of each help text (so a new subcommand appears by itself) and writes one
section per command with its help text as printed. --check compares a committed page with
what this build prints and shows the difference; the docs test runs it, so a flag added,
renamed or redocumented in the code fails the test until the page is written again.
"""
import argparse
import difflib
import os
import subprocess
import sys

HEADER = """# Commands

Every subcommand of `ringtrain` and every flag, as the program's `--help` prints them (defaults
after `=`). This page is generated: `tools/command_reference.py build/ringtrain >
docs/commands.md` writes it, and a test fails when it and the program disagree. `--config
FILE` takes a TOML file whose keys are these flags' names (flags on the command line win).
The user's guide explains them in context: [docs/README.md](README.md).
"""


def help_text(ringtrain, words):
    env = dict(os.environ, COLUMNS="100")  # --help wraps to COLUMNS: the same page everywhere
    out = subprocess.run([ringtrain] + words + ["--help"], capture_output=True, text=True,
                         env=env, timeout=60)
    if out.returncode != 0:
        sys.exit("command_reference: '%s --help' exited %d: %s"
                 % (" ".join(["ringtrain"] + words), out.returncode, out.stderr.strip()))
    return out.stdout.rstrip("\n")


def subcommands(text):
    """The names listed under "Subcommands:" in a help text, in order. A name starts its line
    after two spaces; a description wrapped onto further lines is indented deeper, and its
    words are not names."""
    names, inside = [], False
    for line in text.splitlines():
        if line.startswith("Subcommands:"):
            inside = True
        elif inside and line.startswith("  ") and line.strip():
            if line[2] != " ":
                names.append(line.split()[0])
        elif inside and line.strip():
            inside = False
    return names


def page(ringtrain):
    """One section per command. A help text seen before (CLI11 prints a command's own help for
    a word that names none of its subcommands) ends that branch, so the walk always ends."""
    sections, queue, seen = [], [[]], set()
    while queue:
        words = queue.pop(0)
        text = help_text(ringtrain, words)
        if text in seen:
            continue
        seen.add(text)
        sections.append("## %s\n\n```text\n%s\n```\n" % (" ".join(["ringtrain"] + words), text))
        queue[0:0] = [words + [name] for name in subcommands(text)]
    return HEADER + "\n" + "\n".join(sections)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ringtrain", help="the built program, e.g. build/ringtrain")
    parser.add_argument("--check", metavar="PAGE", nargs="+",
                        help="compare each PAGE with what this build prints; exit 1 if one differs")
    args = parser.parse_args()
    text = page(os.path.abspath(args.ringtrain))
    if not args.check:
        sys.stdout.write(text)
        return 0
    stale = 0
    for path in args.check:
        with open(path, encoding="utf-8") as f:
            committed = f.read()
        if committed == text:
            print("command_reference: %s matches the program's --help" % path)
            continue
        stale += 1
        sys.stdout.writelines(difflib.unified_diff(
            committed.splitlines(True), text.splitlines(True), path, "ringtrain --help"))
        print("command_reference: %s is stale; write it again: tools/command_reference.py "
              "build/ringtrain > docs/commands.md" % path)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
