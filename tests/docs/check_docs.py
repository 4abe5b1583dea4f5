#!/usr/bin/env python3
"""The project's files speak of the project alone, and its documents' links lead somewhere.

  python3 tests/docs/check_docs.py [ROOT]        (ROOT: the repository, default: this one)

Every text file outside tests/ (the tracked files when ROOT is a git checkout, else every
file below ROOT) is read line by line, and these are reported as FILE:LINE: what:
- a path of one particular machine: /work/..., /home/..., /root/..., or a fixed /tmp/...
  folder (a mkdtemp template ending in XXXXXX is not fixed): commands run from a clone, with
  scratch from `mktemp -d`;
- a private tool of the people who wrote it in a command (farm-bench, farm-studio, and
  duplicates or issues where they are run);
- words about who ran what ("this session", "another session's builds", "helper's jobs"):
  the conditions of a measurement are facts about the machine (load, other processes, CPU);
- a bare issue number ("#52", "issue 52"): a reader cannot look it up. A reference to a public
  repository's issue ("pytorch/pytorch#71303") is fine.
bench/results/ is left out: it records what the programs printed, paths included.

Every relative link in a Markdown file (README.md, docs/, bench/, examples/) must lead to a
file or folder inside ROOT, and a #anchor in a link to a .md file must be one of that file's headings
(GitHub's slug: lower case, punctuation dropped, spaces to hyphens, -1, -2 for repeats).

Exit 0 when nothing is found, 1 otherwise. Python's standard library only.
"""
import os
import re
import subprocess
import sys
import urllib.parse

RULE = ("project files name no machine's paths (/work, /home, /root, a fixed /tmp: use "
        "mktemp -d), no private tools, sessions or helpers, no bare issue numbers; "
        "every relative link in a Markdown file resolves")

SKIPPED_PREFIXES = ("tests/", "bench/results/")
WALK_SKIPPED_DIRS = {".git", "runs", "__pycache__"}

# Searched in a file's whole text, so every pattern keeps to one line: blanks are [ \t].
# A path that starts at / (not inside a word, a relative path or a URL).
MACHINE_PATH = re.compile(r"(?<![\w.~$/:-])/(?:work|home|root)/[\w.$-]")
FIXED_TMP = re.compile(r"(?<![\w.~$/:-])/tmp/[\w.$-]+")
# duplicates and issues are English words too: flagged where a command runs them.
PRIVATE_TOOL = re.compile(
    r"(?<![\w/-])farm-(?:bench|studio)\b"
    r"|(?:^[ \t]*\$[ \t]+|[`|;][ \t]*|&&[ \t]*|\$\([ \t]*)(?:duplicates|issues)\b(?![\w.-])"
    r"|\b(?:duplicates|issues)[ \t]+(?:--?[a-z]|(?:show|list|new|close|comment|note)\b)",
    re.MULTILINE)
SESSION_WORDS = re.compile(
    r"\b(?:this|that|another|other|a second|a third|the same|one|each|earlier|previous)"
    r"[ \t]+sessions?\b|\bsessions?'s?[ \t]+(?:builds?|jobs?|runs?|training|test)"
    r"|\bsession's\b|\bhelpers?'?s?'?[ \t]+(?:jobs?|builds?|runs?|training)\b|\bHELPERS\.md\b"
    r"|\b(?:other[ \t]+)?engineers?\b|\bworktrees?\b", re.IGNORECASE)
BARE_ISSUE = re.compile(r"(?<![\w/&#.-])#\d+\b(?![\w-])|(?<!\w)[Ii]ssues?[ \t]+#?\d+\b")
RULES = [  # (pattern, what a match is, words without which it cannot match, which matches count)
    (MACHINE_PATH, "a path of one machine (run from a clone; scratch from mktemp -d)",
     ("/work/", "/home/", "/root/"), None),
    (FIXED_TMP, "a fixed /tmp folder (use mktemp -d)", ("/tmp/",),
     lambda m: not m.group(0).endswith("XXXXXX")),  # a mkdtemp template is not fixed
    (PRIVATE_TOOL, "a private tool in a command", ("farm-", "duplicates", "issues"), None),
    (SESSION_WORDS, "words about who ran what (say what ran on the machine)",
     ("session", "helper", "engineer", "worktree"), None),
    (BARE_ISSUE, "a bare issue number (name the feature instead)", ("#", "issue"), None),
]

INLINE_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
EXTERNAL = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//)")
FENCE = re.compile(r"^\s{0,3}(```+|~~~+)")
ATX_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*(?:#+\s*)?$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)


def project_files(root):
    """Paths relative to root, '/'-separated: the tracked files of a checkout, else all."""
    try:
        top = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, check=True).stdout.strip()
        if os.path.realpath(top) == os.path.realpath(root):
            out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True,
                                 check=True).stdout
            return sorted(p for p in out.decode().split("\0") if p)
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for folder, dirs, names in os.walk(root):
        rel = os.path.relpath(folder, root)
        dirs[:] = [d for d in dirs if d not in WALK_SKIPPED_DIRS
                   and not (rel == "." and d.startswith("build"))]
        for name in names:
            found.append(os.path.normpath(os.path.join(rel, name)).replace(os.sep, "/"))
    return sorted(found)


def file_text(path):
    """The file's text, or None for a binary or non-UTF-8 file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def text_findings(text):
    """(line, what) for every line of a project file's text that breaks a rule, in order."""
    found = set()
    lower = text.lower()
    for order, (pattern, what, words, counts) in enumerate(RULES):
        if not any(word in lower for word in words):
            continue
        for m in pattern.finditer(text):
            if counts is None or counts(m):
                found.add((text.count("\n", 0, m.start()) + 1, order, what))
    return [(line, what) for line, _, what in sorted(found)]


def github_slug(heading):
    """The anchor GitHub gives a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def outside_code(lines):
    """(number, line, line without its inline code) outside fenced code blocks."""
    fence = None
    for number, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker
                continue
            if marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
                continue
        if fence is None:
            yield number, line, re.sub(r"(`+).*?\1", "", line)


def anchors_of(lines):
    anchors, seen = set(), {}
    previous = ""
    for _, line, _ in outside_code(lines):
        m = ATX_HEADING.match(line)
        text = m.group(2) if m else None
        if text is None and previous.strip() and re.match(r"^\s{0,3}(=+|-+)\s*$", line) \
                and not previous.lstrip().startswith(("-", "*", "|", ">")):
            text = previous.strip()
        if text is not None:
            slug = github_slug(text)
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(slug if count == 0 else "%s-%d" % (slug, count))
        anchors.update(a.lower() for a in HTML_ANCHOR.findall(line))
        previous = line
    return anchors


def link_findings(root, rel, lines, anchor_cache):
    """(line, what) for each relative link of a document that leads nowhere."""
    found = []
    real_root = os.path.realpath(root)
    for number, _, line in outside_code(lines):
        targets = INLINE_LINK.findall(line)
        m = REFERENCE_LINK.match(line)
        if m:
            targets.append(m.group(1))
        for target in targets:
            if not target or EXTERNAL.match(target):
                continue
            path, _, anchor = target.partition("#")
            path = urllib.parse.unquote(path)
            if path.startswith("/"):
                found.append((number, "link %s: an absolute path" % target))
                continue
            dest = os.path.normpath(os.path.join(root, os.path.dirname(rel), path)) if path \
                else os.path.join(root, rel)
            real = os.path.realpath(dest)
            if real != real_root and not real.startswith(real_root + os.sep):
                found.append((number, "link %s: outside the repository" % target))
            elif not os.path.exists(dest):
                found.append((number, "link %s: no such file" % target))
            elif anchor and dest.endswith(".md") and os.path.isfile(dest):
                if dest not in anchor_cache:
                    anchor_cache[dest] = anchors_of((file_text(dest) or "").splitlines())
                if urllib.parse.unquote(anchor).lower() not in anchor_cache[dest]:
                    found.append((number, "link %s: no heading #%s in %s"
                                  % (target, anchor, os.path.relpath(dest, root))))
    return found


def check(root):
    """Every finding as 'FILE:LINE: what', in file order."""
    report = []
    anchor_cache = {}
    for rel in project_files(root):
        if rel.startswith(SKIPPED_PREFIXES):
            continue
        text = file_text(os.path.join(root, rel))
        if text is None:
            continue
        for number, what in text_findings(text):
            report.append("%s:%d: %s" % (rel, number, what))
        if rel.endswith(".md"):
            for number, what in link_findings(root, rel, text.splitlines(), anchor_cache):
                report.append("%s:%d: %s" % (rel, number, what))
    return report


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    report = check(os.path.abspath(root))
    for entry in report:
        print(entry)
    if report:
        print("%d finding(s). The rule: %s." % (len(report), RULE))
        return 1
    print("docs: OK (%s)" % RULE)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
