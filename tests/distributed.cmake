# distributed/ tests, run under `mpirun -np 2 --oversubscribe` (this machine has 2 cores shared
# with other jobs). Built only when MPI was found (cmake/MantissaDist.cmake).
if(NOT MANTISSA_WITH_DIST)
  return()
endif()
add_executable(test_dist ${CMAKE_CURRENT_SOURCE_DIR}/distributed/test_dist.cpp)
target_link_libraries(test_dist PRIVATE mantissa::dist GTest::gtest)
target_compile_options(test_dist PRIVATE -Wall -Wextra)
add_executable(test_dist_gpu ${CMAKE_CURRENT_SOURCE_DIR}/distributed/test_dist_gpu.cpp)
target_link_libraries(test_dist_gpu PRIVATE mantissa::dist GTest::gtest)
target_compile_options(test_dist_gpu PRIVATE -Wall -Wextra)
add_executable(dist_failures ${CMAKE_CURRENT_SOURCE_DIR}/distributed/dist_failures.cpp)
target_link_libraries(dist_failures PRIVATE mantissa::dist)
target_compile_options(dist_failures PRIVATE -Wall -Wextra)

# OpenMP threads: one per rank, so two ranks do not fight over two cores. A collective
# that one rank never joins fails after 60 s instead of hanging the test run. Containers
# often forbid the cross-process memory attach (ptrace) of Open MPI's shared-memory
# transport: copy through the shared segment instead.
set(_dist_env OMP_NUM_THREADS=1 MANTISSA_DIST_TIMEOUT=60 OMPI_MCA_btl_vader_single_copy_mechanism=none)
add_test(NAME dist.mpi_np2 COMMAND ${MANTISSA_MPIRUN} -np 2 $<TARGET_FILE:test_dist>)
set_tests_properties(dist.mpi_np2 PROPERTIES TIMEOUT 180 ENVIRONMENT "${_dist_env}" PROCESSORS 2)
# NCCL, one GPU per rank: skipped (on every rank) without two GPUs; tools/dist-gpu-check.sh.
add_test(NAME dist.gpu_np2 COMMAND ${MANTISSA_MPIRUN} -np 2 $<TARGET_FILE:test_dist_gpu>)
# Without two GPUs every case skips: report the test Skipped, not Passed.
set_tests_properties(dist.gpu_np2 PROPERTIES TIMEOUT 180 ENVIRONMENT "${_dist_env}" PROCESSORS 2
                     SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")

# Failures end the job with a message, within the test's timeout (no hang).
add_test(NAME dist.rank_dies COMMAND ${MANTISSA_MPIRUN} -np 2 $<TARGET_FILE:dist_failures> die)
set_tests_properties(dist.rank_dies PROPERTIES TIMEOUT 60 ENVIRONMENT "${_dist_env}" PROCESSORS 2
  PASS_REGULAR_EXPRESSION "exited on signal|exited with non-zero status|non-zero exit code")
add_test(NAME dist.rank_hangs COMMAND ${MANTISSA_MPIRUN} -np 2 $<TARGET_FILE:dist_failures> hang)
set_tests_properties(dist.rank_hangs PROPERTIES TIMEOUT 60 ENVIRONMENT "${_dist_env}" PROCESSORS 2
  PASS_REGULAR_EXPRESSION "rank 0 waited 2 s for the other ranks without completing")
add_test(NAME dist.mismatched_world_size COMMAND ${MANTISSA_MPIRUN} -np 2 -x WORLD_SIZE=3 $<TARGET_FILE:dist_failures> init)
set_tests_properties(dist.mismatched_world_size PROPERTIES TIMEOUT 60 ENVIRONMENT "${_dist_env}" PROCESSORS 2
  PASS_REGULAR_EXPRESSION "mismatched WORLD_SIZE: the environment says 3 but MPI says 2")

# The MNIST example's --distributed path: a smoke run on 512 images.
if(MANTISSA_BUILD_EXAMPLES AND EXISTS /usr/share/datasets/fashion-mnist)
  add_test(NAME example.mnist_distributed
    COMMAND ${MANTISSA_MPIRUN} -np 2 $<TARGET_FILE:mnist> --distributed --epochs 1 --limit 512 --amp fp16)
  set_tests_properties(example.mnist_distributed PROPERTIES TIMEOUT 120 ENVIRONMENT "${_dist_env}" PROCESSORS 2
    PASS_REGULAR_EXPRESSION "final: .* world=2")
endif()
# The transformer example's --distributed path: a few steps of a tiny GPT on 2 ranks.
if(MANTISSA_BUILD_EXAMPLES AND EXISTS /usr/share/games/fortunes)
  add_test(NAME example.transformer_distributed
    COMMAND ${MANTISSA_MPIRUN} -np 2 $<TARGET_FILE:transformer> --distributed --steps 6 --layers 1 --d-model 32
            --heads 2 --context 32 --batch-size 4 --warmup 2 --eval-every 0 --eval-batches 2 --sample 0 --amp bf16)
  set_tests_properties(example.transformer_distributed PROPERTIES TIMEOUT 120 ENVIRONMENT "${_dist_env}"
    PROCESSORS 2 PASS_REGULAR_EXPRESSION "final: steps=6 .* world=2")
endif()
