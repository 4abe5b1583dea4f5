#!/usr/bin/env bash
# check_hostile_outputs.sh RINGTRAIN DATA_DIR
# Outputs never replace what they should not: `eval --predictions` naming a device
# (/dev/null, /dev/full), a FIFO, a directory, the checkpoint being read or a data file is
# refused before anything is read (exit 2), and leaves every file as it was; a write that
# fails (ENOSPC on a full tmpfs, mounted when the test runs as root) names the file and the
# reason and leaves no temporary.
set -u
ringtrain=$1 data=$2
work=$(mktemp -d); trap 'umount "$work/full" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; exit 1; }
timeout -k 5 60 "$ringtrain" train --data "$data" --mlp-hidden 16 --global-batch 8 --steps 4 \
  --no-eval --quiet --run-dir A >a.log 2>&1 || fail "run: $(cat a.log)"
ckpt=A/checkpoints/step-00000004.h5
sum=$(md5sum "$ckpt" "$data"/*.npy)
mkfifo fifo && mkdir folder
for target in /dev/null /dev/full fifo folder "$ckpt" "$data/test_x.npy"; do
  timeout -k 5 30 "$ringtrain" eval "$ckpt" --data "$data" --predictions "$target" >out.log 2>&1
  code=$?
  [[ $code == 2 ]] || fail "--predictions $target exited $code: $(cat out.log)"
  [[ $(wc -l <out.log) == 1 ]] || fail "--predictions $target: not one line: $(cat out.log)"
  grep -Eq "not a regular file: refused|is the same file as the input" out.log ||
    fail "--predictions $target: $(cat out.log)"
done
[[ -c /dev/null && -c /dev/full && -p fifo ]] || fail "a device or the FIFO was replaced"
[[ "$(md5sum "$ckpt" "$data"/*.npy)" == "$sum" ]] || fail "an input was changed"
# A write that fails: ENOSPC on a full file system.
mkdir full
if mount -t tmpfs -o size=64k tmpfs full 2>/dev/null; then
  dd if=/dev/zero of=full/filler bs=4k 2>/dev/null
  "$ringtrain" eval "$ckpt" --data "$data" --predictions full/p.npy >nospace.log 2>&1
  [[ $? == 1 ]] || fail "a write to a full file system: $(cat nospace.log)"
  grep -q "full/p.npy.tmp: write failed: No space left on device (ENOSPC)" nospace.log ||
    fail "$(cat nospace.log)"
  [[ ! -e full/p.npy && ! -e full/p.npy.tmp ]] || fail "a half-written prediction file stayed"
  umount full
else
  echo "note: not root, the ENOSPC case is not run" >nospace.log
fi
"$ringtrain" eval "$ckpt" --data "$data" --predictions p.npy >ok.log 2>&1 || fail "$(cat ok.log)"
echo "ok: $(grep -h "refused" out.log); $(cat nospace.log)"
