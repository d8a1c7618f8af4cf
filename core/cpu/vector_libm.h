// Vector libm. A call to scalar expf/erff/tanhf keeps `#pragma omp simd` loops scalar (gelu
// ran at 1/20 of memcpy bandwidth). glibc >= 2.35 ships SSE/AVX2/AVX-512 versions of these
// in libmvec (<= 4 ulp; pulled in by -lm, which g++ always links) but declares them only
// under -ffast-math; declaring them here lets GCC vectorize the shared functors unchanged.
// float only: fp16/bf16 compute in float; fp64 (gradcheck) keeps the scalar, exact libm
// (random_fill.cpp declares the double ones it draws normals with).
// (erf in float is not here: Eigen's rational erf, core/elementwise_math.h, made gelu 2.3x
// faster than libmvec's erff.)
#pragma once
#include <cmath>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && \
    !defined(__FAST_MATH__) && __GLIBC_PREREQ(2, 35)
#define MT_VECTOR_LIBM 1
#define MT_VEC_LIBM __attribute__((simd("notinbranch")))
extern "C" {
MT_VEC_LIBM float expf(float) noexcept;
MT_VEC_LIBM float logf(float) noexcept;
MT_VEC_LIBM float log1pf(float) noexcept;
MT_VEC_LIBM float sinf(float) noexcept;
MT_VEC_LIBM float cosf(float) noexcept;
MT_VEC_LIBM float tanhf(float) noexcept;
MT_VEC_LIBM float powf(float, float) noexcept;
}
#undef MT_VEC_LIBM
#endif
