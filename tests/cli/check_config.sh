#!/usr/bin/env bash
# check_config.sh RINGTRAIN GOOD_TOML DATA_DIR SPEC
# 1. keys of the file are applied (manifest config shows them);
# 2. a flag overrides the file (--lr 0.03 wins over lr = 0.02);
# 3. the run's own config.toml, passed back with --config, reproduces the same losses;
# 4. config.toml travels: a run given relative --data and --model FILE.toml writes them
#    absolute and --mlp-hidden as a TOML array; read from another folder it reproduces the
#    run's losses;
# 5. a hand-written config's relative paths are read from the file's folder, lists in TOML's
#    native form (mlp-hidden = [16, 8]) and as a string ("16,8") mean the same; an array of
#    anything but whole numbers is refused naming the file and line.
set -eu
ringtrain=$1 toml=$2 data=$3 spec=$4
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
losses() { grep -o '"loss":[^,]*' "$1/metrics.jsonl"; }
cmp <(losses a) <(losses b)

mkdir -p project/data other cfg
cp "$data"/*.npy project/data/
cp "$spec" project/spec.toml
small=(--steps 4 --global-batch 4 --log-every 1 --no-eval --quiet)
(cd project && "$ringtrain" train --data data --model spec.toml "${small[@]}" --run-dir c)
(cd project && "$ringtrain" train --data data --mlp-hidden 16,8 "${small[@]}" --run-dir e)
grep -qx "data = \"$work/project/data\"" project/c/config.toml
grep -qx "model = \"$work/project/spec.toml\"" project/c/config.toml
grep -qx "mlp-hidden = \[16, 8\]" project/e/config.toml
(cd other && "$ringtrain" train --config ../project/c/config.toml --run-dir d >/dev/null)
cmp <(losses project/c) <(losses other/d)
(cd other && "$ringtrain" train --config ../project/e/config.toml --run-dir f >/dev/null)
cmp <(losses project/e) <(losses other/f)

# A hand-written file beside its data and model, read from elsewhere.
cp "$spec" cfg/spec.toml
printf 'data = "../project/data"\nmodel = "spec.toml"\nsteps = 4\nglobal-batch = 4\nlog-every = 1\n' \
  >cfg/run.toml
(cd other && "$ringtrain" train --config ../cfg/run.toml --no-eval --quiet --run-dir g)
cmp <(losses project/c) <(losses other/g)
for form in '[16, 8]' '"16,8"'; do
  printf 'data = "project/data"\nmlp-hidden = %s\n' "$form" >lists.toml
  "$ringtrain" train --config lists.toml "${small[@]}" --run-dir "h${#form}"
  cmp <(losses project/e) <(losses "h${#form}")
done
printf 'mlp-hidden = [16, "8"]\n' >bad.toml
if "$ringtrain" train --config bad.toml --steps 1 2>err.txt; then echo "bad.toml accepted"; exit 1; fi
grep -q "bad.toml line 1: value of 'mlp-hidden': an array holds whole numbers only" err.txt
echo "ok: config applied, flag won, config.toml reproduced the losses from another folder"
