# core_standalone: a test binary linked against mantissa::core alone, proving that core/
# builds and links without autograd/, nn/, optim/ and data/.
add_executable(core_standalone ${CMAKE_CURRENT_SOURCE_DIR}/core_standalone.cpp)
target_link_libraries(core_standalone PRIVATE mantissa::core GTest::gtest_main)
target_compile_options(core_standalone PRIVATE -Wall -Wextra)
gtest_discover_tests(core_standalone TEST_PREFIX core_standalone. DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 300)
