# cmake --install + an exported package: find_package(mantissa) gives mantissa::mantissa
# (and mantissa::core, the tensor library alone; mantissa::distributed when built with MPI).
include(CMakePackageConfigHelpers)
install(TARGETS mantissa_core mantissa EXPORT mantissaTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES mantissa.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mantissa)
set(_mantissa_header_dirs core amp autograd nn optim data)
if(MANTISSA_WITH_DIST)
  install(TARGETS mantissa_dist EXPORT mantissaTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  list(APPEND _mantissa_header_dirs distributed)
endif()
foreach(dir ${_mantissa_header_dirs})
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
