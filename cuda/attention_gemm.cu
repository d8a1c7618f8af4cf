// Scaled dot-product attention as batched tensor-core GEMMs through score buffers in memory
// (contracts in core/nn_kernels.h; when this path runs, and each GEMM's operands:
// core/attention_plan.h, checked on the CPU). Per round of `chunk` problems, with
// q [G, L, E], k [G, S, E], v [G, S, Ev], gout/out [G, L, Ev]:
//
//   forward:  S32 = q k^T (fp32)                      [chunk, L, S]
//             P = dropout(exp(scale S32 + mask - lse))  in T, lse [G, L]   (a warp or block per row)
//             out = P v                                 (fp32 accumulation, one rounding to T)
//   backward: S32 = q k^T, dP32 = gout v^T (fp32); per row D = sum_j P dP (dropped) and
//             Pd = dropout(P), dS = P (dP - D), both in T; then
//             gv = Pd^T gout, gq = scale dS k, gk = scale dS^T q.
//
// P and dS enter their GEMMs rounded to T, as the row kernels' P does (and as PyTorch's
// unfused attention under autocast). Dropout draws the same Philox element (g * L + i) * S + j
// as the row kernels and the CPU, with g the problem's index in the whole call.
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "core/attention_plan.h"
#include "cuda/attention.cuh"
#include "cuda/cuda_api.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda/nn_common.cuh"

namespace mantissa::cuda {

namespace {

// MANTISSA_ATTENTION_SCORE_MEMORY (bytes), else 0: the row kernels.
int64_t score_memory_from_env() {
  const char* env = std::getenv("MANTISSA_ATTENTION_SCORE_MEMORY");
  if (!env || !*env) return 0;
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  MT_CHECK(end && *end == 0 && v >= 0, "MANTISSA_ATTENTION_SCORE_MEMORY", "expected a byte count >= 0, got '", env,
           "'");
  return v;
}

std::atomic<int64_t> g_score_memory{-1};  // -1: the environment not read yet

// A team (a warp, or a block for rows longer than 256: cuda/rows.cuh's plan_rows) per row r
// of the round (problem p0 + r / L, query r % L): dropout(P) in T and lse. s32, pt: [rows, S].
template <typename T>
__global__ void softmax_rows_kernel(Rows team, Attn<float> a, int64_t p0, int64_t rows, const float* s32, T* pt,
                                    float* lse) {
  for (int64_t r = team.first(); r < rows; r += team.step()) {
    const int64_t p = p0 + r / a.L, i = r % a.L;
    T* pr = pt + r * a.S;
    const float row_lse = attention_rows::forward_row(
        a, p, i, s32 + r * a.S, team.lane(), team.width(), [&](int64_t j, float v) { pr[j] = cast_to<T>(v); },
        [&](float v) { return team.max(v); }, [&](float v) { return team.sum(v); });
    if (team.lane() == 0) lse[p * a.L + i] = row_lse;
  }
}

// A team per backward row: from S32 and dP32 ([rows, S]) and lse, dropout(P) and dS in T.
template <typename T>
__global__ void softmax_backward_rows_kernel(Rows team, Attn<float> a, int64_t p0, int64_t rows, const float* s32,
                                             const float* dp32, const float* lse, T* pd, T* ds) {
  for (int64_t r = team.first(); r < rows; r += team.step()) {
    const int64_t p = p0 + r / a.L, i = r % a.L;
    T* pdr = pd + r * a.S;
    T* dsr = ds + r * a.S;
    attention_rows::backward_row(
        a, p, i, lse[p * a.L + i], s32 + r * a.S, dp32 + r * a.S, team.lane(), team.width(),
        [&](int64_t j, float pdj, float dsj) {
          pdr[j] = cast_to<T>(pdj);
          dsr[j] = cast_to<T>(dsj);
        },
        [&](float v) { return team.sum(v); });
  }
}

// The device buffer and element type behind each of the plan's buffer names.
struct Buffers {
  std::array<void*, 12> data{};
  std::array<cudaDataType_t, 12> type{};
  void set(attention_plan::Buffer b, const Tensor& t) {
    if (!t.defined()) return;
    data[size_t(b)] = t.raw_data();
    type[size_t(b)] = gemm_type(t.dtype(), "scaled_dot_product_attention");
  }
  void run(int dev, const attention_plan::Gemm& g) const {
    const size_t a = size_t(g.a), b = size_t(g.b), c = size_t(g.c);
    gemm_batched(dev, g.gemm, data[a], type[a], data[b], type[b], data[c], type[c]);
  }
};

// f.template operator()<T>() on q's device for the GEMM path's dtypes (fp32, fp16, bf16).
template <typename F>
void dispatch_gemm_path(const Tensor& q, F&& f) {
  DeviceGuard guard(q.device().index);
  dispatch_floating(q.dtype(), "scaled_dot_product_attention", [&]<typename T>() {
    if constexpr (std::is_same_v<acc_t<T>, float>)
      f.template operator()<T>();
    else
      MT_FAIL("scaled_dot_product_attention", "the GEMM path takes fp32, fp16 and bf16, got ", dtype_name(q.dtype()));
  });
}

}  // namespace

void set_attention_score_memory(int64_t bytes) {
  MT_CHECK(bytes >= 0, "cuda::set_attention_score_memory", "expected a byte count >= 0, got ", bytes);
  g_score_memory.store(bytes);
}
int64_t attention_score_memory() {
  int64_t v = g_score_memory.load();
  if (v < 0) {  // first use: a malformed variable throws here, at an op, not at load
    int64_t unread = -1;
    g_score_memory.compare_exchange_strong(unread, score_memory_from_env());
    v = g_score_memory.load();
  }
  return v;
}

int64_t attention_gemm_chunk(const AttentionGeometry& g, DType dtype) {
  return attention_plan::gemm_chunk(g.B * g.H, g.L, g.S, g.E, g.Ev, int64_t(element_size(dtype)),
                                    attention_score_memory());
}

void attention_forward_gemm(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out,
                            const Tensor& lse, const AttentionGeometry& g, int64_t chunk) {
  using attention_plan::Buffer;
  const int dev = q.device().index;
  const int64_t G = g.B * g.H, L = g.L, S = g.S, E = g.E, Ev = g.Ev;
  dispatch_gemm_path(q, [&]<typename T>() {
    const Attn<float> a = device_geometry<T>(g, mask);
    Tensor scores = make_tensor({chunk, L, S}, DType::Float32, q.device());
    Tensor p = make_tensor({chunk, L, S}, q.dtype(), q.device());
    Buffers buf;
    for (auto [name, t] : {std::pair{Buffer::Q, q},
                           {Buffer::K, k},
                           {Buffer::V, v},
                           {Buffer::Out, out},
                           {Buffer::Scores, scores},
                           {Buffer::P, p}})
      buf.set(name, t);
    for (int64_t g0 = 0; g0 < G; g0 += chunk) {
      const int64_t n = std::min(chunk, G - g0);
      const auto gemms = attention_plan::forward_gemms(L, S, E, Ev, g0, n);
      buf.run(dev, gemms[0]);
      const RowPlan plan = plan_rows(n * L, S, dev);
      softmax_rows_kernel<T><<<plan.grid, plan.block, 0, current_stream(dev)>>>(
          plan.team, a, g0, n * L, dptr<const float>(scores), dptr<T>(p), dptr<float>(lse));
      MT_CUDA_CHECK_LAUNCH();
      buf.run(dev, gemms[1]);
    }
  });
}

void attention_backward_gemm(const Tensor& gout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                             const Tensor& lse, const Tensor& gq, const Tensor& gk, const Tensor& gv,
                             const AttentionGeometry& g, int64_t chunk) {
  using attention_plan::Buffer;
  if (!gq.defined() && !gk.defined() && !gv.defined()) return;
  const int dev = q.device().index;
  const int64_t G = g.B * g.H, L = g.L, S = g.S, E = g.E, Ev = g.Ev;
  dispatch_gemm_path(q, [&]<typename T>() {
    const Attn<float> a = device_geometry<T>(g, mask);
    Tensor scores = make_tensor({chunk, L, S}, DType::Float32, q.device());
    Tensor grad_p = make_tensor({chunk, L, S}, DType::Float32, q.device());
    Tensor p = make_tensor({chunk, L, S}, q.dtype(), q.device());
    Tensor grad_s = make_tensor({chunk, L, S}, q.dtype(), q.device());
    Buffers buf;
    for (auto [name, t] : {std::pair{Buffer::Q, q},
                           {Buffer::K, k},
                           {Buffer::V, v},
                           {Buffer::Gout, gout},
                           {Buffer::GradQ, gq},
                           {Buffer::GradK, gk},
                           {Buffer::GradV, gv},
                           {Buffer::Scores, scores},
                           {Buffer::GradP, grad_p},
                           {Buffer::P, p},
                           {Buffer::GradS, grad_s}})
      buf.set(name, t);
    for (int64_t g0 = 0; g0 < G; g0 += chunk) {
      const int64_t n = std::min(chunk, G - g0);
      const auto gemms = attention_plan::backward_gemms(L, S, E, Ev, float(g.scale), g0, n);
      buf.run(dev, gemms[0]);
      buf.run(dev, gemms[1]);
      const RowPlan plan = plan_rows(n * L, S, dev);
      softmax_backward_rows_kernel<T><<<plan.grid, plan.block, 0, current_stream(dev)>>>(
          plan.team, a, g0, n * L, dptr<const float>(scores), dptr<const float>(grad_p), dptr<const float>(lse),
          dptr<T>(p), dptr<T>(grad_s));
      MT_CUDA_CHECK_LAUNCH();
      if (gv.defined()) buf.run(dev, gemms[2]);
      if (gq.defined()) buf.run(dev, gemms[3]);
      if (gk.defined()) buf.run(dev, gemms[4]);
    }
  });
}

}  // namespace mantissa::cuda
