// matmul: torch.matmul semantics (1-D, 2-D and broadcast-batched) on top of one
// batched GEMM node whose backward is two more matmuls (so it differentiates again).
#include "amp/autocast.h"
#include "autograd/op_helpers.h"

// Autocast categories of the ops defined here (amp/autocast_policy.h).
MT_DECLARE_CAST_POLICY(matmul, LowerPrecision);

namespace mantissa {

using namespace detail;

namespace {

// The GEMM kernel needs unit stride in one of the last two dims.
Tensor gemm_operand(const Tensor& t) {
  if (t.stride(2) == 1 || t.stride(1) == 1) return t;
  return t.contiguous();
}

// a: [B, M, K], b: [B, K, N] -> [B, M, N]
Tensor bmm3(const Tensor& a0, const Tensor& b0) {
  Tensor a = gemm_operand(a0), b = gemm_operand(b0);
  Tensor y = make_tensor({a.size(0), a.size(1), b.size(2)}, a.dtype(), a.device());
  if (y.numel() > 0) backend_for(a.device()).matmul(a, b, Tensor(), y);
  if (needs_grad({a, b})) {
    record("matmul", {a, b}, y, [sa = SavedTensor(a), sb = SavedTensor(b)](const Tensor& g, auto& need) {
      Tensor ga, gb;
      if (need[0]) ga = bmm3(g, sb.unpack().transpose(1, 2));
      if (need[1]) gb = bmm3(sa.unpack().transpose(1, 2), g);
      return Grads{ga, gb};
    });
  }
  return y;
}

}  // namespace

Tensor matmul(const Tensor& a0, const Tensor& b0) {
  auto in = amp::autocast_many(autocast_matmul, {a0, b0});
  Tensor a = in[0], b = in[1];
  launch::check_same_device("matmul", {a, b});
  MT_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul", "both arguments need at least 1 dimension, got ", describe({a, b}));
  MT_CHECK(a.dtype() == b.dtype(), "matmul", "expected both operands to have the same dtype, got ", describe({a, b}));
  MT_CHECK(is_floating(a.dtype()), "matmul", "expected floating-point operands, got ", describe({a, b}));
  const bool a1 = a.dim() == 1, b1 = b.dim() == 1;
  if (a1) a = a.unsqueeze(0);
  if (b1) b = b.unsqueeze(1);
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  MT_CHECK(b.size(-2) == K, "matmul", "shapes cannot be multiplied: ", describe({a0, b0}), " (inner dimensions ", K,
           " and ", b.size(-2), ")");
  Shape batch_a(a.sizes().begin(), a.sizes().end() - 2), batch_b(b.sizes().begin(), b.sizes().end() - 2);
  Shape batch = broadcast_shapes(batch_a, batch_b, "matmul");
  int64_t B = shape_numel(batch);
  Shape out = batch;
  if (!a1) out.push_back(M);
  if (!b1) out.push_back(N);
  // A batched left operand against one matrix ([B..., M, K] @ [K, N]: a projection written with
  // matmul) is one GEMM of [B M, K] @ [K, N], as in torch: run batched with the matrix broadcast,
  // its gradient had been B small products rounded to the dtype and then summed (bf16
  // [8, 8, 256, 64] @ [64, 64] forward + backward: 1.19x PyTorch's time).
  if (batch_b.empty() && !batch_a.empty()) return bmm3(a.reshape({1, B * M, K}), b.unsqueeze(0)).reshape(out);
  Tensor a3, b3;
  if (batch_a.empty() && !batch.empty() && a.is_contiguous() == false) a = a.contiguous();
  // Both operands are expanded to the common batch (a copy where one is shared) and run as one
  // batched GEMM.
  Shape full_a = batch, full_b = batch;
  full_a.push_back(M), full_a.push_back(K);
  full_b.push_back(K), full_b.push_back(N);
  a3 = a.expand(full_a).reshape({B, M, K});
  b3 = b.expand(full_b).reshape({B, K, N});
  return bmm3(a3, b3).reshape(out);
}

}  // namespace mantissa
