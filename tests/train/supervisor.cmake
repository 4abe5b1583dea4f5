# tools/supervise.py: two injected rank deaths, relaunch with --resume auto, bitwise the same
# final checkpoint and losses as an uninterrupted run (tests/train/supervisor_test.sh).
# Included from tests/train/CMakeLists.txt.
script_case("train: supervisor relaunches after two rank deaths and resumes bitwise: N=2"
  supervisor_test.sh ${PROJECT_SOURCE_DIR}/tools/supervise.py)
