# netns_setup.sh: sourced by the netns cluster tests, with $cluster set to tools/netns-cluster.
# Skips the test (exit 77, with the reason) where namespaces cannot be made (not root, no
# `ip`); otherwise moves into a scratch directory removed on exit and defines
# fail MESSAGE: prints it and the tail of every *.log there, exits 1.
# shellcheck shell=bash
# shellcheck disable=SC2154  # $cluster: set by the sourcing test
reason=$("$cluster" check) || { echo "SKIP: $reason"; exit 77; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; for f in *.log; do echo "--- $f"; tail -8 "$f"; done; exit 1; }
