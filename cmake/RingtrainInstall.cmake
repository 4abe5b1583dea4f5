# `cmake --install` puts libraries, headers and the ringtrain executable under the prefix,
# with a CMake package (find_package(ringtrain) -> ringtrain::framework, ...) and a
# pkg-config file (ringtrain.pc).
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
