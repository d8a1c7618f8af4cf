# Third-party packages, all from Debian 12 (tools/install-deps.sh installs them).
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(OpenMP REQUIRED)
find_package(ZLIB REQUIRED)
find_package(nlohmann_json 3 REQUIRED)  # header-only; safetensors headers (kept private)
include(GNUInstallDirs)

# oneDNN (libdnnl-dev 2.6): the bf16/fp32 matmul and convolution kernels of the CPU backend
# (core/cpu/onednn/). Optional: without it those ops run on Eigen. cmake/FindMantissaOneDNN.cmake
# gives the imported target Mantissa::oneDNN (so the exported package names no path).
set(MANTISSA_ONEDNN AUTO CACHE STRING "Use oneDNN for CPU matmul/conv: AUTO (when libdnnl-dev is found), ON or OFF")
set_property(CACHE MANTISSA_ONEDNN PROPERTY STRINGS AUTO ON OFF)
set(MANTISSA_WITH_ONEDNN OFF)
if(NOT MANTISSA_ONEDNN STREQUAL "OFF")
  find_package(MantissaOneDNN QUIET)
  if(MantissaOneDNN_FOUND)
    set(MANTISSA_WITH_ONEDNN ON)
    message(STATUS "Mantissa: oneDNN CPU kernels (${MantissaOneDNN_LIBRARY})")
  elseif(MANTISSA_ONEDNN STREQUAL "ON")
    message(FATAL_ERROR "MANTISSA_ONEDNN=ON but oneDNN was not found (apt-get install libdnnl-dev)")
  else()
    message(STATUS "Mantissa: oneDNN not found, CPU matmul/conv use Eigen (apt-get install libdnnl-dev)")
  endif()
endif()
