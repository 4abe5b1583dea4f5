#!/usr/bin/env python3
"""Lists C++ functions longer than a limit, in the source folders of the modules.

    tools/function_lengths.py [--limit 100] [DIR ...]     (default: the modules' src/ folders, cli/ and python/src/)

A function's length is the number of lines from its opening brace to its closing brace.
The scan is lexical: comments, string and character literals are blanked, then braces are
matched; a brace opens a function when the text before it (since the last ';', '{' or '}')
holds a parameter list and it is not inside another function (lambdas and blocks count
towards the function that holds them). Namespaces, classes, structs, enums and unions are
containers. Exit status 1 if any function is over the limit, so ctest can run it.
"""
import argparse
import pathlib
import re
import sys

DEFAULT_DIRS = ["framework/src", "collectives/src", "checkpoint/src", "models/src", "cli", "python/src"]
CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$|extern\s*\"C\"\s*$")


def blank_comments_and_literals(text):
    """Replaces comments and literals by spaces, keeping every newline (and so line numbers)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j + 1, n) - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def long_functions(path, limit):
    text = blank_comments_and_literals(path.read_text(errors="replace"))
    stack = []  # per open brace: "container", "function" or "block"
    header_start = 0  # where the text before the next brace begins
    found = []
    line = 1
    for i, c in enumerate(text):
        if c == "\n":
            line += 1
        elif c == ";":
            header_start = i + 1
        elif c == "{":
            head = " ".join(text[header_start:i].split())
            in_function = any(kind[0] == "function" for kind in stack)
            if in_function:
                kind = ("block", line)
            elif CONTAINER.search(head):
                kind = ("container", line)
            elif "(" in head and not head.endswith("="):
                kind = ("function", line, head)
            else:
                kind = ("block", line)
            stack.append(kind)
            header_start = i + 1
        elif c == "}":
            if stack:
                kind = stack.pop()
                if kind[0] == "function":
                    length = line - kind[1] + 1
                    if length > limit:
                        name = re.sub(r"\s*\(.*", "", kind[2]).split(" ")[-1]
                        found.append((length, kind[1], name))
            header_start = i + 1
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", default=DEFAULT_DIRS)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    args = parser.parse_args()
    root = pathlib.Path(args.root)
    over = []
    files = 0
    for d in args.dirs:
        for path in sorted((root / d).rglob("*.cpp")):
            files += 1
            for length, start, name in long_functions(path, args.limit):
                over.append(f"{path.relative_to(root)}:{start}: {name} is {length} lines")
    for line in over:
        print(line)
    print(f"{len(over)} function(s) over {args.limit} lines in {files} files")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
