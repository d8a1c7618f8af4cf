# Finds cuDNN (cudnn.h and libcudnn) and defines the imported target Mantissa::cuDNN.
# Installed with the package, so a consumer looks cuDNN up on its own machine instead of
# inheriting the build machine's absolute paths. Looks beside the CUDA toolkit (found first
# with find_package(CUDAToolkit)), then in the system directories; CUDNN_ROOT overrides.
#   find_package(MantissaCuDNN) -> MantissaCuDNN_FOUND, Mantissa::cuDNN
find_path(MantissaCuDNN_INCLUDE_DIR cudnn.h
  HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
  PATH_SUFFIXES include)
find_library(MantissaCuDNN_LIBRARY cudnn
  HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
  PATH_SUFFIXES lib64 lib)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MantissaCuDNN REQUIRED_VARS MantissaCuDNN_LIBRARY MantissaCuDNN_INCLUDE_DIR)
if(MantissaCuDNN_FOUND AND NOT TARGET Mantissa::cuDNN)
  add_library(Mantissa::cuDNN UNKNOWN IMPORTED)
  set_target_properties(Mantissa::cuDNN PROPERTIES
    IMPORTED_LOCATION "${MantissaCuDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${MantissaCuDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(MantissaCuDNN_INCLUDE_DIR MantissaCuDNN_LIBRARY)
