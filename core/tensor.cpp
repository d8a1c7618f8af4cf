#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/autograd_meta.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/half.h"
#include "core/launch.h"
#include "core/shape.h"

namespace mantissa {

int64_t TensorImpl::numel() const {
  // Hot (every kernel launch asks): a plain checked product; shape_numel words the error.
  int64_t n = 1;
  for (int64_t v : sizes)
    if (__builtin_mul_overflow(n, v, &n)) return shape_numel(sizes);
  return n;
}

bool TensorImpl::is_contiguous() const {
  // No elements: nothing to lay out (as in PyTorch), and copies take the flat path.
  for (int64_t s : sizes)
    if (s == 0) return true;
  int64_t expected = 1;
  for (int64_t i = int64_t(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

namespace {
const TensorImpl& checked(const std::shared_ptr<TensorImpl>& p) {
  if (!p) throw Error("tensor: operation on an undefined tensor");
  return *p;
}
}  // namespace

const Shape& Tensor::sizes() const { return checked(impl_).sizes; }
const Shape& Tensor::strides() const { return checked(impl_).strides; }
// A 0-dim tensor has no dim to name (wrap_dim takes 0 and -1 for it, as ops that treat it as one
// element do).
int64_t Tensor::size(int64_t d) const {
  MT_CHECK(dim() > 0, "size", "dimension ", d, " specified but the tensor has no dimensions");
  return sizes()[wrap_dim(d, dim(), "size")];
}
int64_t Tensor::stride(int64_t d) const {
  MT_CHECK(dim() > 0, "stride", "dimension ", d, " specified but the tensor has no dimensions");
  return strides()[wrap_dim(d, dim(), "stride")];
}
int64_t Tensor::dim() const { return int64_t(sizes().size()); }
int64_t Tensor::numel() const { return checked(impl_).numel(); }
int64_t Tensor::offset() const { return checked(impl_).offset; }
DType Tensor::dtype() const { return checked(impl_).dtype; }
Device Tensor::device() const { return checked(impl_).storage->device; }
bool Tensor::is_contiguous() const { return checked(impl_).is_contiguous(); }
std::string Tensor::shape_str() const { return mantissa::shape_str(sizes()); }
uint64_t Tensor::version() const { return checked(impl_).storage->version; }
void Tensor::bump_version() const { ++checked(impl_).storage->version; }
void* Tensor::raw_data() const { return checked(impl_).data(); }

Tensor make_tensor(const Shape& shape, DType dtype, Device device) {
  const int64_t n = checked_numel(shape, "empty");
  const size_t elem = element_size(dtype);
  MT_CHECK(uint64_t(n) <= SIZE_MAX / elem, "empty", "out of memory: shape ", mantissa::shape_str(shape), " of ",
           dtype_name(dtype), " needs more than 2^64 bytes");
  auto impl = std::make_shared<TensorImpl>();
  impl->strides = contiguous_strides(shape, "empty");
  impl->storage = std::make_shared<Storage>(size_t(n) * elem, device);
  impl->sizes = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::pin_memory() const {
  MT_CHECK(defined() && device().is_cpu(), "pin_memory", "only CPU tensors can be pinned, got ",
           defined() ? "a tensor on " + device().str() : std::string("an undefined tensor"));
  if (is_pinned() && is_contiguous()) return *this;
  Allocator* pinned = pinned_host_allocator();
  if (pinned == nullptr) return launch::contiguous(*this);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(numel()) * element_size(dtype()), Device::cpu(), pinned);
  impl->sizes = sizes();
  impl->strides = contiguous_strides(sizes());
  impl->dtype = dtype();
  Tensor t(std::move(impl));
  cpu_backend().copy(*this, t);
  return t;
}

bool Tensor::is_pinned() const { return defined() && impl()->storage && impl()->storage->pinned; }

Tensor make_view(const Tensor& base, const Shape& sizes, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->sizes = sizes;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// ---------------------------------------------------------------- factories

namespace {
Tensor with_grad(Tensor t, const TensorOptions& o) {
  if (o.requires_grad) t.requires_grad_(true);
  return t;
}

// A float64 CPU tensor converted to the requested dtype and device. The factories fill
// tensor memory rather than a std::vector, so running out of memory is a mantissa::Error.
Tensor from_tensor_f64(const Tensor& v, const TensorOptions& o) {
  return with_grad(launch::convert(v, o.dtype, o.device), o);
}
}  // namespace

Tensor empty(const Shape& shape, const TensorOptions& o) { return with_grad(make_tensor(shape, o.dtype, o.device), o); }

Tensor full(const Shape& shape, const Scalar& value, const TensorOptions& o) {
  Tensor t = make_tensor(shape, o.dtype, o.device);
  backend_for(o.device).fill(t, value);
  return with_grad(t, o);
}

Tensor zeros(const Shape& shape, const TensorOptions& o) { return full(shape, 0, o); }
Tensor ones(const Shape& shape, const TensorOptions& o) { return full(shape, 1, o); }
Tensor scalar_tensor(const Scalar& v, const TensorOptions& o) { return full({}, v, o); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), {t.dtype(), t.device()}); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), {t.dtype(), t.device()}); }
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), {t.dtype(), t.device()}); }
Tensor full_like(const Tensor& t, const Scalar& v) { return full(t.sizes(), v, {t.dtype(), t.device()}); }

Tensor arange(double start, double end, double step, const TensorOptions& o) {
  MT_CHECK(step != 0, "arange", "step must be nonzero");
  const double count = std::ceil((end - start) / step);
  MT_CHECK(count >= 0, "arange", "range [", start, ", ", end, ") is empty in the direction of step ", step);
  // 2^53: beyond it the values are no longer distinct doubles (and NaN fails here too).
  MT_CHECK(count <= 9007199254740992.0, "arange", "range [", start, ", ", end, ") with step ", step, " has ", count,
           " elements, too many");
  const int64_t n = int64_t(count);
  // Generated in float64 in tensor memory (the allocator reports running out of memory clearly).
  Tensor v = make_tensor({n}, DType::Float64, Device::cpu());
  double* p = v.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = start + double(i) * step;
  return from_tensor_f64(v, o);
}

Tensor arange(int64_t end, const TensorOptions& o) { return arange(0, double(end), 1, o); }

Tensor linspace(double start, double end, int64_t steps, const TensorOptions& o) {
  MT_CHECK(steps >= 0, "linspace", "number of steps must be non-negative, got ", steps);
  Tensor t = make_tensor({steps}, DType::Float64, Device::cpu());
  double* v = t.data_ptr<double>();
  double step = steps > 1 ? (end - start) / double(steps - 1) : 0.0;
  // Fill from both ends, as PyTorch does, so the last value is exactly `end` (one step: `start`).
  for (int64_t i = 0; i < steps; ++i)
    v[i] = i < steps / 2 ? start + step * double(i) : end - step * double(steps - 1 - i);
  if (steps == 1) v[0] = start;
  return from_tensor_f64(t, o);
}

// Zeros, then ones along the diagonal (a view of stride n + 1), both filled on the device in
// the requested dtype (built in fp64 on the host and converted, eye(1024) took 4.5x PyTorch's time).
Tensor eye(int64_t n, const TensorOptions& o) {
  MT_CHECK(n >= 0, "eye", "n must be non-negative, got ", n);
  Tensor t = zeros({n, n}, {.dtype = o.dtype, .device = o.device});
  if (n > 0) backend_for(o.device).fill(make_view(t, {n}, {n + 1}, 0), 1);
  return with_grad(t, o);
}

namespace {
template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return DType::Float32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::Float64;
  else if constexpr (std::is_same_v<T, Half>)
    return DType::Float16;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return DType::BFloat16;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::Int64;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::Int32;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DType::UInt8;
  else if constexpr (std::is_same_v<T, bool>)
    return DType::Bool;
  else
    static_assert(sizeof(T) == 0, "unsupported element type");
}
}  // namespace

Tensor from_blob(const void* data, const Shape& shape, DType dtype, const TensorOptions& o) {
  Tensor src = make_tensor(shape, dtype, Device::cpu());
  if (src.nbytes()) std::memcpy(src.raw_data(), data, src.nbytes());
  return with_grad(launch::convert(src, o.dtype, o.device), o);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape_in, const TensorOptions& o) {
  Shape shape = shape_in.empty() ? Shape{int64_t(values.size())} : shape_in;  // default: 1-D
  MT_CHECK(shape_numel(shape) == int64_t(values.size()), "from_vector", "shape ", shape_str(shape), " needs ",
           shape_numel(shape), " values but ", values.size(), " were given");
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    return from_blob(bytes.data(), shape, DType::Bool, o);
  } else {
    return from_blob(values.data(), shape, dtype_of<T>(), o);
  }
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  return from_vector(values, shape, {.dtype = dtype_of<T>()});
}

#define MT_INSTANTIATE_FROM_VECTOR(T)                                                     \
  template Tensor from_vector(const std::vector<T>&, const Shape&, const TensorOptions&); \
  template Tensor from_vector(const std::vector<T>&, const Shape&);
MT_INSTANTIATE_FROM_VECTOR(float)
MT_INSTANTIATE_FROM_VECTOR(double)
MT_INSTANTIATE_FROM_VECTOR(int64_t)
MT_INSTANTIATE_FROM_VECTOR(int32_t)
MT_INSTANTIATE_FROM_VECTOR(uint8_t)
MT_INSTANTIATE_FROM_VECTOR(bool)
MT_INSTANTIATE_FROM_VECTOR(Half)
MT_INSTANTIATE_FROM_VECTOR(BFloat16)
#undef MT_INSTANTIATE_FROM_VECTOR

// ---------------------------------------------------------------- element access

template <typename T>
std::vector<T> Tensor::to_vector() const {
  constexpr DType want = dtype_of<T>();
  Tensor host = make_tensor(sizes(), want, Device::cpu());
  cpu_backend().copy(device().is_cpu() ? *this : launch::to_device(*this, Device::cpu()), host);
  std::vector<T> out(static_cast<size_t>(numel()));
  if (!out.empty()) std::memcpy(static_cast<void*>(out.data()), host.raw_data(), host.nbytes());
  return out;
}

template <typename T>
T Tensor::item() const {
  MT_CHECK(numel() == 1, "item", "a tensor with ", numel(), " elements (shape ", shape_str(),
           ") cannot be converted to a scalar");
  return to_vector<T>()[0];
}

template <>
std::vector<bool> Tensor::to_vector<bool>() const {
  std::vector<uint8_t> b = to_vector<uint8_t>();
  return std::vector<bool>(b.begin(), b.end());
}
template <>
bool Tensor::item<bool>() const {
  MT_CHECK(numel() == 1, "item", "a tensor with ", numel(), " elements cannot be converted to a scalar");
  return to_vector<uint8_t>()[0] != 0;
}

#define MT_INSTANTIATE_ACCESS(T)                        \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
MT_INSTANTIATE_ACCESS(float)
MT_INSTANTIATE_ACCESS(double)
MT_INSTANTIATE_ACCESS(int64_t)
MT_INSTANTIATE_ACCESS(int32_t)
MT_INSTANTIATE_ACCESS(uint8_t)
MT_INSTANTIATE_ACCESS(Half)
MT_INSTANTIATE_ACCESS(BFloat16)
#undef MT_INSTANTIATE_ACCESS

Scalar Tensor::item() const {
  if (is_floating(dtype())) return Scalar(item<double>());
  if (dtype() == DType::Bool) return Scalar(int64_t(item<bool>()));
  return Scalar(item<int64_t>());
}

// ---------------------------------------------------------------- autograd metadata

namespace autograd {
AutogradMeta& meta(const Tensor& t) {
  MT_CHECK(t.defined(), "autograd", "undefined tensor");
  auto& m = t.impl()->autograd;
  if (!m) m = std::make_shared<AutogradMeta>();
  return *m;
}

const AutogradMeta* meta_if(const Tensor& t) { return t.defined() ? t.impl()->autograd.get() : nullptr; }

}  // namespace autograd

using autograd::meta;
using autograd::meta_if;

bool Tensor::requires_grad() const {
  const auto* m = meta_if(*this);
  return m && m->requires_grad;
}

Tensor& Tensor::requires_grad_(bool on) {
  MT_CHECK(is_leaf() || on, "requires_grad_", "you can only change requires_grad of leaf tensors");
  MT_CHECK(!on || is_floating(dtype()), "requires_grad_", "only floating-point tensors can require gradients, got ",
           dtype_name(dtype()));
  meta(*this).requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const {
  const auto* m = meta_if(*this);
  return !m || !m->grad_fn;
}

Tensor Tensor::grad() const {
  const auto* m = meta_if(*this);
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined())
    MT_CHECK(g.sizes() == sizes(), "set_grad", "gradient of shape ", g.shape_str(),
             " does not match the tensor's shape ", shape_str());
  meta(*this).grad = g;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  const auto* m = meta_if(*this);
  return m ? m->grad_fn : nullptr;
}

}  // namespace mantissa
