# The CUDA backend, compiled when MANTISSA_CUDA is ON, or AUTO and the toolkit is found.
# Host files (cuda/*.cpp) are compiled by the C++ compiler into `mantissa_core` with its warning
# flags plus -Werror; device files (cuda/*.cu) go through nvcc in an object library, since
# nvcc rejects the host-only flags that `mantissa` carries (-Wall, -march=native).
set(MANTISSA_WITH_CUDA OFF)
set(MANTISSA_WITH_CUDNN OFF)
set(MANTISSA_WITH_NCCL OFF)
if(NOT MANTISSA_CUDA STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(MANTISSA_WITH_CUDA ON)
  elseif(MANTISSA_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MANTISSA_CUDA=ON but no CUDA compiler was found")
  endif()
endif()

# Plain-C++ headers of cuda/ (no CUDA includes; inline no-ops without CUDA) are public.
install(FILES cuda/cuda_api.h cuda/nccl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mantissa/cuda)

if(MANTISSA_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)  # A100, H100/H200; override with -DCMAKE_CUDA_ARCHITECTURES=...
  endif()
  enable_language(CUDA)
  # CMake 3.25 predates nvcc's C++20 support and would refuse CUDA_STANDARD 20 (which it
  # derives from CXX_STANDARD); tell it the flag.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)

  # cuDNN 9 ships inside the toolkit tree here, or as Debian/NVIDIA packages elsewhere. The
  # imported target (not a path) is what the exported package records.
  find_package(MantissaCuDNN)
  set(MANTISSA_WITH_CUDNN ${MantissaCuDNN_FOUND})

  file(GLOB MANTISSA_CUDA_HOST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cuda/*.cpp)
  file(GLOB MANTISSA_CUDA_DEVICE_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cuda/*.cu)

  add_library(mantissa_cuda_kernels OBJECT ${MANTISSA_CUDA_DEVICE_SOURCES})
  target_include_directories(mantissa_cuda_kernels PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_definitions(mantissa_cuda_kernels PRIVATE MANTISSA_WITH_CUDA)
  target_link_libraries(mantissa_cuda_kernels PRIVATE CUDA::cudart)
  target_compile_options(mantissa_cuda_kernels PRIVATE
    # 186: "pointless comparison of unsigned integer with zero", from the shared generic
    # functors (x < T(0)) instantiated for uint8.
    $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings -diag-suppress=186 -Xcompiler=-Wall,-Wextra,-fno-math-errno>)
  set_target_properties(mantissa_cuda_kernels PROPERTIES POSITION_INDEPENDENT_CODE ON)

  # The objects are linked into mantissa_core itself, so the installed/exported target needs
  # no extra library.
  target_sources(mantissa_core PRIVATE ${MANTISSA_CUDA_HOST_SOURCES} $<TARGET_OBJECTS:mantissa_cuda_kernels>)
  # `mantissa_core` was created before the architectures were set; the CUDA objects make CMake
  # (policy CMP0104) require the property on it too.
  set_target_properties(mantissa_core PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
  set_source_files_properties(${MANTISSA_CUDA_HOST_SOURCES} PROPERTIES COMPILE_OPTIONS -Werror)
  target_compile_definitions(mantissa_core PUBLIC MANTISSA_WITH_CUDA)
  target_link_libraries(mantissa_core PRIVATE CUDA::cudart CUDA::cublas CUDA::cublasLt CUDA::nvtx3)
  if(MANTISSA_WITH_CUDNN)
    target_link_libraries(mantissa_core PRIVATE Mantissa::cuDNN)
    target_compile_definitions(mantissa_core PRIVATE MANTISSA_WITH_CUDNN)
    message(STATUS "mantissa: cuDNN ${MantissaCuDNN_LIBRARY}")
  else()
    message(STATUS "mantissa: cuDNN not found (convolutions will use the fallback path)")
  endif()
  # NCCL (in the toolkit tree here): collectives for distributed/, wrapped by cuda/nccl.cpp.
  find_package(MantissaNCCL QUIET)
  if(MantissaNCCL_FOUND)
    set(MANTISSA_WITH_NCCL ON)
    target_link_libraries(mantissa_core PRIVATE Mantissa::NCCL)
    target_compile_definitions(mantissa_core PUBLIC MANTISSA_WITH_NCCL)
    message(STATUS "mantissa: NCCL ${MantissaNCCL_LIBRARY}")
  endif()
  message(STATUS "mantissa: CUDA backend ON (architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "mantissa: CUDA backend OFF")
endif()
