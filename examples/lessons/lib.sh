# Shared by the lessons' run.sh scripts: source it, then call lesson_setup NAME "$@".
#   run.sh [--quick] [OUT]
# BUILD (default: the repository's build/) holds ringtrain; OUT (default runs/NAME) receives the
# runs and plots, emptied first; --quick sets quick=1 (fewer steps: what the test suite runs).
# After lesson_setup: $top $quick $out $build $mpiexec $ringtrain.
set -euo pipefail

lesson_setup() {
  local name=$1; shift
  top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  quick=0
  if [[ "${1:-}" == --quick ]]; then quick=1; shift; fi
  out=${1:-runs/$name}
  build=${BUILD:-$top/build}
  mpiexec=${MPIEXEC:-mpiexec.mpich}
  ringtrain=$build/ringtrain
  [[ -x $ringtrain ]] || { echo "$name: no ringtrain at $ringtrain: build first (README), or set BUILD" >&2; exit 1; }
  rm -rf "$out"; mkdir -p "$out"
}

# plot_curves PNG TITLE RUN LABEL [RUN LABEL ...]: prints each run's final loss and accuracy;
# draws PNG when matplotlib is there.
plot_curves() {
  local png=$1 title=$2; shift 2
  local args=() labels=()
  while (($#)); do args+=("$1"); labels+=(-l "$2"); shift 2; done
  args+=("${labels[@]}")
  if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then args+=(-o "$png"); fi
  /usr/bin/python3 "$top/tools/plot_runs.py" "${args[@]}" --title "$title" --print | grep -v "^  "
}

# compare_checkpoints A B [GROUPS]: one line, inspect --compare of the two files at rtol 1e-5.
compare_checkpoints() {
  local groups=()
  [[ -n "${3:-}" ]] && groups=(--groups "$3")
  "$ringtrain" inspect "$1" --compare "$2" --rtol 1e-5 "${groups[@]}" | tail -1 || true
}

# compare_bits A B: one line, inspect --compare of the model and optimizer state at rtol 0:
# "equal within tolerance: largest relative difference 0" only when every element is equal.
compare_bits() {
  "$ringtrain" inspect "$1" --compare "$2" --rtol 0 --groups model,optimizer | tail -1 || true
}
