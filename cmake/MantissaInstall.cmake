# cmake --install + an exported package: find_package(mantissa) gives mantissa::mantissa
# (and mantissa::core, the tensor library alone).
include(CMakePackageConfigHelpers)
install(TARGETS mantissa_core mantissa EXPORT mantissaTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES mantissa.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mantissa)
foreach(dir core amp autograd nn optim data)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mantissa/${dir} FILES_MATCHING PATTERN "*.h")
endforeach()
install(EXPORT mantissaTargets NAMESPACE mantissa:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mantissa)
configure_package_config_file(cmake/mantissaConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/mantissaConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mantissa)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/mantissaConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mantissaConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/mantissaConfigVersion.cmake
  cmake/MantissaImportLibrary.cmake cmake/FindMantissaCuDNN.cmake cmake/FindMantissaNCCL.cmake
  cmake/FindMantissaOneDNN.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mantissa)
