// operator<< for tensors, following PyTorch's layout (torch/_tensor_str.py):
//   tensor([[1.0000, 2.5000],
//           [3.0000, 4.0000]], dtype=torch.float16)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace mantissa {

namespace {

// PyTorch's _Formatter: one column width for every element, integer-valued floats as "1.",
// scientific notation when the nonzero finite magnitudes span more than 1000x or exceed 1e8
// (or, with fractions, go below 1e-4). Zeros and non-finite values do not set the width.
struct Formatter {
  DType dtype = DType::Float32;
  bool int_mode = true, sci = false;
  size_t width = 1;

  std::string floating(double v) const {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[64];
    if (sci)
      std::snprintf(buf, sizeof buf, "%.4e", v);
    else if (int_mode)
      std::snprintf(buf, sizeof buf, "%.0f.", v);
    else
      std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
  }
  std::string integral(int64_t v) const {
    if (dtype == DType::Bool) return v ? "True" : "False";
    return std::to_string(v);
  }
};

template <typename Elem>
void print_rec(std::ostream& os, const Shape& s, size_t dim, size_t& pos, const Formatter& f, Elem elem, int indent) {
  if (dim == s.size()) {
    std::string str = elem(pos++);
    os << std::string(f.width > str.size() ? f.width - str.size() : 0, ' ') << str;
    return;
  }
  os << "[";
  for (int64_t i = 0; i < s[dim]; ++i) {
    if (i) {
      os << ",";
      if (dim + 1 < s.size())
        os << std::string(s.size() - dim - 1, '\n') << std::string(size_t(indent + 1), ' ');
      else
        os << " ";
    }
    print_rec(os, s, dim + 1, pos, f, elem, indent + 1);
  }
  os << "]";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  Formatter f;
  f.dtype = t.dtype();
  std::vector<double> dv;
  std::vector<int64_t> iv;
  const bool fl = is_floating(t.dtype());
  if (fl) {
    dv = t.to_vector<double>();
    double lo = INFINITY, hi = 0;
    for (double x : dv) {
      if (!std::isfinite(x) || x == 0) continue;
      if (x != std::ceil(x)) f.int_mode = false;
      lo = std::min(lo, std::fabs(x));
      hi = std::max(hi, std::fabs(x));
    }
    if (hi > 0) {
      f.sci = hi / lo > 1000.0 || hi > 1e8 || (!f.int_mode && lo < 1e-4);
      for (double x : dv)
        if (std::isfinite(x) && x != 0) f.width = std::max(f.width, f.floating(x).size());
    }
  } else {
    iv = t.to_vector<int64_t>();  // exact for every integer width
    for (int64_t x : iv) f.width = std::max(f.width, f.integral(x).size());
  }
  auto elem = [&](size_t i) { return fl ? f.floating(dv[i]) : f.integral(iv[i]); };
  os << "tensor(";
  size_t pos = 0;
  if (t.dim() == 0)
    os << elem(0);
  else
    print_rec(os, t.sizes(), 0, pos, f, elem, 7);
  const DType d = t.dtype();
  if (d != DType::Float32 && d != DType::Int64 && d != DType::Bool) os << ", dtype=torch." << dtype_name(d);
  if (!t.device().is_cpu()) os << ", device='" << t.device().str() << "'";
  if (t.requires_grad()) os << (t.is_leaf() ? ", requires_grad=True" : ", grad_fn=<" + std::string("node") + ">");
  return os << ")";
}

}  // namespace mantissa
