#!/usr/bin/env bash
# check_hostile_resume.sh RINGTRAIN MPIEXEC DATA_DIR
# What a careless or hostile hand leaves in a run directory costs no checkpoint (N = 2):
#  - `--resume auto` from a launch that accepts none of the run's checkpoints (another
#    --mlp-hidden or --optimizer: another experiment; a wrong key; every file damaged) exits
#    2, names the reason (each file's, or each differing setting with both values), and
#    changes nothing in the run directory; `--resume never` there is refused the same way;
#  - three empty files named like newer checkpoints take none of the --keep places: a resume
#    reports them, keeps them, and keeps the real checkpoints;
#  - LATEST as a FIFO does not hang a resume, and as a directory leaves no LATEST.tmp; a
#    manifest.json that is a FIFO is refused, not waited on;
#  - a signed run resumed without its key is refused, saying that the run was signed.
set -u
ringtrain=$1 mpiexec=$2 data=$3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; tail -5 ./*.log 2>/dev/null; exit 1; }
export MPIEXEC_TIMEOUT=60
run=(--data "$data" --mlp-hidden 16 --global-batch 8 --steps 30 --no-eval --checkpoint-every 10
     --keep 3 --quiet)
train() { timeout -k 5 60 "$mpiexec" -n 2 "$ringtrain" train "${run[@]}" "$@"; }
snapshot() { find A -type f -exec md5sum {} + | sort; find A | sort; }
# refused CODE TEXT ARGS...: the launch exits CODE with TEXT in its output and A is untouched.
refused() {
  local code=$1 text=$2; shift 2
  snapshot >before.txt
  train "$@" >refused.log 2>&1
  local got=$?
  [[ $got == "$code" ]] || fail "$* exited $got, expected $code: $(cat refused.log)"
  grep -qF -- "$text" refused.log || fail "$*: no '$text' in: $(cat refused.log)"
  snapshot >after.txt
  cmp -s before.txt after.txt || fail "$* changed the run directory: $(diff before.txt after.txt)"
}

train --run-dir A >a.log 2>&1 || fail "the first run failed"
refused 2 "a checkpoint of another experiment: the layer list (--model, --mlp-hidden, --dropout) differs" \
  --run-dir A --resume auto --steps 40 --mlp-hidden 32
refused 2 "a checkpoint of another experiment: --optimizer sgd (this launch: adamw), --lr 0.05 (this launch: 0.01)" \
  --run-dir A --resume auto --steps 40 --optimizer adamw --lr 0.01
head -c 32 /dev/urandom >other.key && chmod 600 other.key
refused 2 "step-00000010.h5: not signed with this key (the file carries no MAC)" \
  --run-dir A --resume auto --steps 40 --checkpoint-key other.key
grep -qF "holds 3 checkpoint files and this launch accepts none" refused.log || fail "$(cat refused.log)"
refused 1 "already holds a run" --run-dir A --resume never --steps 40

# Garbage named like newer checkpoints: reported, not counted, not removed.
for s in 1200 1201 1202; do : >"A/checkpoints/step-0000$s.h5"; done
train --run-dir A --resume auto --steps 40 >garbage.log 2>&1 || fail "resume with garbage: $(cat garbage.log)"
grep -q '"resumed_from":"step-00000030.h5"' A/metrics.jsonl || fail "$(cat garbage.log)"
grep -q "step-00001202.h5: .*not counted for --keep and is left in place" garbage.log ||
  fail "the garbage was not reported: $(cat garbage.log)"
for s in 20 30 40 1200 1201 1202; do
  [[ -f A/checkpoints/step-$(printf %08d $s).h5 ]] || fail "step $s is gone: $(ls A/checkpoints)"
done
"$ringtrain" inspect A/checkpoints/step-00000040.h5 --verify >/dev/null || fail "step 40 does not verify"
rm A/checkpoints/step-000012*.h5

# Every file damaged: nothing is accepted, nothing is changed.
cp -r A A.good
for f in A/checkpoints/step-*.h5; do printf 'XXXXXXXX' | dd of="$f" bs=1 seek=4000 conv=notrunc 2>/dev/null; done
refused 2 "this launch accepts none: step-00000040.h5: " --run-dir A --resume auto --steps 50
rm -rf A && mv A.good A

# LATEST as a FIFO: no hang (timeout above), one line; as a directory: no LATEST.tmp.
rm A/checkpoints/LATEST && mkfifo A/checkpoints/LATEST
train --run-dir A --resume auto --steps 50 >fifo.log 2>&1
[[ $? == 1 ]] || fail "LATEST as a FIFO: $(cat fifo.log)"
grep -q "LATEST: exists and is a FIFO, not a regular file: refused" fifo.log || fail "$(cat fifo.log)"
rm A/checkpoints/LATEST && mkdir A/checkpoints/LATEST
train --run-dir A --resume auto --steps 50 >dir.log 2>&1 && fail "LATEST as a directory was accepted"
[[ ! -e A/checkpoints/LATEST.tmp ]] || fail "LATEST.tmp was left behind"
rmdir A/checkpoints/LATEST && echo step-00000040.h5 >A/checkpoints/LATEST
mv A/manifest.json A/manifest.real && mkfifo A/manifest.json
train --run-dir A --resume auto --steps 50 >manifest.log 2>&1 && fail "manifest.json as a FIFO was accepted"
grep -q "manifest.json: is a FIFO, not a regular file: refused" manifest.log || fail "$(cat manifest.log)"
rm A/manifest.json && mv A/manifest.real A/manifest.json

# A signed run stays signed.
head -c 32 /dev/urandom >run.key && chmod 600 run.key
train --run-dir S --checkpoint-key run.key --steps 10 >s.log 2>&1 || fail "signed run: $(cat s.log)"
train --run-dir S --resume auto --steps 20 >s2.log 2>&1 && fail "a signed run resumed without its key"
grep -q "the run was signed" s2.log || fail "$(cat s2.log)"
rm S/manifest.json  # the checkpoints' seals say it too
train --run-dir S --resume auto --steps 20 >s3.log 2>&1 && fail "a signed checkpoint resumed without the key"
grep -q "step-00000010.h5: the run was signed (its checkpoints carry a MAC)" s3.log || fail "$(cat s3.log)"
echo "ok: $(head -c 300 refused.log)"
