// CPU launchers for copy, fill, unary, binary and where. Each applies a functor from
// core/elementwise_math.h with the dtype rules of core/elementwise_dispatch.h, both shared with
// CUDA; this file has only the loops.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu/block_transpose.h"
#include "core/cpu/channel_interleave.h"
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/cpu/streaming_store.h"
#include "core/cpu/vec_math.h"
#include "core/cpu/vector_libm.h"
#include "core/elementwise_dispatch.h"

namespace mantissa::cpu {

namespace {

template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

bool same_layout_contiguous(const Tensor& a, const Tensor& b) {
  return a.is_contiguous() && b.is_contiguous() && a.sizes() == b.sizes();
}

// body(dst, offset, m) writes elements [offset, offset + m) of y's n contiguous elements to dst:
// run over threads, each range by streaming stores (write_streamed) where the op's footprint (y
// and in_bytes read) is too large for its output to stay in cache (worth_streaming), else
// straight into y.
// Whether an op of n elements (the threads parallel_for gives it) moving footprint_bytes streams.
bool stream_output(int64_t footprint_bytes, int64_t n) {
  return worth_streaming(footprint_bytes, n > kParallelGrain ? omp_get_max_threads() : 1);
}

template <typename Out, typename Body>
void parallel_write(Out* y, int64_t n, int64_t in_bytes, Body&& body) {
  const bool stream = stream_output(n * int64_t(sizeof(Out)) + in_bytes, n);
  parallel_for(0, n, kParallelGrain, [&](int64_t b, int64_t e) {
    if (stream)
      write_streamed(y + b, e - b, [&](Out* d, int64_t o, int64_t m) { body(d, b + o, m); });
    else
      body(y + b, b, e - b);
  });
}

// Whether an op writing `out` (contiguous) and reading in_bytes streams its rows of at least
// kStreamRowBytes (write_streamed per row). Each row ends in a fence, which waits for the row's
// lines to leave: fenced every 4 KiB, a streamed add ran 1.6x slower than fenced once (and
// slower than plain stores), every 16 KiB 1.2x, every 64 KiB the same.
constexpr int64_t kStreamRowBytes = 64 << 10;
bool stream_rows(const Tensor& out, int64_t in_bytes) {
  return out.is_contiguous() && stream_output(out.nbytes() + in_bytes, out.numel());
}

// `bytes` (a short row: up to a few hundred) from src to dst: whole zmm moves, a ymm and an
// xmm move, and a masked tail only below 16 bytes on AVX-512, so a short row costs a few
// instructions rather than a call or a loop of unknown trip count (a masked store costs Zen 5
// several plain ones).
// `stream`: non-temporal stores (the caller checked dst and bytes are multiples of 64).
inline void move_short_row(const char* src, char* dst, int64_t bytes, bool stream) {
#if defined(__AVX512BW__)
  int64_t k = 0;
  if (stream) {
    for (; k < bytes; k += 64) _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + k), _mm512_loadu_si512(src + k));
    return;
  }
  for (; k + 64 <= bytes; k += 64) _mm512_storeu_si512(dst + k, _mm512_loadu_si512(src + k));
  if (k + 32 <= bytes) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k)));
    k += 32;
  }
  if (k + 16 <= bytes) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k)));
    k += 16;
  }
  if (k < bytes) {
    const __mmask64 m = _cvtu64_mask64(~uint64_t(0) >> (64 - (bytes - k)));
    _mm512_mask_storeu_epi8(dst + k, m, _mm512_maskz_loadu_epi8(m, src + k));
  }
#else
  (void)stream;
  std::memcpy(dst, src, size_t(bytes));
#endif
}

// `rows` rows of `bytes` each, src_step and dst_step bytes apart. Every value in
// a register, and the common row sizes as constants the moves unroll to: through one
// move_short_row per row that reloaded its sizes and steps (the stores may alias them), a
// [32768, 16] fp32 half of a cat took 1.7x a memcpy of its bytes. (A switch: one fold-expression
// helper shared with with_constant_row_length ran the head-split copy 20 % slower, bf16.)
inline void move_short_rows(const char* src, int64_t src_step, char* dst, int64_t dst_step, int64_t rows, int64_t bytes,
                            bool stream) {
  auto each = [&](auto row_bytes) {
    for (int64_t i = 0; i < rows; ++i, src += src_step, dst += dst_step) move_short_row(src, dst, row_bytes, stream);
  };
  switch (bytes) {
    case 16:
      return each(std::integral_constant<int64_t, 16>());
    case 32:
      return each(std::integral_constant<int64_t, 32>());
    case 64:
      return each(std::integral_constant<int64_t, 64>());
    case 128:
      return each(std::integral_constant<int64_t, 128>());
    default:
      return each(bytes);
  }
}

// Short rows (for_each_short_rows) go through the vector kernels in blocks of whole rows:
// rows of at most kShortRow elements, blocks of at most kRowBlock elements.
constexpr int64_t kShortRow = 64, kRowBlock = 1024;

// Rows [0, m) of a run of short rows `rs` elements apart, `inner` long, as adjacent rows: p
// itself where they already are, else gathered into buf.
template <typename T>
const T* adjacent_rows(const T* p, int64_t rs, int64_t inner, int64_t m, T* buf) {
  if (rs == inner) return p;
  constexpr int64_t es = int64_t(sizeof(T));
  move_short_rows(reinterpret_cast<const char*>(p), rs * es, reinterpret_cast<char*>(buf), inner * es, m, inner * es,
                  false);
  return buf;
}

// Writes m adjacent rows of `inner` elements from buf to rows `rs` apart at y, unless buf is y.
template <typename T>
void scatter_rows(const T* buf, T* y, int64_t rs, int64_t inner, int64_t m) {
  if (buf == y) return;
  constexpr int64_t es = int64_t(sizeof(T));
  move_short_rows(reinterpret_cast<const char*>(buf), inner * es, reinterpret_cast<char*>(y), rs * es, m, inner * es,
                  false);
}

// body(r, m) for the blocks [r, r + m) of whole rows of a run of `rows` rows of `inner` elements.
template <typename F>
void for_each_row_block(int64_t rows, int64_t inner, F&& body) {
  const int64_t per_block = std::max<int64_t>(1, kRowBlock / inner);
  for (int64_t r = 0; r < rows; r += per_block) body(r, std::min(per_block, rows - r));
}

// fn(k) with the row length as a constant k where it is one of the common short ones (a
// rotary half of 16 or 32, a head of 64); false where it is not.
template <typename Fn>
bool with_constant_row_length(int64_t inner, Fn&& fn) {
  switch (inner) {
    case 16:
      return fn(std::integral_constant<int64_t, 16>()), true;
    case 32:
      return fn(std::integral_constant<int64_t, 32>()), true;
    case 64:
      return fn(std::integral_constant<int64_t, 64>()), true;
    default:
      return false;
  }
}

#if defined(__AVX512BF16__)
// The even and odd bf16 elements of the 16 words at p as floats.
inline void bf16_halves(const BFloat16* p, __m512& even, __m512& odd) {
  bf16_words_as_floats(_mm512_loadu_si512(p), even, odd);
}
#endif

// f over contiguous fp32/bf16/fp16 data for the functors with an AVX-512 form (exp, sigmoid,
// silu, gelu: core/cpu/vec_math.h): bf16 -> bf16 in registers where the CPU has AVX512-BF16,
// other bf16/fp16 in fp32 blocks; their libmvec calls in the functors' `omp simd` loops held
// them at a third of memcpy in fp32 and an eighth in bf16. exp keeps exp_floats on other CPUs
// too (math::exp_fast, vectorized by GCC).
template <typename In, typename Out, typename F>
void vector_form_block(F f, const In* x, Out* y, int64_t n) {
#if defined(__AVX512BF16__)
  if constexpr (std::is_same_v<In, BFloat16> && std::is_same_v<Out, BFloat16> && kHasVectorForm<F>) {
    const int64_t done =
        bf16_words_in_registers(n, reinterpret_cast<uint16_t*>(y), [&](int64_t i, __m512& e, __m512& o) {
          bf16_halves(x + i, e, o);
          e = vector_form<Bf16Result>(f, e);
          o = vector_form<Bf16Result>(f, o);
        });
    x += done;
    y += done;
    n -= done;
  }
#endif
  using R = ResultPrecision<Out>;
  auto apply = [f](const float* src, float* dst, int64_t m) {
    if constexpr (kHasVectorForm<F>)
      map_floats<R>(f, dst, m, src);
    else
      exp_floats<false, R>(src, dst, m);
  };
  if constexpr (std::is_same_v<In, float> && std::is_same_v<Out, float>) {
    apply(x, y, n);
  } else {
    alignas(64) float buf[kAccBlock];
    for (int64_t s = 0; s < n; s += kAccBlock) {
      const int64_t m = std::min(kAccBlock, n - s);
      widen_block(x + s, buf, m);
      apply(buf, buf, m);
      narrow_block(buf, y + s, m);
    }
  }
}

// The same for the backward functors with an AVX-512 form: y = f(a, b) (a: the gradient).
template <typename In, typename Out, typename F>
void vector_form_block(F f, const In* a, const In* b, Out* y, int64_t n) {
#if defined(__AVX512BF16__)
  if constexpr (std::is_same_v<In, BFloat16> && std::is_same_v<Out, BFloat16>) {
    const int64_t done =
        bf16_words_in_registers(n, reinterpret_cast<uint16_t*>(y), [&](int64_t i, __m512& e, __m512& o) {
          __m512 ae, ao;
          bf16_halves(a + i, ae, ao);
          bf16_halves(b + i, e, o);
          e = vector_form<Bf16Result>(f, ae, e);
          o = vector_form<Bf16Result>(f, ao, o);
        });
    a += done;
    b += done;
    y += done;
    n -= done;
  }
#endif
  if constexpr (std::is_same_v<In, float> && std::is_same_v<Out, float>) {
    map_floats(f, y, n, a, b);
  } else {
    alignas(64) float ba[kAccBlock], bb[kAccBlock];
    for (int64_t s = 0; s < n; s += kAccBlock) {
      const int64_t m = std::min(kAccBlock, n - s);
      widen_block(a + s, ba, m);
      widen_block(b + s, bb, m);
      map_floats<ResultPrecision<Out>>(f, ba, m, ba, bb);
      narrow_block(ba, y + s, m);
    }
  }
}

// y[i] = f(a[i], b[i]) over contiguous rows: through the vector form where f has one (bf16 in
// registers), else map_acc.
template <typename Acc, typename In, typename Out, typename F>
void binary_block(F f, const In* a, const In* b, Out* y, int64_t n) {
  if constexpr (kHasBinaryVectorForm<F> && std::is_same_v<Acc, float>)
    vector_form_block(f, a, b, y, n);
  else
    map_acc<Acc>(a, b, y, n, [f](Acc u, Acc v) { return f(u, v); });
}

// y[i] = f(a[i], s), or f(s, a[i]) when ScalarFirst: one operand a single value (a scalar, a
// broadcast column). bf16 -> bf16 in registers where f has a vector form, as binary_block.
template <bool ScalarFirst, typename Acc, typename In, typename Out, typename F>
void scalar_operand_block(F f, const In* a, Acc s, Out* y, int64_t n) {
#if defined(__AVX512BF16__)
  if constexpr (std::is_same_v<In, BFloat16> && std::is_same_v<Out, BFloat16> && std::is_same_v<Acc, float> &&
                kHasBinaryVectorForm<F>) {
    const __m512 vs = _mm512_set1_ps(s);
    auto g = [&](__m512 v) {
      return ScalarFirst ? vector_form<Bf16Result>(f, vs, v) : vector_form<Bf16Result>(f, v, vs);
    };
    const int64_t done =
        bf16_words_in_registers(n, reinterpret_cast<uint16_t*>(y), [&](int64_t i, __m512& e, __m512& o) {
          bf16_halves(a + i, e, o);
          e = g(e);
          o = g(o);
        });
    a += done;
    y += done;
    n -= done;
  }
#endif
  map_acc<Acc>(a, y, n, [f, s](Acc u) { return ScalarFirst ? f(s, u) : f(u, s); });
}

// neg, abs and relu of bf16 / fp16: exact on the values' bits, 32 elements per vector; through
// fp32 blocks (widen, op, round) they ran at half the fp32 op's bytes per second. NaN stays NaN
// (its sign and payload pass through; the rounding path made it the canonical NaN).
template <typename F, typename T>
constexpr bool kSignBitOp = sizeof(T) == 2 && !std::is_integral_v<T> &&
                            (std::is_same_v<F, math::Neg> || std::is_same_v<F, math::Abs> ||
                             std::is_same_v<F, math::Relu>);

template <typename F, typename T>
void sign_bits_block(const T* x, T* y, int64_t n) {
  const auto* xs = reinterpret_cast<const uint16_t*>(x);
  auto* ys = reinterpret_cast<uint16_t*>(y);
  constexpr uint16_t kSign = 0x8000, kInf = std::is_same_v<T, BFloat16> ? 0x7f80 : 0x7c00;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t v = xs[i], mag = v & uint16_t(~kSign);
    if constexpr (std::is_same_v<F, math::Neg>)
      ys[i] = v ^ kSign;
    else if constexpr (std::is_same_v<F, math::Abs>)
      ys[i] = mag;
    else  // relu: a negative non-zero, non-NaN value becomes +0 (-0 and NaN pass)
      ys[i] = (v & kSign) != 0 && mag != 0 && mag <= kInf ? uint16_t(0) : v;
  }
}

// y[i] = f(x[i]) over contiguous data: by the bits for neg / abs / relu of 16-bit floats,
// through the vector form where f has one (and exp), else map_acc.
template <typename Acc, typename In, typename Out, typename F>
void unary_block(F f, const In* x, Out* y, int64_t n) {
  if constexpr (kSignBitOp<F, In> && std::is_same_v<In, Out>)
    sign_bits_block<F>(x, y, n);
  else if constexpr ((kHasVectorForm<F> || std::is_same_v<F, math::Exp>)&&std::is_same_v<Acc, float>)
    vector_form_block(f, x, y, n);
  else
    map_acc<Acc>(x, y, n, [f](Acc v) { return f(v); });
}

// Whether short rows go straight from the inputs' rows to the output's, a row at a time with
// its length a constant (with_constant_row_length), rather than gathered into blocks: where the
// kernel is one plain vector loop over the element type (no widening or rounding: fp32, fp64,
// integers) or over the bits (kSignBitOp). Through a block, the gather and the op came in two
// phases whose loads did not overlap: neg of a [32768, 16] fp32 narrow took 1.5x its
// contiguous neg, and 1.5x PyTorch's, whose per-row loop reads and computes together.
template <typename Acc, typename In, typename Out, typename F>
constexpr bool kDirectShortRows = std::is_same_v<In, Out> && (std::is_same_v<In, Acc> || kSignBitOp<F, In>);

// Whether t, an input of out's shape, is read across its rows against a contiguous out: a
// transposed or permuted view (a gradient arriving through a transpose). Element by element
// such an input walks a new cache line per element (casts and activations 1.3-4 GB/s, binary
// ops 2.5-6.6, where / masked_fill 0.8-1.8 at 1M).
bool read_across_rows(const Tensor& t, const Tensor& out) {
  return out.is_contiguous() && out.numel() > 1 && t.sizes() == out.sizes() && t.stride(t.dim() - 1) != 1 &&
         is_permuted_dense(t.sizes(), t.strides());
}

// t made contiguous by the tiled copy where it is read across its rows against out; else t.
Tensor along_rows(const Tensor& t, const Tensor& out) {
  if (!read_across_rows(t, out)) return t;
  Tensor c = make_tensor(t.sizes(), t.dtype(), t.device());
  copy(t, c);
  return c;
}

// y[0, n) = v, 16-bit floats as their bits (std::fill over Eigen's structs is a scalar loop).
template <typename T>
void fill_row(T* y, int64_t n, T v) {
  if constexpr (sizeof(T) == 2 && !std::is_integral_v<T>)
    std::fill(reinterpret_cast<uint16_t*>(y), reinterpret_cast<uint16_t*>(y + n), std::bit_cast<uint16_t>(v));
  else
    std::fill(y, y + n, v);
}

// out[i] = cast<Out>(f(cast<Acc>(in[i]))), in broadcast/strided to out's shape.
template <typename In, typename Out, typename Acc, typename F>
void unary_loop(const Tensor& in, const Tensor& out, F f) {
  const In* x = ptr<In>(in);
  Out* y = ptr<Out>(out);
  const int64_t n = out.numel();
  if (same_layout_contiguous(in, out)) {
    parallel_write(y, n, in.nbytes(), [&](Out* d, int64_t o, int64_t m) { unary_block<Acc>(f, x + o, d, m); });
    return;
  }
  // An input read across its rows (autocast's cast of k^T, an activation of a transposed view):
  // two vectorized passes, the tiled copy (copy -> copy_bits) on the narrower side: f in the input's
  // memory order into a buffer of the input's layout, then the copy reorders the results; or,
  // where the input's elements are the narrower (a bf16 -> fp32 cast), the copy makes the input
  // contiguous first.
  if (read_across_rows(in, out)) {
    if constexpr (sizeof(In) < sizeof(Out)) {
      Tensor staged = make_tensor(in.sizes(), in.dtype(), in.device());
      copy(in, staged);
      const In* s = ptr<In>(staged);
      parallel_write(y, n, in.nbytes(), [&](Out* d, int64_t o, int64_t m) { unary_block<Acc>(f, s + o, d, m); });
    } else {
      Tensor staged = make_view(make_tensor(out.sizes(), out.dtype(), out.device()), in.sizes(), in.strides(), 0);
      Out* t = ptr<Out>(staged);
      parallel_for(0, n, kParallelGrain, [&](int64_t b, int64_t e) { unary_block<Acc>(f, x + b, t + b, e - b); });
      copy(staged, out);
    }
    return;
  }
  Shape in_st = broadcast_strides(in.sizes(), in.strides(), out.sizes());
  // Short unit-stride rows (a narrow of the last dim: rotary embeddings' halves) row by row at a
  // constant length where the type is plain (kDirectShortRows), else in blocks of whole rows:
  // per row, a vector kernel's run-time set-up and tail cost more than 16 elements' math (neg of
  // a rotary half ran at 4-8 GB/s).
  if (for_each_short_rows<2>(
          out.sizes(), {out.strides(), in_st}, kShortRow, [&](auto off, int64_t rows, int64_t inner, auto rs) {
            if constexpr (kDirectShortRows<Acc, In, Out, F>) {
              const In* xr = x + off[1];
              Out* yr = y + off[0];
              if (with_constant_row_length(inner, [&](auto k) {
                    for (int64_t r = 0; r < rows; ++r) unary_block<Acc>(f, xr + r * rs[1], yr + r * rs[0], int64_t(k));
                  }))
                return;
            }
            for_each_row_block(rows, inner, [&](int64_t r, int64_t m) {
              alignas(64) In xb[kRowBlock];
              alignas(64) Out yb[kRowBlock];
              Out* yo = y + off[0] + r * rs[0];
              Out* yd = rs[0] == inner ? yo : yb;
              unary_block<Acc>(f, adjacent_rows(x + off[1] + r * rs[1], rs[1], inner, m, xb), yd, m * inner);
              scatter_rows(yd, yo, rs[0], inner, m);
            });
          }))
    return;
  for_each_row<2>(out.sizes(), {out.strides(), in_st}, [&](auto off, int64_t len, auto st) {
    Out* yo = y + off[0];
    const In* xo = x + off[1];
    // Long unit-stride rows (a GLU's chunk) as contiguous blocks.
    if (st[0] == 1 && st[1] == 1) return unary_block<Acc>(f, xo, yo, len);
    // Other strides through a gathered block: the same vector math as the contiguous kernels,
    // so a result does not depend on its input's layout (the scalar functor's exp differed
    // from the vector form's in the last bit).
    constexpr int64_t kBlock = 256;
    In xb[kBlock];
    Out yb[kBlock];
    for (int64_t s = 0; s < len; s += kBlock) {
      const int64_t m = std::min(kBlock, len - s);
      for (int64_t i = 0; i < m; ++i) xb[i] = xo[(s + i) * st[1]];
      unary_block<Acc>(f, xb, yb, m);
      for (int64_t i = 0; i < m; ++i) yo[(s + i) * st[0]] = yb[i];
      // One value along the whole row (an expanded gradient): the first block's result filled
      // through the rest (the gathered scalar loop ran at 0.7 ns per element).
      if (st[0] == 1 && st[1] == 0) return fill_row(yo + m, len - m, yb[0]);
    }
  });
}

// out[i] = cast<Out>(f(a[i], b[i])), a and b broadcast/strided to out's shape.
template <typename In, typename Out, typename Acc, typename F>
void binary_loop(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  {
    const Tensor ra = along_rows(a, out), rb = along_rows(b, out);
    if (ra.raw_data() != a.raw_data() || rb.raw_data() != b.raw_data())
      return binary_loop<In, Out, Acc>(ra, rb, out, f);
  }
  const In* pa = ptr<In>(a);
  const In* pb = ptr<In>(b);
  Out* y = ptr<Out>(out);
  const int64_t n = out.numel();
  if (same_layout_contiguous(a, out) && same_layout_contiguous(b, out)) {
    parallel_write(y, n, a.nbytes() + b.nbytes(),
                   [&](Out* d, int64_t o, int64_t m) { binary_block<Acc>(f, pa + o, pb + o, d, m); });
    return;
  }
  if (same_layout_contiguous(a, out) && b.numel() == 1) {  // tensor (op) scalar
    const Acc vb = cast_to<Acc>(pb[0]);
    parallel_write(y, n, a.nbytes(),
                   [&](Out* d, int64_t o, int64_t m) { scalar_operand_block<false>(f, pa + o, vb, d, m); });
    return;
  }
  Shape sa = broadcast_strides(a.sizes(), a.strides(), out.sizes());
  Shape sb = broadcast_strides(b.sizes(), b.strides(), out.sizes());
  // Short unit-stride rows (rotary embeddings: q [B, H, T, E], a head-split view, times a
  // [T, E] table) row by row or in blocks of whole rows, as unary_loop's.
  if (for_each_short_rows<3>(
          out.sizes(), {out.strides(), sa, sb}, kShortRow, [&](auto off, int64_t rows, int64_t inner, auto rs) {
            if constexpr (kDirectShortRows<Acc, In, Out, F>) {
              const In* ar = pa + off[1];
              const In* br = pb + off[2];
              Out* yr = y + off[0];
              if (with_constant_row_length(inner, [&](auto k) {
                    for (int64_t r = 0; r < rows; ++r)
                      binary_block<Acc>(f, ar + r * rs[1], br + r * rs[2], yr + r * rs[0], int64_t(k));
                  }))
                return;
            }
            for_each_row_block(rows, inner, [&](int64_t r, int64_t m) {
              alignas(64) In ab[kRowBlock], bb[kRowBlock];
              alignas(64) Out yb[kRowBlock];
              Out* yo = y + off[0] + r * rs[0];
              Out* yd = rs[0] == inner ? yo : yb;
              binary_block<Acc>(f, adjacent_rows(pa + off[1] + r * rs[1], rs[1], inner, m, ab),
                                adjacent_rows(pb + off[2] + r * rs[2], rs[2], inner, m, bb), yd, m * inner);
              scatter_rows(yd, yo, rs[0], inner, m);
            });
          }))
    return;
  // One row of out: unit-stride rows through the vector blocks (a bias over [N, C], a [N, 1]
  // column over its rows: one operand a single value), others through gathered blocks.
  // Long rows of a large output by streaming stores (a bias added to [N, 4096]).
  const bool stream = stream_rows(out, a.nbytes() + b.nbytes());
  // A unit-stride row of out whose operands are unit-stride or one value (not both one value).
  auto unit_row = [&](const In* ao, const In* bo, Out* yo, int64_t len, const auto& st) {
    if (st[1] == 1 && st[2] == 1) return binary_block<Acc>(f, ao, bo, yo, len);
    if (st[1] == 1) return scalar_operand_block<false>(f, ao, cast_to<Acc>(bo[0]), yo, len);
    return scalar_operand_block<true>(f, bo, cast_to<Acc>(ao[0]), yo, len);
  };
  auto row = [&](const In* ao, const In* bo, Out* yo, int64_t len, const auto& st) {
    if (st[0] == 1 && (st[1] == 0 || st[1] == 1) && (st[2] == 0 || st[2] == 1) && st[1] + st[2] > 0) {
      if (stream && len * int64_t(sizeof(Out)) >= kStreamRowBytes)
        return write_streamed(
            yo, len, [&](Out* d, int64_t o, int64_t m) { unit_row(ao + o * st[1], bo + o * st[2], d, m, st); });
      return unit_row(ao, bo, yo, len, st);
    }
    // Other strides through gathered blocks, as unary_loop's (the contiguous kernels' math).
    constexpr int64_t kBlock = 256;
    In ab[kBlock], bb[kBlock];
    Out yb[kBlock];
    for (int64_t s = 0; s < len; s += kBlock) {
      const int64_t m = std::min(kBlock, len - s);
      for (int64_t i = 0; i < m; ++i) {
        ab[i] = ao[(s + i) * st[1]];
        bb[i] = bo[(s + i) * st[2]];
      }
      binary_block<Acc>(f, ab, bb, yb, m);
      for (int64_t i = 0; i < m; ++i) yo[(s + i) * st[0]] = yb[i];
      // Both operands one value along the row (an expanded gradient times a per-channel weight,
      // two expanded gradients added): the first block's result filled through the rest.
      if (st[0] == 1 && st[1] == 0 && st[2] == 0) return fill_row(yo + m, len - m, yb[0]);
    }
  };
  const std::array<Shape, 3> strides{out.strides(), sa, sb};
  if (for_each_row_run<3>(out.sizes(), strides, [&](auto off, int64_t rows, int64_t len, auto rs, auto st) {
        // A column over short rows ([N, 16] * [N, 1]: a small head's per-row scale, a row sum's
        // normalization): per row, scalar_operand_block's set-up cost more than its 16 elements
        // (3.2x PyTorch's time). Its loop inline, the row length a constant (no tail: the same
        // functor calls, so the same values). For + - * / (one instruction, so the same values
        // in a tail) any row length: an expanded row times a column ([B, 1, E] expanded over T,
        // times [B, T, 1]: a masked mean's gradient) ran rows of 128 at 2x PyTorch's time.
        if constexpr (kDirectShortRows<Acc, In, Out, F>) {
          if (stream && len * int64_t(sizeof(Out)) >= kStreamRowBytes) {
            for (int64_t r = 0; r < rows; ++r)
              row(pa + off[1] + r * rs[1], pb + off[2] + r * rs[2], y + off[0] + r * rs[0], len, st);
            return;
          }
          auto inline_rows = [&](auto k) {
            const bool column_b = st[2] == 0;
            for (int64_t r = 0; r < rows; ++r) {
              const In* ao = pa + off[1] + r * rs[1];
              const In* bo = pb + off[2] + r * rs[2];
              Out* yo = y + off[0] + r * rs[0];
              if (column_b) {
                const Acc v = cast_to<Acc>(bo[0]);
#pragma omp simd
                for (int64_t i = 0; i < int64_t(k); ++i) yo[i] = cast_to<Out>(f(cast_to<Acc>(ao[i]), v));
              } else {
                const Acc v = cast_to<Acc>(ao[0]);
#pragma omp simd
                for (int64_t i = 0; i < int64_t(k); ++i) yo[i] = cast_to<Out>(f(v, cast_to<Acc>(bo[i])));
              }
            }
          };
          if (st[0] == 1 && ((st[1] == 1 && st[2] == 0) || (st[1] == 0 && st[2] == 1))) {
            if (with_constant_row_length(len, inline_rows)) return;
            if constexpr (kHasBinaryVectorForm<F>) return inline_rows(len);
          }
        }
        for (int64_t r = 0; r < rows; ++r)
          row(pa + off[1] + r * rs[1], pb + off[2] + r * rs[2], y + off[0] + r * rs[0], len, st);
      }))
    return;
  for_each_row<3>(out.sizes(), strides,
                  [&](auto off, int64_t len, auto st) { row(pa + off[1], pb + off[2], y + off[0], len, st); });
}

// The coalesced layout of a copy that moves the last dim: y with unit stride along the last
// dim and x without, m the dim along which x has unit stride (-1 when none, or when the copy
// does not move the last dim). Strides: st[0] y's, st[1] x's.
struct MovedLastDim {
  Shape shape;
  std::array<Shape, 2> st;
  int64_t last = 0, m = -1;
  MovedLastDim(const Shape& sizes, const Shape& src_st, const Shape& dst_st) {
    coalesce_dims<2>(sizes, {dst_st, src_st}, shape, st);
    last = int64_t(shape.size()) - 1;
    if (last < 1 || st[0][size_t(last)] != 1 || st[1][size_t(last)] == 1) return;
    for (int64_t d = 0; d < last; ++d)
      if (st[1][size_t(d)] == 1) m = d;
  }
};

// A permuting copy (a transpose, a permute that moves the last dim): y [.., m, .., n] with
// unit stride along n, x with unit stride along m. Element by element one side would walk a new
// cache line per element (0.8 GB/s); 16 x 16 tiles keep both sides' lines in cache, and a whole
// tile of 2- or 4-byte elements moves as four 8 x 8 register transposes (core/cpu/block_transpose.h),
// or, on AVX-512, whole 64 x 64 blocks through buffers (power-of-two strides).
// Returns false when the layout is not that case.
template <typename U>
bool copy_tiled(const U* x, U* y, const Shape& sizes, const Shape& src_st, const Shape& dst_st) {
  MovedLastDim layout(sizes, src_st, dst_st);
  const Shape& shape = layout.shape;
  const std::array<Shape, 2>& st = layout.st;
  const int64_t last = layout.last, m = layout.m;
  if (m < 0 || shape[size_t(m)] < 8 || shape[size_t(last)] < 8) return false;
  constexpr int64_t kTile = 16;
  // 2- and 4-byte elements on AVX-512 go in 64 x 64 blocks through buffers
  // (block_transpose_64x64); a block's partial edge falls back to the 16 x 16 tiles.
  constexpr int64_t kBlock = has_block64_transpose<U> ? 64 : kTile;
  const int64_t rows = shape[size_t(m)], cols = shape[size_t(last)];
  const int64_t ym = st[0][size_t(m)], xn = st[1][size_t(last)];
  const int64_t row_blocks = (rows + kBlock - 1) / kBlock, col_blocks = (cols + kBlock - 1) / kBlock;
  int64_t outer = 1;
  for (int64_t d = 0; d < last; ++d)
    if (d != m) outer *= shape[size_t(d)];
  const int64_t blocks = row_blocks * col_blocks;
  // Outputs of 8 MiB and more leave the caches anyway: whole 64 x 64 blocks then skip the read
  // of each destination line (non-temporal stores). fp32 [2048, 2048]: 18 -> 27 GB/s on one
  // Zen 5 core; smaller outputs stay cached for the op that reads them next.
  const bool stream = kBlock == 64 && outer * rows * cols * int64_t(sizeof(U)) >= kStreamPermutedBytes;
  // Rows [r0, r1) x columns [c0, c1) of one outer index, in 16 x 16 tiles.
  auto tiles = [&](int64_t xo, int64_t yo, int64_t rb0, int64_t rb1, int64_t cb0, int64_t cb1) {
    for (int64_t r0 = rb0; r0 < rb1; r0 += kTile)
      for (int64_t c0 = cb0; c0 < cb1; c0 += kTile) {
        const int64_t r1 = std::min(rb1, r0 + kTile), c1 = std::min(cb1, c0 + kTile);
        if constexpr (has_block_transpose<U>) {
          if (r1 - r0 == kTile && c1 - c0 == kTile) {  // a whole tile: four 8 x 8 register transposes
            for (int64_t r = r0; r < r1; r += 8)
              for (int64_t c = c0; c < c1; c += 8)
                block_transpose_8x8(x + xo + r + c * xn, xn, y + yo + r * ym + c, ym);
            continue;
          }
        }
        for (int64_t r = r0; r < r1; ++r) {
          U* yr = y + yo + r * ym;
          const U* xr = x + xo + r;
          for (int64_t c = c0; c < c1; ++c) yr[c] = xr[c * xn];
        }
      }
  };
  parallel_for(0, outer * blocks, std::max<int64_t>(1, kParallelGrain / (kBlock * kBlock)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t rem = t / blocks, xo = 0, yo = 0;
      for (int64_t d = last - 1; d >= 0; --d) {  // the outer index over the dims but m and last
        if (d == m) continue;
        const int64_t i = rem % shape[size_t(d)];
        rem /= shape[size_t(d)];
        xo += i * st[1][size_t(d)];
        yo += i * st[0][size_t(d)];
      }
      const int64_t r0 = (t % blocks) / col_blocks * kBlock, c0 = (t % blocks) % col_blocks * kBlock;
      const int64_t r1 = std::min(rows, r0 + kBlock), c1 = std::min(cols, c0 + kBlock);
      if constexpr (kBlock == 64) {
        if (r1 - r0 == kBlock && c1 - c0 == kBlock) {
          block_transpose_64x64(x + xo + r0 + c0 * xn, xn, y + yo + r0 * ym + c0, ym, stream);
          continue;
        }
      }
      tiles(xo, yo, r0, r1, c0, c1);
    }
    if (stream) streaming_stores_done();  // before anyone reads y
  });
  return true;
}

// A copy whose rows are contiguous on both sides but short (attention's head split
// [B, T, H, E] -> [B, H, T, E]: rows of E = 32 elements): rows run along the next dim by its
// two strides and the outer index steps once per such run. Through for_each_row each 64-byte
// row paid its odometer step and loop set-up: 27 GB/s against 79 for plain nested loops (bf16,
// 1M elements, one Zen 5 core). Outputs of 8 MiB and more whose rows are whole aligned lines go
// out by streaming stores, visiting the rows in the source's order (sequential reads; the
// stores need no locality): fp32 4M 22 -> 73 GB/s in that harness. Returns false when the
// layout is not that case.
template <typename U>
bool copy_short_rows(const U* x, U* y, const Shape& sizes, const Shape& src_st, const Shape& dst_st) {
  constexpr int64_t kMaxRowBytes = 256;
  constexpr int64_t es = int64_t(sizeof(U));
  Shape shape;
  std::array<Shape, 2> st;
  coalesce_dims<2>(sizes, {dst_st, src_st}, shape, st);
  const int64_t nd = int64_t(shape.size()), last = nd - 1;
  if (nd < 2 || st[0][size_t(last)] != 1 || st[1][size_t(last)] != 1 || shape[size_t(last)] * es > kMaxRowBytes)
    return false;
  const int64_t row_bytes = shape[size_t(last)] * es;
  int64_t numel = 1;
  bool lines = row_bytes % 64 == 0 && (reinterpret_cast<uintptr_t>(y) & 63) == 0;
  for (int64_t d = 0; d < nd; ++d) {
    numel *= shape[size_t(d)];
    if (d < last) lines = lines && (st[0][size_t(d)] * es) % 64 == 0;
  }
  if (numel == 0) return true;
  const bool stream = has_block64_transpose<U> && lines && numel * es >= kStreamPermutedBytes;
  // The outer dims, outermost first: the destination's order, or the source's when streaming.
  std::vector<int64_t> order(static_cast<size_t>(last));
  for (int64_t d = 0; d < last; ++d) order[size_t(d)] = d;
  if (stream)
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return st[1][size_t(a)] > st[1][size_t(b)]; });
  const int64_t run_dim = order.back(), run = shape[size_t(run_dim)];
  const int64_t ys = st[0][size_t(run_dim)] * es, xs = st[1][size_t(run_dim)] * es;
  const int64_t rows = numel / shape[size_t(last)];
  const char* xb = reinterpret_cast<const char*>(x);
  char* yb = reinterpret_cast<char*>(y);
  parallel_for(0, rows, std::max<int64_t>(1, kParallelGrain / shape[size_t(last)]), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e;) {
      // Row r is element i0 of the run at outer index r / run.
      int64_t rem = r / run, xo = 0, yo = 0;
      const int64_t i0 = r % run, i1 = std::min(run, i0 + (e - r));
      for (int64_t k = last - 2; k >= 0; --k) {
        const size_t d = size_t(order[size_t(k)]);
        const int64_t i = rem % shape[d];
        rem /= shape[d];
        xo += i * st[1][d];
        yo += i * st[0][d];
      }
      move_short_rows(xb + xo * es + i0 * xs, xs, yb + yo * es + i0 * ys, ys, i1 - i0, row_bytes, stream);
      r += i1 - i0;
    }
    if (stream) streaming_stores_done();  // before anyone reads y
  });
  return true;
}

// A copy whose destination rows are short and strided in the source while the source runs
// contiguously along another dim (pixel shuffle's [.., w, r] from [.., r, w], NCHW -> NHWC of a
// few channels; three of 2 or 4 bytes on AVX-512: copy_three_channels, below): rows taken along
// the source's contiguous dim instead, a unit-stride read and a
// strided write each, so the per-row set-up spreads over w elements rather than r (pixel
// shuffle by 2, fp32: 4.8 GB/s through rows of 2). Returns false when the layout is not that case.
template <typename U>
bool copy_along_source_rows(const U* x, U* y, const Shape& sizes, const Shape& src_st, const Shape& dst_st) {
  MovedLastDim layout(sizes, src_st, dst_st);
  const Shape& shape = layout.shape;
  const std::array<Shape, 2>& st = layout.st;
  const int64_t nd = layout.last + 1, m = layout.m;
  if (m < 0 || shape[size_t(layout.last)] >= 8 || shape[size_t(m)] < 8) return false;
  // m moves to the end: the rows' dim.
  Shape rshape;
  std::array<Shape, 2> rst;
  for (int64_t d = 0; d < nd; ++d)
    if (d != m) {
      rshape.push_back(shape[size_t(d)]);
      for (size_t k = 0; k < 2; ++k) rst[k].push_back(st[k][size_t(d)]);
    }
  rshape.push_back(shape[size_t(m)]);
  for (size_t k = 0; k < 2; ++k) rst[k].push_back(st[k][size_t(m)]);
  for_each_row<2>(rshape, rst, [&](auto off, int64_t n, auto row_st) {
    U* yo = y + off[0];
    const U* xo = x + off[1];
    for (int64_t i = 0; i < n; ++i) yo[i * row_st[0]] = xo[i];
  });
  return true;
}

// A copy between the planar and the interleaved layout of three channels (NCHW <-> NHWC of an
// RGB batch): a channel dim of size 3 and a pixel dim along which the planar side has unit
// stride and the interleaved side stride 3 (unit stride along the channels). Each index of the
// other dims is one row of pixels (for_each_row spreads the rows, or pieces of few long ones,
// over the threads), moved by channel_interleave.h's permutes. [64, 3, 32, 32] -> NHWC and back,
// one Zen 5 core: fp32 59 -> 21-27 us, bf16 58 -> 10-14 us; through copy_along_source_rows each
// element was one strided store. Returns false when the layout is not that case, or the build
// has no such permutes for U.
template <typename U>
bool copy_three_channels(const U* x, U* y, const Shape& sizes, const Shape& src_st, const Shape& dst_st) {
  if constexpr (!has_channel_interleave<U>) {
    return false;
  } else {
    Shape shape;
    std::array<Shape, 2> st;  // y's, x's
    coalesce_dims<2>(sizes, {dst_st, src_st}, shape, st);
    const size_t nd = shape.size();
    size_t c = nd, p = nd, inter = 0;  // the channel dim, the pixel dim, the interleaved side
    for (size_t a = 0; a < nd && c == nd; ++a)
      for (size_t b = 0; b < nd && c == nd && shape[a] == 3; ++b)
        for (size_t s = 0; s < 2 && b != a && shape[b] >= 16; ++s)
          if (st[s][a] == 1 && st[s][b] == 3 && st[1 - s][b] == 1) {
            c = a;
            p = b;
            inter = s;
            break;
          }
    if (c == nd) return false;
    const int64_t cs = st[1 - inter][c];  // the planar side's channel stride
    // Rows along the pixel dim, one per index of the other dims (split further where they are few).
    Shape rshape;
    std::array<Shape, 2> rst;
    for (size_t d = 0; d <= nd; ++d) {
      const size_t e = d == nd ? p : d;
      if (d < nd && (d == c || d == p)) continue;
      rshape.push_back(shape[e]);
      for (size_t k = 0; k < 2; ++k) rst[k].push_back(st[k][e]);
    }
    for_each_row<2>(
        rshape, rst,
        [&](auto off, int64_t n, auto) {
          if (inter == 0)
            interleave_three(x + off[1], cs, y + off[0], n);
          else
            deinterleave_three(x + off[1], y + off[0], cs, n);
        },
        3);
    return true;
  }
}

// A copy between two layouts of one dtype (a transpose made contiguous): rows whose inner
// strides are both 1 are memcpy'd, other rows copy the elements as unsigned integers of their
// size (as Eigen's bf16 struct the strided loop stayed scalar).
template <typename U>
void copy_bits(const Tensor& src, const Tensor& dst) {
  const U* x = ptr<U>(src);
  U* y = ptr<U>(dst);
  const Shape src_st = broadcast_strides(src.sizes(), src.strides(), dst.sizes());
  if (copy_tiled(x, y, dst.sizes(), src_st, dst.strides())) return;
  if (copy_short_rows(x, y, dst.sizes(), src_st, dst.strides())) return;
  if (copy_three_channels(x, y, dst.sizes(), src_st, dst.strides())) return;
  if (copy_along_source_rows(x, y, dst.sizes(), src_st, dst.strides())) return;
  for_each_row<2>(dst.sizes(), {dst.strides(), src_st}, [&](auto off, int64_t n, auto st) {
    U* yo = y + off[0];
    const U* xo = x + off[1];
    if (st[0] == 1 && st[1] == 1) {  // rows over 256 bytes (shorter ones: copy_short_rows)
      std::memcpy(yo, xo, size_t(n) * sizeof(U));
      return;
    }
    if (st[0] == 1 && st[1] == 0) return fill_row(yo, n, xo[0]);  // a broadcast source (an expanded gradient)
    for (int64_t i = 0; i < n; ++i) yo[i * st[0]] = xo[i * st[1]];
  });
}

}  // namespace

bool kernels_use_avx512() {
#if defined(__AVX512F__)
  return true;
#else
  return false;
#endif
}

void copy(const Tensor& src, const Tensor& dst) {
  if (src.dtype() == dst.dtype()) {
    if (same_layout_contiguous(src, dst)) {
      // Over threads in whole lines (one core's copy reached half of two cores' out of L1), by
      // streaming stores where the copy is large enough to leave the caches anyway.
      const char* x = static_cast<const char*>(src.raw_data());
      char* y = static_cast<char*>(dst.raw_data());
      const int64_t bytes = dst.nbytes(), lines = (bytes + 63) / 64;
      const bool stream = stream_output(2 * bytes, lines * 16);
      parallel_for(0, lines, kParallelGrain / 16, [&](int64_t b, int64_t e) {
        const int64_t o = b * 64, m = std::min(bytes, e * 64) - o;
        if (stream)
          stream_copy(x + o, y + o, m);
        else
          std::memcpy(y + o, x + o, size_t(m));
      });
      return;
    }
    switch (element_size(dst.dtype())) {
      case 1:
        return copy_bits<uint8_t>(src, dst);
      case 2:
        return copy_bits<uint16_t>(src, dst);
      case 4:
        return copy_bits<uint32_t>(src, dst);
      case 8:
        return copy_bits<uint64_t>(src, dst);
      default:
        break;
    }
  }
  dispatch_all(src.dtype(), [&]<typename In>() {
    dispatch_all(dst.dtype(), [&]<typename Out>() {
      // fp32 <-> bf16/fp16, both contiguous (autocast's casts): one widening or rounding pass
      // straight between the tensors, not through an fp32 block copied on one side.
      if constexpr (kBlockType<In> && kBlockType<Out> && (std::is_same_v<In, float> != std::is_same_v<Out, float>)) {
        if (same_layout_contiguous(src, dst)) {
          const In* x = ptr<In>(src);
          Out* y = ptr<Out>(dst);
          parallel_write(y, dst.numel(), src.nbytes(), [&](Out* d, int64_t o, int64_t m) {
            if constexpr (std::is_same_v<In, float>)
              narrow_block(x + o, d, m);
            else
              widen_block(x + o, d, m);
          });
          return;
        }
      }
      // Between float types of at most 32 bits through float (exact) and the vector blocks.
      using Acc = std::conditional_t<kBlockType<In> && kBlockType<Out>, float, In>;
      unary_loop<In, Out, Acc>(src, dst, [](Acc v) { return v; });
    });
  });
}

void fill(const Tensor& dst, const Scalar& value) {
  dispatch_all(dst.dtype(), [&]<typename T>() {
    const T v = Dtypes::from_scalar<T>(value, "fill");
    T* y = ptr<T>(dst);
    if (dst.is_contiguous()) {
      parallel_write(y, dst.numel(), 0, [&](T* d, int64_t, int64_t m) {
        fill_row(d, m, v);  // 16-bit floats as bits: 8x the struct fill's speed
      });
      return;
    }
    for_each_row<1>(dst.sizes(), {dst.strides()}, [&](auto off, int64_t n, auto st) {
      for (int64_t i = 0; i < n; ++i) y[off[0] + i * st[0]] = v;
    });
  });
}

void unary(UnaryOp op, const Tensor& in, const Tensor& out, double a, double b) {
  elementwise::run_unary<Dtypes>(op, in.dtype(), a, b, [&]<typename In, typename Out, typename Acc>(auto f) {
    if constexpr (std::is_same_v<decltype(f), math::PowScalar>)
      math::with_pow_kind(f.e, [&](auto g) { unary_loop<In, Out, Acc>(in, out, g); });
    else
      unary_loop<In, Out, Acc>(in, out, f);
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, double s0, double s1) {
  elementwise::run_binary<Dtypes>(op, a.dtype(), s0, s1, [&]<typename In, typename Out, typename Acc>(auto f) {
    binary_loop<In, Out, Acc>(a, b, out, f);
  });
}

namespace {

// y[i] = c[i * SC] ? a[i * SA] : b[i * SB] with unit (1) or broadcast (0) strides fixed at compile
// time, on the values' bits (U: an unsigned type of T's size), so the select vectorizes: Eigen's
// bf16 is a struct, and a loop copying one stays scalar. Both values are loaded whatever the
// condition (a conditional load compiled to gathers: 4 GB/s), a broadcast one once.
template <typename U, int SC, int SA, int SB>
void where_unit(U* y, const uint8_t* c, const U* a, const U* b, int64_t n) {
  if (n <= 0) return;
  const U a0 = a[0], b0 = b[0];
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const U av = SA ? a[i] : a0, bv = SB ? b[i] : b0;
    y[i] = (SC ? c[i] : c[0]) != 0 ? av : bv;
  }
}

template <typename U>
void where_row(U* y, const uint8_t* c, const U* a, const U* b, int64_t n, int64_t sc, int64_t sa, int64_t sb) {
  const int key = (sc == 1 ? 4 : 0) + (sa == 1 ? 2 : 0) + (sb == 1 ? 1 : 0);
  if ((sc == 0 || sc == 1) && (sa == 0 || sa == 1) && (sb == 0 || sb == 1)) {
    switch (key) {
      case 0:
        return where_unit<U, 0, 0, 0>(y, c, a, b, n);
      case 1:
        return where_unit<U, 0, 0, 1>(y, c, a, b, n);
      case 2:
        return where_unit<U, 0, 1, 0>(y, c, a, b, n);
      case 3:
        return where_unit<U, 0, 1, 1>(y, c, a, b, n);
      case 4:
        return where_unit<U, 1, 0, 0>(y, c, a, b, n);
      case 5:
        return where_unit<U, 1, 0, 1>(y, c, a, b, n);
      case 6:
        return where_unit<U, 1, 1, 0>(y, c, a, b, n);
      default:
        return where_unit<U, 1, 1, 1>(y, c, a, b, n);
    }
  }
  for (int64_t i = 0; i < n; ++i) y[i] = c[i * sc] != 0 ? a[i * sa] : b[i * sb];
}

template <size_t Size>
using bits_t =
    std::conditional_t<Size == 1, uint8_t,
                       std::conditional_t<Size == 2, uint16_t, std::conditional_t<Size == 4, uint32_t, uint64_t>>>;

}  // namespace

// out: any strides; cond (bool), a, b (out's dtype): broadcast to out (0 strides), e.g. a
// [1, 1, T, T] mask over [B, H, T, T] scores, which coalesces to rows of T * T unit-stride elements.
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  {
    const Tensor rc = along_rows(cond, out), ra = along_rows(a, out), rb = along_rows(b, out);
    if (rc.raw_data() != cond.raw_data() || ra.raw_data() != a.raw_data() || rb.raw_data() != b.raw_data())
      return where(rc, ra, rb, out);
  }
  dispatch_all(out.dtype(), [&]<typename T>() {
    using U = bits_t<sizeof(T)>;
    static_assert(sizeof(U) == sizeof(T));
    const auto* pc = static_cast<const uint8_t*>(cond.raw_data());
    const U* pa = static_cast<const U*>(a.raw_data());
    const U* pb = static_cast<const U*>(b.raw_data());
    U* y = static_cast<U*>(out.raw_data());
    Shape sc = broadcast_strides(cond.sizes(), cond.strides(), out.sizes());
    Shape sa = broadcast_strides(a.sizes(), a.strides(), out.sizes());
    Shape sb = broadcast_strides(b.sizes(), b.strides(), out.sizes());
    // Long rows of a large output by streaming stores (a mask over [B, H, T, T] scores).
    const bool stream = stream_rows(out, cond.nbytes() + a.nbytes() + b.nbytes());
    for_each_row<4>(out.sizes(), {out.strides(), sc, sa, sb}, [&](auto off, int64_t n, auto st) {
      if (stream && st[0] == 1 && n * int64_t(sizeof(U)) >= kStreamRowBytes) {
        write_streamed(y + off[0], n, [&](U* d, int64_t o, int64_t m) {
          where_row(d, pc + off[1] + o * st[1], pa + off[2] + o * st[2], pb + off[3] + o * st[3], m, st[1], st[2],
                    st[3]);
        });
        return;
      }
      if (st[0] == 1) {
        where_row(y + off[0], pc + off[1], pa + off[2], pb + off[3], n, st[1], st[2], st[3]);
        return;
      }
      for (int64_t i = 0; i < n; ++i)
        y[off[0] + i * st[0]] = pc[off[1] + i * st[1]] != 0 ? pa[off[2] + i * st[2]] : pb[off[3] + i * st[3]];
    });
  });
}

}  // namespace mantissa::cpu
