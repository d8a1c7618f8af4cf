# Package checks, run by CTest after the build: tests/consumer (a separate project) is
# configured, built and run against (1) this build installed into a scratch prefix with
# `cmake --install` and found with find_package(mantissa), (2) this source tree through
# add_subdirectory. Both use this build's compiler, build type and CUDA setting.
set(_consumer_args
  -DSOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR}/consumer
  -DBUILD_TYPE=${CMAKE_BUILD_TYPE}
  -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
  # The build's own flags (a sanitizer build's -fsanitize=...) must reach the consumer too,
  # or it cannot link against the instrumented library.
  "-DCXX_FLAGS=${CMAKE_CXX_FLAGS}"
  "-DEXE_LINKER_FLAGS=${CMAKE_EXE_LINKER_FLAGS}"
  -DMANTISSA_CUDA=${MANTISSA_CUDA})
# Paths of this machine that the installed config files must not name.
set(_forbidden "${PROJECT_SOURCE_DIR}|${PROJECT_BINARY_DIR}")
if(CUDAToolkit_BIN_DIR)
  get_filename_component(_cuda_root "${CUDAToolkit_BIN_DIR}" DIRECTORY)
  string(APPEND _forbidden "|${_cuda_root}|${CUDAToolkit_LIBRARY_ROOT}")
endif()
if(MantissaOneDNN_LIBRARY)
  string(APPEND _forbidden "|${MantissaOneDNN_LIBRARY}")
endif()
if(MantissaNCCL_LIBRARY)
  string(APPEND _forbidden "|${MantissaNCCL_LIBRARY}")
endif()
if(MantissaCuDNN_LIBRARY)
  string(APPEND _forbidden "|${MantissaCuDNN_LIBRARY}")
endif()
add_test(NAME package.find_package
  COMMAND ${CMAKE_COMMAND} ${_consumer_args} -DMODE=install -DMANTISSA_BUILD_DIR=${PROJECT_BINARY_DIR}
          "-DFORBIDDEN_PATHS=${_forbidden}"
          -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer-install -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run.cmake)
# A second full build of the library: the slowest test, so it gets a long timeout.
# The subdirectory build checks the CMake wiring, not the GPU code: CUDA stays off there so
# CI does not compile the CUDA kernels twice.
add_test(NAME package.add_subdirectory
  COMMAND ${CMAKE_COMMAND} ${_consumer_args} -DMANTISSA_CUDA=OFF -DMODE=subdirectory -DMANTISSA_SOURCE_DIR=${PROJECT_SOURCE_DIR}
          -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer-subdir -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run.cmake)
set_tests_properties(package.find_package PROPERTIES TIMEOUT 600)
set_tests_properties(package.add_subdirectory PROPERTIES TIMEOUT 2400)
