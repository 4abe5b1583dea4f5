#!/usr/bin/env bash
# check_corrupt_resume.sh RINGTRAIN MPIEXEC -- TRAIN_ARGS...
# A finished run's newest checkpoint gets bytes flipped in its data and a stray .partial
# appears; `--resume auto` must name the corrupt file with the reason, ignore the .partial,
# resume from the previous good checkpoint, and end bitwise equal to the original run.
set -u
ringtrain=$1 mpiexec=$2; shift 2; [[ "$1" == "--" ]] && shift
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; cat *.log 2>/dev/null | tail -20; exit 1; }
export MPIEXEC_TIMEOUT=120
"$mpiexec" -n 2 "$ringtrain" train "$@" --quiet --run-dir A >a.log 2>&1 || fail "reference run failed"
cp -r A B
last=$(cat B/checkpoints/LATEST)
size=$(stat -c %s "B/checkpoints/$last")
# flip 64 bytes in the middle of the file (array data)
printf '%064d' 0 | tr 0 '\377' | dd of="B/checkpoints/$last" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
echo "garbage" > B/checkpoints/step-99999999.h5.partial
"$ringtrain" inspect "B/checkpoints/$last" --verify >verify.log 2>&1 && fail "inspect --verify accepted the corrupt file"
"$mpiexec" -n 2 "$ringtrain" train "$@" --run-dir B --resume auto >b.log 2>&1 || fail "resume failed"
grep -q "skipping checkpoint $last" b.log || fail "the corrupt $last was not reported by name"
grep -q "resumed from" b.log || fail "did not resume"
"$ringtrain" inspect "B/checkpoints/$last" --compare "A/checkpoints/$last" >cmp.log 2>&1 ||
  fail "the rewritten $last differs from the original: $(cat cmp.log)"
echo "ok: $(grep -m1 'skipping checkpoint' b.log); $(grep -m1 -o 'resumed from.*' b.log); $(cat cmp.log)"
