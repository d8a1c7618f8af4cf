# ONNX (libonnx-dev 1.12: the protobuf classes in libonnx_proto, the checker and shape inference
# in libonnx) and protobuf (libprotobuf-dev) -> the imported target Mantissa::onnx. Found by hand
# because Debian's ONNXConfig.cmake names a protobuf::libprotobuf target that Debian's protobuf
# does not export. ONNX_ROOT overrides.
include(FindPackageHandleStandardArgs)
find_package(Protobuf QUIET)
find_path(MantissaOnnx_INCLUDE_DIR onnx/onnx-ml.pb.h HINTS ${ONNX_ROOT} $ENV{ONNX_ROOT} PATH_SUFFIXES include)
find_library(MantissaOnnx_PROTO_LIBRARY onnx_proto HINTS ${ONNX_ROOT} $ENV{ONNX_ROOT} PATH_SUFFIXES lib64 lib)
find_library(MantissaOnnx_LIBRARY onnx HINTS ${ONNX_ROOT} $ENV{ONNX_ROOT} PATH_SUFFIXES lib64 lib)
find_package_handle_standard_args(MantissaOnnx
  REQUIRED_VARS MantissaOnnx_LIBRARY MantissaOnnx_PROTO_LIBRARY MantissaOnnx_INCLUDE_DIR Protobuf_LIBRARIES)
if(MantissaOnnx_FOUND AND NOT TARGET Mantissa::onnx)
  add_library(Mantissa::onnx_proto UNKNOWN IMPORTED GLOBAL)
  # The generated headers are compiled with these (ONNXTargets.cmake sets the same).
  set_target_properties(Mantissa::onnx_proto PROPERTIES
    IMPORTED_LOCATION "${MantissaOnnx_PROTO_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${MantissaOnnx_INCLUDE_DIR};${Protobuf_INCLUDE_DIRS}"
    INTERFACE_COMPILE_DEFINITIONS "ONNX_NAMESPACE=onnx;ONNX_ML=1"
    INTERFACE_LINK_LIBRARIES "${Protobuf_LIBRARIES}")
  add_library(Mantissa::onnx UNKNOWN IMPORTED GLOBAL)
  set_target_properties(Mantissa::onnx PROPERTIES
    IMPORTED_LOCATION "${MantissaOnnx_LIBRARY}"
    INTERFACE_LINK_LIBRARIES Mantissa::onnx_proto)
endif()
mark_as_advanced(MantissaOnnx_INCLUDE_DIR MantissaOnnx_PROTO_LIBRARY MantissaOnnx_LIBRARY)
