# Script mode: install the build tree into WORK_DIR/prefix, build the consumer against it.
file(REMOVE_RECURSE ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
foreach(f bin/ringtrain bin/ringtrain-supervise lib/libringtrain_framework.a lib/pkgconfig/ringtrain.pc
          lib/cmake/ringtrain/ringtrainConfig.cmake include/ringtrain/framework/sequential.hpp)
  if(NOT EXISTS ${WORK_DIR}/prefix/${f})
    message(FATAL_ERROR "installed tree lacks ${f}")
  endif()
endforeach()
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)
message(STATUS "consumer printed: ${last_output}")
if(NOT last_output MATCHES "loss decreased")
  message(FATAL_ERROR "consumer did not train: ${last_output}")
endif()
set(ENV{PKG_CONFIG_PATH} ${WORK_DIR}/prefix/lib/pkgconfig)
run(pkg-config --cflags --libs ringtrain)

# The Python package, where the prefix's python3 looks, finds the installed reader.
if(PYTHON_DIR)
  set(ENV{PYTHONPATH} ${WORK_DIR}/prefix/${PYTHON_DIR})
  run(/usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/check_python.py)
  message(STATUS "python: ${last_output}")
endif()

# The supervisor runs from the prefix (its package under share/ringtrain) and says how.
run(${WORK_DIR}/prefix/bin/ringtrain-supervise --help)
if(NOT last_output MATCHES "--hostfile" OR NOT last_output MATCHES "--min-hosts")
  message(FATAL_ERROR "ringtrain-supervise --help lacks the host options: ${last_output}")
endif()
