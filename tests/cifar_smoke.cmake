# Smoke runs of examples/cifar on small CIFAR-10 / CIFAR-100 files in the real binary
# formats (written by tests/cifar_smoke/write_synthetic_cifar.cpp): the loss must fall,
# and a run resumed from a checkpoint must end exactly where the uninterrupted one does.
# A third run checks the default data path (Fashion-MNIST through the same pipeline).
if(MANTISSA_BUILD_EXAMPLES)
  add_executable(write_synthetic_cifar ${CMAKE_CURRENT_SOURCE_DIR}/cifar_smoke/write_synthetic_cifar.cpp)
  target_compile_options(write_synthetic_cifar PRIVATE -Wall -Wextra)
  foreach(set cifar10 cifar100)
    add_test(NAME example.cifar.${set}
      COMMAND ${CMAKE_COMMAND} -DSET=${set} -DWRITER=$<TARGET_FILE:write_synthetic_cifar> -DCIFAR=$<TARGET_FILE:cifar>
              -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/cifar-smoke-${set} -P ${CMAKE_CURRENT_SOURCE_DIR}/cifar_smoke/run.cmake)
    set_tests_properties(example.cifar.${set} PROPERTIES TIMEOUT 300)
  endforeach()
  # The default data (no --data-dir): Debian's Fashion-MNIST, padded to 32x32, 3 channels.
  add_test(NAME example.cifar.fashion-mnist
    COMMAND $<TARGET_FILE:cifar> --limit 256 --depth 8 --batch-size 64 --epochs 1)
  set_tests_properties(example.cifar.fashion-mnist PROPERTIES TIMEOUT 300 ENVIRONMENT OMP_NUM_THREADS=1
    PASS_REGULAR_EXPRESSION "data: fashion-mnist, 256 train / 256 test images, 10 classes.*final: dataset=fashion-mnist depth=8")
endif()
