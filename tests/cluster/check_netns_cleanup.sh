#!/usr/bin/env bash
# check_netns_cleanup.sh NETNS_CLUSTER
# netns-cluster removes everything it made (namespaces rtPID-*, hence the veth pairs and
# the bridge; its state directory; the processes it started) in each way it can end:
#   1. the command succeeds           -> its exit code 0
#   2. the command fails              -> the command's exit code
#   3. a job inside fails: mpiexec with a rank that exits 3
#   4. SIGTERM while the command runs -> forwarded to the command, then cleanup
#   5. --delay on a kernel without netem: one clear line, exit 3 (with netem: it works)
#   6. SIGKILL (no trap can run): `netns-cluster cleanup` removes what was left
# and the machine's own namespace gains no interface. Exit 77 where namespaces cannot be made.
set -u
cluster=$1
reason=$("$cluster" check) || { echo "SKIP: $reason"; exit 77; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; cat "$work"/*.log 2>/dev/null | tail -10; exit 1; }
links_before=$(ip -o link show | wc -l)

# left_behind PID: what a netns-cluster with this PID left, empty when nothing
left_behind() {
  ip netns list | grep -o "^rt$1-[a-z0-9]*"
  [[ -e ${TMPDIR:-/tmp}/netns-cluster-$1 ]] && echo "${TMPDIR:-/tmp}/netns-cluster-$1"
  return 0
}
# expect NAME CODE PID: the run PID ended with CODE and left nothing
expect() {
  local name=$1 want=$2 pid=$3 got
  wait "$pid"; got=$?
  [[ $got == "$want" ]] || fail "$name: exit code $got, expected $want"
  [[ -z $(left_behind "$pid") ]] || fail "$name: left behind: $(left_behind "$pid")"
  echo "ok: $name: exit $got, nothing left"
}
# wait_for FILE: bounded wait (30 s) for a file the command writes once the cluster is up
wait_for() {
  for _ in $(seq 300); do [[ -e $1 ]] && return 0; sleep 0.1; done
  fail "$1 did not appear within 30 s"
}

"$cluster" --hosts 3 --rate 1gbit run true >"$work/1.log" 2>&1 &
expect "success" 0 $!
"$cluster" --hosts 2 run sh -c 'exit 7' >"$work/2.log" 2>&1 &
expect "failing command" 7 $!
# shellcheck disable=SC2016  # PMI_RANK is each rank's own
MPIEXEC_TIMEOUT=30 "$cluster" --hosts 2 mpiexec -n 2 sh -c 'test "$PMI_RANK" != 1 || exit 3' \
  >"$work/3.log" 2>&1 &
pid=$!
wait $pid; code=$?
((code != 0)) || fail "a rank exiting 3 gave exit code 0"
[[ -z $(left_behind $pid) ]] || fail "failing job: left behind: $(left_behind $pid)"
echo "ok: failing rank: exit $code, nothing left"

# shellcheck disable=SC2016  # expanded in host 0
"$cluster" --hosts 2 run sh -c 'trap "exit 143" TERM; touch "$0"; while :; do sleep 1; done' \
  "$work/up-4" >"$work/4.log" 2>&1 &
pid=$!
wait_for "$work/up-4"
kill -TERM $pid
expect "SIGTERM" 143 $pid

if "$cluster" netem >/dev/null; then
  "$cluster" --hosts 2 --delay 1ms run true >"$work/5.log" 2>&1 &
  expect "--delay with netem" 0 $!
else
  "$cluster" --hosts 2 --delay 1ms run true >"$work/5.log" 2>&1 &
  pid=$!
  expect "--delay without netem" 3 $pid
  grep -q "no netem" "$work/5.log" || fail "--delay without netem: no clear message"
fi

# shellcheck disable=SC2016
"$cluster" --hosts 2 run sh -c 'touch "$0"; exec sleep 300' "$work/up-6" >"$work/6.log" 2>&1 &
pid=$!
wait_for "$work/up-6"
kill -KILL $pid
wait $pid 2>/dev/null
[[ -n $(left_behind $pid) ]] || fail "SIGKILL: nothing left, so this case proves nothing"
"$cluster" cleanup >"$work/6c.log" 2>&1 || fail "cleanup failed"
[[ -z $(left_behind $pid) ]] || fail "cleanup left: $(left_behind $pid)"
echo "ok: SIGKILL: 'netns-cluster cleanup' removed $(grep -c removed "$work/6c.log") leftovers"

links_after=$(ip -o link show | wc -l)
((links_after == links_before)) || fail "the root namespace had $links_before links, now $links_after"
echo "ok: the root namespace has the same $links_after links as before"
