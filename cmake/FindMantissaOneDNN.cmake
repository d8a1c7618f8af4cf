# Finds oneDNN (libdnnl-dev: oneapi/dnnl/dnnl.hpp and libdnnl) and defines the imported target
# Mantissa::oneDNN. Found by hand because Debian's dnnl-config.cmake also demands OpenCL, which
# the CPU path never uses. Installed with the package, so a consumer looks oneDNN up on its own
# machine instead of inheriting the build machine's library path. DNNL_ROOT overrides.
#   find_package(MantissaOneDNN) -> MantissaOneDNN_FOUND, Mantissa::oneDNN
find_path(MantissaOneDNN_INCLUDE_DIR oneapi/dnnl/dnnl.hpp HINTS ${DNNL_ROOT} $ENV{DNNL_ROOT} PATH_SUFFIXES include)
find_library(MantissaOneDNN_LIBRARY dnnl HINTS ${DNNL_ROOT} $ENV{DNNL_ROOT} PATH_SUFFIXES lib lib64)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(MantissaOneDNN REQUIRED_VARS MantissaOneDNN_LIBRARY MantissaOneDNN_INCLUDE_DIR)
if(MantissaOneDNN_FOUND AND NOT TARGET Mantissa::oneDNN)
  add_library(Mantissa::oneDNN UNKNOWN IMPORTED)
  set_target_properties(Mantissa::oneDNN PROPERTIES
    IMPORTED_LOCATION "${MantissaOneDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${MantissaOneDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(MantissaOneDNN_INCLUDE_DIR MantissaOneDNN_LIBRARY)
