#!/usr/bin/env bash
# Lesson 8: restart. Kill a rank with SIGKILL in the middle of training, resume with
# --resume auto, and check bit for bit with h5diff that the run continued the same
# computation as one that never stopped.
#   examples/lessons/08-restart/run.sh [--quick] [OUT]      (OUT default: runs/lesson08)
source "$(dirname "$0")/../lib.sh"
lesson_setup lesson08 "$@"
steps=2000 every=500
((quick)) && steps=300 every=100
last=$(printf "checkpoints/step-%08d.h5" "$steps")
train=(train --steps "$steps" --checkpoint-every "$every" --no-eval --log-every 10)

echo "== 1. the reference: $steps steps of mlp at N=2, never stopped"
"$mpiexec" -n 2 "$ringtrain" "${train[@]}" --run-dir "$out/uninterrupted" >"$out/uninterrupted.log"

echo "== 2. the same run; once the first checkpoint is committed, rank 1 gets SIGKILL"
"$mpiexec" -n 2 "$ringtrain" "${train[@]}" --run-dir "$out/killed" >"$out/killed.log" 2>&1 &
launcher=$!
rank1=""
while kill -0 "$launcher" 2>/dev/null; do
  if [[ -s $out/killed/checkpoints/LATEST && -z $rank1 ]]; then
    # the ringtrain process of this run whose PMI rank is 1
    for pid in $(pgrep -f "ringtrain train .*--run-dir $out/killed"); do
      if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "PMI_RANK=1"; then rank1=$pid; fi
    done
    if [[ -n $rank1 ]]; then
      kill -KILL "$rank1"
      echo "killed rank 1 (pid $rank1) after checkpoint $(cat "$out/killed/checkpoints/LATEST")"
    fi
  fi
  sleep 0.01
done
wait "$launcher" && code=0 || code=$?
[[ -n $rank1 ]] || { echo "the run ended before the kill: raise --steps"; exit 1; }
echo "mpiexec exited with $code: $(grep -m1 -o "BAD TERMINATION[^=]*" "$out/killed.log" || echo "no banner")"
echo "metrics lines before the kill: $(grep -c '"loss"' "$out/killed/metrics.jsonl") (every 10 steps)"

echo "== 3. relaunch with --resume auto"
"$mpiexec" -n 2 "$ringtrain" "${train[@]}" --run-dir "$out/killed" --resume auto >"$out/resume.log" 2>&1
grep -m1 "resumed from" "$out/resume.log"

echo "== 4. bit for bit: h5diff of the final checkpoints, group by group (not /progress: timings)"
for g in model optimizer schedule data rng; do
  if h5diff "$out/uninterrupted/$last" "$out/killed/$last" "/$g" "/$g"; then
    echo "  /$g: identical"
  else
    echo "  /$g: DIFFERENT"
  fi
done
loss() { /usr/bin/python3 -c 'import json,sys; print("\n".join("%d %r" % (m["step"], m["loss"]) for m in map(json.loads, open(sys.argv[1])) if "loss" in m))' "$1"; }
if diff <(loss "$out/uninterrupted/metrics.jsonl") <(loss "$out/killed/metrics.jsonl") >/dev/null; then
  echo "  losses in metrics.jsonl: identical at all $(loss "$out/killed/metrics.jsonl" | wc -l) logged steps"
else
  echo "  losses in metrics.jsonl: DIFFERENT"
fi
