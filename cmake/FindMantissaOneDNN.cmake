# oneDNN (libdnnl-dev) -> Mantissa::oneDNN; found by hand because Debian's dnnl-config.cmake
# also demands OpenCL, which the CPU path never uses. DNNL_ROOT overrides.
include(${CMAKE_CURRENT_LIST_DIR}/MantissaImportLibrary.cmake)
mantissa_import_library(MantissaOneDNN Mantissa::oneDNN HEADER oneapi/dnnl/dnnl.hpp LIBRARY dnnl
  HINTS ${DNNL_ROOT} $ENV{DNNL_ROOT})
