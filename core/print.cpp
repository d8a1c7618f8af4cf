// operator<< for tensors, in PyTorch's layout:
//   tensor([[1.0000, 2.5000],
//           [3.0000, 4.0000]], dtype=float16)
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/tensor.h"

namespace mantissa {

namespace {

struct Formatter {
  bool floating = false, all_int = true, sci = false;
  int width = 1;

  std::string fmt(double v) const {
    char buf[64];
    if (!floating) std::snprintf(buf, sizeof buf, "%lld", (long long)v);
    else if (std::isnan(v)) std::snprintf(buf, sizeof buf, "nan");
    else if (std::isinf(v)) std::snprintf(buf, sizeof buf, v > 0 ? "inf" : "-inf");
    else if (sci) std::snprintf(buf, sizeof buf, "%.4e", v);
    else if (all_int) std::snprintf(buf, sizeof buf, "%.0f.", v);
    else std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
  }
};

void print_rec(std::ostream& os, const std::vector<double>& v, const Shape& s, size_t dim, size_t& pos,
               const Formatter& f, int indent) {
  if (dim == s.size()) {
    std::string str = f.fmt(v[pos++]);
    os << std::string(size_t(std::max<int>(0, f.width - int(str.size()))), ' ') << str;
    return;
  }
  os << "[";
  for (int64_t i = 0; i < s[dim]; ++i) {
    if (i) {
      os << ",";
      if (dim + 1 < s.size()) os << std::string(s.size() - dim - 1, '\n') << std::string(size_t(indent + 1), ' ');
      else os << " ";
    }
    print_rec(os, v, s, dim + 1, pos, f, indent + 1);
  }
  os << "]";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  std::vector<double> v = t.to_vector<double>();
  Formatter f;
  f.floating = t.is_floating_point();
  double maxabs = 0, minabs = INFINITY;
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    if (x != std::floor(x)) f.all_int = false;
    maxabs = std::max(maxabs, std::fabs(x));
    if (x != 0) minabs = std::min(minabs, std::fabs(x));
  }
  f.sci = f.floating && (maxabs >= 1e8 || (minabs < 1e-4 && !f.all_int) || (maxabs / minabs > 1e3 && !f.all_int));
  for (double x : v) f.width = std::max<int>(f.width, int(f.fmt(x).size()));
  os << "tensor(";
  size_t pos = 0;
  if (t.dim() == 0) os << f.fmt(v[0]);
  else print_rec(os, v, t.sizes(), 0, pos, f, 7);
  if (t.dtype() != DType::Float32 && t.dtype() != DType::Int64) os << ", dtype=" << dtype_name(t.dtype());
  if (!t.device().is_cpu()) os << ", device='" << t.device().str() << "'";
  if (t.requires_grad()) os << (t.is_leaf() ? ", requires_grad=True" : ", grad_fn=<" + std::string("node") + ">");
  return os << ")";
}

}  // namespace mantissa
