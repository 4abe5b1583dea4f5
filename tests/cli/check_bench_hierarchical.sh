#!/usr/bin/env bash
# check_bench_hierarchical.sh RINGTRAIN MPIEXEC N K
# `ringtrain bench allreduce --collective hierarchical --ranks-per-host K` at N ranks on a short
# sweep: the header names it, the memory-traffic table (a flat-ring model) is left out, and
# rank 0's counters in the JSON are the two-level model's (hierarchical.hpp): with H hosts, L
# ranks on the smallest, P on rank 0's,
#   intra-host: P == L: 2(L-1) rounds, 2M(L-1)/L bytes; P > L: 4(P-1) rounds, 4M(P-1)/P bytes
#   inter-host: 2(H-1) rounds, 2(M/L)(H-1)/H bytes
set -euo pipefail
ringtrain=$1 mpiexec=$2 n=$3 k=$4
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$mpiexec" -n "$n" "$ringtrain" bench allreduce --sizes 4,12K,48K --seconds-per-size 0.01 \
  --min-repeats 3 --max-repeats 5 --warmup 1 --collective hierarchical --ranks-per-host "$k" \
  --json "$work/out.json" >"$work/stdout.txt"
grep -qF "allreduce: hierarchical (" "$work/stdout.txt" || { cat "$work/stdout.txt"; echo "FAIL: header"; exit 1; }
if grep -qF "memory traffic" "$work/stdout.txt"; then echo "FAIL: flat-ring traffic table printed"; exit 1; fi
/usr/bin/python3 - "$work/out.json" "$n" "$k" <<'PY'
import json, sys
doc, n, k = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
H = -(-n // k)
L = min(k, n - (H - 1) * k)
P = min(k, n)
assert (doc["collective"], doc["ranks_per_host"], doc["hosts"]) == ("hierarchical", k, H), doc
checked = 0
for r in doc["rows"]:
    if r["impl"] != "ring" or r["bytes"] == 4:
        continue  # 4 B: one float, chunks of unequal size; the unit tests cover every size
    m = r["bytes"]  # 3072 and 12288 floats: divisible by every L·H here
    intra_rounds, intra_bytes = (2 * (L - 1), 2 * m * (L - 1) // L) if P == L else (4 * (P - 1), 4 * m * (P - 1) // P)
    inter_rounds, inter_bytes = 2 * (H - 1), 2 * (m // L) * (H - 1) // H
    got = (r["rounds"], r["bytes_sent_per_rank"], r["inter_host_rounds"], r["inter_host_bytes_sent_per_rank"])
    want = (intra_rounds + inter_rounds, intra_bytes + inter_bytes, inter_rounds, inter_bytes)
    assert got == want, (r["bytes"], got, want)
    checked += 1
assert checked == 2, checked
print("ok: N=%d K=%d, H=%d L=%d P=%d" % (n, k, H, L, P))
PY
