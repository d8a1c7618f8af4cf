#include "onnx/tracer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/cpu/kernels.h"
#include "core/error.h"
#include "core/launch.h"

namespace mantissa::onnx {

namespace {

thread_local KernelTracer* t_tracer = nullptr;
thread_local int t_suspended = 0;

const Storage* storage_of(const Tensor& t) { return t.impl()->storage.get(); }

// The product of s[0, to) (all of s by default).
int64_t product(const Shape& s, size_t to = SIZE_MAX) {
  int64_t p = 1;
  const size_t end = std::min(to, s.size());
  for (size_t i = 0; i < end; ++i) p *= s[i];
  return p;
}

using A = Attribute;

// The tracer recording on this thread, or null (suspended, or none installed).
KernelTracer* rec() {
  if (t_tracer == nullptr || t_suspended != 0 || !t_tracer->recording()) return nullptr;
  t_tracer->sync_scope();
  return t_tracer;
}

// ---------------------------------------------------------------- twin tables
// Each entry runs the real CPU kernel, then lets the tracer record it.

// The tensor arguments of a kernel, for the unsupported ones.
template <typename T>
void tensors_of(std::vector<const Tensor*>& v, const T& a) {
  if constexpr (std::is_same_v<T, Tensor>) v.push_back(&a);
}

// A kernel with no ONNX mapping runs and refuses traced inputs (an error naming it). Both twins
// start with every entry of their kernel list so (core/backend.h, core/nn_kernels.h), then
// assign the recorded ones: a kernel added to a list later is refused by an export, never a
// null pointer here.
#define MT_UNSUPPORTED(name)                                     \
  [](auto... args) {                                             \
    if (KernelTracer* k = rec()) {                               \
      std::vector<const Tensor*> ts;                             \
      (tensors_of<std::decay_t<decltype(args)>>(ts, args), ...); \
      k->unsupported(#name, ts);                                 \
    }                                                            \
    cpu::name(args...);                                          \
  }
#define MT_UNSUPPORTED_ENTRY(name, ...) .name = MT_UNSUPPORTED(name),
const Backend& twin_backend() {
  static const Backend table = [] {
    Backend t{MT_BACKEND_KERNELS(MT_UNSUPPORTED_ENTRY)};
    t.copy = [](const Tensor& src, const Tensor& dst) {
      cpu_backend().copy(src, dst);
      if (KernelTracer* k = rec()) k->copy(src, dst);
    };
    t.fill = [](const Tensor& dst, const Scalar& v) {
      cpu_backend().fill(dst, v);
      if (KernelTracer* k = rec()) k->fill(dst);
    };
    t.unary = [](UnaryOp op, const Tensor& in, const Tensor& out, double a, double b) {
      cpu_backend().unary(op, in, out, a, b);
      if (KernelTracer* k = rec()) k->unary(op, in, out, a, b);
    };
    t.binary = [](BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, double s0, double s1) {
      cpu_backend().binary(op, a, b, out, s0, s1);
      if (KernelTracer* k = rec()) k->binary(op, a, b, out, s0, s1);
    };
    t.where = [](const Tensor& c, const Tensor& a, const Tensor& b, const Tensor& out) {
      cpu_backend().where(c, a, b, out);
      if (KernelTracer* k = rec()) k->where(c, a, b, out);
    };
    t.reduce = [](ReduceOp op, const Tensor& in, const Tensor& out) {
      cpu_backend().reduce(op, in, out);
      if (KernelTracer* k = rec()) k->reduce(op, in, out);
    };
    t.var_mean = [](const Tensor& in, const Tensor& var, const Tensor& mean, int64_t correction) {
      cpu_backend().var_mean(in, var, mean, correction);
      if (KernelTracer* k = rec()) k->var_mean(in, var, mean, correction);
    };
    t.softmax = [](const Tensor& in, const Tensor& out, bool log) {
      cpu_backend().softmax(in, out, log);
      if (KernelTracer* k = rec()) k->softmax(in, out, log);
    };
    t.scan = [](const Tensor& in, const Tensor& out, bool product, bool reverse) {
      cpu_backend().scan(in, out, product, reverse);
      if (KernelTracer* k = rec()) k->scan(in, out, product, reverse);
    };
    t.matmul = [](const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
      cpu_backend().matmul(a, b, bias, out);
      if (KernelTracer* k = rec()) k->matmul(a, b, bias, out);
    };
    t.index_select = [](const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
      cpu_backend().index_select(in, dim, index, out);
      if (KernelTracer* k = rec()) k->index_select(in, dim, index, out);
    };
    t.gather = [](const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
      cpu_backend().gather(in, dim, index, out);
      if (KernelTracer* k = rec()) k->gather(in, dim, index, out);
    };
    t.scatter_add = [](const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
      if (KernelTracer* k = rec()) k->unsupported("scatter_add", {&out, &index, &src});
      cpu_backend().scatter_add(out, dim, index, src);
    };
    t.accumulate_grad = [](const Tensor& src, const Tensor& dst, bool init, const Tensor& found_inf) {
      if (KernelTracer* k = rec()) k->unsupported("accumulate_grad", {&src, &dst});
      cpu_backend().accumulate_grad(src, dst, init, found_inf);
    };
    t.fused_optimizer_step = [](const FusedStepArgs& args) {
      if (KernelTracer* k = rec()) k->unsupported("fused_optimizer_step", {});
      cpu_backend().fused_optimizer_step(args);
    };
    t.update_scale = [](const Tensor& scale, const Tensor& counters, const Tensor& found_inf,
                        const math::ScaleUpdate& rule) {
      cpu_backend().update_scale(scale, counters, found_inf, rule);
    };
    t.dropout = [](const Tensor& x, const Tensor& out, const Tensor& keep_bits, double p, uint64_t seed) {
      KernelTracer* k = rec();
      if (!x.defined() || !k) {
        cpu_backend().dropout(x, out, keep_bits, p, seed);
        if (k) k->fill(out);  // a random constant: only in training
        return;
      }
      // x times the mask as a constant (only in training), as the graph had it before the fusion.
      Tensor mask = make_tensor(out.sizes(), out.dtype(), out.device());
      cpu_backend().dropout(Tensor(), mask, keep_bits, p, seed);
      k->fill(mask);
      cpu_backend().binary(BinaryOp::Mul, x, mask, out, 0, 0);
      k->binary(BinaryOp::Mul, x, mask, out, 0, 0);
    };
    t.dropout_backward = [](const Tensor& g, const Tensor& keep_bits, const Tensor& out, double p) {
      if (KernelTracer* k = rec()) k->unsupported("dropout_backward", {&g, &out});
      cpu_backend().dropout_backward(g, keep_bits, out, p);
    };
    return t;
  }();
  return table;
}

const NnKernels& twin_nn() {
  static const NnKernels table = [] {
    NnKernels t{MT_NN_KERNELS(MT_UNSUPPORTED_ENTRY)};
    t.conv2d_forward = [](const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                          const Conv2dGeometry& g) {
      cpu::conv2d_forward(x, w, bias, y, g);
      if (KernelTracer* k = rec()) k->conv2d(x, w, bias, y, g);
    };
    t.max_pool2d = [](const Tensor& x, const Tensor& y, const Tensor& indices, const Pool2dGeometry& g) {
      cpu::max_pool2d(x, y, indices, g);
      if (KernelTracer* k = rec()) k->max_pool2d(x, y, indices, g);
    };
    t.avg_pool2d = [](const Tensor& x, const Tensor& y, const Pool2dGeometry& g) {
      cpu::avg_pool2d(x, y, g);
      if (KernelTracer* k = rec()) k->avg_pool2d(x, y, g, false);
    };
    t.adaptive_avg_pool2d = [](const Tensor& x, const Tensor& y, const Pool2dGeometry& g) {
      cpu::adaptive_avg_pool2d(x, y, g);
      if (KernelTracer* k = rec()) k->avg_pool2d(x, y, g, true);
    };
    t.layer_norm = [](const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& y,
                      const Tensor& mean, const Tensor& rstd) {
      cpu::layer_norm(x, w, b, eps, y, mean, rstd);
      if (KernelTracer* k = rec()) k->layer_norm(x, w, b, eps, y, mean, rstd);
    };
    t.group_norm = [](const Tensor& x, const Tensor& w, const Tensor& b, int64_t groups, double eps, const Tensor& y,
                      const Tensor& mean, const Tensor& rstd) {
      cpu::group_norm(x, w, b, groups, eps, y, mean, rstd);
      if (KernelTracer* k = rec()) k->group_norm(x, w, b, groups, eps, y, mean, rstd);
    };
    t.batch_norm_apply = [](const Tensor& x, const Tensor& scale, const Tensor& shift, const Tensor& y) {
      cpu::batch_norm_apply(x, scale, shift, y);
      if (KernelTracer* k = rec()) k->batch_norm_apply(x, scale, shift, y);
    };
    t.attention_forward = [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out,
                             const Tensor& lse, const AttentionGeometry& g) {
      cpu::attention_forward(q, k, v, mask, out, lse, g);
      if (KernelTracer* t = rec()) t->attention(q, k, v, mask, out, lse, g);
    };
    t.triangle = [](const Tensor& in, const Tensor& out, int64_t diagonal, bool upper) {
      cpu::triangle(in, out, diagonal, upper);
      if (KernelTracer* k = rec()) k->triangle(in, out, diagonal, upper);
    };
    return t;
  }();
  return table;
}
#undef MT_UNSUPPORTED_ENTRY
#undef MT_UNSUPPORTED

}  // namespace

SuspendTracing::SuspendTracing() { ++t_suspended; }
SuspendTracing::~SuspendTracing() { --t_suspended; }

// ---------------------------------------------------------------- bookkeeping

KernelTracer::KernelTracer(Graph& g, bool dynamic_batch) : g_(g), dynamic_batch_(dynamic_batch) {
  MT_CHECK(t_tracer == nullptr, "onnx export", "an export is already running on this thread");
  t_tracer = this;
}
KernelTracer::~KernelTracer() { t_tracer = nullptr; }

const Backend& KernelTracer::backend() { return twin_backend(); }
const NnKernels& KernelTracer::nn_kernels() { return twin_nn(); }
bool KernelTracer::recording() const { return function_depth_ == 0; }

std::string KernelTracer::module_path() const {
  return module_stack.empty() ? std::string("<top level>") : module_stack.back();
}

void KernelTracer::fail(const char* kernel, const std::string& why) const {
  MT_FAIL("onnx export", "op '", kernel, "' called from module '", module_path(), "': ", why);
}

void KernelTracer::add_input(const Tensor& t, const std::string& name, int batch_dim) {
  MT_CHECK(!entries_.count(storage_of(t)), "onnx export", "input '", name,
           "' shares its storage with another input or parameter; pass a copy (.clone())");
  entries_[storage_of(t)] = Entry{t, Value{name, t.sizes(), batch_dim}, "", false};
}

void KernelTracer::add_initializer(const Tensor& t, const std::string& name) {
  if (!t.defined() || entries_.count(storage_of(t)) || pending_initializers_.count(storage_of(t))) return;
  pending_initializers_[storage_of(t)] = {t, name};
}

bool KernelTracer::traced(const Tensor& x) const {
  if (!x.defined()) return false;
  const Storage* s = storage_of(x);
  return entries_.count(s) > 0 || pending_initializers_.count(s) > 0 || pieces_.count(s) > 0;
}

bool KernelTracer::any_traced(std::initializer_list<const Tensor*> ts) const {
  for (const Tensor* t : ts)
    if (traced(*t)) return true;
  return false;
}

void KernelTracer::define(const Tensor& out, Value v) {
  const Storage* s = storage_of(out);
  auto it = entries_.find(s);
  if (it != entries_.end() || pending_initializers_.count(s)) {
    const Tensor& base = it != entries_.end() ? it->second.base : pending_initializers_[s].first;
    if (it != entries_.end() && !it->second.initializer && out.sizes() == base.sizes() &&
        out.strides() == base.strides() && out.offset() == base.offset()) {
      it->second = Entry{out, std::move(v), "", false};  // a whole traced intermediate overwritten
      return;
    }
    fail("in-place write", "the forward writes into a parameter, an input or part of a computed tensor (shape " +
                               out.shape_str() + "), which ONNX cannot express");
  }
  v.shape = out.sizes();
  if (out.is_contiguous() && out.offset() == 0 && size_t(out.nbytes()) == out.impl()->storage->nbytes) {
    MT_CHECK(!pieces_.count(s), "onnx export", "op called from module '", module_path(),
             "' overwrites a tensor that was written in parts (shape ", out.shape_str(), "): not exportable");
    entries_[s] = Entry{out, std::move(v), "", false};
    return;
  }
  // A kernel output covering only part of its storage (cat writes each piece into a slice):
  // joined when the whole is read.
  pieces_[s].push_back(Piece{out, std::move(v)});
}

void KernelTracer::join_pieces(const Tensor& x) {
  const Storage* s = storage_of(x);
  std::vector<Piece> pieces = std::move(pieces_.at(s));
  pieces_.erase(s);
  auto not_exportable = [&](const std::string& why) {
    fail("cat", "a tensor written in parts (shape " + x.shape_str() + ") " + why);
  };
  if (!(x.is_contiguous() && x.offset() == 0 && size_t(x.nbytes()) == x.impl()->storage->nbytes))
    not_exportable("is read through a view before it is read whole");
  // x: [d0, ..., dn] contiguous; each piece is x.narrow(d, start, len) for one d.
  int d = -1;
  std::vector<std::pair<int64_t, Piece*>> starts;
  for (Piece& p : pieces) {
    if (p.view.strides() != x.strides() || p.view.dim() != x.dim()) not_exportable("is not divided into slices");
    for (int64_t i = 0; i < x.dim(); ++i)
      if (p.view.size(i) != x.size(i)) {
        if (d >= 0 && d != int(i)) not_exportable("is divided along more than one dim");
        d = int(i);
      }
  }
  if (d < 0) not_exportable("is written whole twice");
  const int64_t stride = x.stride(d);
  for (Piece& p : pieces) {
    const int64_t rel = p.view.offset() - x.offset();
    if (stride == 0 || rel % stride != 0 || rel / stride >= x.size(d)) not_exportable("is not divided into slices");
    starts.emplace_back(rel / stride, &p);
  }
  std::sort(starts.begin(), starts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> parts;
  int batch = -2;  // the pieces' common batch dim (-1: none)
  int64_t at = 0;
  auto gap = [&](int64_t end) {  // a slice no traced kernel wrote: the constant it holds
    if (end <= at) return;
    Shape gs = x.sizes();
    gs[size_t(d)] = end - at;
    parts.push_back(g_.constant(make_view(x, gs, x.strides(), x.offset() + at * stride)));
  };
  for (auto& [start, p] : starts) {
    if (start < at) not_exportable("is written twice in overlapping slices");
    gap(start);
    parts.push_back(g_.cast(p->value.name, x.dtype()));
    const int bd = p->value.batch_dim == d ? -1 : p->value.batch_dim;
    batch = batch == -2 || batch == bd ? bd : -1;
    at = start + p->view.size(d);
  }
  gap(x.size(d));
  const std::string joined = parts.size() == 1 ? parts[0] : g_.node("Concat", parts, {Attribute::integer("axis", d)});
  entries_[s] = Entry{x, Value{joined, x.sizes(), batch}, "", false};
}

void KernelTracer::define(const Tensor& out, const std::string& name, int batch_dim) {
  std::string n = g_.cast(name, out.dtype());
  define(out, Value{n, out.sizes(), batch_dim});
}

void KernelTracer::poison(const Tensor& out, const std::string& why) {
  if (!out.defined() || entries_.count(storage_of(out))) return;
  entries_[storage_of(out)] = Entry{out, Value{}, why, false};
}

int KernelTracer::batch_of(std::initializer_list<const Value*> vs, size_t out_rank) {
  for (const Value* v : vs)
    if (v != nullptr && v->batch_dim >= 0) return size_t(v->batch_dim) < out_rank ? v->batch_dim : -1;
  return -1;
}

// ---------------------------------------------------------------- views

Value KernelTracer::reshape(const Value& v, const Shape& target) {
  if (v.shape == target) return v;
  Shape t = target;
  int bd = -1;
  if (v.batch_dim >= 0) {
    // The target dim holding the input's outermost batch index.
    const int64_t pre = product(v.shape, size_t(v.batch_dim));
    int64_t acc = 1;
    for (size_t j = 0; j < t.size(); ++j) {
      if (acc <= pre && pre < acc * t[j]) {
        bd = int(j);
        break;
      }
      acc *= t[j];
    }
    if (dynamic_batch_ && bd >= 0) t[size_t(bd)] = -1;
  }
  return Value{g_.node("Reshape", {v.name, g_.ints(t)}), target, bd};
}

Value KernelTracer::expand(const Value& v, const Shape& target) {
  if (v.shape == target) return v;
  Shape t = target;
  for (size_t i = 0; i < t.size() && i < v.shape.size(); ++i)
    if (v.shape[i] == t[i]) t[i] = 1;  // Expand keeps the input's size where the target says 1
  return Value{g_.node("Expand", {v.name, g_.ints(t)}), target, v.batch_dim};
}

Value KernelTracer::as(const Value& v, DType dtype) { return Value{g_.cast(v.name, dtype), v.shape, v.batch_dim}; }

Value KernelTracer::value_of(const Tensor& x, bool broadcast_ok) {
  MT_CHECK(x.defined(), "onnx export", "undefined tensor argument");
  // Broadcast dims (stride 0) are size 1 in the value; ONNX ops broadcast them back.
  Shape cs = x.sizes();
  for (size_t d = 0; d < cs.size(); ++d)
    if (x.strides()[d] == 0) cs[d] = std::min<int64_t>(cs[d], 1);
  const Storage* s = storage_of(x);
  if (auto p = pending_initializers_.find(s); p != pending_initializers_.end()) {
    auto [t, name] = p->second;
    pending_initializers_.erase(p);
    g_.initializer(name, t);
    used_initializers_[name] = t;
    entries_[s] = Entry{t, Value{name, t.sizes(), -1}, "", true};
  }
  if (pieces_.count(s)) join_pieces(x);
  Value v;
  auto it = entries_.find(s);
  if (it == entries_.end()) {
    v = Value{g_.constant(make_view(x, cs, x.strides(), x.offset())), cs, -1};
  } else {
    const Entry& e = it->second;
    if (e.value.name.empty()) fail("use", e.poison);
    const Tensor& b = e.base;
    MT_CHECK(b.dtype() == x.dtype(), "onnx export", "a view reinterprets ", dtype_name(b.dtype()), " as ",
             dtype_name(x.dtype()));
    if (x.sizes() == b.sizes() && x.strides() == b.strides() && x.offset() == b.offset()) return e.value;
    MT_CHECK(b.is_contiguous(), "onnx export", "a view of a non-contiguous value (shape ", b.shape_str(), ")");
    v = e.value;
    const int64_t n = b.numel();
    int64_t rel = x.offset() - b.offset();
    // The dims of x that matter, outermost (largest stride) first.
    std::vector<size_t> dims;
    for (size_t d = 0; d < cs.size(); ++d)
      if (cs[d] > 1) dims.push_back(d);
    std::stable_sort(dims.begin(), dims.end(), [&](size_t a, size_t c) { return x.strides()[a] > x.strides()[c]; });
    const bool plain = rel == 0 && product(cs) == n && [&] {
      for (size_t i = 0; i + 1 < dims.size(); ++i)
        if (x.strides()[dims[i]] != x.strides()[dims[i + 1]] * cs[dims[i + 1]] || dims[i] > dims[i + 1]) return false;
      return dims.empty() || x.strides()[dims.back()] == 1;
    }();
    if (plain) {
      v = reshape(v, cs);
    } else {
      // Factor the flat storage as [D0, D1, ...] with one dim per dim of x (stride = the
      // product of the later D), slice each to x's extent at x's offset, then transpose to
      // x's order.
      Shape base, starts, lens;
      int64_t extent = n;
      for (size_t d : dims) {
        const int64_t st = x.strides()[d];
        MT_CHECK(st > 0 && extent % st == 0, "onnx export", "a view with strides ", shape_str(x.strides()),
                 " of a value of shape ", b.shape_str(), " (overlapping or irregular) is not exportable");
        const int64_t size = extent / st, a = rel / st;
        MT_CHECK(a + cs[d] <= size, "onnx export", "irregular view of shape ", x.shape_str());
        base.push_back(size);
        starts.push_back(a);
        lens.push_back(cs[d]);
        rel -= a * st;
        extent = st;
      }
      if (extent > 1 || base.empty()) {
        base.push_back(extent);
        starts.push_back(rel);
        lens.push_back(1);
        rel = 0;
      }
      MT_CHECK(rel == 0, "onnx export", "irregular view of shape ", x.shape_str());
      v = reshape(v, Shape(base));
      Shape axes, st, en;
      for (size_t i = 0; i < base.size(); ++i)
        if (starts[i] != 0 || lens[i] != base[i]) {
          axes.push_back(int64_t(i));
          st.push_back(starts[i]);
          en.push_back(starts[i] + lens[i]);
        }
      if (!axes.empty()) {
        v = Value{g_.node("Slice", {v.name, g_.ints(st), g_.ints(en), g_.ints(axes)}), lens, v.batch_dim};
      }
      Shape sorted;
      for (size_t d : dims) sorted.push_back(cs[d]);
      v = reshape(v, sorted);
      // sorted position -> x order
      std::vector<size_t> order(dims.begin(), dims.end());
      std::sort(order.begin(), order.end());
      Shape perm;
      bool identity = true;
      for (size_t k = 0; k < order.size(); ++k) {
        const auto pos = int64_t(std::find(dims.begin(), dims.end(), order[k]) - dims.begin());
        perm.push_back(pos);
        identity = identity && pos == int64_t(k);
      }
      if (!identity) {
        Shape shape;
        for (int64_t p : perm) shape.push_back(sorted[size_t(p)]);
        int bd = -1;
        for (size_t k = 0; k < perm.size(); ++k)
          if (perm[k] == v.batch_dim) bd = int(k);
        v = Value{g_.node("Transpose", {v.name}, {A::list("perm", perm)}), shape, bd};
      }
      v = reshape(v, cs);
    }
  }
  if (!broadcast_ok) v = expand(v, x.sizes());
  return v;
}

// ---------------------------------------------------------------- custom Functions

bool KernelTracer::function_begin(const char* name) {
  if (t_suspended > 0 || !recording() || find_function_exporter(name) == nullptr) return false;
  ++function_depth_;
  return true;
}

void KernelTracer::function_end(const char* name, const std::vector<Tensor>& inputs, const autograd::Context& ctx,
                                const Tensor& output) {
  --function_depth_;
  bool any = false;
  for (const Tensor& t : inputs) any = any || traced(t);
  if (!any) return;  // computed from constants only: a constant itself
  std::vector<std::string> names;
  int bd = -1;
  for (const Tensor& t : inputs) {
    Value v = value_of(t);
    if (bd < 0) bd = v.batch_dim;
    names.push_back(v.name);
  }
  std::string y = (*find_function_exporter(name))(g_, names, ctx);
  MT_CHECK(output.defined(), "onnx export", "custom Function '", name, "' returned an undefined tensor");
  define(output, y, size_t(bd) < size_t(output.dim()) ? bd : -1);
}

// ---------------------------------------------------------------- kernels

void KernelTracer::unsupported(const char* kernel, const std::vector<const Tensor*>& args) {
  for (const Tensor* t : args)
    if (t->defined() && traced(*t))
      fail(kernel, "no ONNX mapping (register an exporter for a custom Function, docs/onnx.md)");
}

void KernelTracer::copy(const Tensor& src, const Tensor& dst) {
  if (!traced(src)) {
    // Into a tensor written in parts: the slice stays a gap, read from memory when joined.
    if (traced(dst) && !pieces_.count(storage_of(dst)))
      define(dst, Value{g_.constant(launch::contiguous(dst)), dst.sizes(), -1});
    return;
  }
  Value v = value_of(src);
  define(dst, g_.cast(v.name, dst.dtype()), v.batch_dim);
}

void KernelTracer::fill(const Tensor& dst) {
  if (traced(dst)) fail("fill", "the forward overwrites a computed tensor in place");
}

void KernelTracer::unary(UnaryOp op, const Tensor& in, const Tensor& out, double a, double b) {
  if (!traced(in)) return;
  Value v = value_of(in);
  // Formulas of several ONNX ops run in fp32 for half inputs, as Mantissa's kernels compute them
  // (one rounding at the end instead of one per node).
  // (Elu also because opset 17 has no bfloat16 Elu.)
  const bool composite = op == UnaryOp::GeluErf || op == UnaryOp::GeluTanh || op == UnaryOp::Silu ||
                         op == UnaryOp::Softplus || op == UnaryOp::Log1p || op == UnaryOp::Rsqrt ||
                         op == UnaryOp::Elu || op == UnaryOp::SmoothL1;
  const bool widen = composite && (in.dtype() == DType::Float16 || in.dtype() == DType::BFloat16);
  const DType t = widen ? DType::Float32 : in.dtype();
  const std::string x = g_.cast(v.name, t);
  auto sc = [&](double c) { return g_.scalar(c, t); };
  std::string y;
  switch (op) {
    case UnaryOp::Neg:
      y = g_.node("Neg", {x});
      break;
    case UnaryOp::Abs:
      y = g_.node("Abs", {x});
      break;
    case UnaryOp::Sign:
      y = g_.node("Sign", {x});
      break;
    case UnaryOp::Exp:
      y = g_.node("Exp", {x});
      break;
    case UnaryOp::Log:
      y = g_.node("Log", {x});
      break;
    case UnaryOp::Log1p:
      y = g_.node("Log", {g_.node("Add", {x, sc(1)})});
      break;
    case UnaryOp::Sqrt:
      y = g_.node("Sqrt", {x});
      break;
    case UnaryOp::Rsqrt:
      y = g_.node("Reciprocal", {g_.node("Sqrt", {x})});
      break;
    case UnaryOp::Sin:
      y = g_.node("Sin", {x});
      break;
    case UnaryOp::Cos:
      y = g_.node("Cos", {x});
      break;
    case UnaryOp::Tanh:
      y = g_.node("Tanh", {x});
      break;
    case UnaryOp::Sigmoid:
      y = g_.node("Sigmoid", {x});
      break;
    case UnaryOp::Relu:
      y = g_.node("Relu", {x});
      break;
    case UnaryOp::GeluErf:  // x/2 (1 + erf(x / sqrt 2))
      y = g_.node("Mul", {g_.node("Mul", {x, sc(0.5)}),
                          g_.node("Add", {sc(1), g_.node("Erf", {g_.node("Mul", {x, sc(M_SQRT1_2)})})})});
      break;
    case UnaryOp::GeluTanh: {  // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      std::string cube = g_.node("Mul", {g_.node("Mul", {x, x}), x});
      std::string inner =
          g_.node("Mul", {g_.node("Add", {x, g_.node("Mul", {cube, sc(0.044715)})}), sc(std::sqrt(2.0 / M_PI))});
      y = g_.node("Mul", {g_.node("Mul", {x, sc(0.5)}), g_.node("Add", {sc(1), g_.node("Tanh", {inner})})});
      break;
    }
    case UnaryOp::Silu:
      y = g_.node("Mul", {x, g_.node("Sigmoid", {x})});
      break;
    case UnaryOp::Softplus: {  // log(1 + exp(beta x)) / beta, x where beta x > threshold
      std::string bx = g_.node("Mul", {x, sc(a)});
      y = g_.node("Where", {g_.node("Greater", {bx, sc(b)}), x, g_.node("Div", {g_.node("Softplus", {bx}), sc(a)})});
      break;
    }
    case UnaryOp::Erf:
      y = g_.node("Erf", {x});
      break;
    case UnaryOp::Reciprocal:
      y = g_.node("Reciprocal", {x});
      break;
    case UnaryOp::Square:
      y = g_.node("Mul", {x, x});
      break;
    case UnaryOp::LogicalNot:
      y = g_.node("Not", {g_.cast(x, DType::Bool)});
      break;
    case UnaryOp::PowScalar:
      y = g_.node("Pow", {x, sc(a)});
      break;
    case UnaryOp::Clamp:
      y = x;
      if (!std::isinf(a)) y = g_.node("Max", {y, sc(a)});
      if (!std::isinf(b)) y = g_.node("Min", {y, sc(b)});
      if (y == x) y = g_.node("Identity", {x});
      break;
    case UnaryOp::IsFinite:
      y = g_.node("Not", {g_.node("Or", {g_.node("IsInf", {x}), g_.node("IsNaN", {x})})});
      break;
    case UnaryOp::LeakyRelu:
      y = g_.node("LeakyRelu", {x}, {Attribute::real("alpha", float(a))});
      break;
    case UnaryOp::Elu:
      y = g_.node("Elu", {x}, {Attribute::real("alpha", float(a))});
      break;
    case UnaryOp::SmoothL1: {  // Where(|d| < beta, 0.5 d^2 / beta, |d| - 0.5 beta)
      const std::string ad = g_.node("Abs", {x});
      y = g_.node("Where", {g_.node("Less", {ad, sc(a)}),
                            g_.node("Div", {g_.node("Mul", {g_.node("Mul", {x, sc(0.5)}), x}), sc(a)}),
                            g_.node("Sub", {ad, sc(0.5 * a)})});
      break;
    }
    default:
      fail(op_name(op), "no ONNX mapping (a backward formula)");
  }
  define(out, y, v.batch_dim);
}

void KernelTracer::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, double, double) {
  if (!any_traced({&a, &b})) return;
  Value va = value_of(a, true), vb = value_of(b, true);
  const std::vector<std::string> ab{va.name, vb.name};
  std::string y;
  switch (op) {
    case BinaryOp::Add:
      y = g_.node("Add", ab);
      break;
    case BinaryOp::Sub:
      y = g_.node("Sub", ab);
      break;
    case BinaryOp::Mul:
      y = g_.node("Mul", ab);
      break;
    case BinaryOp::Div:
      y = g_.node("Div", ab);
      break;
    case BinaryOp::Maximum:
      y = g_.node("Max", ab);
      break;
    case BinaryOp::Minimum:
      y = g_.node("Min", ab);
      break;
    case BinaryOp::Pow:
      y = g_.node("Pow", ab);
      break;
    case BinaryOp::Eq:
      y = g_.node("Equal", ab);
      break;
    case BinaryOp::Ne:
      y = g_.node("Not", {g_.node("Equal", ab)});
      break;
    case BinaryOp::Lt:
      y = g_.node("Less", ab);
      break;
    case BinaryOp::Le:
      y = g_.node("LessOrEqual", ab);
      break;
    case BinaryOp::Gt:
      y = g_.node("Greater", ab);
      break;
    case BinaryOp::Ge:
      y = g_.node("GreaterOrEqual", ab);
      break;
    case BinaryOp::LogicalAnd:
      y = g_.node("And", {g_.cast(va.name, DType::Bool), g_.cast(vb.name, DType::Bool)});
      break;
    case BinaryOp::LogicalOr:
      y = g_.node("Or", {g_.cast(va.name, DType::Bool), g_.cast(vb.name, DType::Bool)});
      break;
    default:
      fail(op_name(op), "no ONNX mapping (a backward formula)");
  }
  Value r{y, out.sizes(), batch_of({&va, &vb}, out.dim())};
  // Both operands broadcast along a dim: ONNX's result stays size 1 there.
  Shape got(out.dim(), 1);
  for (const Value* v : {&va, &vb})
    for (size_t i = 0; i < v->shape.size(); ++i)
      got[out.dim() - v->shape.size() + i] = std::max(got[out.dim() - v->shape.size() + i], v->shape[i]);
  r.shape = got;
  r = expand(r, out.sizes());
  define(out, r.name, r.batch_dim);
}

void KernelTracer::where(const Tensor& c, const Tensor& a, const Tensor& b, const Tensor& out) {
  if (!any_traced({&c, &a, &b})) return;
  Value vc = value_of(c, true), va = value_of(a, true), vb = value_of(b, true);
  Value r{
      g_.node("Where", {g_.cast(vc.name, DType::Bool), va.name, vb.name}), {}, batch_of({&vc, &va, &vb}, out.dim())};
  r.shape = Shape(out.dim(), 1);
  for (const Value* v : {&vc, &va, &vb})
    for (size_t i = 0; i < v->shape.size(); ++i)
      r.shape[out.dim() - v->shape.size() + i] = std::max(r.shape[out.dim() - v->shape.size() + i], v->shape[i]);
  r = expand(r, out.sizes());
  define(out, r.name, r.batch_dim);
}

void KernelTracer::reduce(ReduceOp op, const Tensor& in, const Tensor& out) {
  if (!traced(in)) return;
  const int64_t outer = out.numel(), n = outer > 0 ? in.numel() / outer : 0;
  Value v = reshape(value_of(in), {outer, n});
  // Mantissa accumulates reduced floats in fp32.
  const bool widen = in.dtype() == DType::Float16 || in.dtype() == DType::BFloat16;
  std::string x = widen && (op == ReduceOp::Sum || op == ReduceOp::Prod) ? g_.cast(v.name, DType::Float32) : v.name;
  std::string y;
  switch (op) {
    case ReduceOp::Sum:
      y = g_.node("ReduceSum", {x, g_.ints({1})}, {A::integer("keepdims", 0)});
      break;
    case ReduceOp::Prod:
      y = g_.node("ReduceProd", {x}, {A::list("axes", {1}), A::integer("keepdims", 0)});
      break;
    case ReduceOp::Max:
      y = g_.node("ReduceMax", {x}, {A::list("axes", {1}), A::integer("keepdims", 0)});
      break;
    case ReduceOp::Min:
      y = g_.node("ReduceMin", {x}, {A::list("axes", {1}), A::integer("keepdims", 0)});
      break;
    case ReduceOp::ArgMax:
      y = g_.node("ArgMax", {x},
                  {A::integer("axis", 1), A::integer("keepdims", 0), A::integer("select_last_index", 0)});
      break;
    case ReduceOp::ArgMin:
      y = g_.node("ArgMin", {x},
                  {A::integer("axis", 1), A::integer("keepdims", 0), A::integer("select_last_index", 0)});
      break;
  }
  Value r = reshape(Value{g_.cast(y, out.dtype()), {outer}, v.batch_dim == 0 ? 0 : -1}, out.sizes());
  define(out, r.name, r.batch_dim);
}

void KernelTracer::var_mean(const Tensor& in, const Tensor& var, const Tensor& mean, int64_t correction) {
  if (!traced(in)) return;
  const int64_t outer = mean.numel(), n = outer > 0 ? in.numel() / outer : 0;
  Value v = reshape(value_of(in), {outer, n});
  std::string x = g_.cast(v.name, DType::Float32);
  std::string m = g_.node("ReduceMean", {x}, {A::list("axes", {1}), A::integer("keepdims", 1)});
  std::string d = g_.node("Sub", {x, m});
  std::string s = g_.node("ReduceSum", {g_.node("Mul", {d, d}), g_.ints({1})}, {A::integer("keepdims", 0)});
  std::string va = g_.node("Div", {s, g_.scalar(double(std::max<int64_t>(n - correction, 0)), DType::Float32)});
  const int bd = v.batch_dim == 0 ? 0 : -1;
  Value rv = reshape(Value{g_.cast(va, var.dtype()), {outer}, bd}, var.sizes());
  Value rm = reshape(Value{g_.cast(m, mean.dtype()), {outer, 1}, bd}, mean.sizes());
  define(var, rv.name, rv.batch_dim);
  define(mean, rm.name, rm.batch_dim);
}

void KernelTracer::softmax(const Tensor& in, const Tensor& out, bool log) {
  if (!traced(in)) return;
  // in, out: [outer, n] or [outer, n, inner] views (core/backend.h): softmax along n, axis 1.
  const int64_t n = in.dim() == 3 ? in.size(1) : (in.dim() > 0 ? in.sizes().back() : 1);
  const int64_t outer = n > 0 ? in.numel() / n : 0;
  const Shape rows = in.dim() == 3 ? in.sizes() : Shape{outer, n};
  Value v = reshape(value_of(in), rows);
  std::string y = g_.node(log ? "LogSoftmax" : "Softmax", {g_.cast(v.name, DType::Float32)}, {A::integer("axis", 1)});
  Value r = reshape(Value{g_.cast(y, out.dtype()), rows, v.batch_dim}, out.sizes());
  define(out, r.name, r.batch_dim);
}

void KernelTracer::scan(const Tensor& in, const Tensor& out, bool product, bool reverse) {
  if (!traced(in)) return;
  // in, out: [outer, n, inner] views (core/backend.h): the scan runs along axis 1, in fp32 for
  // fp16 / bf16 (the kernel accumulates them in fp32 and rounds once).
  const int64_t n = in.size(1);
  Value v = value_of(in);
  const DType t = in.dtype() == DType::Float16 || in.dtype() == DType::BFloat16 ? DType::Float32 : in.dtype();
  std::string y = g_.cast(v.name, t);
  if (!product) {
    y = g_.node("CumSum", {y, g_.scalar(1, DType::Int64)}, {A::integer("reverse", reverse ? 1 : 0)});
  } else {
    // ONNX has no CumProd: y *= y shifted by 1, 2, 4, .. along the axis, padded with ones.
    MT_CHECK(v.batch_dim != 1, "onnx export", "cumprod along the dynamic batch dim has no ONNX form");
    for (int64_t off = 1; off < n; off *= 2) {
      const std::vector<int64_t> begin{reverse ? off : 0}, end{reverse ? n : n - off}, axis{1};
      const std::vector<int64_t> pads =
          reverse ? std::vector<int64_t>{0, 0, 0, 0, off, 0} : std::vector<int64_t>{0, off, 0, 0, 0, 0};
      std::string part = g_.node("Slice", {y, g_.ints(begin), g_.ints(end), g_.ints(axis)});
      y = g_.node("Mul", {y, g_.node("Pad", {part, g_.ints(pads), g_.scalar(1, t)})});
    }
  }
  Value r = reshape(Value{g_.cast(y, out.dtype()), in.sizes(), v.batch_dim}, out.sizes());
  define(out, r.name, r.batch_dim);
}

void KernelTracer::matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
  if (!any_traced({&a, &b, &bias})) return;
  Value va = value_of(a), vb = value_of(b);
  std::string y = g_.node("MatMul", {va.name, vb.name});
  if (bias.defined()) y = g_.node("Add", {y, value_of(bias, true).name});
  int bd = va.batch_dim >= 0 && va.batch_dim < 2 ? va.batch_dim : (vb.batch_dim == 0 ? 0 : -1);
  define(out, y, bd);
}

void KernelTracer::index_select(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
  if (!any_traced({&in, &index})) return;
  Value vi = value_of(in), vx = value_of(index);
  std::string y = g_.node("Gather", {vi.name, vx.name}, {A::integer("axis", dim)});
  define(out, y, vx.batch_dim >= 0 ? int(dim) + vx.batch_dim : batch_of({&vi}, out.dim()));
}

void KernelTracer::gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) {
  if (!any_traced({&in, &index})) return;
  Value vi = value_of(in), vx = value_of(index);
  define(out, g_.node("GatherElements", {vi.name, vx.name}, {A::integer("axis", dim)}),
         batch_of({&vi, &vx}, out.dim()));
}

void KernelTracer::conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                          const Conv2dGeometry& g) {
  if (!any_traced({&x, &w, &bias})) return;
  Value vx = value_of(x);
  std::vector<std::string> in{vx.name, value_of(w).name};
  if (bias.defined()) in.push_back(g_.cast(value_of(bias).name, x.dtype()));
  std::string r = g_.node(
      "Conv", in,
      {A::list("kernel_shape", {g.KH, g.KW}), A::list("strides", {g.SH, g.SW}),
       A::list("pads", {g.PH, g.PW, g.PH, g.PW}), A::list("dilations", {g.DH, g.DW}), A::integer("group", g.groups)});
  define(y, r, vx.batch_dim);
}

namespace {
// Whether the pooling output needs ceil_mode (its size is larger than floor mode gives).
int64_t ceil_mode(const Pool2dGeometry& g) {
  return g.OH > window_output_size(g.H, g.KH, g.SH, g.PH, g.DH) ||
                 g.OW > window_output_size(g.W, g.KW, g.SW, g.PW, g.DW)
             ? 1
             : 0;
}
}  // namespace

void KernelTracer::max_pool2d(const Tensor& x, const Tensor& y, const Tensor& indices, const Pool2dGeometry& g) {
  if (!traced(x)) return;
  Value vx = value_of(x);
  std::string r = g_.node("MaxPool", {vx.name},
                          {A::list("kernel_shape", {g.KH, g.KW}), A::list("strides", {g.SH, g.SW}),
                           A::list("pads", {g.PH, g.PW, g.PH, g.PW}), A::list("dilations", {g.DH, g.DW}),
                           A::integer("ceil_mode", ceil_mode(g))});
  define(y, r, vx.batch_dim);
  poison(indices, "max_pool2d's indices are not exported");
}

void KernelTracer::avg_pool2d(const Tensor& x, const Tensor& y, const Pool2dGeometry& g, bool adaptive) {
  if (!traced(x)) return;
  Value vx = value_of(x);
  std::string r;
  if (adaptive) {
    if (g.OH == 1 && g.OW == 1) {
      r = g_.node("GlobalAveragePool", {vx.name});
    } else {
      if (g.H % g.OH != 0 || g.W % g.OW != 0)
        fail("adaptive_avg_pool2d", "output " + std::to_string(g.OH) + "x" + std::to_string(g.OW) +
                                        " does not divide the input " + std::to_string(g.H) + "x" +
                                        std::to_string(g.W) + " (uneven windows have no ONNX op)");
      const int64_t kh = g.H / g.OH, kw = g.W / g.OW;
      r = g_.node("AveragePool", {vx.name}, {A::list("kernel_shape", {kh, kw}), A::list("strides", {kh, kw})});
    }
  } else {
    if (g.divisor_override > 0) fail("avg_pool2d", "divisor_override has no ONNX equivalent");
    r = g_.node("AveragePool", {vx.name},
                {A::list("kernel_shape", {g.KH, g.KW}), A::list("strides", {g.SH, g.SW}),
                 A::list("pads", {g.PH, g.PW, g.PH, g.PW}), A::integer("ceil_mode", ceil_mode(g)),
                 A::integer("count_include_pad", g.count_include_pad ? 1 : 0)});
  }
  define(y, r, vx.batch_dim);
}

void KernelTracer::layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& y,
                              const Tensor& mean, const Tensor& rstd) {
  if (!any_traced({&x, &w, &b})) return;
  const int64_t n = x.dim() > 0 ? x.sizes().back() : 1;
  const int64_t m = n > 0 ? x.numel() / n : 0;
  Value vx = reshape(value_of(x), {m, n});
  // Computed in fp32 as Mantissa does (acc parameters).
  std::vector<std::string> in{g_.cast(vx.name, DType::Float32)};
  in.push_back(w.defined() ? g_.cast(value_of(w).name, DType::Float32) : g_.constant([&] {
    SuspendTracing s;
    return ones({n});
  }()));
  if (b.defined()) in.push_back(g_.cast(value_of(b).name, DType::Float32));
  std::string r = g_.node("LayerNormalization", in, {A::integer("axis", -1), A::real("epsilon", float(eps))});
  Value out = reshape(Value{g_.cast(r, y.dtype()), {m, n}, vx.batch_dim}, y.sizes());
  define(y, out.name, out.batch_dim);
  poison(mean, "layer_norm's statistics are not exported");
  poison(rstd, "layer_norm's statistics are not exported");
}

// x, y: [N, C, S] views. Opset 17 has no GroupNormalization: each group ([N, G, C / G * S]) by
// LayerNormalization with a unit scale, then the per-channel affine on [N, C, S], in fp32.
void KernelTracer::group_norm(const Tensor& x, const Tensor& w, const Tensor& b, int64_t groups, double eps,
                              const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  if (!any_traced({&x, &w, &b})) return;
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2), D = C / groups * S;
  Value vx = reshape(value_of(x), {N, groups, D});
  const std::string unit = g_.constant([&] {
    SuspendTracing s;
    return ones({D});
  }());
  Value v{g_.node("LayerNormalization", {g_.cast(vx.name, DType::Float32), unit},
                  {A::integer("axis", -1), A::real("epsilon", float(eps))}),
          {N, groups, D},
          vx.batch_dim};
  v = reshape(v, {N, C, S});
  auto per_channel = [&](const Tensor& t) { return g_.cast(reshape(value_of(t), {C, 1}).name, DType::Float32); };
  if (w.defined()) v.name = g_.node("Mul", {v.name, per_channel(w)});
  if (b.defined()) v.name = g_.node("Add", {v.name, per_channel(b)});
  Value out = reshape(Value{g_.cast(v.name, y.dtype()), v.shape, v.batch_dim}, y.sizes());
  define(y, out.name, out.batch_dim);
  poison(mean, "group_norm's statistics are not exported");
  poison(rstd, "group_norm's statistics are not exported");
}

void KernelTracer::batch_norm_apply(const Tensor& x, const Tensor& scale, const Tensor& shift, const Tensor& y) {
  if (!any_traced({&x, &scale, &shift})) return;
  Value vx = value_of(x);
  Shape cshape(size_t(x.dim()), 1);
  if (x.dim() > 1) cshape[1] = x.size(1);
  auto per_channel = [&](const Tensor& t) { return g_.cast(reshape(value_of(t), cshape).name, x.dtype()); };
  std::string r = g_.node("Add", {g_.node("Mul", {vx.name, per_channel(scale)}), per_channel(shift)});
  define(y, r, vx.batch_dim);
}

void KernelTracer::attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Tensor& out,
                             const Tensor& lse, const AttentionGeometry& g) {
  if (!any_traced({&q, &k, &v, &mask})) return;
  if (g.dropout_p > 0) fail("attention_forward", "attention dropout in an eval-mode forward");
  Value vq = value_of(q), vk = value_of(k), vv = value_of(v);
  // scores [BH, L, S] = q k^T (in T, accumulated in fp32 by both), scaled and masked in fp32.
  std::string kt = g_.node("Transpose", {vk.name}, {A::list("perm", {0, 2, 1})});
  std::string s =
      g_.node("Mul", {g_.cast(g_.node("MatMul", {vq.name, kt}), DType::Float32), g_.scalar(g.scale, DType::Float32)});
  if (mask.defined()) {
    if (traced(mask)) fail("attention_forward", "an attention mask computed from the inputs is not exportable");
    SuspendTracing sus;
    // The additive mask as the kernel reads it: (b, h, i, j) at mask_strides.
    const bool per_bh = g.mask_strides[0] != 0 || g.mask_strides[1] != 0;
    const int64_t G = per_bh ? g.B * g.H : 1;
    Tensor full = empty({G, g.L, g.S}, {.dtype = DType::Float32});
    MT_CHECK(mask.dtype() == DType::Float32, "onnx export", "attention mask of dtype ", dtype_name(mask.dtype()));
    const float* m = static_cast<const float*>(mask.raw_data());
    float* f = full.data_ptr<float>();
    for (int64_t gi = 0; gi < G; ++gi)
      for (int64_t i = 0; i < g.L; ++i)
        for (int64_t j = 0; j < g.S; ++j)
          f[(gi * g.L + i) * g.S + j] = m[(gi / g.H) * g.mask_strides[0] + (gi % g.H) * g.mask_strides[1] +
                                          i * g.mask_strides[2] + j * g.mask_strides[3]];
    s = g_.node("Add", {s, g_.constant(full)});
  }
  if (g.causal) {
    SuspendTracing sus;
    Tensor keep = empty({g.L, g.S}, {.dtype = DType::Bool});
    bool* p = keep.data_ptr<bool>();
    for (int64_t i = 0; i < g.L; ++i)
      for (int64_t j = 0; j < g.S; ++j) p[i * g.S + j] = j <= i;
    s = g_.node("Where", {g_.constant(keep), s, g_.scalar(-std::numeric_limits<double>::infinity(), DType::Float32)});
  }
  std::string p = g_.cast(g_.node("Softmax", {s}, {A::integer("axis", -1)}), v.dtype());
  define(out, g_.node("MatMul", {p, vv.name}), vq.batch_dim);
  poison(lse, "attention's log-sum-exp is not exported");
}

void KernelTracer::triangle(const Tensor& in, const Tensor& out, int64_t diagonal, bool upper) {
  if (!traced(in)) return;
  Value v = value_of(in);
  define(out,
         g_.node("Trilu", {v.name, g_.scalar(double(diagonal), DType::Int64)}, {A::integer("upper", upper ? 1 : 0)}),
         v.batch_dim);
}

}  // namespace mantissa::onnx
