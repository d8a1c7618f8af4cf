// Tensor: a value-semantic handle over shared TensorImpl state (storage, shape,
// strides, dtype, device, autograd metadata). Copying a Tensor copies the handle.
//
//   mt::Tensor x = mt::randn({2, 3}, {.requires_grad = true});
//   mt::Tensor y = (x * 2).sum();
//   y.backward();            // x.grad() is a tensor of 2s
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/scalar.h"

namespace mantissa {

using Shape = std::vector<int64_t>;
class Tensor;
namespace autograd {
struct AutogradMeta;  // core/autograd_meta.h: grad, grad_fn, hooks
struct Node;
}  // namespace autograd

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  std::shared_ptr<autograd::AutogradMeta> autograd;  // null until autograd touches it

  int64_t numel() const;
  bool is_contiguous() const;
  void* data() const { return static_cast<char*>(storage->data) + offset * static_cast<int64_t>(element_size(dtype)); }
};

// Options for factories: mt::zeros({2, 3}, {.dtype = mt::kHalf, .requires_grad = true}).
struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  bool requires_grad = false;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // --- metadata ---
  const Shape& sizes() const;
  const Shape& shape() const { return sizes(); }
  const Shape& strides() const;
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  int64_t offset() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  size_t nbytes() const { return size_t(numel()) * element_size(dtype()); }
  std::string shape_str() const;  // "[2, 3]"
  // Counts in-place writes to this tensor's storage (shared with its views).
  uint64_t version() const;
  void bump_version() const;

  // --- raw data (CPU tensors) ---
  void* raw_data() const;
  template <typename T>
  T* data_ptr() const {
    return static_cast<T*>(raw_data());
  }
  template <typename T>
  T item() const;  // the single value of a one-element tensor, converted to T
  template <typename T>
  std::vector<T> to_vector() const;  // all values in row-major order, converted to T

  // --- views and copies (differentiable) ---
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;
  // A copy on `device` (this tensor when already there). Synchronous with respect to the host
  // by default, as LibTorch's: once it returns, the source may be overwritten. With
  // non_blocking = true an upload from pinned memory (pin_memory()) only queues the DMA on the
  // device's current stream; kernels queued after it on that stream see the data, but the
  // source must not be refilled before the copy ran (the pinned allocator keeps a freed block
  // from being reused until then). Other copies ignore the flag.
  Tensor to(Device device, bool non_blocking = false) const;
  // A contiguous copy in page-locked host memory (this tensor if it already is one), so
  // that .to(Device::cuda(i), true) from it is an asynchronous DMA; without history. Without a
  // GPU there is no pinned memory and this is contiguous(). CPU tensors only.
  Tensor pin_memory() const;
  bool is_pinned() const;
  Tensor detach() const;  // shares storage, no history

  // --- autograd ---
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);
  bool is_leaf() const;
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  std::shared_ptr<autograd::Node> grad_fn() const;
  // Backpropagates from this tensor; `gradient` seeds it (required unless this is a scalar).
  void backward(const Tensor& gradient = {}, bool retain_graph = false, bool create_graph = false) const;
  // Hook called with the gradient of this tensor; may return a replacement (or an undefined tensor).
  void register_hook(std::function<Tensor(const Tensor&)> hook) const;
  void retain_grad() const;  // keep .grad on a non-leaf

  // --- reductions and common ops as methods (see ops.h for the full list) ---
  Tensor sum() const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor matmul(const Tensor& o) const;
  Tensor pow(const Scalar& e) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor abs() const;
  Tensor sqrt() const;
  Tensor neg() const;
  Tensor relu() const;

  // --- in-place (bump the version counter) ---
  Tensor& add_(const Tensor& o, const Scalar& alpha = 1);
  Tensor& add_(const Scalar& s);
  Tensor& sub_(const Tensor& o);
  Tensor& sub_(const Scalar& s);
  Tensor& mul_(const Tensor& o);
  Tensor& mul_(const Scalar& s);
  Tensor& div_(const Tensor& o);
  Tensor& div_(const Scalar& s);
  Tensor& clamp_(const Scalar& lo, const Scalar& hi);
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value);
  Tensor& zero_();
  Tensor& fill_(const Scalar& value);
  Tensor& copy_(const Tensor& src);  // broadcasts and converts dtype

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// --- factories ---
Tensor empty(const Shape& shape, const TensorOptions& opts = {});
Tensor zeros(const Shape& shape, const TensorOptions& opts = {});
Tensor ones(const Shape& shape, const TensorOptions& opts = {});
Tensor full(const Shape& shape, const Scalar& value, const TensorOptions& opts = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);
Tensor full_like(const Tensor& t, const Scalar& value);
Tensor scalar_tensor(const Scalar& value, const TensorOptions& opts = {});
Tensor arange(double start, double end, double step = 1, const TensorOptions& opts = {.dtype = DType::Int64});
Tensor arange(int64_t end, const TensorOptions& opts = {.dtype = DType::Int64});
Tensor linspace(double start, double end, int64_t steps, const TensorOptions& opts = {});
Tensor eye(int64_t n, const TensorOptions& opts = {});
// Copies `values` (row-major) into a new tensor of `shape` (empty: 1-D; use reshape({}) for 0-dim).
// Without options the dtype is T's (int64_t -> int64, double -> float64, ...); with options the
// values are converted to opts.dtype.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape = {});
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, const TensorOptions& opts);
// Copies shape_numel(shape) elements of `dtype` from `data` (row-major) into a new tensor.
Tensor from_blob(const void* data, const Shape& shape, DType dtype, const TensorOptions& opts = {});
inline Tensor tensor(std::initializer_list<float> v, const Shape& shape = {}) {
  return from_vector(std::vector<float>(v), shape);
}

// Internal: a new tensor (no autograd) of `shape`, contiguous.
Tensor make_tensor(const Shape& shape, DType dtype, Device device);
// Internal: a view of `base`'s storage with new geometry (no autograd).
Tensor make_view(const Tensor& base, const Shape& sizes, const Shape& strides, int64_t offset);

}  // namespace mantissa
