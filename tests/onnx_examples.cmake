# Smoke runs of the examples' --export flag (tests/onnx/export_smoke.sh), with the exporter only.
if(MANTISSA_WITH_ONNX AND MANTISSA_BUILD_EXAMPLES)
  set(onnx_smoke ${CMAKE_CURRENT_SOURCE_DIR}/onnx/export_smoke.sh)
  add_test(NAME example.mnist.onnx COMMAND bash ${onnx_smoke} ${CMAKE_CURRENT_BINARY_DIR}/onnx-smoke-mnist
    $<TARGET_FILE:mnist> --model cnn --limit 256 --epochs 1)
  add_test(NAME example.cifar.onnx COMMAND bash ${onnx_smoke} ${CMAKE_CURRENT_BINARY_DIR}/onnx-smoke-cifar
    $<TARGET_FILE:cifar> --limit 256 --depth 8 --batch-size 64 --epochs 1)
  add_test(NAME example.transformer.onnx COMMAND bash ${onnx_smoke} ${CMAKE_CURRENT_BINARY_DIR}/onnx-smoke-transformer
    $<TARGET_FILE:transformer> --layers 1 --heads 2 --d-model 16 --context 16 --batch-size 8 --steps 4
    --eval-every 0 --eval-batches 2 --sample 0)
  set_tests_properties(example.mnist.onnx example.cifar.onnx example.transformer.onnx PROPERTIES
    TIMEOUT 300 ENVIRONMENT OMP_NUM_THREADS=1)
endif()
