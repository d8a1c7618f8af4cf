// Gradient accumulation into leaves, with the GradScaler's non-finite check fused in.
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/step_math.h"

namespace mantissa::cpu {

namespace {
// src: any floating dtype and strides; *found_inf = 1 if any element is inf or NaN.
void check_finite(const Tensor& src, const Tensor& found_inf) {
  dispatch_floating(src.dtype(), "accumulate_grad", [&]<typename S>() {
    using Acc = std::conditional_t<std::is_same_v<S, double>, double, float>;
    const S* x = static_cast<const S*>(src.raw_data());
    const math::AccumulateAndCheck op;
    bool bad = false;
    for_each_row<1>(src.sizes(), {src.strides()}, [&](auto off, int64_t n, auto s) {
      int local = 0;
      const S* xo = x + off[0];
      if (s[0] == 1) {
        for (int64_t i = 0; i < n; ++i) (void)op(Acc(0), load_acc<Acc>(xo, i), local);
      } else {
        for (int64_t i = 0; i < n; ++i) (void)op(Acc(0), cast_to<Acc>(xo[i * s[0]]), local);
      }
      if (local) {
#pragma omp atomic write
        bad = true;
      }
    });
    if (bad) *static_cast<float*>(found_inf.raw_data()) = 1.0f;
  });
}
}  // namespace

void accumulate_grad(const Tensor& src, const Tensor& dst, bool init, const Tensor& found_inf) {
  // dst undefined: only check src (GradScaler::step, for gradients written after backward).
  if (!dst.defined()) {
    if (found_inf.defined() && src.numel() > 0) check_finite(src, found_inf);
    return;
  }
  dispatch_floating(src.dtype(), "accumulate_grad", [&]<typename S>() {
    dispatch_floating(dst.dtype(), "accumulate_grad", [&]<typename D>() {
      using Acc = std::conditional_t<std::is_same_v<D, double>, double, float>;
      const S* x = static_cast<const S*>(src.raw_data());
      D* y = static_cast<D*>(dst.raw_data());
      const Shape st = broadcast_strides(src.sizes(), src.strides(), dst.sizes());
      const math::AccumulateAndCheck op;
      bool bad = false;
      // Each thread keeps its own flag; they are OR-ed once at the end.
      for_each_row<2>(dst.sizes(), {dst.strides(), st}, [&](auto off, int64_t n, auto s) {
        int local = 0;
        D* yo = y + off[0];
        const S* xo = x + off[1];
        if (s[0] == 1 && s[1] == 1) {  // the usual case, as its own loop so that it vectorizes
          for (int64_t i = 0; i < n; ++i) {
            const Acc acc = init ? Acc(0) : load_acc<Acc>(yo, i);
            store_acc(yo, i, op(acc, load_acc<Acc>(xo, i), local));
          }
        } else if (s[0] == 1 && s[1] == 0) {  // a broadcast gradient (sum's or mean's backward, expanded)
          const Acc v = cast_to<Acc>(xo[0]);
          for (int64_t i = 0; i < n; ++i) {
            const Acc acc = init ? Acc(0) : load_acc<Acc>(yo, i);
            store_acc(yo, i, op(acc, v, local));
          }
        } else {
          for (int64_t i = 0; i < n; ++i) {
            Acc acc = init ? Acc(0) : cast_to<Acc>(yo[i * s[0]]);
            yo[i * s[0]] = cast_to<D>(op(acc, cast_to<Acc>(xo[i * s[1]]), local));
          }
        }
        if (local) {
#pragma omp atomic write
          bad = true;
        }
      });
      if (bad && found_inf.defined()) *static_cast<float*>(found_inf.raw_data()) = 1.0f;
    });
  });
}

}  // namespace mantissa::cpu
