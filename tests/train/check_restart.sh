#!/usr/bin/env bash
# check_restart.sh RINGTRAIN MPIEXEC N_FIRST N_RESUME FAULT_ARGS -- TRAIN_ARGS...
# 1. reference: an uninterrupted run at N_FIRST ranks
# 2. the same run with FAULT_ARGS (a kill -9 of a rank, or of rank 0 inside a save phase),
#    which must fail; then `--resume auto` at N_RESUME ranks, which must finish
# 3. the final checkpoints agree: bitwise in /model /optimizer /schedule /data /rng and the
#    same losses in metrics.jsonl when N_RESUME = N_FIRST; otherwise every array within
#    1e-5 relative (‖a − b‖ / ‖b‖, `ringtrain inspect --compare`)
# If EXPECT_RESUMED is set (a checkpoint file name), the resume must start from that file; if
# EXPECT_RESUME_LINE is set (an extended regular expression), the resume's output must match it.
# FIRST_ARGS (reference and faulty run) and RESUME_ARGS (the resume) add flags to one side
# only, e.g. FIRST_ARGS="--zero 1" RESUME_ARGS="--zero 0".
# REFERENCE_RANKS runs the reference at another N (default N_FIRST); BITWISE=1 requires the
# bitwise comparison of step 3 whatever the Ns (--reduction exact).
set -u
read -ra first_args <<<"${FIRST_ARGS:-}"
read -ra resume_args <<<"${RESUME_ARGS:-}"
ringtrain=$1 mpiexec=$2 n_first=$3 n_resume=$4 fault=$5; shift 5
[[ "$1" == "--" ]] && shift
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; for f in *.log; do echo "--- $f"; tail -5 "$f"; done; exit 1; }
export MPIEXEC_TIMEOUT=120
"$mpiexec" -n "${REFERENCE_RANKS:-$n_first}" "$ringtrain" train "$@" "${first_args[@]}" --quiet --run-dir A </dev/null >a.log 2>&1 || fail "reference run failed"
# shellcheck disable=SC2086
"$mpiexec" -n "$n_first" "$ringtrain" train "$@" "${first_args[@]}" --quiet --run-dir B $fault >b1.log 2>&1 && fail "the fault did not stop the run"
"$mpiexec" -n "$n_resume" "$ringtrain" train "$@" "${resume_args[@]}" --run-dir B --resume auto >b2.log 2>&1 || fail "resume failed"
grep -qE "resumed from|no checkpoint to resume from" b2.log || fail "the second attempt did not resume"
if [[ -n ${EXPECT_RESUMED:-} ]]; then
  grep -q "resumed from B/checkpoints/$EXPECT_RESUMED " b2.log ||
    fail "expected a resume from $EXPECT_RESUMED: $(grep -E 'resumed from|no checkpoint' b2.log)"
fi
if [[ -n ${EXPECT_RESUME_LINE:-} ]]; then
  grep -qE "$EXPECT_RESUME_LINE" b2.log || fail "the resume does not say /$EXPECT_RESUME_LINE/"
fi
last=$(cat A/checkpoints/LATEST)
[[ -f B/checkpoints/$last ]] || fail "resumed run has no $last"
[[ $(cat B/checkpoints/LATEST) == "$last" ]] || fail "resumed run's LATEST names $(cat B/checkpoints/LATEST), not $last"
bitwise=${BITWISE:-0}
[[ $n_first == "$n_resume" && $n_first == "${REFERENCE_RANKS:-$n_first}" ]] && bitwise=1
for g in model optimizer schedule data rng; do
  if [[ $bitwise == 1 ]]; then
    h5diff "A/checkpoints/$last" "B/checkpoints/$last" "/$g" "/$g" >/dev/null || fail "/$g differs"
  fi
done
if [[ $bitwise != 1 ]]; then
  "$ringtrain" inspect "B/checkpoints/$last" --compare "A/checkpoints/$last" --rtol 1e-5 ||
    fail "the resumed run differs from the reference beyond 1e-5"
fi
if [[ $n_first == "$n_resume" && $n_first == "${REFERENCE_RANKS:-$n_first}" ]]; then
  cmp <(grep -o '"loss":[^,]*' A/metrics.jsonl) <(grep -o '"loss":[^,]*' B/metrics.jsonl) ||
    fail "losses in metrics.jsonl differ"
fi
echo "ok: $(grep -oE "resumed from.*|no checkpoint to resume.*" b2.log | head -1); final $last equal"
