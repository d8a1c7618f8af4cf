// Batched matmul through oneDNN's matmul primitive (brgemm kernels: AVX512-BF16 dot products
// or AMX tiles for bf16, fp32 accumulation, bias added to the accumulator before the one
// rounding to the output dtype).
//
//   out [B, M, N] = a [B|1, M, K] @ b [B|1, K, N] + bias [1, N]
//
// Operands keep their strides (a transposed weight view is read in place); an operand whose
// batch stride is 0 is passed with batch 1 and broadcast by oneDNN.
#include "core/cpu/onednn/context.h"

namespace mantissa::cpu::onednn {

namespace {

struct MatmulEntry {
  dnnl::matmul prim;
  memory::desc a, b, bias, out, scratch;
};

// A desc for one operand: [M, K] (batch 1) or [B', M, K] with B' = 1 where it is broadcast.
memory::desc operand_desc(const Tensor& t, int64_t B, memory::data_type dt) {
  const int64_t r = t.size(1), c = t.size(2);
  // oneDNN checks strides even of size-1 dims: give those the dense value.
  const int64_t rs = r == 1 ? c * t.stride(2) : t.stride(1), cs = c == 1 ? 1 : t.stride(2);
  if (B == 1) return memory::desc({r, c}, dt, {rs, cs});
  const bool bcast = t.stride(0) == 0;
  return memory::desc({bcast ? 1 : B, r, c}, dt, {bcast ? r * c : t.stride(0), rs, cs});
}

}  // namespace

bool matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
  const DType t = a.dtype();
  if (!use_onednn(OpKind::Matmul, t)) return false;
  const auto dt = data_type(t);
  if (!dt) return false;
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  if (B * M * N * K == 0) return false;
  thread_local Cache<MatmulEntry> cache;
  const std::vector<int64_t> key{int64_t(t),
                                 bias.defined(),
                                 B,
                                 M,
                                 N,
                                 K,
                                 B > 1 && a.stride(0) == 0 ? 0 : a.stride(0),
                                 a.stride(1),
                                 a.stride(2),
                                 B > 1 && b.stride(0) == 0 ? 0 : b.stride(0),
                                 b.stride(1),
                                 b.stride(2)};
  const MatmulEntry* e = cache.get(key, [&] {
    MatmulEntry m;
    m.a = operand_desc(a, B, *dt);
    m.b = operand_desc(b, B, *dt);
    m.out = B == 1 ? memory::desc({M, N}, *dt, memory::format_tag::ab)
                   : memory::desc({B, M, N}, *dt, memory::format_tag::abc);
    if (bias.defined())
      m.bias = B == 1 ? memory::desc({1, N}, *dt, memory::format_tag::ab)
                      : memory::desc({1, 1, N}, *dt, memory::format_tag::abc);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto pd = bias.defined() ? dnnl::matmul::primitive_desc(dnnl::matmul::desc(m.a, m.b, m.bias, m.out), attr, engine())
                             : dnnl::matmul::primitive_desc(dnnl::matmul::desc(m.a, m.b, m.out), attr, engine());
    m.scratch = pd.scratchpad_desc();
    m.prim = dnnl::matmul(pd);
    return m;
  });
  if (e == nullptr) return false;
  Call call;
  auto& args = call.args();
  args.emplace(DNNL_ARG_SRC, memory(e->a, engine(), a.raw_data()));
  args.emplace(DNNL_ARG_WEIGHTS, memory(e->b, engine(), b.raw_data()));
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, memory(e->bias, engine(), bias.raw_data()));
  args.emplace(DNNL_ARG_DST, memory(e->out, engine(), out.raw_data()));
  call.execute(e->prim, e->scratch);
  return true;
}

}  // namespace mantissa::cpu::onednn
