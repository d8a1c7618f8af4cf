#include "core/shape.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace mantissa {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

int64_t shape_numel(const Shape& s, const char* op) {
  // `span` (zeros counted as 1) bounds every contiguous stride: a shape like [0, 2^62, 4]
  // holds no elements but its strides would still overflow.
  int64_t n = 1, span = 1;
  bool overflow = false;
  for (int64_t v : s) {
    overflow |= __builtin_mul_overflow(n, v, &n);
    overflow |= __builtin_mul_overflow(span, std::max<int64_t>(v, 1), &span);
  }
  MT_CHECK(!overflow, op, "sizes ", shape_str(s),
           " overflow int64 (the product of the sizes, zeros counted as 1, must stay below 2^63)");
  return n;
}

int64_t checked_numel(const Shape& s, const char* op) {
  for (int64_t v : s) MT_CHECK(v >= 0, op, "negative dimension in shape ", shape_str(s));
  return shape_numel(s, op);
}

Shape contiguous_strides(const Shape& sizes, const char* op) {
  Shape st(sizes.size());
  int64_t acc = 1;
  for (int64_t i = int64_t(sizes.size()) - 1; i >= 0; --i) {
    st[size_t(i)] = acc;
    MT_CHECK(!__builtin_mul_overflow(acc, std::max<int64_t>(sizes[size_t(i)], 1), &acc), op, "sizes ", shape_str(sizes),
             " overflow int64 (the product of the sizes, zeros counted as 1, must stay below 2^63)");
  }
  return st;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);
  MT_CHECK(dim >= -n && dim < n, op, "dimension ", dim, " out of range for a tensor of ", ndim,
           " dimensions (expected in [", -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    MT_CHECK(da == db || da == 1 || db == 1, op, "shapes ", shape_str(a), " and ", shape_str(b),
             " cannot be broadcast together (dimension ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> reduction_dims(const Shape& dims, int64_t ndim, const char* op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t i = 0; i < ndim; ++i) out.push_back(i);
    return out;
  }
  for (int64_t d : dims) out.push_back(wrap_dim(d, ndim, op));
  std::sort(out.begin(), out.end());
  MT_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), op, "dimension repeated in ", shape_str(dims));
  if (ndim == 0) out.clear();
  return out;
}

Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& target) {
  Shape out(target.size(), 0);
  size_t lead = target.size() - sizes.size();
  for (size_t i = 0; i < sizes.size(); ++i) out[lead + i] = (sizes[i] == 1 && target[lead + i] != 1) ? 0 : strides[i];
  return out;
}

bool is_permuted_dense(const Shape& sizes, const Shape& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dims longer than 1
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1) dims.emplace_back(strides[d], sizes[d]);
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

}  // namespace mantissa
