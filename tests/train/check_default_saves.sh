#!/usr/bin/env bash
# check_default_saves.sh RINGTRAIN MPIEXEC N
# Periodic saves are on by default: with no checkpoint flag a run plans Young/Daly
# (--checkpoint-every auto) with the default MTBF of one day, says so in its banner, the
# manifest and each plan, and its first save (after --log-every steps, which measures the cost
# C) is a checkpoint a killed run resumes from. --checkpoint-every 0 still saves at the end only.
# The run pauses after step 100 until that first save is committed (it is written on a writer
# thread), then a rank is killed (SIGKILL) in step 150; the rerun with --resume auto continues
# from step 20 to the end.
set -u
ringtrain=$1 mpiexec=$2 n=$3
export MPIEXEC_TIMEOUT=120
fail() { echo "FAIL: $*"; for f in *.log; do echo "--- $f"; tail -12 "$f"; done; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
run=(--model mlp --mlp-hidden 32 --global-batch 32 --no-eval --log-every 20 --steps 200)

"$mpiexec" -n "$n" "$ringtrain" train "${run[@]}" --run-dir R --test-pause-step 100 \
  --test-pause-file go --test-kill-rank $((n - 1)) --test-kill-step 150 >killed.log 2>&1 &
launcher=$!
for _ in $(seq 600); do
  [[ -f R/checkpoints/step-00000020.h5 ]] && break
  sleep 0.1
done
touch go
wait $launcher && fail "the run to be killed exited 0"
plan="checkpoints: every tau = sqrt(2 C mu) (Young/Daly), C measured by the first save 20 steps"
plan+=" in, mu = 86400 s (the default: one day; give --mtbf or --node-mtbf), asynchronous"
grep -qF "$plan" killed.log || fail "the banner does not state the default plan"
[[ -f R/checkpoints/step-00000020.h5 ]] || fail "no checkpoint after step 20 with the defaults"
"$ringtrain" inspect R/checkpoints/step-00000020.h5 --verify >inspect.log 2>&1 ||
  fail "the default save after step 20 does not verify"

"$mpiexec" -n "$n" "$ringtrain" train "${run[@]}" --run-dir R --resume auto >resumed.log 2>&1 ||
  fail "the resume failed"
grep -qE "resumed from \S*step-00000020.h5 at step 20" resumed.log ||
  fail "the resume did not continue from the default save after step 20"
[[ -f R/checkpoints/step-00000200.h5 ]] || fail "the resumed run did not save its end"

"$mpiexec" -n "$n" "$ringtrain" train "${run[@]}" --steps 60 --checkpoint-every 0 --run-dir Z \
  >end-only.log 2>&1 || fail "the run with --checkpoint-every 0 failed"
grep -qF "checkpoints: at the end only (--checkpoint-every 0)" end-only.log ||
  fail "--checkpoint-every 0: the banner does not say at the end only"
[[ $(ls Z/checkpoints) == $'LATEST\nstep-00000060.h5' ]] ||
  fail "--checkpoint-every 0 saved other than at the end: $(ls Z/checkpoints | tr '\n' ' ')"

python3 - <<'EOF' || fail "see above"
import json, sys
def check(ok, what):
    if not ok:
        print("FAIL:", what)
        sys.exit(1)
manifest = json.load(open("R/manifest.json"))
check(manifest["config"]["checkpoint-every"] == "auto", "the default is not auto")
check(manifest["checkpoints"]["mtbf"] == {"seconds": 86400.0, "source":
      "the default: one day; give --mtbf or --node-mtbf"}, f"manifest: {manifest['checkpoints']}")
plans = [r for r in map(json.loads, open("R/metrics.jsonl")) if "interval_plan" in r]
check([p["step"] for p in plans] == [20, 40], f"plans at steps {[p['step'] for p in plans]}")
for p in plans:
    check(p["interval_plan"]["mtbf_s"] == 86400 and
          p["interval_plan"]["mtbf_source"] == "the default: one day", f"plan {p}")
EOF
echo "ok: N=$n: the defaults save after step 20 (mu one day, stated), a kill resumes from it;" \
  "--checkpoint-every 0 saves at the end only"
