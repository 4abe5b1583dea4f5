#!/usr/bin/env bash
# check_config.sh RINGTRAIN GOOD_TOML
# 1. keys of the file are applied (manifest config shows them);
# 2. a flag overrides the file (--lr 0.03 wins over lr = 0.02);
# 3. the run's own config.toml, passed back with --config, reproduces the same losses.
set -eu
ringtrain=$1 toml=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
"$ringtrain" train --config "$toml" --lr 0.03 --run-dir a >/dev/null
python3 - <<'PY'
import json
m = json.load(open("a/manifest.json"))
c = m["config"]
assert c["steps"] == 6 and c["global-batch"] == 32 and c["mlp-hidden"] == "32", c
assert abs(c["lr"] - 0.03) < 1e-9, ("flag must override the file", c["lr"])
assert m["results"]["steps"] == 6, m["results"]
PY
"$ringtrain" train --config a/config.toml --run-dir b >/dev/null
cmp <(grep -o '"loss":[^,]*' a/metrics.jsonl) <(grep -o '"loss":[^,]*' b/metrics.jsonl)
echo "ok: config applied, flag won, config.toml reproduced the losses"
