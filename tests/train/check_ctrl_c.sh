#!/usr/bin/env bash
# check_ctrl_c.sh RINGTRAIN MPIEXEC
# Ctrl-C on a terminal, as a user presses it (a shell in tmux, the command in its foreground):
# 1. `mpiexec -n 2 ringtrain train`, C-c at a test pause after step 10. Hydra forwards SIGINT
#    to every rank: they agree on the next step boundary, save a checkpoint there, say
#    "stopped by a signal at step N: SIGINT" and exit 130; the manifest names SIGINT.
#    (MPICH 4.0's mpiexec reports 0 after it forwarded a signal, whatever the ranks' status:
#    mpiexec's status may be 130 or 0; the rank's own status is checked in 3.)
# 2. `--resume auto` from that checkpoint finishes; its last checkpoint and its losses are
#    bitwise those of an uninterrupted run.
# 3. One process without mpiexec: the same Ctrl-C ends it with status 130 (the shell's
#    128 + 2).
# 4. Ctrl-C twice while rank 0 sleeps inside a step (no boundary to wait for): the second one
#    ends the run at once with status 130 and no stop message; every checkpoint left behind
#    verifies. (Under mpiexec a second Ctrl-C is hydra's own forced abort of the job.)
# Without tmux, SIGINT goes to the command's process group, as a terminal sends it.
set -u
ringtrain=$1 mpiexec=$2
work=$(mktemp -d)
socket=ringtrain-ctrl-c-$$
trap 'tmux -L "$socket" kill-server 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*"; for f in *.log; do echo "--- $f"; tail -8 "$f"; done; exit 1; }
args=(--model mlp --mlp-hidden 64 --global-batch 32 --steps 40 --no-eval --log-every 5)
export MPIEXEC_TIMEOUT=120

# Waits (at most 60 s) until file $1 holds the text $2.
wait_for() {
  for _ in $(seq 600); do
    grep -qs -- "$2" "$1" && return 0
    sleep 0.1
  done
  fail "no '$2' in $1 within 60 s"
}

# Runs the command line $1 in the foreground of a terminal's shell (tmux) or, without tmux, as
# its own process group.
start() {
  if command -v tmux >/dev/null; then
    tmux -L "$socket" new-session -d -x 120 -y 30 -c "$work" "bash --norc --noprofile"
    tmux -L "$socket" send-keys "$1" Enter
  else
    rm -f group.pid status
    (setsid bash -c "echo \$\$ > group.pid; exec $1"; echo $? >status) &
    wait_for group.pid .
  fi
}
# Presses Ctrl-C (or sends SIGINT to the process group).
ctrl_c() {
  if command -v tmux >/dev/null; then
    tmux -L "$socket" send-keys C-c
  else
    kill -INT -- "-$(cat group.pid)"
  fi
}
# Waits for the command to end and puts its exit status in $1. The shell's $?: typed after the
# presses (Ctrl-C flushes what was typed before; the commands read no terminal input, or
# mpiexec would take the line for rank 0), read once the command is over. A command that died
# of SIGINT ends a list such as "cmd; echo $?" in bash, so it cannot be one line.
status() {
  if command -v tmux >/dev/null; then
    tmux -L "$socket" send-keys "echo \$? > $1" Enter
    wait_for "$1" .
    tmux -L "$socket" kill-server 2>/dev/null
  else
    wait_for status .
    mv status "$1"
  fi
}

"$mpiexec" -n 2 "$ringtrain" train "${args[@]}" --quiet --run-dir A </dev/null >a.log 2>&1 ||
  fail "reference run failed"

# 1. One Ctrl-C under mpiexec at N=2.
pause=(--test-pause-step 10 --test-pause-file "$work/never")
start "$mpiexec -n 2 $ringtrain train ${args[*]} ${pause[*]} --run-dir B </dev/null >b1.log 2>&1"
wait_for b1.log "test pause after step 10 "
ctrl_c
status b1.rc
rc=$(cat b1.rc)
[[ $rc == 130 || $rc == 0 ]] || fail "one Ctrl-C under mpiexec: exit status $rc, not 130 (or 0)"
step=$(grep -o 'stopped by a signal at step [0-9]*: SIGINT' b1.log | grep -o '[0-9]*:' | tr -d :)
[[ -n $step ]] || fail "no 'stopped by a signal at step N: SIGINT'"
((step >= 10 && step < 40)) || fail "stopped at step $step, not after the pause at 10"
saved=B/checkpoints/$(printf 'step-%08d.h5' "$step")
[[ -f $saved ]] || fail "no checkpoint at step $step"
"$ringtrain" inspect "$saved" --verify >/dev/null || fail "$saved does not verify"
python3 -c "import json,sys; r=json.load(open('B/manifest.json'))['results']; \
sys.exit(r['stop_signal'] != 'SIGINT' or r['steps'] != $step)" ||
  fail "manifest.json results do not say SIGINT at step $step"

# 2. The resume is bitwise the uninterrupted run.
"$mpiexec" -n 2 "$ringtrain" train "${args[@]}" --run-dir B --resume auto >b2.log 2>&1 ||
  fail "resume failed"
grep -q "resumed from .* at step $step" b2.log || fail "did not resume at step $step"
last=$(cat A/checkpoints/LATEST)
for g in model optimizer schedule data rng; do
  h5diff "A/checkpoints/$last" "B/checkpoints/$last" "/$g" "/$g" >/dev/null || fail "/$g differs"
done
cmp -s <(grep -o '"loss":[^,]*' A/metrics.jsonl) <(grep -o '"loss":[^,]*' B/metrics.jsonl) ||
  fail "losses in metrics.jsonl differ"

# 3. One process: the status of the process itself.
start "$ringtrain train ${args[*]} ${pause[*]} --run-dir C </dev/null >c.log 2>&1"
wait_for c.log "test pause after step 10 "
ctrl_c
status c.rc
rc=$(cat c.rc)
[[ $rc == 130 ]] || fail "one Ctrl-C: exit status $rc, not 130"
grep -q "stopped by a signal at step [0-9]*: SIGINT" c.log || fail "N=1: no stop message"

# 4. Ctrl-C twice: rank 0 sleeps 30 s before the sum of step 5, so the run cannot reach a
#    boundary; the second Ctrl-C must end it at once.
hang=(--test-hang-rank 0 --test-hang-step 5 --test-hang-s 30 --log-every 1)
start "$ringtrain train ${args[*]} ${hang[*]} --checkpoint-every 2 --run-dir D </dev/null >d.log 2>&1"
wait_for D/metrics.jsonl '"step":5[,}]'
ctrl_c
sleep 0.5  # the two presses of a user: the first one must have arrived
ctrl_c
SECONDS=0
status d.rc
((SECONDS < 10)) || fail "the second Ctrl-C took ${SECONDS} s to end the run"
rc=$(cat d.rc)
[[ $rc == 130 ]] || fail "two Ctrl-C: exit status $rc, not 130"
grep -q "stopped by a signal" d.log && fail "two Ctrl-C: the run still stopped at a boundary"
for f in D/checkpoints/step-*.h5; do
  "$ringtrain" inspect "$f" --verify >/dev/null || fail "$f does not verify"
done
echo "ok: Ctrl-C at N=2 -> checkpoint at step $step (mpiexec status $(cat b1.rc)), resume" \
  "bitwise equal; N=1 -> exit 130; twice -> exit 130 at once"
