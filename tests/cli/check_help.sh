#!/usr/bin/env bash
# check_help.sh RINGTRAIN
# train --help people can read, and the same settings in --help as in config.toml:
# 1. the usage line names the program ("Usage: ringtrain train"); the options stand under
#    topic headings, none under "Other" (an option the topic table does not know);
# 2. at COLUMNS=80 no line is longer than 80 characters;
# 3. the flags --help lists are the keys config.toml writes, but for those a rerun picks for
#    itself (--config, --run-dir, --resume), the older name --target-accuracy, and the values
#    config.toml leaves out (empty, false, --epochs beside --steps); each is a key of the
#    manifest's configuration; hidden test flags are in neither. (check_config reads a
#    config.toml back with --config.)
set -u
ringtrain=$1
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
COLUMNS=80 "$ringtrain" train --help >help.txt || fail "train --help failed"
grep -q "^Usage: ringtrain train \[OPTIONS\]" help.txt || fail "usage line: $(grep Usage help.txt)"
for topic in Data Model Optimization Parallelism Performance "Evaluation and outputs" \
  "Checkpoints and failures"; do
  grep -q "^$topic:$" help.txt || fail "no '$topic:' heading"
done
grep -q "^Other:$" help.txt && fail "options without a topic: $(sed -n '/^Other:$/,/^$/p' help.txt)"
long=$(awk 'length($0) > 80' help.txt)
[[ -z $long ]] || fail "lines over 80 columns: $long"
"$ringtrain" train --model mlp --mlp-hidden 8 --steps 1 --no-eval --quiet --run-dir R \
  >run.log 2>&1 || fail "a one-step run failed: $(tail -3 run.log)"
python3 - <<'PY' || fail "--help and config.toml differ"
import json, re, sys, tomllib
flags = set(re.findall(r"^  --([a-z0-9-]+)", open("help.txt").read(), re.M)) - {"help"}
keys = set(tomllib.load(open("R/config.toml", "rb")))
config = json.load(open("R/manifest.json"))["config"]
rerun = {"config", "run-dir", "resume", "target-accuracy"}
# config.toml leaves out empty strings, false switches and --epochs when --steps is given.
left_out = {f for f in flags - keys if config.get(f) in ("", False) or f == "epochs"}
only_help, only_toml = flags - keys - rerun - left_out, keys - flags
missing = flags - {"config"} - set(config)
if missing:
    print("flags the manifest's configuration does not record:", sorted(missing))
    sys.exit(1)
if only_help or only_toml or any(k.startswith("test-") for k in flags | keys):
    print("only in --help:", sorted(only_help), "only in config.toml:", sorted(only_toml))
    sys.exit(1)
PY
echo "ok: grouped, wrapped at 80, $(grep -c '^  --' help.txt) flags = config.toml's keys + the rerun's own"
