#!/usr/bin/env bash
# Lesson 4: overlap. The same cnn training at N=2 with the buckets' rings started during
# backward (--overlap on) and after it (--overlap off); the step account of each, and a
# trace to open in Perfetto.
#   examples/lessons/04-overlap/run.sh [--quick] [OUT]      (OUT default: runs/lesson04)
source "$(dirname "$0")/../lib.sh"
lesson_setup lesson04 "$@"
steps=200
((quick)) && steps=30
train=(train --model cnn --steps "$steps" --no-eval --log-every 10 --trace-steps 5 --quiet)

for mode in on off; do
  echo "== cnn N=2, $steps steps, --overlap $mode"
  "$mpiexec" -n 2 "$ringtrain" "${train[@]}" --overlap "$mode" --run-dir "$out/overlap-$mode"
done
/usr/bin/python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["gradient_buckets"]; print("buckets: %d, bytes %s (%s)" % (b["count"], b["bytes"], b["cap_reason"]))' \
  "$out/overlap-on/manifest.json"
echo
/usr/bin/python3 "$(dirname "$0")/account.py" "overlap on" "$out/overlap-on" "overlap off" "$out/overlap-off"
echo
echo "trace: open $out/overlap-on/trace.json in https://ui.perfetto.dev (or chrome://tracing)"
if [[ -f $top/tools/plot_overlap.py ]] && /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 "$top/tools/plot_overlap.py" timeline "$out/overlap-on/trace.json" --step 4 \
    -o "$out/timeline.png" >/dev/null && echo "timeline of step 4: $out/timeline.png"
fi
