#include "core/cpu/onednn/context.h"

#include <cstdlib>
#include <cstring>

#include "core/allocator.h"
#include "core/cpu/loops.h"
#include "core/error.h"

namespace mantissa::cpu::onednn {

namespace {

enum class Mode { Eigen, Auto, OneDnn };

Mode mode() {
  static const Mode m = [] {
    const char* v = std::getenv("MANTISSA_CPU_ISA");
    if (v == nullptr || *v == 0 || std::strcmp(v, "auto") == 0) return Mode::Auto;
    if (std::strcmp(v, "eigen") == 0) return Mode::Eigen;
    if (std::strcmp(v, "onednn") == 0) return Mode::OneDnn;
    MT_FAIL("MANTISSA_CPU_ISA", "expected eigen, onednn or auto, got '", v, "'");
  }();
  return m;
}

const char* mode_name() {
  switch (mode()) {
    case Mode::Eigen:
      return "eigen";
    case Mode::OneDnn:
      return "onednn";
    case Mode::Auto:
      break;
  }
  return "auto";
}

// oneDNN's ISA values are nested bit sets: an ISA includes every bit of those it extends.
bool isa_at_least(dnnl::cpu_isa want) {
  const auto have = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  return (have & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
}

const char* isa_name() {
  if (isa_at_least(dnnl::cpu_isa::avx512_core_amx)) return "avx512_core_amx";
  if (isa_at_least(dnnl::cpu_isa::avx512_core_bf16)) return "avx512_core_bf16";
  if (isa_at_least(dnnl::cpu_isa::avx512_core_vnni)) return "avx512_core_vnni";
  if (isa_at_least(dnnl::cpu_isa::avx512_core)) return "avx512_core";
  if (isa_at_least(dnnl::cpu_isa::avx2)) return "avx2";
  return "sse41 or older";
}

}  // namespace

bool use_onednn(OpKind op, DType t) {
  switch (mode()) {
    case Mode::Eigen:
      return false;
    case Mode::OneDnn:  // every dtype oneDNN implements on this CPU: no bf16 primitives below AVX-512
      return t == DType::Float32 || (t == DType::BFloat16 && isa_at_least(dnnl::cpu_isa::avx512_core));
    case Mode::Auto:
      break;
  }
  // fp32: oneDNN's matmul and convolution beat Eigen's GEMM and our im2col (docs/cpu.md has
  // the measurements). bf16 without bf16 dot products would be emulated: widening for Eigen
  // is as fast there.
  (void)op;
  static const bool bf16_dots = isa_at_least(dnnl::cpu_isa::avx512_core_bf16);
  if (t == DType::BFloat16) return bf16_dots;
  return t == DType::Float32;
}

std::string describe() {
  const dnnl_version_t* v = dnnl_version();
  return detail::concat("oneDNN ", v->major, ".", v->minor, ".", v->patch, " (isa ", isa_name(),
                        "), MANTISSA_CPU_ISA=", mode_name(), ": bf16 ",
                        use_onednn(OpKind::Matmul, DType::BFloat16) ? "oneDNN" : "Eigen", ", fp32 matmul ",
                        use_onednn(OpKind::Matmul, DType::Float32) ? "oneDNN" : "Eigen", ", fp32 conv ",
                        use_onednn(OpKind::Conv, DType::Float32) ? "oneDNN" : "Eigen");
}

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

std::mutex& creation_mutex() {
  static std::mutex m;
  return m;
}

CacheCounts& thread_counts() {
  thread_local CacheCounts c;
  return c;
}

CacheCounts thread_cache_counts() { return thread_counts(); }

std::optional<memory::data_type> data_type(DType t) {
  switch (t) {
    case DType::Float32:
      return memory::data_type::f32;
    case DType::BFloat16:
      return memory::data_type::bf16;
    case DType::Float16:
      return memory::data_type::f16;
    default:
      return std::nullopt;
  }
}

namespace {

// x [N, C, S] <-> xb [N, C/16, S, 16] (nchw <-> nChw16c), elements of type E (2 or 4 bytes):
// 16 x 16 tiles go through an L1 buffer, so both sides are read and written in whole rows.
template <typename E, bool kToBlocked>
void transpose16(const E* src, E* dst, int64_t N, int64_t C, int64_t S) {
  parallel_for(0, N * (C / 16), std::max<int64_t>(1, kParallelGrain / (16 * S)), [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) {
      const E* s = src + blk * 16 * S;
      E* d = dst + blk * 16 * S;
      alignas(64) E tile[16][16];
      int64_t p0 = 0;
      for (; p0 + 16 <= S; p0 += 16) {
        if constexpr (kToBlocked) {
          for (int c = 0; c < 16; ++c) std::memcpy(tile[c], s + c * S + p0, sizeof(tile[c]));
          for (int q = 0; q < 16; ++q)
            for (int c = 0; c < 16; ++c) d[(p0 + q) * 16 + c] = tile[c][q];
        } else {
          for (int q = 0; q < 16; ++q)
            for (int c = 0; c < 16; ++c) tile[c][q] = s[(p0 + q) * 16 + c];
          for (int c = 0; c < 16; ++c) std::memcpy(d + c * S + p0, tile[c], sizeof(tile[c]));
        }
      }
      for (int64_t p = p0; p < S; ++p)
        for (int c = 0; c < 16; ++c) {
          if constexpr (kToBlocked)
            d[p * 16 + c] = s[c * S + p];
          else
            d[c * S + p] = s[p * 16 + c];
        }
    }
  });
}

template <bool kToBlocked>
void transpose16(const memory::desc& md, const void* src, void* dst) {
  const Dims d = md.dims();
  const int64_t N = d[0], C = d[1], S = d[2] * d[3];
  if (md.data_type() == memory::data_type::f32)
    transpose16<uint32_t, kToBlocked>(static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), N, C, S);
  else
    transpose16<uint16_t, kToBlocked>(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), N, C, S);
}

// Whether user -> prim is nchw -> nChw16c of 2- or 4-byte elements with whole channel blocks.
bool is_blocked16_pair(const memory::desc& user, const memory::desc& prim) {
  const Dims d = user.dims();
  if (d.size() != 4 || d[1] % 16 != 0) return false;
  const auto dt = user.data_type();
  if (dt != memory::data_type::f32 && dt != memory::data_type::bf16) return false;
  return user == memory::desc(d, dt, memory::format_tag::nchw) &&
         prim == memory::desc(d, dt, memory::format_tag::nChw16c);
}

}  // namespace

Operand::Operand(const memory::desc& user_md, const memory::desc& prim_md, bool is_input)
    : user(user_md), prim(prim_md) {
  if (user == prim) return;
  blocked16 = is_blocked16_pair(user, prim);
  if (blocked16) return;
  if (is_input)
    to_prim.emplace(dnnl::reorder::primitive_desc(engine(), user, engine(), prim));
  else
    to_user.emplace(dnnl::reorder::primitive_desc(engine(), prim, engine(), user));
}

Call::~Call() {
  Allocator* a = allocator_for(Device::cpu());
  for (auto& [p, n] : owned_) a->deallocate(p, n);
}

void* Call::scratch(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  void* p = allocator_for(Device::cpu())->allocate(nbytes);
  owned_.emplace_back(p, nbytes);
  return p;
}

memory Call::input(const Operand& o, const void* data) {
  memory user(o.user, engine(), const_cast<void*>(data));
  if (!o.to_prim && !o.blocked16) return user;
  memory prim(o.prim, engine(), scratch(o.prim.get_size()));
  if (o.blocked16)
    transpose16<true>(o.user, data, prim.get_data_handle());
  else
    o.to_prim->execute(stream(), user, prim);
  return prim;
}

memory Call::output(const Operand& o, void* data) {
  if (!o.to_user && !o.blocked16) return memory(o.user, engine(), data);
  return memory(o.prim, engine(), scratch(o.prim.get_size()));
}

void Call::finish(const Operand& o, const memory& written, void* data) {
  if (o.blocked16) return transpose16<false>(o.user, written.get_data_handle(), data);
  if (!o.to_user) return;
  memory user(o.user, engine(), data);
  o.to_user->execute(stream(), const_cast<memory&>(written), user);
}

void Call::execute(const dnnl::primitive& p, const memory::desc& scratch_md) {
  if (scratch_md.get_size() > 0)
    args_.insert_or_assign(DNNL_ARG_SCRATCHPAD, memory(scratch_md, engine(), scratch(scratch_md.get_size())));
  p.execute(stream(), args_);
  args_.clear();
}

}  // namespace mantissa::cpu::onednn
