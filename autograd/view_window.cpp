// Windows of select / slice views and the gradient of their input (autograd/view_window.h).
#include "autograd/view_window.h"

#include <algorithm>
#include <tuple>

#include "autograd/ops.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/shape.h"

namespace mantissa::autograd {

namespace {

// The window's sizes, strides and offset in a tensor of the input's shape with `strides`.
std::tuple<Shape, Shape, int64_t> geometry(const ViewWindow& w, const Shape& strides, int64_t offset) {
  Shape sz = w.input_sizes, st = strides;
  offset += w.start * st[size_t(w.dim)];
  if (w.drops_dim) {
    sz.erase(sz.begin() + w.dim);
    st.erase(st.begin() + w.dim);
  } else {
    sz[size_t(w.dim)] = w.length;
    st[size_t(w.dim)] *= w.step;
  }
  return {sz, st, offset};
}

// True when the windows cover the input once each: spans of one dim, step 1, side by side.
bool tile(const std::vector<WindowGradient>& terms) {
  const ViewWindow& first = *terms[0].window;
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const WindowGradient& t : terms) {
    const ViewWindow& w = *t.window;
    if (w.dim != first.dim || (w.step != 1 && w.length > 1)) return false;
    spans.emplace_back(w.start, w.start + w.length);
  }
  std::sort(spans.begin(), spans.end());
  int64_t covered = 0;
  for (auto [begin, end] : spans) {
    if (begin != covered) return false;
    covered = end;
  }
  return covered == first.input_sizes[size_t(first.dim)];
}

}  // namespace

Shape gradient_layout(const Tensor& x) {
  Shape contiguous = contiguous_strides(x.sizes());
  if (x.numel() == 0 || x.is_contiguous()) return contiguous;
  std::vector<int64_t> order;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.size(d) != 1) order.push_back(d);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x.stride(a) > x.stride(b); });
  int64_t expected = 1;
  for (auto d = order.rbegin(); d != order.rend(); ++d) {
    if (x.stride(*d) != expected) return contiguous;
    expected *= x.size(*d);
  }
  Shape layout = x.strides();
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.size(d) == 1) layout[size_t(d)] = contiguous[size_t(d)];  // any stride does; keep it tidy
  return layout;
}

ViewWindow::ViewWindow(Shape input_sizes, int64_t dim, int64_t start, int64_t step, int64_t length, bool drops_dim)
    : input_sizes(std::move(input_sizes)),
      layout(contiguous_strides(this->input_sizes)),
      dim(dim),
      start(start),
      step(step),
      length(length),
      drops_dim(drops_dim) {}

Tensor ViewWindow::in(const Tensor& whole) const {
  auto [sz, st, offset] = geometry(*this, whole.strides(), whole.offset());
  return make_view(whole, sz, st, offset);
}

Tensor ViewWindow::scatter(const Tensor& g) const {
  auto [sz, st, offset] = geometry(*this, contiguous_strides(input_sizes), 0);
  return view_scatter(g, input_sizes, sz, st, offset);
}

Tensor sum_windows(const std::vector<WindowGradient>& terms, const Tensor& whole) {
  const Tensor& g0 = terms.front().grad;
  const ViewWindow& w0 = *terms.front().window;
  auto like_g0 = [&](const Tensor& t) { return t.dtype() == g0.dtype() && t.device() == g0.device(); };
  const bool alike = std::all_of(terms.begin(), terms.end(),
                                 [&](const WindowGradient& t) {
                                   return like_g0(t.grad) && t.window->input_sizes == w0.input_sizes;
                                 }) &&
                     (!whole.defined() || (like_g0(whole) && whole.sizes() == w0.input_sizes));
  if (!alike) {  // mixed dtypes promote as the sum of whole gradients does
    Tensor sum = whole;
    for (const WindowGradient& t : terms) {
      Tensor scattered = t.window->scatter(t.grad);
      sum = sum.defined() ? sum + scattered : scattered;
    }
    return sum;
  }
  const Backend& backend = backend_for(g0.device());
  Tensor storage = make_tensor({shape_numel(w0.input_sizes)}, g0.dtype(), g0.device());
  Tensor sum = make_view(storage, w0.input_sizes, w0.layout, 0);
  // Windows that tile the input are written once each: copied, or added to the whole gradient's
  // window (one pass over each element); others start from zeros or the whole gradient.
  const bool tiled = tile(terms);
  if (!tiled) {
    if (whole.defined())
      backend.copy(whole, sum);
    else
      backend.fill(storage, 0);
  }
  for (const WindowGradient& t : terms) {
    Tensor window = t.window->in(sum);
    MT_CHECK(t.grad.sizes() == window.sizes(), "backward", "the gradient of a view of shape ",
             shape_str(window.sizes()), " has shape ", t.grad.shape_str());
    if (!tiled)
      window.add_(t.grad);  // overlapping windows sum, in the order the gradients arrived
    else if (whole.defined())
      backend.binary(BinaryOp::Add, t.window->in(whole), t.grad, window, 0, 0);
    else
      backend.copy(t.grad, window);
  }
  return sum;
}

}  // namespace mantissa::autograd
