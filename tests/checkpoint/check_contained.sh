#!/usr/bin/env bash
# check_contained.sh RINGTRAIN MPIEXEC
# The contained reader and the keyed MAC through the ringtrain executable:
#  - a reader child that crashes (the test hook RINGTRAIN_TEST_READER_CRASH raises SIGSEGV
#    where libhdf5 would parse the file) is one line naming the file and the signal, exit 1;
#  - `--resume auto` names the crashed file, falls back to the previous checkpoint, and the
#    run continues to the same final state as the uninterrupted run (bitwise);
#  - a signed run's files verify with its key only; a key file others may read is refused.
set -u
ringtrain=$1 mpiexec=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; tail -20 ./*.log 2>/dev/null; exit 1; }
export MPIEXEC_TIMEOUT=120
run=(--model mlp --mlp-hidden 64 --global-batch 32 --steps 30 --no-eval --log-every 10
     --checkpoint-every 10 --keep 3)
"$mpiexec" -n 2 "$ringtrain" train "${run[@]}" --quiet --run-dir A >a.log 2>&1 || fail "reference run failed"
newest=A/checkpoints/step-00000030.h5

# inspect: the child dies, the parent refuses the file in one line and exits 1.
RINGTRAIN_TEST_READER_CRASH=step-00000030.h5 "$ringtrain" inspect "$newest" --verify >crash.log 2>&1
code=$?
[[ $code == 1 ]] || fail "inspect of a file that crashes the reader exited $code, expected 1"
[[ $(wc -l <crash.log) == 1 ]] || fail "expected one line, got: $(cat crash.log)"
grep -q "$newest: the HDF5 library crashed while reading it (SIGSEGV): refused" crash.log ||
  fail "message: $(cat crash.log)"
RINGTRAIN_TEST_READER_CRASH=step-00000030.h5 "$mpiexec" -n 2 "$ringtrain" train "${run[@]}" \
  --run-dir A --resume "$newest" >explicit.log 2>&1 && fail "--resume FILE accepted a crashing read"
grep -q "crashed while reading it (SIGSEGV)" explicit.log || fail "--resume FILE: $(cat explicit.log)"

# --resume auto: the crash is one more refused candidate; the run goes on from step 20.
cp -r A B
RINGTRAIN_TEST_READER_CRASH=step-00000030.h5 "$mpiexec" -n 2 "$ringtrain" train "${run[@]}" \
  --run-dir B --resume auto >b.log 2>&1 || fail "resume after a crashed reader failed"
grep -q "skipping checkpoint step-00000030.h5: the HDF5 library crashed while reading it (SIGSEGV)" b.log ||
  fail "the crashed candidate was not named"
grep -q "resumed from B/checkpoints/step-00000020.h5" b.log || fail "did not fall back to step 20"
"$ringtrain" inspect B/checkpoints/step-00000030.h5 --compare "$newest" >cmp.log 2>&1 ||
  fail "the continued run differs from the uninterrupted one: $(cat cmp.log)"

# Keys: signed saves, verified with the key, refused with another one or without a MAC.
head -c 32 /dev/urandom >ck.key && chmod 600 ck.key
head -c 32 /dev/urandom >other.key && chmod 600 other.key
RINGTRAIN_CHECKPOINT_KEY_FILE=ck.key "$mpiexec" -n 2 "$ringtrain" train "${run[@]}" --steps 10 \
  --run-dir C >c.log 2>&1 || fail "signed run failed"
signed=C/checkpoints/step-00000010.h5
"$ringtrain" inspect "$signed" --verify --checkpoint-key ck.key >k1.log 2>&1 || fail "$(cat k1.log)"
grep -q "seal and MAC match" k1.log || fail "no MAC check reported: $(cat k1.log)"
"$ringtrain" inspect "$signed" --verify --checkpoint-key other.key >k2.log 2>&1 && fail "another key accepted"
grep -q "$signed: not signed with this key (MAC mismatch)" k2.log || fail "$(cat k2.log)"
RINGTRAIN_CHECKPOINT_KEY_FILE=ck.key "$ringtrain" inspect "$newest" --verify >k3.log 2>&1 &&
  fail "an unsigned file was accepted with a key"
grep -q "$newest: not signed with this key (the file carries no MAC)" k3.log || fail "$(cat k3.log)"
chmod 644 ck.key
"$ringtrain" inspect "$signed" --verify --checkpoint-key ck.key >k4.log 2>&1 && fail "a key readable by others was used"
grep -q "ck.key: checkpoint key file has mode 0644: group or others may read it" k4.log || fail "$(cat k4.log)"
echo "ok: $(cat crash.log); $(grep -m1 -o 'skipping checkpoint.*' b.log); $(cat cmp.log); $(cat k2.log)"
