# cuDNN -> Mantissa::cuDNN; looks beside the CUDA toolkit (find_package(CUDAToolkit) first),
# then in the system directories; CUDNN_ROOT overrides.
include(${CMAKE_CURRENT_LIST_DIR}/MantissaImportLibrary.cmake)
mantissa_import_library(MantissaCuDNN Mantissa::cuDNN HEADER cudnn.h LIBRARY cudnn
  HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT})
