#!/usr/bin/env bash
# check_hostile_data.sh RINGTRAIN MPIEXEC H5_FILE
# Users' data files that would crash or kill the job:
#  - an HDF5 file whose parse crashes libhdf5 (the reader child raises SIGSEGV where HDF5
#    opens the file: the test hook RINGTRAIN_TEST_READER_CRASH, standing in for the HDF Group's
#    CVE files) as `train --data` and `eval --data`: one line, "the HDF5 library crashed while
#    reading it (SIGSEGV): refused", exit 2, nothing written;
#  - a mapped .npy file truncated while a run of 2 ranks trains on it, mid-epoch (SIGBUS on
#    the next read) and at an epoch boundary (the size check): one line naming the file, exit
#    1 on every rank, no "Bus error", the last checkpoint kept and verifying.
set -u
ringtrain=$1 mpiexec=$2 h5=$3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; tail -5 ./*.log 2>/dev/null; exit 1; }
export MPIEXEC_TIMEOUT=90
cp "$h5" data.h5
timeout -k 5 60 "$ringtrain" train --data data.h5 --global-batch 2 --steps 2 --no-eval --quiet \
  --run-dir A >a.log 2>&1 || fail "training on $h5: $(cat a.log)"
for cmd in "train --data data.h5 --steps 2 --run-dir B" \
           "eval A/checkpoints/step-00000002.h5 --data data.h5"; do
  # shellcheck disable=SC2086
  RINGTRAIN_TEST_READER_CRASH=data.h5 timeout -k 5 60 "$ringtrain" $cmd >crash.log 2>&1
  code=$?
  [[ $code == 2 ]] || fail "$cmd exited $code: $(cat crash.log)"
  [[ $(wc -l <crash.log) == 1 ]] || fail "$cmd: $(cat crash.log)"
  grep -q "^ringtrain: error: data.h5: the HDF5 library crashed while reading it (SIGSEGV): refused$" \
    crash.log || fail "$cmd: $(cat crash.log)"
done
[[ ! -e B ]] || fail "a refused --data left a run directory"

# A mapped file that shrinks. 400 samples of 1 KiB, global batch 40: 10 steps an epoch.
if ! /usr/bin/python3 -c "import numpy" 2>/dev/null; then echo "SKIP: no numpy"; exit 77; fi
/usr/bin/python3 - <<'PY'
import os, numpy as np
rng = np.random.default_rng(0)
os.makedirs("d")
np.save("d/train_x.npy", rng.standard_normal((400, 256)).astype(np.float32))
np.save("d/train_y.npy", rng.integers(0, 2, 400).astype(np.int64))
np.save("d/test_x.npy", rng.standard_normal((40, 256)).astype(np.float32))
np.save("d/test_y.npy", rng.integers(0, 2, 40).astype(np.int64))
PY
for pause in 7 10; do  # mid-epoch: the next gather faults; 10: the epoch boundary check
  rm -rf R go
  timeout -k 5 80 "$mpiexec" -n 2 "$ringtrain" train --data d --mlp-hidden 16 --global-batch 40 \
    --steps 30 --no-eval --checkpoint-every 5 --checkpoint-async off --run-dir R \
    --test-pause-step $pause --test-pause-file go >shrink.log 2>&1 &
  job=$!
  for _ in $(seq 600); do grep -q "test pause" shrink.log 2>/dev/null && break; sleep 0.1; done
  truncate -s 4096 d/train_x.npy  # the header and a few samples are left
  touch go
  wait $job
  code=$?
  [[ $code == 1 ]] || fail "pause $pause: exit $code, expected 1: $(cat shrink.log)"
  grep -q "d/train_x.npy: the file shrank to 4096 bytes while the run had it mapped" shrink.log ||
    fail "pause $pause: $(cat shrink.log)"
  grep -qi "bus error\|BAD TERMINATION" shrink.log && fail "pause $pause: $(cat shrink.log)"
  "$ringtrain" inspect R/checkpoints/step-00000005.h5 --verify >/dev/null ||
    fail "pause $pause: the last checkpoint does not verify"
  /usr/bin/python3 -c "
import numpy as np; np.save('d/train_x.npy', np.random.default_rng(0).standard_normal((400, 256)).astype(np.float32))"
done
echo "ok: $(cat crash.log); $(grep -m1 'shrank' shrink.log)"
