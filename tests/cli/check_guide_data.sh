#!/usr/bin/env bash
# check_guide_data.sh RINGTRAIN MPIEXEC PAGE
# The user's guide's "Your own data" section (docs/data-and-models.md) works as written: its
# Python snippet (numpy, h5py) writes blobs.h5 and, uncommented, the blobs/ .npy folder; its
# two commands train at N=2;
# and the two files train the same cnn to bitwise the same /model. "Your own model" too: its
# spec, saved as the file its commands name, is printed and trains on blobs.h5. Skips (77)
# without numpy or h5py for Debian's python3.
set -u
ringtrain=$1 mpiexec=$2 page=$3
python=/usr/bin/python3
"$python" -c "import numpy, h5py" 2>/dev/null || { echo "skipped: no numpy/h5py"; exit 77; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

# The snippet, with the .npy lines uncommented (the backquotes below are Markdown fences).
# shellcheck disable=SC2016
sed -n '/^## Your own data/,/^## /p' "$page" | sed -n '/^```python$/,/^```$/p' | sed '1d;$d' |
  sed -E 's/^#   //; s/^#       /    /' >snippet.py
"$python" snippet.py || fail "the guide's snippet failed"
[[ -f blobs.h5 && -f blobs/train_x.npy && -f blobs/test_y.npy ]] || fail "the snippet wrote no data"

# The guide's commands, as written (the build folder and a run directory aside).
# shellcheck disable=SC2016
sed -n '/^## Your own data/,/^## /p' "$page" | sed -n '/^```sh$/,/^```$/p' | grep '^mpiexec' |
  sed -E 's/ +#.*$//' >commands.txt
[[ $(wc -l <commands.txt) -eq 2 ]] || fail "expected two commands in the section"
n=0
while read -r line; do
  n=$((n + 1))
  args=${line#*build/ringtrain }
  # shellcheck disable=SC2086
  "$mpiexec" -n 2 "$ringtrain" $args --run-dir "run$n" --quiet || fail "'$line' failed"
done <commands.txt

for data in blobs.h5 blobs; do
  "$mpiexec" -n 2 "$ringtrain" train --data "$data" --model cnn --steps 6 --checkpoint-every 6 \
    --no-eval --run-dir "same-$data" --quiet || fail "training on $data failed"
done
"$ringtrain" inspect same-blobs.h5/checkpoints/step-00000006.h5 \
  --compare same-blobs/checkpoints/step-00000006.h5 --groups model --rtol 0 ||
  fail "the HDF5 file and the .npy folder trained different models"
# "Your own model": the TOML block under the name its first line gives, then its commands.
# shellcheck disable=SC2016
sed -n '/^## Your own model/,/^## /p' "$page" | sed -n '/^```toml$/,/^```$/p' | sed '1d;$d' >spec.toml
spec_name=$(head -1 spec.toml | sed -E 's/^# *//')
[[ -n "$spec_name" ]] || fail "no spec in 'Your own model'"
mv spec.toml "$spec_name"
# shellcheck disable=SC2016
sed -n '/^## Your own model/,/^## /p' "$page" | sed -n '/^```sh$/,/^```$/p' |
  grep -E '^(mpiexec|build/ringtrain)' | sed -E 's/ +#.*$//' >model_commands.txt
[[ $(wc -l <model_commands.txt) -eq 2 ]] || fail "expected two commands in 'Your own model'"
n=0
while read -r line; do
  n=$((n + 1))
  args=${line#*build/ringtrain }
  extra=()
  [[ $args == train* ]] && extra=(--run-dir "model-run$n" --quiet)
  # shellcheck disable=SC2086
  "$mpiexec" -n 2 "$ringtrain" $args "${extra[@]}" || fail "'$line' failed"
done <model_commands.txt
echo "ok: the guide's snippet and commands work; HDF5 and .npy train the same model; the spec trains"
