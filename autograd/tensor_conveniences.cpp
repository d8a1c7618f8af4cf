// The LibTorch conveniences of Tensor (core/tensor.h): index terms, mm/bmm and the
// comparison methods, each a spelling of existing differentiable ops.
#include <cstring>

#include "autograd/ops.h"
#include "core/shape.h"

namespace mantissa {

Tensor Tensor::index(Key, const std::vector<indexing::TensorIndex>& terms) const {
  using namespace indexing;
  int64_t named = 0, ellipses = 0;  // terms that consume a dim of *this; Ellipsis count
  for (const TensorIndex& t : terms) {
    if (std::holds_alternative<int64_t>(t.value()) || std::holds_alternative<Slice>(t.value())) ++named;
    if (std::holds_alternative<EllipsisIndex>(t.value())) ++ellipses;
  }
  MT_CHECK(ellipses <= 1, "index", "at most one Ellipsis, got ", ellipses);
  MT_CHECK(named <= dim(), "index", "too many indices (", named, ") for a tensor of shape ", shape_str());
  Tensor r = *this;
  int64_t d = 0;  // the dim of r the next term applies to
  for (const TensorIndex& t : terms) {
    const auto& v = t.value();
    if (const int64_t* i = std::get_if<int64_t>(&v)) {
      r = r.select(d, *i);
    } else if (const Slice* s = std::get_if<Slice>(&v)) {
      const int64_t n = r.size(d);
      r = r.slice(d, s->start.value_or(0), s->stop.value_or(n), s->step);
      ++d;
    } else if (std::holds_alternative<NoneIndex>(v)) {
      r = r.unsqueeze(d);
      ++d;
    } else {
      d += dim() - named;  // the dims no term names
    }
  }
  return r;
}

Tensor Tensor::mm(Key, const Tensor& o) const { return mantissa::mm(*this, o); }
Tensor Tensor::bmm(Key, const Tensor& o) const { return mantissa::bmm(*this, o); }

Tensor mm(const Tensor& a, const Tensor& b) {
  MT_CHECK(a.defined() && b.defined() && a.dim() == 2 && b.dim() == 2, "mm", "expected 2-D matrices, got ",
           a.defined() ? a.shape_str() : "undefined", " and ", b.defined() ? b.shape_str() : "undefined");
  return matmul(a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  MT_CHECK(a.defined() && b.defined() && a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0), "bmm",
           "expected 3-D batches [B, n, m] and [B, m, p] with one B, got ", a.defined() ? a.shape_str() : "undefined",
           " and ", b.defined() ? b.shape_str() : "undefined");
  return matmul(a, b);
}

namespace {
template <typename B>
Tensor compare_by_name(const char* op, const Tensor& a, const B& b) {
  if (!std::strcmp(op, "eq")) return a == b;
  if (!std::strcmp(op, "ne")) return a != b;
  if (!std::strcmp(op, "lt")) return a < b;
  if (!std::strcmp(op, "le")) return a <= b;
  if (!std::strcmp(op, "gt")) return a > b;
  return a >= b;  // "ge": the six names are core/tensor.h's
}
}  // namespace

Tensor Tensor::compare(Key, const char* op, const Tensor& o) const { return compare_by_name(op, *this, o); }
Tensor Tensor::compare(Key, const char* op, const Scalar& s) const { return compare_by_name(op, *this, s); }

}  // namespace mantissa
