# ONNX (libonnx-dev 1.12: the protobuf classes in libonnx_proto, the checker and shape inference
# in libonnx) and protobuf -> Mantissa::onnx_proto, Mantissa::onnx. Found by hand because
# Debian's ONNXConfig.cmake names a protobuf::libprotobuf target that Debian's protobuf does not
# export. ONNX_ROOT overrides.
include(${CMAKE_CURRENT_LIST_DIR}/MantissaImportLibrary.cmake)
find_package(Protobuf QUIET)
mantissa_import_library(MantissaOnnxProto Mantissa::onnx_proto HEADER onnx/onnx-ml.pb.h LIBRARY onnx_proto
  HINTS ${ONNX_ROOT} $ENV{ONNX_ROOT})
mantissa_import_library(MantissaOnnxChecker Mantissa::onnx HEADER onnx/checker.h LIBRARY onnx
  HINTS ${ONNX_ROOT} $ENV{ONNX_ROOT})
set(MantissaOnnx_FOUND OFF)
if(MantissaOnnxProto_FOUND AND MantissaOnnxChecker_FOUND AND Protobuf_FOUND)
  set(MantissaOnnx_FOUND ON)
  # The generated headers are built with these (ONNXTargets.cmake sets the same).
  set_target_properties(Mantissa::onnx_proto PROPERTIES
    INTERFACE_COMPILE_DEFINITIONS "ONNX_NAMESPACE=onnx;ONNX_ML=1"
    INTERFACE_LINK_LIBRARIES "${Protobuf_LIBRARIES}")
  set_property(TARGET Mantissa::onnx_proto APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES ${Protobuf_INCLUDE_DIRS})
  set_target_properties(Mantissa::onnx PROPERTIES INTERFACE_LINK_LIBRARIES Mantissa::onnx_proto)
endif()
