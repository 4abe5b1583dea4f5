#!/usr/bin/env bash
# check_bench_wire.sh RINGTRAIN MPIEXEC N
# `ringtrain bench allreduce --wire fp32|bf16` at N ranks, for the flat ring and for
# --collective hierarchical with hosts of 1 and of 2 ranks: the header and the JSON state the
# wire format (MPI_Allreduce's rows stay fp32), every ring row has a measured time, and rank
# 0's bytes per call are the formula's, in the JSON and in the printed wire-bytes table. With
# M bytes of fp32 payload, H hosts, L ranks on the smallest, P on rank 0's:
#   flat ring:    2M(N-1)/N sent, no host split; bf16 halves all of it
#   hierarchical: intra-host P == L: 2M(L-1)/L; P > L: 4M(P-1)/P     (fp32 on either wire)
#                 inter-host 2(M/L)(H-1)/H                            (bf16 halves it)
# So bf16 halves the bytes of the rounded rings and not the others: one host (H = 1) sends the
# same bytes on both wires.
set -euo pipefail
ringtrain=$1 mpiexec=$2 n=$3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
for config in ring:0 hierarchical:1 hierarchical:2; do
  collective=${config%:*} k=${config#*:}
  extra=(--collective "$collective")
  ((k > 0)) && extra+=(--ranks-per-host "$k")
  for wire in fp32 bf16; do
    out=$work/$collective-$k-$wire
    "$mpiexec" -n "$n" "$ringtrain" bench allreduce --sizes 4,12K,48K --seconds-per-size 0.01 \
      --min-repeats 3 --max-repeats 5 --warmup 1 "${extra[@]}" --wire "$wire" \
      --json "$out.json" >"$out.txt" </dev/null
    grep -qF "wire: $wire" "$out.txt" || { cat "$out.txt"; echo "FAIL: header lacks 'wire: $wire'"; exit 1; }
    /usr/bin/python3 - "$out.json" "$out.txt" "$n" "$collective" "$k" "$wire" <<'PY'
import json, sys
doc, text = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
n, collective, k, wire = int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
assert (doc["wire"], doc["collective"]) == (wire, collective), (doc["wire"], doc["collective"])
# The printed wire-bytes table: size -> (ms, sent, intra, inter).
table = text.split("wire bytes sent by rank 0 per call (" + wire, 1)[1].splitlines()[2:]
printed = {}
for line in table:
    f = line.split()
    if len(f) == 7:  # "12 KiB  0.0123  8192  -  -  1.234"
        printed[" ".join(f[:2])] = (float(f[2]), int(f[3]), f[4], f[5])
half = 2 if wire == "bf16" else 1
checked = 0
for r in doc["rows"]:
    assert r["median_s"] > 0, r
    if r["impl"] == "mpi":
        assert r["wire"] == "fp32", r
        continue
    assert r["wire"] == wire, r
    if r["bytes"] == 4:
        continue  # one float: chunks of unequal size; the unit tests cover every size
    m = r["bytes"]  # 3072 and 12288 floats: divisible by every chunk count here
    if collective == "ring":
        intra, inter = None, None
        sent = 2 * m * (n - 1) // n // half
    else:
        H = -(-n // k)
        L, P = min(k, n - (H - 1) * k), min(k, n)
        intra = 2 * m * (L - 1) // L if P == L else 4 * m * (P - 1) // P
        inter = 2 * (m // L) * (H - 1) // H // half
        sent = intra + inter
    got = (r["bytes_sent_per_rank"], r["intra_host_bytes_sent_per_rank"], r["inter_host_bytes_sent_per_rank"])
    assert got == (sent, intra, inter), (m, got, (sent, intra, inter))
    row = printed["%d KiB" % (m // 1024)]
    split = ("-", "-") if intra is None else (str(intra), str(inter))
    assert (row[1], row[2], row[3]) == (sent,) + split, (row, sent, split)
    assert abs(row[0] - r["median_s"] * 1e3) <= 1e-4 + 1e-3 * row[0], (row, r["median_s"])
    checked += 1
assert checked == 2, checked
print("ok: N=%d %s K=%d wire %s: %s" % (n, collective, k, wire,
      [(r["bytes"], r["bytes_sent_per_rank"], r["median_s"]) for r in doc["rows"] if r["impl"] == "ring"]))
PY
  done
done
