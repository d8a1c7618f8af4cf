// Non-temporal ("streaming") stores for outputs too large to stay in cache. A plain store into a
// line that is not cached first reads the line (read-for-ownership), so an elementwise op on data
// beyond the caches moves 4 lines per 3 it needs (a * b: two reads, the destination's read and its
// write-back); a streaming store writes the line whole without reading it and leaves it out of the
// caches, where the op that reads it next would have found it had it fitted. worth_streaming says
// which of the two an op's size makes the faster.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace mantissa::cpu {

// The last-level cache's bytes (sysfs; 32 MiB where it cannot be read), or what
// set_streaming_cache_bytes set.
int64_t last_level_cache_bytes();

// For tests and benchmarks: the cache size worth_streaming assumes from now on (1 streams every
// op's output, a huge value none; 0 or less: the machine's again). Returns the previous override
// (0: none).
int64_t set_streaming_cache_bytes(int64_t bytes);

// Whether an op that reads and writes `footprint_bytes` in all (inputs and output) on `threads`
// threads should stream its output. Measured on Zen 5 (32 MiB L3), ops repeated on the same
// tensors and chains of ops each reading the last one's output: on one thread streaming wins once
// the footprint passes half the cache (a core's own fill bandwidth is the limit, and each plain
// store's line read spends a third of it: fp32 relu / mul of 4M, footprints of 32 / 48 MiB,
// 40 -> 54 / 25 -> 49 GB/s), and loses below it (bf16 relu of 4M, 16 MiB: 72 -> 49 GB/s, the
// data had stayed in cache). On two threads the cores' fill bandwidths add up and the memory's
// write bandwidth becomes the limit: streaming loses while the footprint fits the cache (fp32
// relu of 4M: 88 -> 55 GB/s) and wins beyond it (fp32 mul of 4M: 50 -> 80 GB/s; of 16M, 34 -> 52).
inline bool worth_streaming(int64_t footprint_bytes, int threads) {
  const int64_t cache = last_level_cache_bytes();
  return footprint_bytes > (threads > 1 ? cache : cache / 2);
}

// A permuting copy (a transpose, a head split) streams outputs of at least this many bytes
// whatever the thread count: its plain stores fill each destination line piecewise, which cost
// more than its line's read (fp32 transpose of 4M on two threads: 41 -> 61 GB/s streamed).
inline constexpr int64_t kStreamPermutedBytes = int64_t(8) << 20;

// dst[0, bytes) = src[0, bytes) by streaming stores; dst 64-byte aligned, bytes a multiple of 64.
inline void stream_lines(const void* src, void* dst, int64_t bytes) {
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
#if defined(__AVX512F__)
  for (int64_t k = 0; k < bytes; k += 64)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + k), _mm512_loadu_si512(s + k));
#elif defined(__AVX2__)
  for (int64_t k = 0; k < bytes; k += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + k), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + k)));
#else
  std::memcpy(d, s, size_t(bytes));
#endif
}

// Orders this thread's streaming stores before its later loads and stores (and so before another
// thread reads them after a barrier): they are weakly ordered.
inline void streaming_stores_done() {
#if defined(__AVX2__)
  _mm_sfence();
#endif
}

// y[0, n) computed by body(dst, offset, m), which writes elements [offset, offset + m) of the
// range to dst[0, m): the unaligned head straight into y, whole 64-byte lines through a 1 KiB
// buffer in L1 streamed out, the partial tail straight into y. Any kernel that writes a
// contiguous range streams through it unchanged. The buffer: GCC emits no streaming store from
// an `omp simd` loop, and 1 KiB stages ran as fast as streaming in the kernel's own loop (4 KiB
// stages ran up to 1.6x slower: their loads and stores met in the same cache sets).
template <typename Out, typename Body>
void write_streamed(Out* y, int64_t n, Body&& body) {
  constexpr int64_t es = int64_t(sizeof(Out)), kStage = 1024 / es;
  const auto addr = reinterpret_cast<uintptr_t>(y);
  if (64 % es != 0 || addr % es != 0) {
    body(y, int64_t(0), n);
    return;
  }
  const int64_t head = std::min(n, int64_t((64 - addr % 64) % 64) / es);
  if (head > 0) body(y, int64_t(0), head);
  alignas(64) unsigned char stage[1024];
  Out* buf = reinterpret_cast<Out*>(stage);
  const int64_t end = head + (n - head) * es / 64 * (64 / es);  // the whole lines end here
  for (int64_t s = head; s < end; s += kStage) {
    const int64_t m = std::min(kStage, end - s);
    body(buf, s, m);
    stream_lines(buf, y + s, m * es);
  }
  if (end < n) body(y + end, end, n - end);
  streaming_stores_done();
}

// memcpy whose destination's whole lines are written by streaming stores straight from src.
inline void stream_copy(const void* src, void* dst, int64_t bytes) {
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  const int64_t head = std::min(bytes, int64_t((64 - reinterpret_cast<uintptr_t>(d) % 64) % 64));
  std::memcpy(d, s, size_t(head));
  const int64_t body = (bytes - head) / 64 * 64;
  stream_lines(s + head, d + head, body);
  std::memcpy(d + head + body, s + head + body, size_t(bytes - head - body));
  streaming_stores_done();
}

}  // namespace mantissa::cpu
