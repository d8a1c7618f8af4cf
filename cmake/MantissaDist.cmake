# distributed/: data-parallel training (communicators, DistributedDataParallel) in its own library,
# mantissa::distributed (alias mantissa::dist), installed and exported with the package
# (find_package(mantissa) then finds MPI, and NCCL when the build used it), built when Open MPI is found (Debian: libopenmpi-dev, openmpi-bin; CI
# installs both). With the CUDA backend and NCCL present, the NCCL communicator is added.
# MANTISSA_DIST=OFF skips it; ON makes a missing MPI an error.
set(MANTISSA_DIST AUTO CACHE STRING "Build distributed/ (MPI data parallelism): AUTO, ON or OFF")
set_property(CACHE MANTISSA_DIST PROPERTY STRINGS AUTO ON OFF)
set(MANTISSA_WITH_DIST OFF)
if(NOT MANTISSA_DIST STREQUAL "OFF")
  if(MANTISSA_DIST STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS CXX)
  else()
    find_package(MPI QUIET COMPONENTS CXX)
  endif()
  if(MPI_CXX_FOUND)
    set(MANTISSA_WITH_DIST ON)
  endif()
endif()

if(MANTISSA_WITH_DIST)
  file(GLOB MANTISSA_DIST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/distributed/*.cpp)
  add_library(mantissa_dist ${MANTISSA_DIST_SOURCES})
  add_library(mantissa::dist ALIAS mantissa_dist)
  add_library(mantissa::distributed ALIAS mantissa_dist)
  set_target_properties(mantissa_dist PROPERTIES EXPORT_NAME distributed POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(mantissa_dist PUBLIC mantissa MPI::MPI_CXX)
  target_compile_options(mantissa_dist PRIVATE -Wall -Wextra)
  # mpirun for the tests and examples; root (CI containers) needs explicit permission.
  find_program(MANTISSA_MPIEXEC NAMES mpirun mpiexec HINTS ${MPIEXEC_EXECUTABLE})
  set(MANTISSA_MPIRUN ${MANTISSA_MPIEXEC} --oversubscribe --allow-run-as-root)
  message(STATUS "mantissa: dist ON (MPI ${MPI_CXX_VERSION}, NCCL ${MANTISSA_WITH_NCCL})")
else()
  message(STATUS "mantissa: dist OFF (no MPI found)")
endif()
