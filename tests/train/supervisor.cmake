# tools/supervise.py: two injected rank deaths, relaunch with --resume auto, bitwise the same
# final checkpoint and losses as an uninterrupted run (tests/train/supervisor_test.sh).
# Included from tests/train/CMakeLists.txt.
add_test(NAME "train: supervisor relaunches after two rank deaths and resumes bitwise: N=2"
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/supervisor_test.sh $<TARGET_FILE:ringtrain>
          ${MPIEXEC_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/supervise.py)
set_tests_properties("train: supervisor relaunches after two rank deaths and resumes bitwise: N=2"
  PROPERTIES TIMEOUT 300)
