#!/usr/bin/env bash
# check_netns_train.sh NETNS_CLUSTER RINGTRAIN MPIEXEC
# Two emulated hosts (network namespaces, a bridge, 10 Gbit/s tbf per link, TCP only) train
# the same steps as two ranks on one host, and the final checkpoints are bitwise equal
# (`ringtrain inspect --compare --rtol 0` and h5diff), as are the logged losses. The cluster
# run must really have been spread: one rank per node in its manifest, and host 0's eth0 sent
# at least the ring's bytes (M per step at N = 2). --node-mtbf counts the hosts: the job's MTBF
# in metrics.jsonl is the node's on one host and half of it on two. Exit 77 (skipped) where namespaces cannot
# be made (not root, no `ip`).
set -u
cluster=$1 ringtrain=$2 mpiexec=$3
# shellcheck source=/dev/null  # netns_setup.sh beside this script, checked on its own
source "$(dirname "$0")/netns_setup.sh"  # skip (77) or a scratch directory, and fail()
export MPIEXEC_TIMEOUT=40
steps=12
args=(train --model mlp --global-batch 128 --steps "$steps" --no-eval --log-every 2
      --checkpoint-every 6 --blas-threads 1 --node-mtbf 1000 --quiet)

"$mpiexec" -n 2 "$ringtrain" "${args[@]}" --run-dir one-host >one-host.log 2>&1 ||
  fail "the one-host run failed"
# shellcheck disable=SC2016  # expanded by the inner bash, in host 0
"$cluster" --hosts 2 --rate 10gbit run bash -c '
  "$RT_MPIEXEC" -n 2 "$0" "$@" --run-dir two-hosts || exit
  cat /sys/class/net/eth0/statistics/tx_bytes >host0-tx-bytes' \
  "$ringtrain" "${args[@]}" >two-hosts.log 2>&1 &
launcher=$!
wait $launcher || fail "the two-host run failed"
! ip netns list | grep -q "^rt$launcher-" || fail "namespaces rt$launcher-* left behind"

# A top-level number of two-hosts/manifest.json.
manifest() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' two-hosts/manifest.json "$1"; }
ranks_per_node=$(manifest ranks_per_node)
[[ $ranks_per_node == 1 ]] || fail "the two-host run had $ranks_per_node ranks per node, not 1"
parameters=$(manifest parameters)
tx=$(cat host0-tx-bytes)
((tx >= steps * parameters * 4)) ||
  fail "host 0 sent $tx bytes on eth0, less than $steps steps x $((parameters * 4)) gradient bytes"

# The job_mtbf record of run directory $1: "hosts mtbf_s".
job_mtbf() {
  python3 -c '
import json, sys
r = [r["job_mtbf"] for r in map(json.loads, open(sys.argv[1])) if "job_mtbf" in r]
print(r[0]["hosts"], r[0]["mtbf_s"]) if len(r) == 1 else print("none")' "$1/metrics.jsonl"
}
[[ $(job_mtbf one-host) == "1 1000.0" ]] || fail "one host: job MTBF $(job_mtbf one-host), expected 1 host, 1000 s"
[[ $(job_mtbf two-hosts) == "2 500.0" ]] || fail "two hosts: job MTBF $(job_mtbf two-hosts), expected 2 hosts, 500 s"

last=$(cat one-host/checkpoints/LATEST)
[[ $last == $(cat two-hosts/checkpoints/LATEST) ]] || fail "LATEST differs"
"$ringtrain" inspect "two-hosts/checkpoints/$last" --compare "one-host/checkpoints/$last" \
  --rtol 0 >compare.log 2>&1 || fail "checkpoints differ (inspect --compare --rtol 0)"
for g in model optimizer schedule data rng; do
  h5diff "one-host/checkpoints/$last" "two-hosts/checkpoints/$last" "/$g" "/$g" >/dev/null ||
    fail "/$g differs (h5diff)"
done
cmp -s <(grep -o '"loss":[^,]*' one-host/metrics.jsonl) <(grep -o '"loss":[^,]*' two-hosts/metrics.jsonl) ||
  fail "losses in metrics.jsonl differ"
echo "ok: $last bitwise equal on 1 host and on 2 namespace hosts; host 0 sent $tx B over eth0" \
     "(>= $steps x $((parameters * 4)) B of gradients)"
