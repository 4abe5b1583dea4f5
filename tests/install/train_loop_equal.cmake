# Script mode: install the build tree into WORK_DIR/prefix, build examples/train_loop.cpp
# against it, run it and `ringtrain train` with the same settings at N=2, and require the
# final checkpoints' /model and /optimizer to be bitwise equal (h5diff without tolerance).
file(REMOVE_RECURSE ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)
set(steps 60)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
    -DTRAIN_LOOP_SOURCE=${TRAIN_LOOP_SOURCE})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${MPIEXEC} -n 2 ${WORK_DIR}/build/train_loop ${steps} ${WORK_DIR}/loop)
run(${MPIEXEC} -n 2 ${RINGTRAIN} train --quiet --steps ${steps} --run-dir ${WORK_DIR}/train)
set(file checkpoints/step-000000${steps}.h5)
foreach(group /model /optimizer)
  run(h5diff ${WORK_DIR}/loop/${file} ${WORK_DIR}/train/${file} ${group})
endforeach()
message(STATUS "train_loop and ringtrain train agree bitwise on /model and /optimizer")
