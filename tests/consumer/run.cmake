# cmake -DMODE=install|subdirectory -DSOURCE_DIR=... -DWORK_DIR=... [-DMANTISSA_BUILD_DIR=...]
#       [-DMANTISSA_SOURCE_DIR=...] -DBUILD_TYPE=... -DCXX_COMPILER=... [-DCXX_FLAGS=...]
#       [-DEXE_LINKER_FLAGS=...] -DMANTISSA_CUDA=... -P run.cmake
# Installs (MODE=install) or points at the sources (MODE=subdirectory), then configures,
# builds and runs the consumer; any failing step fails the test with its output.
cmake_minimum_required(VERSION 3.24)

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer (${MODE}): ${what} failed (${rc})")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(configure_args -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
                   "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${EXE_LINKER_FLAGS}")
if(MODE STREQUAL "install")
  step("cmake --install" ${CMAKE_COMMAND} --install ${MANTISSA_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
  list(APPEND configure_args -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
  # The package must be relocatable: no path of the build machine (its source and build trees,
  # the CUDA toolkit or cuDNN it found) and no empty generator expression in the config files.
  # FORBIDDEN_PATHS is a |-separated list (CTest would split a ;-list).
  string(REPLACE "|" ";" forbidden "${FORBIDDEN_PATHS}")
  file(GLOB_RECURSE config_files ${WORK_DIR}/prefix/*.cmake)
  if(NOT config_files)
    message(FATAL_ERROR "consumer (install): no CMake config files were installed")
  endif()
  foreach(f ${config_files})
    file(READ ${f} text)
    foreach(path ${forbidden})
      string(FIND "${text}" "${path}" at)
      if(NOT path STREQUAL "" AND at GREATER -1)
        message(FATAL_ERROR "consumer (install): ${f} names the build machine's path ${path}")
      endif()
    endforeach()
    string(FIND "${text}" "$<LINK_ONLY:>" at)
    if(at GREATER -1)
      message(FATAL_ERROR "consumer (install): ${f} has an empty $<LINK_ONLY:> entry")
    endif()
  endforeach()
else()
  list(APPEND configure_args -DMANTISSA_SOURCE_DIR=${MANTISSA_SOURCE_DIR} -DMANTISSA_CUDA=${MANTISSA_CUDA})
endif()
step("configure" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build ${configure_args})
cmake_host_system_information(RESULT jobs QUERY NUMBER_OF_LOGICAL_CORES)
step("build" ${CMAKE_COMMAND} --build ${WORK_DIR}/build -j ${jobs})
step("run" ${WORK_DIR}/build/consumer)
if(EXISTS ${WORK_DIR}/build/consumer_distributed)  # the package has mantissa::distributed
  step("run consumer_distributed" ${WORK_DIR}/build/consumer_distributed)
endif()
