// Shared by the GPU test files: a GPU test reports itself skipped (not absent) when no CUDA
// device is usable, so CTest lists every GPU case on every machine.
#pragma once
#include <gtest/gtest.h>
#include <mantissa.h>

#define REQUIRE_GPU()                                                                     \
  do {                                                                                    \
    if (::mantissa::cuda_device_count() == 0)                                             \
      GTEST_SKIP() << "no usable CUDA device (no GPU, no driver, or built without CUDA)"; \
  } while (0)
