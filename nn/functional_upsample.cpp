// interpolate (nearest, linear, bilinear), torch 1.13's F.interpolate semantics. The map is
// linear in x: recorded as a pair of ops (A and its adjoint A^T) that are each other's
// backward, as the average pools, so every order of derivative is available.
#include <cmath>
#include <sstream>

#include "nn/functional_detail.h"
#include "nn/upsample.h"

namespace mantissa::nn {

using namespace detail;

// torch 1.13's CUDA autocast lists no upsample op (they run in the input's dtype); its CPU
// autocast casts them to fp32. Mantissa follows the CUDA lists for fp16: PassThrough.
MT_DECLARE_CAST_POLICY(interpolate, PassThrough);

namespace {

std::string list_str(const std::vector<double>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}
std::string list_str(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

// x: [N, C, IH, IW] (or the [N, C, 1, L] view of [N, C, L]) -> [N, C, OH, OW]; adjoint: back.
Tensor upsample_apply(const Tensor& x, const UpsampleGeometry& g, bool adjoint) {
  Shape out = adjoint ? Shape{g.N, g.C, g.IH, g.IW} : Shape{g.N, g.C, g.OH, g.OW};
  Tensor y = make_tensor(out, x.dtype(), x.device());
  if (y.numel()) {
    if (adjoint)
      kernel(x, "interpolate", &NnKernels::upsample_backward)(launch::contiguous(x), y, g);
    else
      kernel(x, "interpolate", &NnKernels::upsample)(launch::contiguous(x), y, g);
  }
  if (needs_grad({x}))
    record(adjoint ? "interpolate_backward" : "interpolate", {x}, y,
           [g, adjoint](const Tensor& gy, auto&) { return Grads{upsample_apply(gy, g, !adjoint)}; });
  return y;
}

}  // namespace

namespace functional {

Tensor interpolate(const Tensor& x0, const InterpolateOptions& o) {
  const char* op = "interpolate";
  const std::string& mode = o.mode;
  MT_CHECK(mode == "nearest" || mode == "linear" || mode == "bilinear", op, "mode '", mode,
           "' is not supported (nearest, linear, bilinear)");
  const int64_t spatial = x0.dim() - 2;
  MT_CHECK(is_floating(x0.dtype()), op, "expected a floating-point input, got ", describe({x0}));
  if (mode == "nearest")
    MT_CHECK(spatial == 1 || spatial == 2, op, "mode 'nearest' expects a 3-D [N, C, L] or 4-D [N, C, H, W] input, got ",
             describe({x0}));
  if (mode == "linear") MT_CHECK(spatial == 1, op, "mode 'linear' expects a 3-D [N, C, L] input, got ", describe({x0}));
  if (mode == "bilinear")
    MT_CHECK(spatial == 2, op, "mode 'bilinear' expects a 4-D [N, C, H, W] input, got ", describe({x0}));
  MT_CHECK(!o.align_corners.has_value() || mode != "nearest", op,
           "align_corners is only valid for the linear modes (linear, bilinear), got mode 'nearest'");
  const bool has_size = !o.size.empty(), has_scale = !o.scale_factor.empty();
  MT_CHECK(has_size != has_scale, op,
           has_size ? "only one of size and scale_factor may be given, got size " + list_str(o.size) +
                          " and scale_factor " + list_str(o.scale_factor)
                    : std::string("either size or scale_factor must be given"),
           " (input ", describe({x0}), ")");
  // One value applies to every spatial dim (as torch's int / float arguments).
  auto per_dim = [&](auto v, const char* what) {
    MT_CHECK(v.size() == 1 || int64_t(v.size()) == spatial, op, what, " ", list_str(v), " must have 1 or ", spatial,
             " values for input ", describe({x0}));
    if (v.size() == 1) v.assign(size_t(spatial), v[0]);
    return v;
  };
  std::vector<int64_t> in_sizes(x0.sizes().begin() + 2, x0.sizes().end()), out_sizes;
  std::vector<double> scales(size_t(spatial), 0.0);
  if (has_size) {
    out_sizes = per_dim(o.size, "size");
  } else {
    scales = per_dim(o.scale_factor, "scale_factor");
    for (int64_t d = 0; d < spatial; ++d) {
      MT_CHECK(scales[size_t(d)] > 0 && std::isfinite(scales[size_t(d)]), op, "scale_factor ", list_str(o.scale_factor),
               " must be positive and finite (input ", describe({x0}), ")");
      out_sizes.push_back(int64_t(std::floor(double(in_sizes[size_t(d)]) * scales[size_t(d)])));
    }
  }
  for (int64_t d = 0; d < spatial; ++d) {
    MT_CHECK(in_sizes[size_t(d)] > 0, op, "input ", describe({x0}), " has an empty spatial dim");
    MT_CHECK(out_sizes[size_t(d)] > 0, op, "output size ", list_str(out_sizes), " must be positive (input ",
             describe({x0}), has_scale ? ", scale_factor " + list_str(o.scale_factor) : std::string(), ")");
  }

  Tensor x = amp::autocast_one(autocast_interpolate, x0);
  UpsampleGeometry g;
  g.N = x.size(0), g.C = x.size(1);
  g.linear = mode != "nearest";
  g.align_corners = o.align_corners.value_or(false);
  g.one_d = spatial == 1;
  if (g.one_d) {
    g.IW = in_sizes[0], g.OW = out_sizes[0], g.scale_w = scales[0];
  } else {
    g.IH = in_sizes[0], g.IW = in_sizes[1], g.OH = out_sizes[0], g.OW = out_sizes[1];
    g.scale_h = scales[0], g.scale_w = scales[1];
  }
  Tensor x4 = g.one_d ? x.unsqueeze(2) : x;
  Tensor y = upsample_apply(x4, g, /*adjoint=*/false);
  return g.one_d ? y.squeeze(2) : y;
}

}  // namespace functional

Upsample::Upsample(const functional::InterpolateOptions& o) : options(o) {}
Tensor Upsample::forward(const Tensor& x) { return functional::interpolate(x, options); }
std::string Upsample::extra_repr() const {
  std::ostringstream os;
  if (!options.size.empty()) os << "size=" << list_str(options.size) << ", ";
  if (!options.scale_factor.empty()) os << "scale_factor=" << list_str(options.scale_factor) << ", ";
  os << "mode=" << options.mode;
  if (options.align_corners) os << ", align_corners=" << (*options.align_corners ? "True" : "False");
  return os.str();
}

}  // namespace mantissa::nn
