#!/usr/bin/env bash
# check_netns_elastic.sh NETNS_CLUSTER RINGTRAIN MPIEXEC SUPERVISE CASE
# The supervisor over emulated hosts (tools/netns-cluster): a host is taken away for good
# ("$RT_HOSTCTL" cut I: its link down, then its processes killed) while every rank waits after
# step 7 (--test-pause-step, attempt 0 only), so the loss lands at the same step every time;
# released, the other ranks hang in the next step's gradient sum until the watchdog
# (--watchdog-s 3) ends the job, and its report names rank, step and phase. (Not at a logged
# step: the gather of a metrics line is not watched, and would hang until the timeout.) mlp (hidden 64), global batch 48,
# 24 steps, checkpoints every 4: the loss leaves LATEST at step 4. CASE:
#   shrink        3 hosts x 1 rank, --reduction exact, host 2 lost: the run finishes on hosts
#                 0-1 (local batches 24,24), bitwise equal (h5diff of every group, losses) to an
#                 uninterrupted 3-host run and to a 1-process run; --node-mtbf follows the
#                 hosts (job MTBF of 3 hosts, then of 2)
#   grow          the same, and host 2 comes back while the 2-host world waits after step 15:
#                 the supervisor probes it, sends SIGUSR1, the run grows back to 3 hosts and
#                 still ends bitwise equal to the 1-process run
#   hierarchical  2 hosts x 2 ranks, --collective hierarchical, default reduction, host 1 lost:
#                 the run finishes on host 0's 2 ranks within 1e-5 of the uninterrupted 2x2 run
#   flap          3 hosts x 1 rank, exact, --flap-limit 2: rank 1 (host 1) kills itself in
#                 attempts 0 and 1 while host 1 answers every probe: host 1 is set aside after
#                 2 tries, not taken back, and the run ends bitwise on hosts 0 and 2
#   min-hosts     2 hosts, --min-hosts 2, host 1 lost: the supervisor probes for 2 s, then
#                 exits 3 saying the run can resume from step 4
# Exit 77 (skipped) where namespaces cannot be made (not root, no `ip`).
set -u
cluster=$1 ringtrain=$2 mpiexec=$3 supervise=$4 case=$5 self=$(realpath "$0")
if [[ $case == inner-* ]]; then  # in host 0 of the cluster (below): run the supervised job
  inner=1 case=${case#inner-}
else
  inner=0
  # shellcheck source=/dev/null  # netns_setup.sh beside this script, checked on its own
  source "$(dirname "$0")/netns_setup.sh"  # skip (77) or a scratch directory, and fail()
fi
export MPIEXEC_TIMEOUT=120
train=(train --model mlp --mlp-hidden 64 --global-batch 48 --steps 24 --no-eval --log-every 2
       --checkpoint-every 4 --blas-threads 1 --watchdog-s 3 --quiet)
exact=(--reduction exact --exact-micro-batch 8)
pause=(--attempt-args 0 "--test-pause-step 7 --test-pause-file $PWD/go")

# --- in host 0 ---------------------------------------------------------------------------------
supervise() {  # OPTIONS -- COMMAND: in the background, output in sup.log
  /usr/bin/python3 "$supervise" --mpiexec "$RT_LAUNCH" --probe-timeout 5 --probe-every 0.5 \
    --timeout-per-attempt 120 --finalize-grace 1 "$@" >sup.log 2>&1 &
  sup=$!
}
wait_for() {  # FILE TEXT: until FILE holds TEXT (60 s at most)
  for _ in $(seq 3000); do grep -qF -- "$2" "$1" 2>/dev/null && return 0; sleep 0.02; done
  echo "no '$2' in $1 within 60 s" >>inner.log; return 1
}
lose_host_after_pause() {  # HOST: once the ranks wait after step 7, HOST is taken away
  wait_for sup.log "test pause after step 7" && "$RT_HOSTCTL" cut "$1" && touch go
}
reference() {  # RUN RANKS ARGS...: an uninterrupted run across the hosts, under the supervisor
  # with no restart, which ends a job that hangs in MPI_Finalize after its last step
  local run=$1 n=$2; shift 2
  /usr/bin/python3 "$supervise" --max-restarts 0 --finalize-grace 1 -- "$RT_MPIEXEC" -n "$n" \
    "$ringtrain" "$@" --run-dir "$run" >"$run.log" 2>&1
}
hosts_answer() {  # until every host runs a probe as the supervisor's does (30 s at most): a
  # supervisor started while a host still comes up would start without it, and the case's
  # checks assume it starts on all of them
  local host
  for host in ${RT_HOSTS//,/ }; do
    for _ in $(seq 300); do
      "$RT_LAUNCH" -hosts "$host" -n 1 true >/dev/null 2>&1 && continue 2
      sleep 0.1
    done
    echo "host $host answered no probe within 30 s" >>inner.log; return 1
  done
}
if ((inner)); then
  hosts_answer || exit 1
  case $case in
    shrink)
      reference ref3 3 "${train[@]}" "${exact[@]}"
      supervise --hosts "$RT_HOSTS" "${pause[@]}" -- "$ringtrain" "${train[@]}" "${exact[@]}" \
        --node-mtbf 1200 --run-dir run
      lose_host_after_pause 2 ;;
    grow)
      supervise --hosts "$RT_HOSTS" "${pause[@]}" \
        --attempt-args 1 "--test-pause-step 15 --test-pause-file $PWD/grown" \
        -- "$ringtrain" "${train[@]}" "${exact[@]}" --run-dir run
      lose_host_after_pause 2 && wait_for sup.log "test pause after step 15" &&
        "$RT_HOSTCTL" up 2 && wait_for sup.log "answered its probe: growing back"
      touch grown ;;
    hierarchical)
      hier=(--collective hierarchical)
      reference ref 4 "${train[@]}" "${hier[@]}"
      supervise --hosts "$RT_HOSTS" --slots 2 "${pause[@]}" -- "$ringtrain" "${train[@]}" \
        "${hier[@]}" --run-dir run
      lose_host_after_pause 1 ;;
    flap)
      supervise --hosts "$RT_HOSTS" --flap-limit 2 \
        --attempt-args 0 "--test-kill-rank 1 --test-kill-step 6" \
        --attempt-args 1 "--test-kill-rank 1 --test-kill-step 10" \
        -- "$ringtrain" "${train[@]}" "${exact[@]}" --run-dir run ;;
    min-hosts)
      supervise --hosts "$RT_HOSTS" --min-hosts 2 --wait-for-hosts 2 "${pause[@]}" \
        -- "$ringtrain" "${train[@]}" "${exact[@]}" --run-dir run
      lose_host_after_pause 1 ;;
  esac
  wait "$sup"
  echo $? >sup.exit
  exit 0
fi

# --- outside the cluster: the references and the checks -----------------------------------------
hosts=3 slots=1
[[ $case == hierarchical ]] && hosts=2 slots=2
[[ $case == min-hosts ]] && hosts=2
"$mpiexec" -n 1 "$ringtrain" "${train[@]}" "${exact[@]}" --run-dir ref1 >ref1.log 2>&1 ||
  fail "the 1-process reference run failed"
"$cluster" --hosts "$hosts" --slots "$slots" run \
  bash "$self" "$cluster" "$ringtrain" "$mpiexec" "$supervise" "inner-$case" >cluster.log 2>&1 &
launcher=$!
wait $launcher || fail "netns-cluster failed"
! ip netns list | grep -q "^rt$launcher-" || fail "namespaces rt$launcher-* left behind"
cp run/logs/attempt-*.log . 2>/dev/null
code=$(cat sup.exit 2>/dev/null)

# bitwise RUN REF: the final checkpoints' groups (h5diff) and the logged losses are equal
bitwise() {
  local g last=checkpoints/step-00000024.h5
  [[ -f $1/$last && -f $2/$last ]] || fail "no $last in $1 or in $2: a run did not finish"
  for g in model optimizer schedule data rng; do
    h5diff "$1/$last" "$2/$last" "/$g" "/$g" >/dev/null || fail "$1 and $2 differ in /$g (h5diff)"
  done
  cmp -s <(grep -o '"loss":[^,]*' "$1/metrics.jsonl") <(grep -o '"loss":[^,]*' "$2/metrics.jsonl") ||
    fail "$1 and $2 logged different losses"
}
# ledger EXPRESSION...: python asserts on `ledger` (run/restarts.jsonl's lines) and `h` (addresses)
ledger() {
  /usr/bin/python3 - "$@" <<'PY' || fail "ledger: $(cat run/restarts.jsonl 2>/dev/null)"
import json, sys
ledger = [json.loads(l) for l in open("run/restarts.jsonl")]
h = ["10.213.0.%d" % i for i in range(1, 5)]
for expression in sys.argv[1:]:
    assert eval(expression), expression
PY
}
case $case in
  shrink)
    [[ $code == 0 ]] || fail "the supervised run exited '$code'"
    ledger "len(ledger) == 2" "ledger[0]['ended'] == 'failed' and ledger[0]['world_size'] == 3" \
      "ledger[1]['hosts'] == [h[0] + ':1', h[1] + ':1'] and ledger[1]['local_batches'] == [24, 24]" \
      "ledger[1]['why'].startswith('shrink: ' + h[2] + ' did not answer')" \
      "ledger[1]['step_restored'] == 4 and ledger[1]['ended'] == 'finished'" \
      "ledger[0]['failure']['probes'][h[2]]['answered'] is False" \
      "all(ledger[0]['failure']['probes'][x]['answered'] for x in h[:2])"
    /usr/bin/python3 - <<'PY' || fail "job MTBF records: not 1200/3 then 1200/2"
import json
r = [r["job_mtbf"] for r in map(json.loads, open("run/metrics.jsonl")) if "job_mtbf" in r]
assert [(x["hosts"], x["mtbf_s"]) for x in r] == [(3, 400.0), (2, 600.0)], r
PY
    bitwise run ref3
    bitwise run ref1 ;;
  grow)
    [[ $code == 0 ]] || fail "the supervised run exited '$code'"
    ledger "len(ledger) == 3" "[l['world_size'] for l in ledger] == [3, 2, 3]" \
      "[l['ended'] for l in ledger] == ['failed', 'grow', 'finished']" \
      "ledger[2]['why'].startswith('grow: ' + h[2] + ' answered')" \
      "ledger[2]['step_restored'] >= 15 and ledger[1]['steps_lost'] == 0"
    bitwise run ref1 ;;
  hierarchical)
    [[ $code == 0 ]] || fail "the supervised run exited '$code'"
    ledger "len(ledger) == 2" "ledger[1]['hosts'] == [h[0] + ':2'] and ledger[1]['world_size'] == 2" \
      "ledger[1]['step_restored'] == 4 and ledger[1]['local_batches'] == [24, 24]"
    last=checkpoints/step-00000024.h5
    "$ringtrain" inspect "run/$last" --compare "ref/$last" --rtol 1e-5 >compare.log 2>&1 ||
      fail "the shrunk run is not within 1e-5 of the uninterrupted one: $(tail -1 compare.log)"
    /usr/bin/python3 - <<'PY' || fail "losses differ by more than 1e-5"
import json
loss = lambda p: [(r["step"], r["loss"]) for r in map(json.loads, open(p)) if "loss" in r]
a, b = loss("run/metrics.jsonl"), loss("ref/metrics.jsonl")
assert [s for s, _ in a] == [s for s, _ in b] and len(a) == 12, (a, b)
assert all(abs(x - y) <= 1e-5 * abs(y) for (_, x), (_, y) in zip(a, b)), (a, b)
PY
    echo "note: $(tail -1 compare.log)" ;;
  flap)
    [[ $code == 0 ]] || fail "the supervised run exited '$code'"
    ledger "len(ledger) == 3" "[l['failure']['blamed'] for l in ledger[:2]] == [[h[1]], [h[1]]]" \
      "'strike 1' in ledger[1]['why']" "ledger[2]['why'].startswith('shrink: ' + h[1])" \
      "'flapping' in ledger[2]['why'] and ledger[2]['hosts'] == [h[0] + ':1', h[2] + ':1']" \
      "ledger[2]['ended'] == 'finished'"
    bitwise run ref1 ;;
  min-hosts)
    [[ $code == 3 ]] || fail "below --min-hosts: exit '$code', expected 3"
    grep -q "below --min-hosts 2, after waiting 2 s; the run can resume from step 4" sup.log ||
      fail "no clear message with the resume point"
    ledger "len(ledger) == 1" "ledger[0]['failure']['set_aside'][0][0] == h[1]" ;;
  *) fail "unknown case '$case'" ;;
esac
echo "ok ($case): $(grep -c . run/restarts.jsonl) world(s): $(/usr/bin/python3 "$supervise" --history run |
  tail -n +2 | awk '{printf "%s%s ranks (%s)", sep, $2, $9; sep = ", "}')"
