# Sourced by the test scripts that write their datasets with NumPy and h5py: skips (exit 77)
# when Debian's python3 lacks them, else sets $python and enters a fresh directory that is
# removed at exit.
python=/usr/bin/python3
"$python" -c "import numpy, h5py" 2>/dev/null || { echo "skipped: no numpy/h5py"; exit 77; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
