# NCCL -> Mantissa::NCCL; looks beside the CUDA toolkit (find_package(CUDAToolkit) first),
# then in the system directories; NCCL_ROOT overrides.
include(${CMAKE_CURRENT_LIST_DIR}/MantissaImportLibrary.cmake)
mantissa_import_library(MantissaNCCL Mantissa::NCCL HEADER nccl.h LIBRARY nccl
  HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT})
