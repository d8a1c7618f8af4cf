// sort / argsort / topk along one dim. The permutation is found on the host (each row sorted by
// value and index; a device tensor is copied down once and its indices copied back), and the
// values are gathered from x with the differentiable gather, so backward scatters the
// gradient back to the sorted positions on any device. NaN sorts above every number, as in
// PyTorch (last ascending, first descending); ties keep their input order (stable).
#include <algorithm>
#include <cmath>

#include "autograd/op_helpers.h"

namespace mantissa {

using namespace detail;

namespace {

// The indices of the first k of each row of n in sorted order into out (k per row). Each row as
// (value, index) pairs, ordered by value and then by index (NaN above every number), so that
// std::sort and std::partial_sort give the stable order; topk's k < n sorts only k (a full
// stable sort of index permutations through the values made topk(8) of [1024, 1024] 28x
// PyTorch's time).
template <typename T>
void sort_rows(const Tensor& rows, int64_t n, int64_t k, bool descending, int64_t* out) {
  const std::vector<T> v = rows.to_vector<T>();
  const int64_t m = n == 0 ? 0 : int64_t(v.size()) / n;
  std::vector<std::pair<T, int64_t>> keyed(static_cast<size_t>(n));
  auto is_nan = [](T a) {
    if constexpr (std::is_floating_point_v<T>)
      return std::isnan(a);
    else
      return false;
  };
  auto before = [&](const std::pair<T, int64_t>& p, const std::pair<T, int64_t>& q) {
    const bool pn = is_nan(p.first), qn = is_nan(q.first);
    if (pn != qn) return descending ? pn : qn;
    if (!pn && p.first != q.first) return descending ? p.first > q.first : p.first < q.first;
    return p.second < q.second;
  };
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t i = 0; i < n; ++i) keyed[size_t(i)] = {v[size_t(r * n + i)], i};
    if (k < n)
      std::partial_sort(keyed.begin(), keyed.begin() + k, keyed.end(), before);
    else
      std::sort(keyed.begin(), keyed.end(), before);
    for (int64_t i = 0; i < k; ++i) out[r * k + i] = keyed[size_t(i)].second;
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
  if (is_floating(x.dtype()))
    sort_rows<double>(rows, n, k, descending, idx.data_ptr<int64_t>());
  else
    sort_rows<int64_t>(rows, n, k, descending, idx.data_ptr<int64_t>());
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
