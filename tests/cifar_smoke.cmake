# Smoke runs of examples/cifar on small CIFAR-10 / CIFAR-100 files in the real binary
# formats (written by tests/cifar_smoke/write_synthetic_cifar.cpp): the loss must fall,
# and a run resumed from a checkpoint must end exactly where the uninterrupted one does.
if(MANTISSA_BUILD_EXAMPLES)
  add_executable(write_synthetic_cifar ${CMAKE_CURRENT_SOURCE_DIR}/cifar_smoke/write_synthetic_cifar.cpp)
  target_compile_options(write_synthetic_cifar PRIVATE -Wall -Wextra)
  foreach(set cifar10 cifar100)
    add_test(NAME example.cifar.${set}
      COMMAND ${CMAKE_COMMAND} -DSET=${set} -DWRITER=$<TARGET_FILE:write_synthetic_cifar> -DCIFAR=$<TARGET_FILE:cifar>
              -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/cifar-smoke-${set} -P ${CMAKE_CURRENT_SOURCE_DIR}/cifar_smoke/run.cmake)
    set_tests_properties(example.cifar.${set} PROPERTIES TIMEOUT 300)
  endforeach()
endif()
