# tools/gpu-check.sh's CPU-side self-check: its plan names test files and cases that exist,
# and every GPU test file skips without a GPU (no GPU needed; the GPU run is the script itself).
find_program(MANTISSA_BASH bash)
if(MANTISSA_BASH)
  add_test(NAME tools.gpu_check_self_check
           COMMAND ${MANTISSA_BASH} ${PROJECT_SOURCE_DIR}/tools/gpu-check.sh --self-check)
  set_tests_properties(tools.gpu_check_self_check PROPERTIES PASS_REGULAR_EXPRESSION "self-check: OK" TIMEOUT 60)
endif()
