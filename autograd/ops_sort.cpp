// sort / argsort / topk along one dim. The permutation is found on the host (each row sorted by
// value and index; a device tensor is copied down once and its indices copied back), and the
// values are gathered from x with the differentiable gather, so backward scatters the
// gradient back to the sorted positions on any device. NaN sorts above every number, as in
// PyTorch (last ascending, first descending); ties keep their input order (stable).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "autograd/op_helpers.h"

namespace mantissa {

using namespace detail;

namespace {

constexpr int64_t kBlock = 16;
constexpr int64_t kInsertionMax = 32;         // larger k: std::partial_sort (insertion costs k per kept element)
constexpr int64_t kRadixMin = 256;            // rows this long sort 32-bit keys by radix, not std::sort
constexpr int64_t kThreadedElements = 32768;  // fewer elements sort on the calling thread

// Unsigned keys in the sort's ascending order: key(a) < key(b) iff a sorts before b by value,
// NaN (any payload) above every number, -0 equal to 0. Floats by their sign-flipped bits.
uint32_t sort_key(float v) {
  if (std::isnan(v)) return ~uint32_t(0);
  const uint32_t u = std::bit_cast<uint32_t>(v == 0.0f ? 0.0f : v);
  return u >> 31 ? ~u : u | (uint32_t(1) << 31);
}
uint64_t sort_key(double v) {
  if (std::isnan(v)) return ~uint64_t(0);
  const uint64_t u = std::bit_cast<uint64_t>(v == 0.0 ? 0.0 : v);
  return u >> 63 ? ~u : u | (uint64_t(1) << 63);
}
uint64_t sort_key(int64_t v) { return uint64_t(v) ^ (uint64_t(1) << 63); }

// One element of a row in sort order: key, then index (the stable order). 32-bit keys pack
// with the index into one uint64, one comparison per step of std::sort.
template <typename K>
struct Item {
  uint64_t key;
  int64_t i;
  Item(uint64_t k, int64_t index) : key(k), i(index) {}
  bool operator<(const Item& o) const { return key != o.key ? key < o.key : i < o.i; }
  int64_t index() const { return i; }
  K sort_key() const { return K(key); }
};
template <>
struct Item<uint32_t> {
  uint64_t packed;
  Item(uint32_t k, int64_t index) : packed(uint64_t(k) << 32 | uint64_t(index)) {}
  bool operator<(const Item& o) const { return packed < o.packed; }
  int64_t index() const { return int64_t(packed & 0xffffffffu); }
  uint32_t sort_key() const { return uint32_t(packed >> 32); }
};

// Sorts items by their keys, a byte at a time from the lowest (LSD radix sort). Each pass is
// stable, so equal keys keep their index order. A byte that every key shares moves nothing and is
// skipped (small int64 values sort in one or two passes).
template <typename K>
void radix_sort(std::vector<Item<K>>& items, std::vector<Item<K>>& scratch) {
  constexpr int kBytes = int(sizeof(K));
  const size_t n = items.size();
  scratch.resize(n, Item<K>(0, 0));
  size_t count[kBytes][256] = {};
  for (const Item<K>& it : items) {
    const K key = it.sort_key();
    for (int b = 0; b < kBytes; ++b) ++count[b][(key >> (8 * b)) & 0xffu];
  }
  for (int b = 0; b < kBytes; ++b) {
    const size_t* c = count[b];
    if (c[(items[0].sort_key() >> (8 * b)) & 0xffu] == n) continue;
    size_t offset[256];
    size_t total = 0;
    for (int d = 0; d < 256; ++d) {
      offset[d] = total;
      total += c[d];
    }
    for (const Item<K>& it : items) scratch[offset[(it.sort_key() >> (8 * b)) & 0xffu]++] = it;
    items.swap(scratch);
  }
}

// Whether any of keys[0 .. kBlock) is below `worst`.
template <typename K>
bool any_below(const K* keys, K worst) {
  int any = 0;
#pragma omp simd reduction(| : any)
  for (int64_t j = 0; j < kBlock; ++j) any |= int(keys[j] < worst);
  return any != 0;
}

// The indices of the first k of each row of n in sorted order into out (k per row); v holds m
// rows of n contiguous. Each row becomes keys (descending: complemented), sorted with the index
// as the tie-break, so std::sort and the radix sort give the stable order. topk with a small k keeps the best k
// seen so far sorted while walking the row: a later element with an equal key loses (its index
// is larger), so one vector comparison with the worst kept key rejects whole blocks, and a kept
// one is inserted in order. One thread, [1024, 1024] fp32: topk(8) 4.1 ms with std::partial_sort
// of (value, index) pairs (PyTorch 2.1), 1.4 ms so; sort 65 ms with std::sort of pairs and a
// NaN-aware comparison, 44 ms with std::sort of packed items, 7.9 ms by radix (PyTorch 57 ms).
template <typename K, typename T>
void sort_rows(const T* v, int64_t m, int64_t n, int64_t k, bool descending, int64_t* out) {
  const K flip = descending ? ~K(0) : K(0);
  std::vector<K> keys(static_cast<size_t>(n));
  std::vector<Item<K>> items, scratch;
  items.reserve(size_t(k <= kInsertionMax ? k : n));
  for (int64_t r = 0; r < m; ++r) {
    const T* row = v + r * n;
    for (int64_t i = 0; i < n; ++i) keys[size_t(i)] = K(sort_key(row[i])) ^ flip;
    items.clear();
    if (k <= kInsertionMax && k < n) {
      if (k == 0) continue;
      for (int64_t i = 0; i < k; ++i) items.emplace_back(keys[size_t(i)], i);
      std::sort(items.begin(), items.end());  // back: the worst kept
      K worst = keys[size_t(items.back().index())];
      for (int64_t i = k; i < n;) {
        if (i + kBlock <= n && !any_below(keys.data() + i, worst)) {
          i += kBlock;
          continue;
        }
        for (const int64_t end = std::min(n, i + kBlock); i < end; ++i) {
          if (!(keys[size_t(i)] < worst)) continue;
          const Item<K> p(keys[size_t(i)], i);
          size_t at = items.size() - 1;
          for (; at > 0 && p < items[at - 1]; --at) items[at] = items[at - 1];
          items[at] = p;
          worst = keys[size_t(items.back().index())];
        }
      }
    } else {
      for (int64_t i = 0; i < n; ++i) items.emplace_back(keys[size_t(i)], i);
      if (n >= kRadixMin)
        radix_sort(items, scratch);
      else if (k < n)
        std::partial_sort(items.begin(), items.begin() + k, items.end());
      else
        std::sort(items.begin(), items.end());
    }
    for (int64_t i = 0; i < k; ++i) out[r * k + i] = items[size_t(i)].index();
  }
}

// sort_rows with the rows split over the OpenMP threads (each with its own buffers) when there
// are enough of them: a fork costs more than a few short rows.
template <typename K, typename T>
void sort_rows_threaded(const T* v, int64_t m, int64_t n, int64_t k, bool descending, int64_t* out) {
  const bool threaded = m > 1 && m * n >= kThreadedElements;
#pragma omp parallel if (threaded)
  {
#ifdef _OPENMP
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
#else
    const int64_t threads = 1, t = 0;
#endif
    const int64_t chunk = (m + threads - 1) / threads, b = std::min(m, t * chunk), e = std::min(m, b + chunk);
    if (b < e) sort_rows<K>(v + b * n, e - b, n, k, descending, out + b * k);
  }
}

// int64 indices of the first k of x's sorted order along dim (x has dim >= 1).
Tensor sort_indices(const Tensor& x, int64_t dim, bool descending, int64_t k) {
  const int64_t last = x.dim() - 1;
  Tensor rows = launch::contiguous(x.detach().transpose(dim, last));
  if (!rows.device().is_cpu()) rows = launch::to_device(rows, Device::cpu());
  const int64_t n = x.size(dim);
  Shape idx_sizes = rows.sizes();
  idx_sizes.back() = k;
  Tensor idx = make_tensor(idx_sizes, DType::Int64, Device::cpu());
  const int64_t m = n == 0 ? 0 : rows.numel() / n;
  if (is_floating(x.dtype())) {
    // fp32 and narrower compare exactly as fp32, fp64 as itself.
    const DType t = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
    Tensor v = launch::cast(rows, t);
    if (t == DType::Float64)
      sort_rows_threaded<uint64_t>(v.data_ptr<double>(), m, n, k, descending, idx.data_ptr<int64_t>());
    else if (n <= int64_t(0xffffffffu))  // the index fits beside a 32-bit key
      sort_rows_threaded<uint32_t>(v.data_ptr<float>(), m, n, k, descending, idx.data_ptr<int64_t>());
    else
      sort_rows_threaded<uint64_t>(v.data_ptr<float>(), m, n, k, descending, idx.data_ptr<int64_t>());
  } else {
    Tensor v = launch::cast(rows, DType::Int64);
    sort_rows_threaded<uint64_t>(v.data_ptr<int64_t>(), m, n, k, descending, idx.data_ptr<int64_t>());
  }
  Tensor r = launch::contiguous(idx.transpose(dim, last));
  return x.device().is_cpu() ? r : launch::to_device(r, x.device());
}

}  // namespace

ValuesIndices sort(const Tensor& x, int64_t dim_in, bool descending, bool /*stable*/) {
  MT_CHECK(x.defined(), "sort", "got an undefined tensor");
  const bool scalar = x.dim() == 0;
  Tensor xr = scalar ? x.reshape({1}) : x;
  const int64_t dim = wrap_dim(dim_in, xr.dim(), "sort");
  Tensor idx = sort_indices(xr, dim, descending, xr.size(dim));
  Tensor vals = gather(xr, dim, idx);
  if (scalar) return {vals.reshape({}), idx.reshape({})};
  return {vals, idx};
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  return sort(x.detach(), dim, descending, stable).indices;
}

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim_in, bool largest, bool sorted) {
  MT_CHECK(x.defined(), "topk", "got an undefined tensor");
  const bool scalar = x.dim() == 0;
  Tensor xr = scalar ? x.reshape({1}) : x;
  const int64_t dim = wrap_dim(dim_in, xr.dim(), "topk");
  MT_CHECK(k >= 0 && k <= xr.size(dim), "topk", "k = ", k, " is out of range for dim ", dim, " of size ", xr.size(dim),
           " (", describe({x}), ")");
  (void)sorted;  // always sorted: a sorted result is a valid unsorted one
  Tensor idx = sort_indices(xr, dim, largest, k);
  Tensor vals = gather(xr, dim, idx);
  if (scalar) return {vals.reshape({}), idx.reshape({})};
  return {vals, idx};
}

}  // namespace mantissa
