# `cmake --install` puts libraries, headers and the ringtrain executable under the prefix,
# with a CMake package (find_package(ringtrain) -> ringtrain::framework, ...), a pkg-config
# file (ringtrain.pc) and the supervisor (ringtrain-supervise).
include(CMakePackageConfigHelpers)
set(RINGTRAIN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ringtrain)
install(EXPORT ringtrainTargets NAMESPACE ringtrain:: DESTINATION ${RINGTRAIN_CMAKE_DIR})
configure_package_config_file(cmake/ringtrainConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ringtrainConfig.cmake INSTALL_DESTINATION ${RINGTRAIN_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ringtrainConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ringtrainConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/ringtrainConfigVersion.cmake
  cmake/RingtrainDependencies.cmake DESTINATION ${RINGTRAIN_CMAKE_DIR})
configure_file(cmake/ringtrain.pc.in ${CMAKE_CURRENT_BINARY_DIR}/ringtrain.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ringtrain.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The supervisor (tools/supervision, Python standard library only) as a program:
# build/ringtrain-supervise runs the sources in place; `cmake --install` puts the package
# under share/ringtrain and bin/ringtrain-supervise beside bin/ringtrain.
set(RINGTRAIN_SUPERVISION_DIR ${CMAKE_INSTALL_DATADIR}/ringtrain)
file(GLOB supervision_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tools/supervision/*.py)

set(SUPERVISION_PARENT ${PROJECT_SOURCE_DIR}/tools)
configure_file(cmake/ringtrain-supervise.in ${CMAKE_BINARY_DIR}/ringtrain-supervise @ONLY
  FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ
  WORLD_EXECUTE)

# Installed: the path from bin/ to share/ringtrain, relative, so the prefix can move.
file(RELATIVE_PATH SUPERVISION_PARENT ${CMAKE_INSTALL_FULL_BINDIR}
  ${CMAKE_INSTALL_PREFIX}/${RINGTRAIN_SUPERVISION_DIR})
configure_file(cmake/ringtrain-supervise.in
  ${CMAKE_CURRENT_BINARY_DIR}/supervise-installed/ringtrain-supervise @ONLY)
install(PROGRAMS ${CMAKE_CURRENT_BINARY_DIR}/supervise-installed/ringtrain-supervise
  DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${supervision_sources} DESTINATION ${RINGTRAIN_SUPERVISION_DIR}/supervision)
