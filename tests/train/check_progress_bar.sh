#!/usr/bin/env bash
# check_progress_bar.sh RINGTRAIN MPIEXEC
# The README's command on a terminal shows the bar: `mpiexec -n 2 ringtrain train` in a shell
# in tmux draws rank 0's bar in place with the time left (the ranks write to pipes; the
# launcher's stdout is the terminal), and ends with the full bar and no "step K/N" lines. The
# same command into a file, or into a pipe, prints one plain line per --log-every steps. That
# is --progress auto; --progress lines prints the lines on a terminal too, --progress bar draws
# the bar into a file too, and --progress off prints neither (the summary still prints). An
# old config's `progress = "thread"` (the ring driver's flag before --ring-driver) still loads:
# it sets the ring driver, with a note saying what to write instead.
set -u
ringtrain=$1 mpiexec=$2
command -v tmux >/dev/null || { echo "skipped: no tmux (tools/install-deps installs it)"; exit 0; }
work=$(mktemp -d)
socket=ringtrain-bar-$$
trap 'tmux -L "$socket" kill-server 2>/dev/null; rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; echo "--- pane"; cat pane*.txt 2>/dev/null; exit 1; }
export MPIEXEC_TIMEOUT=120
run="$mpiexec -n 2 $ringtrain train --model mlp --mlp-hidden 32 --global-batch 32 --steps 400"
run+=" --no-eval --log-every 100"
# Waits (at most 60 s) until the pane shows the extended regular expression $1.
pane_shows() {
  for _ in $(seq 600); do
    tmux -L "$socket" capture-pane -p >pane.txt
    grep -qE -- "$1" pane.txt && return 0
    sleep 0.1
  done
  fail "the pane never showed '$1'"
}

tmux -L "$socket" new-session -d -x 150 -y 40 -c "$work" "bash --norc --noprofile"
# Paused after step 200 (until the file exists): the bar of a run under way, with the ETA. The
# bar is redrawn at most 10 times a second: rank 0 sleeps 1 s in step 100, so a bar with an
# ETA is drawn after it, however fast the steps.
tmux -L "$socket" send-keys "$run --run-dir A --test-pause-step 200 --test-pause-file go \
--test-hang-rank 0 --test-hang-step 100 --test-hang-s 1" Enter
pane_shows '^\[#+\.+\] [0-9]+/400 loss [0-9.]+  lr [0-9.]+  ETA [0-9]+:[0-9]{2}'
touch go
pane_shows '^done: 400 steps'
cp pane.txt pane-terminal.txt
grep -qE '^\[#{30}\] 400/400 loss [0-9.]+  lr ' pane.txt || fail "no full bar at the end"
grep -q '^step [0-9]*/400' pane.txt && fail "plain step lines on a terminal"

tmux -L "$socket" send-keys "$run --run-dir B >file.log 2>&1; $run --run-dir C 2>&1 | cat >pipe.log; echo finished" Enter
pane_shows '^finished'
for log in file.log pipe.log; do
  [[ $(grep -c '^step [0-9]*/400 loss' $log) == 4 ]] || fail "$log: not one line per 100 steps"
  grep -q $'\r' $log && fail "$log: a bar drawn into a file or pipe"
done

tmux -L "$socket" send-keys "clear; $run --run-dir D --progress lines; echo lines-finished" Enter
pane_shows '^lines-finished'
cp pane.txt pane-lines.txt
[[ $(grep -c '^step [0-9]*/400 loss' pane.txt) == 4 ]] || fail "--progress lines: not 4 lines"
grep -q '^\[#' pane.txt && fail "--progress lines drew a bar on a terminal"
tmux -L "$socket" send-keys "clear; $run --run-dir E --progress off; echo off-finished" Enter
pane_shows '^off-finished'
cp pane.txt pane-off.txt
grep -q '^done: 400 steps' pane.txt || fail "--progress off: no summary"
grep -qE '^step [0-9]+/400|^\[#' pane.txt && fail "--progress off printed step progress"

$run --run-dir F --progress bar >bar.log 2>&1 || fail "--progress bar into a file failed"
grep -q $'\r\[#\{30\}\] 400/400 loss' bar.log || fail "--progress bar: no bar in the file"
$run --run-dir G --progress off >off.log 2>&1 || fail "--progress off into a file failed"
grep -qE '^step [0-9]+/400' off.log && fail "--progress off: step lines in the file"
grep -q $'\r' off.log && fail "--progress off: a bar in the file"
grep -q '^done: 400 steps' off.log || fail "--progress off: no summary in the file"

printf 'progress = "thread"\n' >old.toml
"$mpiexec" -n 2 "$ringtrain" train --config old.toml --model mlp --mlp-hidden 32 --steps 20 \
  --no-eval --run-dir H >old.log 2>&1 || fail "a config with progress = \"thread\" is refused"
grep -qF 'note: progress thread names the ring driver, now --ring-driver thread (in a config file: ring-driver = "thread")' \
  old.log || fail "no note for progress = \"thread\""
grep -q '^ring-driver = "thread"' H/config.toml || fail "the run's config.toml lacks the driver"
grep -q '^progress = "auto"' H/config.toml || fail "the run's config.toml lacks progress auto"
echo "ok: the bar with its ETA under mpiexec on a terminal; plain lines into a file and a pipe;" \
  "--progress lines, bar and off; an old config's progress = \"thread\" sets the ring driver"
