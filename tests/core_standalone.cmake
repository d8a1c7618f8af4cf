# core_standalone: a test binary linked against mantissa::core alone, proving that core/
# builds and links without autograd/, nn/, optim/ and data/.
add_executable(core_standalone ${CMAKE_CURRENT_SOURCE_DIR}/core_standalone.cpp)
target_link_libraries(core_standalone PRIVATE mantissa::core GTest::gtest_main)
target_compile_options(core_standalone PRIVATE -Wall -Wextra)
gtest_discover_tests(core_standalone TEST_PREFIX core_standalone. DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)

# The other half: core/tensor.h's autograd methods (x.sum(), x.reshape(...), x.backward())
# are a compile error, naming the header to include, in a translation unit on core alone.
# The target is built by the test, not by `all`; the test passes only on that message.
add_library(core_calls_autograd_method OBJECT EXCLUDE_FROM_ALL ${CMAKE_CURRENT_SOURCE_DIR}/core_calls_autograd_method.cpp)
target_link_libraries(core_calls_autograd_method PRIVATE mantissa::core)
add_test(NAME core_standalone.AutogradMethodsDoNotCompileOnCore
         COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target core_calls_autograd_method)
set_tests_properties(core_standalone.AutogradMethodsDoNotCompileOnCore PROPERTIES
  PASS_REGULAR_EXPRESSION "static assertion failed: this Tensor method is an autograd op: include autograd/ops.h" TIMEOUT 300)
