// sort / argsort / topk along one dim. The permutation is found on the host (std::stable_sort
// of each row; a device tensor is copied down once and its indices copied back), and the
// values are gathered from x with the differentiable gather, so backward scatters the
// gradient back to the sorted positions on any device. NaN sorts above every number, as in
// PyTorch (last ascending, first descending); ties keep their input order (stable).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/op_helpers.h"

namespace mantissa {

using namespace detail;

namespace {

template <typename T>
void sort_rows(const Tensor& rows, int64_t n, bool descending, int64_t* out) {
  const std::vector<T> v = rows.to_vector<T>();
  const int64_t m = n == 0 ? 0 : int64_t(v.size()) / n;
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t r = 0; r < m; ++r) {
    const T* row = v.data() + r * n;
    std::iota(perm.begin(), perm.end(), int64_t(0));
    auto is_nan = [](T a) {
      if constexpr (std::is_floating_point_v<T>)
        return std::isnan(a);
      else
        return false;
    };
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t i, int64_t j) {
      const T a = row[i], b = row[j];
      if (descending) return !is_nan(b) && (is_nan(a) || a > b);
      return !is_nan(a) && (is_nan(b) || a < b);
    });
    std::copy(perm.begin(), perm.end(), out + r * n);
  }
}

// int64 indices of the sorted order of x along dim (x has dim >= 1).
Tensor sort_indices(const Tensor& x, int64_t dim, bool descending) {
  const int64_t last = x.dim() - 1;
  Tensor rows = launch::contiguous(x.detach().transpose(dim, last));
  if (!rows.device().is_cpu()) rows = launch::to_device(rows, Device::cpu());
  const int64_t n = x.size(dim);
  Tensor idx = make_tensor(rows.sizes(), DType::Int64, Device::cpu());
  if (is_floating(x.dtype()))
    sort_rows<double>(rows, n, descending, idx.data_ptr<int64_t>());
  else
    sort_rows<int64_t>(rows, n, descending, idx.data_ptr<int64_t>());
  Tensor r = launch::contiguous(idx.transpose(dim, last));
  return x.device().is_cpu() ? r : launch::to_device(r, x.device());
}

}  // namespace

ValuesIndices sort(const Tensor& x, int64_t dim_in, bool descending, bool /*stable*/) {
  MT_CHECK(x.defined(), "sort", "got an undefined tensor");
  const bool scalar = x.dim() == 0;
  Tensor xr = scalar ? x.reshape({1}) : x;
  const int64_t dim = wrap_dim(dim_in, xr.dim(), "sort");
  Tensor idx = sort_indices(xr, dim, descending);
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
  // Narrowed from the full sort (gather wants an index as large as its input).
  ValuesIndices all = sort(xr, dim, largest, true);
  Tensor vals = all.values.narrow(dim, 0, k), idx = launch::contiguous(all.indices.narrow(dim, 0, k));
  if (scalar) return {vals.reshape({}), idx.reshape({})};
  return {vals, idx};
}

}  // namespace mantissa
