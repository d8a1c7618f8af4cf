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
#include "core/tensor_index.h"

namespace mantissa {

using Shape = std::vector<int64_t>;
class Tensor;
namespace autograd {
struct AutogradMeta;  // core/autograd_meta.h: grad, grad_fn, hooks
struct Node;
// Defined (empty) in autograd/tensor_methods.h; Tensor's autograd methods need it complete.
struct Methods;
template <class A>
constexpr bool methods_included = requires {
  sizeof(A);
};
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
  T item() const;       // the single value of a one-element tensor, converted to T
  Scalar item() const;  // the same as a Scalar: floating for floating dtypes, else integral
  template <typename T>
  std::vector<T> to_vector() const;  // all values in row-major order, converted to T

  // The methods below that take `class A` are defined by autograd/ (differentiable ops):
  // they compile only where autograd/tensor_methods.h is included (every autograd, nn and
  // optim header brings it through autograd/node.h), so a program on mantissa::core alone
  // that calls x.sum() fails to compile, naming autograd/ops.h, instead of failing to link.

  // --- views and copies (differentiable) ---
  template <class A = autograd::Methods>
  Tensor view(const Shape& shape) const {
    return view(key<A>(), shape);
  }
  template <class A = autograd::Methods>
  Tensor reshape(const Shape& shape) const {
    return reshape(key<A>(), shape);
  }
  template <class A = autograd::Methods>
  Tensor permute(const Shape& dims) const {
    return permute(key<A>(), dims);
  }
  template <class A = autograd::Methods>
  Tensor transpose(int64_t d0, int64_t d1) const {
    return transpose(key<A>(), d0, d1);
  }
  template <class A = autograd::Methods>
  Tensor t() const {
    return t(key<A>());
  }
  template <class A = autograd::Methods>
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const {
    return narrow(key<A>(), dim, start, length);
  }
  template <class A = autograd::Methods>
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const {
    return slice(key<A>(), dim, start, end, step);
  }
  template <class A = autograd::Methods>
  Tensor select(int64_t dim, int64_t index) const {
    return select(key<A>(), dim, index);
  }
  // Views along dim, as torch.Tensor.chunk / split / unbind (the free functions of autograd/ops.h).
  template <class A = autograd::Methods>
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const {
    return chunk(key<A>(), chunks, dim);
  }
  template <class A = autograd::Methods>
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const {
    return split(key<A>(), split_size, dim);
  }
  template <class A = autograd::Methods>
  std::vector<Tensor> split(const std::vector<int64_t>& sizes, int64_t dim = 0) const {
    return split(key<A>(), sizes, dim);
  }
  template <class A = autograd::Methods>
  std::vector<Tensor> unbind(int64_t dim = 0) const {
    return unbind(key<A>(), dim);
  }
  template <class A = autograd::Methods>
  Tensor expand(const Shape& shape) const {
    return expand(key<A>(), shape);
  }
  template <class A = autograd::Methods>
  Tensor expand_as(const Tensor& other) const {
    return expand<A>(other.sizes());
  }
  template <class A = autograd::Methods>
  Tensor squeeze() const {
    return squeeze(key<A>());
  }
  template <class A = autograd::Methods>
  Tensor squeeze(int64_t dim) const {
    return squeeze(key<A>(), dim);
  }
  template <class A = autograd::Methods>
  Tensor unsqueeze(int64_t dim) const {
    return unsqueeze(key<A>(), dim);
  }
  template <class A = autograd::Methods>
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const {
    return flatten(key<A>(), start_dim, end_dim);
  }
  template <class A = autograd::Methods>
  Tensor contiguous() const {
    return contiguous(key<A>());
  }
  template <class A = autograd::Methods>
  Tensor clone() const {
    return clone(key<A>());
  }
  template <class A = autograd::Methods>
  Tensor to(DType dtype) const {
    return to(key<A>(), dtype);
  }
  // A copy on `device` (this tensor when already there). Synchronous with respect to the host
  // by default, as LibTorch's: once it returns, the source may be overwritten. With
  // non_blocking = true an upload from pinned memory (pin_memory()) only queues the DMA on the
  // device's current stream; kernels queued after it on that stream see the data, but the
  // source must not be refilled before the copy ran (the pinned allocator keeps a freed block
  // from being reused until then). Other copies ignore the flag.
  template <class A = autograd::Methods>
  Tensor to(Device device, bool non_blocking = false) const {
    return to(key<A>(), device, non_blocking);
  }
  // A contiguous copy in page-locked host memory (this tensor if it already is one), so
  // that .to(Device::cuda(i), true) from it is an asynchronous DMA; without history. Without a
  // GPU there is no pinned memory and this is contiguous(). CPU tensors only.
  Tensor pin_memory() const;
  bool is_pinned() const;
  template <class A = autograd::Methods>
  Tensor detach() const {
    return detach(key<A>());
  }  // shares storage, no history

  // --- autograd ---
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);
  bool is_leaf() const;
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  std::shared_ptr<autograd::Node> grad_fn() const;
  // Backpropagates from this tensor; `gradient` seeds it (required unless this is a scalar).
  template <class A = autograd::Methods>
  void backward(const Tensor& gradient = {}, bool retain_graph = false, bool create_graph = false) const {
    return backward(key<A>(), gradient, retain_graph, create_graph);
  }
  // Hook called with the gradient of this tensor; may return a replacement (or an undefined tensor).
  template <class A = autograd::Methods>
  void register_hook(std::function<Tensor(const Tensor&)> hook) const {
    return register_hook(key<A>(), std::move(hook));
  }
  template <class A = autograd::Methods>
  void retain_grad() const {
    return retain_grad(key<A>());
  }
  // --- reductions and common ops as methods (see autograd/ops.h for the full list) ---
  template <class A = autograd::Methods>
  Tensor sum() const {
    return sum(key<A>());
  }
  template <class A = autograd::Methods>
  Tensor sum(const Shape& dims, bool keepdim = false) const {
    return sum(key<A>(), dims, keepdim);
  }
  template <class A = autograd::Methods>
  Tensor mean() const {
    return mean(key<A>());
  }
  template <class A = autograd::Methods>
  Tensor mean(const Shape& dims, bool keepdim = false) const {
    return mean(key<A>(), dims, keepdim);
  }
  template <class A = autograd::Methods>
  Tensor max() const {
    return max(key<A>());
  }
  template <class A = autograd::Methods>
  Tensor min() const {
    return min(key<A>());
  }
  template <class A = autograd::Methods>
  Tensor argmax(int64_t dim, bool keepdim = false) const {
    return argmax(key<A>(), dim, keepdim);
  }
  template <class A = autograd::Methods>
  Tensor matmul(const Tensor& o) const {
    return matmul(key<A>(), o);
  }
  template <class A = autograd::Methods>
  Tensor pow(const Scalar& e) const {
    return pow(key<A>(), e);
  }
  template <class A = autograd::Methods>
  Tensor exp() const {
    return exp(key<A>());
  }
  template <class A = autograd::Methods>
  Tensor log() const {
    return log(key<A>());
  }
  template <class A = autograd::Methods>
  Tensor abs() const {
    return abs(key<A>());
  }
  template <class A = autograd::Methods>
  Tensor sqrt() const {
    return sqrt(key<A>());
  }
  template <class A = autograd::Methods>
  Tensor neg() const {
    return neg(key<A>());
  }
  template <class A = autograd::Methods>
  Tensor relu() const {
    return relu(key<A>());
  }
  // --- LibTorch conveniences (differentiable) ---
  template <class A = autograd::Methods>
  Tensor operator[](int64_t i) const {  // select(0, i)
    return select(key<A>(), 0, i);
  }
  template <class A = autograd::Methods>
  Tensor index(std::initializer_list<indexing::TensorIndex> terms) const {  // core/tensor_index.h
    return index(key<A>(), std::vector<indexing::TensorIndex>(terms));
  }
  template <class A = autograd::Methods>
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> terms, const Tensor& value) {
    index(key<A>(), std::vector<indexing::TensorIndex>(terms)).copy_(value);
    return *this;
  }
  template <class A = autograd::Methods>
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> terms, const Scalar& value) {
    index(key<A>(), std::vector<indexing::TensorIndex>(terms)).fill_(value);
    return *this;
  }
  template <class A = autograd::Methods>
  Tensor mm(const Tensor& o) const {  // 2-D matmul
    return mm(key<A>(), o);
  }
  template <class A = autograd::Methods>
  Tensor bmm(const Tensor& o) const {  // 3-D batched matmul
    return bmm(key<A>(), o);
  }
  // Comparisons as methods (bool results): x.eq(y), x.lt(0.5), ...
#define MT_COMPARISON_METHOD(name)       \
  template <class A = autograd::Methods> \
  Tensor name(const Tensor& o) const {   \
    return compare(key<A>(), #name, o);  \
  }                                      \
  template <class A = autograd::Methods> \
  Tensor name(const Scalar& s) const {   \
    return compare(key<A>(), #name, s);  \
  }
  MT_COMPARISON_METHOD(eq)
  MT_COMPARISON_METHOD(ne)
  MT_COMPARISON_METHOD(lt)
  MT_COMPARISON_METHOD(le)
  MT_COMPARISON_METHOD(gt)
  MT_COMPARISON_METHOD(ge)
#undef MT_COMPARISON_METHOD
  // Compound assignment: in place, as LibTorch's (x += y is x.add_(y)).
  template <class A = autograd::Methods>
  Tensor& operator+=(const Tensor& o) {
    return add_(key<A>(), o, 1);
  }
  template <class A = autograd::Methods>
  Tensor& operator+=(const Scalar& s) {
    return add_(key<A>(), s);
  }
  template <class A = autograd::Methods>
  Tensor& operator-=(const Tensor& o) {
    return sub_(key<A>(), o);
  }
  template <class A = autograd::Methods>
  Tensor& operator-=(const Scalar& s) {
    return sub_(key<A>(), s);
  }
  template <class A = autograd::Methods>
  Tensor& operator*=(const Tensor& o) {
    return mul_(key<A>(), o);
  }
  template <class A = autograd::Methods>
  Tensor& operator*=(const Scalar& s) {
    return mul_(key<A>(), s);
  }
  template <class A = autograd::Methods>
  Tensor& operator/=(const Tensor& o) {
    return div_(key<A>(), o);
  }
  template <class A = autograd::Methods>
  Tensor& operator/=(const Scalar& s) {
    return div_(key<A>(), s);
  }
  // --- in-place (bump the version counter) ---
  template <class A = autograd::Methods>
  Tensor& add_(const Tensor& o, const Scalar& alpha = 1) {
    return add_(key<A>(), o, alpha);
  }
  template <class A = autograd::Methods>
  Tensor& add_(const Scalar& s) {
    return add_(key<A>(), s);
  }
  template <class A = autograd::Methods>
  Tensor& sub_(const Tensor& o) {
    return sub_(key<A>(), o);
  }
  template <class A = autograd::Methods>
  Tensor& sub_(const Scalar& s) {
    return sub_(key<A>(), s);
  }
  template <class A = autograd::Methods>
  Tensor& mul_(const Tensor& o) {
    return mul_(key<A>(), o);
  }
  template <class A = autograd::Methods>
  Tensor& mul_(const Scalar& s) {
    return mul_(key<A>(), s);
  }
  template <class A = autograd::Methods>
  Tensor& div_(const Tensor& o) {
    return div_(key<A>(), o);
  }
  template <class A = autograd::Methods>
  Tensor& div_(const Scalar& s) {
    return div_(key<A>(), s);
  }
  template <class A = autograd::Methods>
  Tensor& clamp_(const Scalar& lo, const Scalar& hi) {
    return clamp_(key<A>(), lo, hi);
  }
  template <class A = autograd::Methods>
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value) {
    return masked_fill_(key<A>(), mask, value);
  }
  template <class A = autograd::Methods>
  Tensor& zero_() {
    return zero_(key<A>());
  }
  template <class A = autograd::Methods>
  Tensor& fill_(const Scalar& value) {
    return fill_(key<A>(), value);
  }
  template <class A = autograd::Methods>
  Tensor& copy_(const Tensor& src) {
    return copy_(key<A>(), src);
  }  // broadcasts and converts dtype

 private:
  // The definitions (autograd/), reached through the methods above: Key cannot be made from
  // `{}` or 0, so x.sum({0}) or x.squeeze(0) never picks one of these.
  struct Key {
    explicit Key() = default;
  };
  template <class A>
  static Key key() {
    static_assert(autograd::methods_included<A>,
                  "this Tensor method is an autograd op: include autograd/ops.h (or mantissa.h) and link "
                  "mantissa::mantissa, not mantissa::core alone");
    return Key{};
  }
  Tensor view(Key, const Shape& shape) const;
  Tensor reshape(Key, const Shape& shape) const;
  Tensor permute(Key, const Shape& dims) const;
  Tensor transpose(Key, int64_t d0, int64_t d1) const;
  Tensor t(Key) const;
  Tensor narrow(Key, int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(Key, int64_t dim, int64_t start, int64_t end, int64_t step) const;
  Tensor select(Key, int64_t dim, int64_t index) const;
  std::vector<Tensor> chunk(Key, int64_t chunks, int64_t dim) const;
  std::vector<Tensor> split(Key, int64_t split_size, int64_t dim) const;
  std::vector<Tensor> split(Key, const std::vector<int64_t>& sizes, int64_t dim) const;
  std::vector<Tensor> unbind(Key, int64_t dim) const;
  Tensor expand(Key, const Shape& shape) const;
  Tensor squeeze(Key) const;
  Tensor squeeze(Key, int64_t dim) const;
  Tensor unsqueeze(Key, int64_t dim) const;
  Tensor flatten(Key, int64_t start_dim, int64_t end_dim) const;
  Tensor contiguous(Key) const;
  Tensor clone(Key) const;
  Tensor to(Key, DType dtype) const;
  Tensor to(Key, Device device, bool non_blocking) const;
  Tensor detach(Key) const;
  void backward(Key, const Tensor& gradient, bool retain_graph, bool create_graph) const;
  void register_hook(Key, std::function<Tensor(const Tensor&)> hook) const;
  void retain_grad(Key) const;
  Tensor sum(Key) const;
  Tensor sum(Key, const Shape& dims, bool keepdim) const;
  Tensor mean(Key) const;
  Tensor mean(Key, const Shape& dims, bool keepdim) const;
  Tensor max(Key) const;
  Tensor min(Key) const;
  Tensor argmax(Key, int64_t dim, bool keepdim) const;
  Tensor matmul(Key, const Tensor& o) const;
  Tensor mm(Key, const Tensor& o) const;
  Tensor bmm(Key, const Tensor& o) const;
  Tensor index(Key, const std::vector<indexing::TensorIndex>& terms) const;
  Tensor compare(Key, const char* op, const Tensor& o) const;
  Tensor compare(Key, const char* op, const Scalar& s) const;
  Tensor pow(Key, const Scalar& e) const;
  Tensor exp(Key) const;
  Tensor log(Key) const;
  Tensor abs(Key) const;
  Tensor sqrt(Key) const;
  Tensor neg(Key) const;
  Tensor relu(Key) const;
  Tensor& add_(Key, const Tensor& o, const Scalar& alpha);
  Tensor& add_(Key, const Scalar& s);
  Tensor& sub_(Key, const Tensor& o);
  Tensor& sub_(Key, const Scalar& s);
  Tensor& mul_(Key, const Tensor& o);
  Tensor& mul_(Key, const Scalar& s);
  Tensor& div_(Key, const Tensor& o);
  Tensor& div_(Key, const Scalar& s);
  Tensor& clamp_(Key, const Scalar& lo, const Scalar& hi);
  Tensor& masked_fill_(Key, const Tensor& mask, const Scalar& value);
  Tensor& zero_(Key);
  Tensor& fill_(Key, const Scalar& value);
  Tensor& copy_(Key, const Tensor& src);
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
