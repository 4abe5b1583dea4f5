#!/usr/bin/env bash
# check_async_save.sh RINGTRAIN MPIEXEC N -- TRAIN_ARGS...
# --checkpoint-async on changes when the file is written, not what it holds: the same run
# with synchronous and with asynchronous saves writes the same checkpoints, bitwise in
# /model /optimizer /schedule /data /rng, at every save step. The asynchronous run's
# periodic save records say "async", with blocking and persist times; the end save is
# synchronous. TRAIN_ARGS must make at least two periodic saves (--keep large enough for all).
# ZERO_GATHER (e.g. "snapshot writer"): one asynchronous run per --zero-gather mode, each
# compared with the synchronous run, so the modes' files are also equal to each other.
set -u
read -ra gathers <<<"${ZERO_GATHER:-}"
ringtrain=$1 mpiexec=$2 n=$3; shift 3
[[ "$1" == "--" ]] && shift
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; for f in *.log; do echo "--- $f"; tail -5 "$f"; done; exit 1; }
export MPIEXEC_TIMEOUT=120
# The asynchronous run in on/ against the synchronous one in off/ ($1: its --zero-gather).
check_async_run() {
  files=$(cd off/checkpoints && ls step-*.h5)
  [[ $(cd on/checkpoints && ls step-*.h5) == "$files" ]] ||
    fail "checkpoints differ: off has $(echo $files), on has $(cd on/checkpoints && echo step-*.h5)"
  [[ $(wc -w <<<"$files") -ge 3 ]] || fail "fewer than two periodic saves and the end save: $files"
  for f in $files; do
    for g in model optimizer schedule data rng; do
      h5diff "off/checkpoints/$f" "on/checkpoints/$f" "/$g" "/$g" >/dev/null || fail "$f: /$g differs (--zero-gather $1)"
    done
  done
  [[ $(cat on/checkpoints/LATEST) == "$(cat off/checkpoints/LATEST)" ]] || fail "LATEST differs"
  python3 - <<'PY' || fail "see above (--zero-gather $1)"
import json, sys
saves = [r for r in map(json.loads, open("on/metrics.jsonl")) if "blocking_s" in r]
periodic, end = saves[:-1], saves[-1]
ok = (len(periodic) >= 2 and all(r.get("async") is True and r["reason"] == "interval" for r in periodic)
      and all(r["blocking_s"] > 0 and r["persist_s"] > 0 and r["checkpoint_s"] == r["blocking_s"]
              for r in saves)
      and end["reason"] == "end" and "async" not in end and "save_failed" not in json.dumps(saves))
if not ok:
    print("FAIL: save records of the asynchronous run:", saves)
    sys.exit(1)
PY
}
"$mpiexec" -n "$n" "$ringtrain" train "$@" --keep 1000 --quiet --run-dir off \
  --checkpoint-async off >off.log 2>&1 || fail "the run with --checkpoint-async off failed"
[[ ${#gathers[@]} -gt 0 ]] || gathers=(default)
for gather in "${gathers[@]}"; do
  extra=(); [[ $gather == default ]] || extra=(--zero-gather "$gather")
  rm -rf on
  "$mpiexec" -n "$n" "$ringtrain" train "$@" --keep 1000 --quiet --run-dir on \
    --checkpoint-async on "${extra[@]}" >on.log 2>&1 ||
    fail "the run with --checkpoint-async on ${extra[*]} failed"
  check_async_run "$gather"
done
echo "ok: $(wc -w <<<"$files") checkpoints bitwise equal with --checkpoint-async on (${gathers[*]}) and off"
