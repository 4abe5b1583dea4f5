# ringtrain_add_module(NAME <name> [DEPS <targets...>] [PRIVATE_DEPS <targets...>])
#
# A module is one static library: sources in <module>/src/ (recursively), public headers
# in <module>/include/ringtrain/<module>/. Only DEPS are linked, so only their headers are
# reachable: an include that breaks the dependency rules fails to compile.
# PRIVATE_DEPS are linked but their headers stay hidden from dependents (HDF5 behind
# checkpoint/: the framework stores state through checkpoint/, never through HDF5).
# Sources are globbed (CONFIGURE_DEPENDS) so that adding a file is adding a file.
function(ringtrain_add_module)
  cmake_parse_arguments(M "" "NAME" "DEPS;PRIVATE_DEPS" ${ARGN})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp")
  add_library(${M_NAME} STATIC ${sources})
  add_library(ringtrain::${M_NAME} ALIAS ${M_NAME})
  set_target_properties(${M_NAME} PROPERTIES OUTPUT_NAME ringtrain_${M_NAME}
    POSITION_INDEPENDENT_CODE ON EXPORT_NAME ${M_NAME})
  target_include_directories(${M_NAME} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${M_NAME} PUBLIC ${M_DEPS} PRIVATE ${M_PRIVATE_DEPS} $<BUILD_INTERFACE:ringtrain_flags>)
  target_compile_definitions(${M_NAME} PRIVATE RINGTRAIN_VERSION="${PROJECT_VERSION}"
    RINGTRAIN_SOURCE_REVISION="${RINGTRAIN_SOURCE_REVISION}")
  if(RINGTRAIN_SANITIZE)
    # Instrumented objects call the sanitizer runtimes: whoever links this library (also a
    # program built against the installed package) must link them too.
    target_link_options(${M_NAME} INTERFACE -fsanitize=address,undefined)
  endif()
  install(TARGETS ${M_NAME} EXPORT ringtrainTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()
