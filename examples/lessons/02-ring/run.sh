#!/usr/bin/env bash
# Lesson 2: the ring, measured. Rounds and bytes counted for N = 2, 3, 4; alpha and B fitted;
# the model beside the measurement, and where it fails.
#   examples/lessons/02-ring/run.sh [--quick] [OUT]      (OUT default: runs/lesson02)
source "$(dirname "$0")/../lib.sh"
lesson_setup lesson02 "$@"
sizes=()   # default sweep: 4 B .. 64 MiB
((quick)) && sizes=(--sizes 4,4K,64K,1M --seconds-per-size 0.01 --min-repeats 3 --max-repeats 5)

for n in 2 3 4; do
  echo "== N = $n: ringtrain bench allreduce"
  "$mpiexec" -n "$n" "$ringtrain" bench allreduce "${sizes[@]}" --json "$out/allreduce-n$n.json" |
    sed -n '/^alpha-beta model/,/^  one\|^  one alpha/p;/^summary/,/^ *busbw/p'
done

echo; echo "== what the counters say (rank 0's, from the JSON): rounds and bytes sent per rank"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
print("%3s %10s %7s %16s %16s" % ("N", "M bytes", "rounds", "sent per rank", "2M(N-1)/N"))
for n in (2, 3, 4):
    doc = json.load(open("%s/allreduce-n%d.json" % (sys.argv[1], n)))
    for r in doc["rows"]:
        if r["impl"] == "ring" and r["bytes"] in (4096, 65536, 1048576):
            print("%3d %10d %7d %16d %16.0f" % (n, r["bytes"], r["rounds"], r["bytes_sent_per_rank"],
                                                2 * r["bytes"] * (n - 1) / n))
PY
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 "$top/tools/plot_allreduce.py" "$out"/allreduce-n{2,3,4}.json -o "$out/allreduce.png"
fi
