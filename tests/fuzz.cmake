# Fuzz harnesses (tests/fuzz/): every reader of untrusted files has one.
#  * Always: replay_fuzz_<name>, the harness with a plain main() (tests/fuzz/replay_main.cpp),
#    run by CTest over its seed corpus and the crafted regression inputs, so every build
#    replays them (any compiler).
#  * With -DMANTISSA_FUZZ=ON and clang: fuzz_<name>, the libFuzzer binary. The library must be
#    instrumented too; tools/fuzz.sh configures such a build (CMAKE_CXX_FLAGS with
#    -fsanitize=fuzzer-no-link,address,undefined) and runs each harness.
option(MANTISSA_FUZZ "Build the libFuzzer harnesses (clang only)" OFF)
set(_fuzz_dir ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
foreach(name safetensors checkpoint idx cifar)
  add_executable(replay_fuzz_${name} ${_fuzz_dir}/fuzz_${name}.cpp ${_fuzz_dir}/replay_main.cpp)
  target_link_libraries(replay_fuzz_${name} PRIVATE mantissa::mantissa)
  target_compile_options(replay_fuzz_${name} PRIVATE -Wall -Wextra)
  add_test(NAME fuzz_replay.${name}
           COMMAND replay_fuzz_${name} ${_fuzz_dir}/corpus/${name} ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/hostile)
  set_tests_properties(fuzz_replay.${name} PROPERTIES TIMEOUT 120)
  if(MANTISSA_FUZZ)
    if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
      message(FATAL_ERROR "MANTISSA_FUZZ needs clang (libFuzzer); configure with CMAKE_CXX_COMPILER=clang++-14")
    endif()
    add_executable(fuzz_${name} ${_fuzz_dir}/fuzz_${name}.cpp)
    target_link_libraries(fuzz_${name} PRIVATE mantissa::mantissa)
    target_compile_options(fuzz_${name} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  endif()
endforeach()
