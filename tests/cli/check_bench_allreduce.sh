#!/usr/bin/env bash
# check_bench_allreduce.sh RINGTRAIN MPIEXEC N
# `ringtrain bench allreduce` at N ranks on a short sweep: it prints the table, the fit and
# the summary, and its JSON holds the contract's fields with the ring's counters exact
# (2(N-1) rounds; 2M(N-1)/N bytes sent per rank where N divides the element count).
set -euo pipefail
ringtrain=$1 mpiexec=$2 n=$3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$mpiexec" -n "$n" "$ringtrain" bench allreduce --sizes 4,1000,64K,256K --seconds-per-size 0.01 \
  --min-repeats 3 --max-repeats 5 --warmup 1 --json "$work/out.json" >"$work/stdout.txt"
for text in "ring/MPI" "alpha-beta model" "summary:" "memory traffic"; do
  grep -qF "$text" "$work/stdout.txt" || { cat "$work/stdout.txt"; echo "FAIL: no '$text'"; exit 1; }
done
/usr/bin/python3 - "$work/out.json" "$n" <<'PY'
import json, sys
doc, n = json.load(open(sys.argv[1])), int(sys.argv[2])
assert doc["world_size"] == n, doc["world_size"]
rows = doc["rows"]
assert sorted({r["impl"] for r in rows}) == ["mpi", "ring"], rows
assert sorted({r["bytes"] for r in rows}) == [4, 1000, 65536, 262144]
for r in rows:
    for key in ("impl", "world_size", "bytes", "median_s", "algbw_GBps", "busbw_GBps", "rounds",
                "bytes_sent_per_rank"):
        assert key in r, (key, r)
    assert r["median_s"] > 0, r
    if r["impl"] == "ring":
        # exact counters for every size are the unit tests' (tests/collectives/ring_test.cpp)
        assert r["rounds"] == 2 * (n - 1), r
        if (r["bytes"] // 4) % n == 0:
            assert r["bytes_sent_per_rank"] == 2 * r["bytes"] * (n - 1) // n, r
fit = doc["fit"]
for key in ("alpha_s", "bandwidth_Bps", "residuals", "regimes", "note"):
    assert key in fit, key
if n > 1:
    assert len(fit["residuals"]) == 4, fit["residuals"]
print("ok: N=%d, %d rows, fit: %s" % (n, len(rows), fit["note"]))
PY
