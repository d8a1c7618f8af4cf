#include "data/augment.h"

#include <cmath>
#include <cstring>

#include "autograd/tensor_methods.h"
#include "core/error.h"

namespace mantissa::data {

namespace {

// Where each output image reads from: out[i, j] = in[i + top, j' + left] with j' = j, or
// ow - 1 - j when flipped; reads outside the input give 0.
struct Window {
  int64_t top = 0, left = 0;
  bool flip = false;
};

// x: [N, C, H, W] contiguous -> out [N, C, oh, ow], one window per image.
template <typename T>
void gather_windows(const Tensor& x, Tensor& out, const std::vector<Window>& windows) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t oh = out.size(2), ow = out.size(3);
  const T* src = x.data_ptr<T>();
  T* dst = out.data_ptr<T>();
  for (int64_t img = 0; img < n; ++img) {
    const Window& win = windows[size_t(img)];
    for (int64_t ch = 0; ch < c; ++ch) {
      const T* plane = src + (img * c + ch) * h * w;
      T* o = dst + (img * c + ch) * oh * ow;
      for (int64_t i = 0; i < oh; ++i) {
        const int64_t si = i + win.top;
        T* row = o + i * ow;
        if (si < 0 || si >= h) {
          std::fill(row, row + ow, T(0));
          continue;
        }
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t sj = (win.flip ? ow - 1 - j : j) + win.left;
          row[j] = (sj < 0 || sj >= w) ? T(0) : plane[si * w + sj];
        }
      }
    }
  }
}

// Applies `windows` (one per image) to an image [C, H, W] or a batch [N, C, H, W].
Tensor apply_windows(const char* op, const Tensor& x0, int64_t oh, int64_t ow, const std::vector<Window>& windows) {
  const bool single = x0.dim() == 3;
  Tensor x = (single ? x0.unsqueeze(0) : x0).contiguous();
  Tensor out = make_tensor({x.size(0), x.size(1), oh, ow}, x.dtype(), x.device());
  switch (x.dtype()) {
    case kUInt8:
      gather_windows<uint8_t>(x, out, windows);
      break;
    case kFloat32:
      gather_windows<float>(x, out, windows);
      break;
    case kFloat64:
      gather_windows<double>(x, out, windows);
      break;
    default:
      MT_CHECK(false, op, "expected uint8, float32 or float64 images, got ", dtype_name(x.dtype()));
  }
  return single ? out.squeeze(0) : out;
}

// Checks an image [C, H, W] or batch [N, C, H, W] on the CPU; returns the image count.
int64_t check_images(const char* op, const Tensor& x) {
  MT_CHECK(x.defined(), op, "input tensor is undefined");
  MT_CHECK(x.dim() == 3 || x.dim() == 4, op, "expected an image [C, H, W] or a batch [N, C, H, W], got shape ",
           x.shape_str());
  MT_CHECK(x.device().is_cpu(), op, "runs on the CPU (the DataLoader's worker thread, before the upload); got a ",
           x.device().str(), " tensor");
  return x.dim() == 3 ? 1 : x.size(0);
}

// Uniform in [0, n], from 53 random bits (deterministic on every platform).
int64_t draw_offset(Generator& gen, int64_t n) { return std::min(n, int64_t(gen.uniform() * double(n + 1))); }

}  // namespace

RandomCrop::RandomCrop(int64_t size, int64_t padding) : size_(size), padding_(padding) {
  MT_CHECK(size > 0, "RandomCrop", "size must be positive, got ", size);
  MT_CHECK(padding >= 0, "RandomCrop", "padding must be non-negative, got ", padding);
}

Tensor RandomCrop::operator()(const Tensor& x, Generator& gen) const {
  const int64_t n = check_images("RandomCrop", x);
  const int64_t h = x.size(-2), w = x.size(-1);
  MT_CHECK(h + 2 * padding_ >= size_ && w + 2 * padding_ >= size_, "RandomCrop", "a ", size_, "x", size_,
           " crop does not fit images of shape ", x.shape_str(), " padded by ", padding_);
  std::vector<Window> windows(static_cast<size_t>(n));
  for (Window& win : windows) {
    win.top = draw_offset(gen, h + 2 * padding_ - size_) - padding_;
    win.left = draw_offset(gen, w + 2 * padding_ - size_) - padding_;
  }
  return apply_windows("RandomCrop", x, size_, size_, windows);
}

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  MT_CHECK(p >= 0 && p <= 1, "RandomHorizontalFlip", "p must be in [0, 1], got ", p);
}

Tensor RandomHorizontalFlip::operator()(const Tensor& x, Generator& gen) const {
  const int64_t n = check_images("RandomHorizontalFlip", x);
  std::vector<Window> windows(static_cast<size_t>(n));
  for (Window& win : windows) win.flip = gen.uniform() < p_;
  return apply_windows("RandomHorizontalFlip", x, x.size(-2), x.size(-1), windows);
}

Pad::Pad(int64_t padding) : padding_(padding) {
  MT_CHECK(padding >= 0, "Pad", "padding must be non-negative, got ", padding);
}

Tensor Pad::operator()(const Tensor& x) const {
  const int64_t n = check_images("Pad", x);
  std::vector<Window> windows(static_cast<size_t>(n), Window{.top = -padding_, .left = -padding_});
  return apply_windows("Pad", x, x.size(-2) + 2 * padding_, x.size(-1) + 2 * padding_, windows);
}

Example Compose::operator()(Example e, Generator& gen) const {
  for (const Step& step : steps_) e = step(std::move(e), gen);
  return e;
}

}  // namespace mantissa::data
