#!/usr/bin/env bash
# tools/function_lengths.py: the modules' src folders hold no function over 100 lines, and
# the tool does see one (a made-up file with a 101-line function and a 100-line one whose
# body holds a lambda, a string with braces and a comment with braces).
set -euo pipefail
tool=$1 root=$2
"$tool" --root "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src"
{
  echo 'namespace n { struct S { int f() const; };'
  echo 'int long_one(int x) {'
  for _ in $(seq 99); do echo '  x += 1;'; done
  echo '}'
  echo 'int fits(int x) {'
  echo '  auto l = [&] { return "}{"; };  // } {'
  for _ in $(seq 97); do echo '  x += 1;'; done
  echo '}'
  echo '}  // namespace n'
} >"$tmp/src/sample.cpp"
if out=$("$tool" --root "$tmp" src); then
  echo "FAILED: a 101-line function was not reported"; exit 1
fi
echo "$out"
grep -q "src/sample.cpp:2: long_one is 101 lines" <<<"$out"
grep -q "^1 function(s) over 100 lines" <<<"$out"
echo "function lengths: OK"
