// The window of its input that a select / slice view is (narrow, split, chunk and unbind are
// built on them), kept so backward can write the view's gradient into the input's gradient.
// The engine gathers the windows of one tensor that reach it in one backward pass into one
// gradient of the whole tensor (sum_windows): no zero tensor per view, no sum of whole tensors,
// and laid out like the input, so a permuted input's gradient permutes back to a contiguous one.
#pragma once
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace mantissa::autograd {

struct ViewWindow {
  Shape input_sizes;
  Shape layout;     // strides the input's gradient gets: the input's own when dense, else contiguous
  int64_t dim = 0;  // elements start, start + step, ... (length of them) along dim
  int64_t start = 0;
  int64_t step = 1;
  int64_t length = 0;
  bool drops_dim = false;  // select: the view has no `dim`

  // Of an input of input_sizes: select(dim, i) is {sizes, dim, i, 1, 1, true}, a slice
  // {sizes, dim, start, step, n, false}; the layout is contiguous until set (gradient_layout).
  ViewWindow(Shape input_sizes, int64_t dim, int64_t start, int64_t step, int64_t length, bool drops_dim);
  // The window of `whole` (a tensor of input_sizes, any strides), as a view without autograd.
  Tensor in(const Tensor& whole) const;
  // g (the view's gradient) written into zeros of the input's shape; differentiable (create_graph).
  Tensor scatter(const Tensor& g) const;
};

struct WindowGradient {
  Tensor grad;  // the gradient of the view
  std::shared_ptr<const ViewWindow> window;
};

// x's strides when its elements fill their span of storage exactly, in any dimension order
// (contiguous, or a permutation of that); otherwise contiguous strides.
Shape gradient_layout(const Tensor& x);

// The gradient of the input: `whole` (a gradient of the whole input, or undefined) plus the
// views' gradients, each in its window. Without autograd; every term is of one input (same
// input_sizes).
Tensor sum_windows(const std::vector<WindowGradient>& terms, const Tensor& whole = {});

}  // namespace mantissa::autograd
