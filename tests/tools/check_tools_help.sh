#!/usr/bin/env bash
# check_tools_help.sh TOOLS_DIR
# Every tool in TOOLS_DIR answers --help with a usage text: exit 0 within 20 s, at least three
# lines on standard output, a line with "usage", and the tool's own name; nothing written to
# the folder it runs in (--help does not start the tool's work). Python tools run under
# Debian's /usr/bin/python3.
set -u
tools=$1
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir "$work/cwd" && cd "$work/cwd" || exit 1
shopt -s nullglob dotglob
out=$work/help.out err=$work/help.err
failed=0 checked=0
for tool in "$tools"/*; do
  [[ -f $tool ]] || continue
  name=$(basename "$tool")
  run=("$tool")
  [[ $name == *.py ]] && run=(/usr/bin/python3 "$tool")
  timeout -k 5 20 "${run[@]}" --help </dev/null >"$out" 2>"$err"
  rc=$?
  written=(*)
  why=""
  if ((rc != 0)); then why="exit code $rc"
  elif (($(wc -l <"$out") < 3)); then why="fewer than 3 lines"
  elif ! grep -qi "usage" "$out"; then why="no usage line"
  elif ! grep -q -- "${name%.*}" "$out"; then why="its name does not appear"
  elif ((${#written[@]})); then why="it wrote ${written[*]}"
  fi
  if [[ -n $why ]]; then
    echo "FAIL: $name --help: $why"; head -n 5 "$out" "$err"; failed=1
  fi
  rm -rf -- "${written[@]}"
  checked=$((checked + 1))
done
((checked > 0)) || { echo "FAIL: no tools in $tools"; exit 1; }
((failed)) && exit 1
echo "ok: $checked tools answer --help with a usage text"
