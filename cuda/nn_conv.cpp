// 2-D convolution on the GPU, and the CUDA row of the nn kernel table.
//
// With cuDNN (MANTISSA_WITH_CUDNN): the legacy convolution API — cudnnConvolutionForward,
// cudnnConvolutionBackwardData, cudnnConvolutionBackwardFilter — with groups through
// cudnnSetConvolutionGroupCount. Without it, or when cuDNN offers no algorithm that keeps the
// precision rules, or a size exceeds its 32-bit limits: im2col / col2im kernels + cuBLAS GEMM.
//
// Precision (docs/design.md §4): compute type fp32 for fp16/bf16/fp32 (fp32 accumulation), fp64 for
// fp64. Math type: CUDNN_TENSOR_OP_MATH for fp16/bf16; for fp32 CUDNN_FMA_MATH, because
// CUDNN_DEFAULT_MATH lets cuDNN pick TF32 kernels on Ampere and later, unless
// cuda::set_allow_tf32(true) (then CUDNN_DEFAULT_MATH). A heuristic candidate whose reported
// math type breaks that rule is skipped, as PyTorch does.
//
// Algorithms: cuDNN's heuristics (cudnnGet*Algorithm_v7) are asked once per (device,
// direction, dtype, TF32 flag, geometry); the first candidate that succeeds, fits the math
// rule and whose workspace the caching allocator can provide is cached. Workspaces come from
// that allocator and are returned right after the call is queued: a freed block is reused only
// by later work on the same stream, which runs after this call.
//
// Bias: added by a small kernel after the convolution, so fp16/bf16 outputs are rounded twice
// (as in PyTorch's cuDNN path); the bias gradient is a per-channel sum with fp32 accumulation.
// Handles: one per device, created on first use and never destroyed (at process exit the CUDA
// runtime may already be gone); a per-device mutex covers cudnnSetStream and the call.
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/profiler.h"
#include "cuda/allocator.h"
#include "cuda/cuda_api.h"
#include "cuda/device.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"

#ifdef MANTISSA_WITH_CUDNN
#include <cudnn.h>

// MT_CUDNN_CHECK("conv2d", cudnnCreate(&h)): throws mantissa::Error naming the op, cuDNN's status
// and last error message, the failed call and where it was made.
#define MT_CUDNN_CHECK(op, expr)                                                            \
  do {                                                                                      \
    cudnnStatus_t mt_cudnn_status_ = (expr);                                                \
    if (mt_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                           \
      ::mantissa::cuda::throw_cudnn_error(op, mt_cudnn_status_, #expr, __FILE__, __LINE__); \
  } while (0)

namespace mantissa::cuda {
[[noreturn]] void throw_cudnn_error(const std::string& op, cudnnStatus_t status, const char* expr, const char* file,
                                    int line);
}  // namespace mantissa::cuda
#endif

namespace mantissa::cuda {

namespace {

std::atomic<bool> g_force_gemm{false};

[[maybe_unused]] bool fits_int(std::initializer_list<int64_t> vs) {
  for (int64_t v : vs)
    if (v > INT_MAX) return false;
  return true;
}

// `t` itself, or a contiguous copy when cuDNN or cuBLAS could trip over its alignment
// (a view that starts mid-block).
Tensor aligned16(const Tensor& t) {
  if (reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0) return t;
  Tensor c = make_tensor(t.sizes(), t.dtype(), t.device());
  copy_same_device(t, c);
  return c;
}

// ---------------------------------------------------------------- im2col + cuBLAS

// A strided view into the storage of `t`, `offset` elements past t's first element.
Tensor view_of(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset = 0) {
  return make_view(t, sizes, strides, t.offset() + offset);
}

// With K = C/G * KH * KW, L = OH * OW:
//   y[n, g]  [Cout/G, L] = W[g] [Cout/G, K] @ cols[n, g] [K, L]
void gemm_forward(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dGeometry& g) {
  const int64_t G = g.groups, Cog = g.Cout / G, K = g.C / G * g.KH * g.KW, L = g.OH * g.OW;
  Tensor cols = make_tensor({g.N, G * K, L}, x.dtype(), x.device());
  im2col(x, cols, g);
  if (G == 1) {  // one batched GEMM, the weight broadcast over the batch (batch stride 0)
    matmul(view_of(w, {g.N, Cog, K}, {0, K, 1}), cols, Tensor(), view_of(y, {g.N, Cog, L}, {Cog * L, L, 1}));
    return;
  }
  for (int64_t n = 0; n < g.N; ++n)
    matmul(view_of(w, {G, Cog, K}, {Cog * K, K, 1}), view_of(cols, {G, K, L}, {K * L, L, 1}, n * G * K * L), Tensor(),
           view_of(y, {G, Cog, L}, {Cog * L, L, 1}, n * g.Cout * L));
}

//   dcols[n, g] [K, L] = W[g]^T @ gy[n, g];  gx = col2im(dcols)
void gemm_backward_data(const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dGeometry& g) {
  const int64_t G = g.groups, Cog = g.Cout / G, K = g.C / G * g.KH * g.KW, L = g.OH * g.OW;
  Tensor dcols = make_tensor({g.N, G * K, L}, gy.dtype(), gy.device());
  if (G == 1) {
    matmul(view_of(w, {g.N, K, Cog}, {0, 1, K}), view_of(gy, {g.N, Cog, L}, {Cog * L, L, 1}), Tensor(), dcols);
  } else {
    for (int64_t n = 0; n < g.N; ++n)
      matmul(view_of(w, {G, K, Cog}, {Cog * K, 1, K}), view_of(gy, {G, Cog, L}, {Cog * L, L, 1}, n * g.Cout * L),
             Tensor(), view_of(dcols, {G, K, L}, {K * L, L, 1}, n * G * K * L));
  }
  col2im(dcols, gx, g);
}

//   gW[g] [Cout/G, K] = gy_g [Cout/G, N*L] @ cols_g^T [N*L, K]: one GEMM per group over the
//   whole batch (fp32 accumulation inside cuBLAS, one rounding), on copies of gy and cols
//   with the batch moved next to L.
void gemm_backward_filter(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dGeometry& g) {
  const int64_t G = g.groups, Cog = g.Cout / G, K = g.C / G * g.KH * g.KW, L = g.OH * g.OW, N = g.N;
  Tensor cols = make_tensor({N, G * K, L}, x.dtype(), x.device());
  im2col(x, cols, g);
  Tensor cols_t = make_tensor({G, K, N, L}, x.dtype(), x.device());
  copy_same_device(view_of(cols, {G, K, N, L}, {K * L, L, G * K * L, 1}), cols_t);
  Tensor gy_t = make_tensor({G, Cog, N, L}, gy.dtype(), gy.device());
  copy_same_device(view_of(gy, {G, Cog, N, L}, {Cog * L, L, g.Cout * L, 1}), gy_t);
  matmul(view_of(gy_t, {G, Cog, N * L}, {Cog * N * L, N * L, 1}), view_of(cols_t, {G, N * L, K}, {K * N * L, 1, N * L}),
         Tensor(), view_of(gw, {G, Cog, K}, {Cog * K, K, 1}));
}

#ifdef MANTISSA_WITH_CUDNN

// ---------------------------------------------------------------- cuDNN

enum class Direction { Forward, BackwardData, BackwardFilter };

const char* direction_name(Direction d) {
  switch (d) {
    case Direction::Forward:
      return "forward";
    case Direction::BackwardData:
      return "backward data";
    case Direction::BackwardFilter:
      return "backward filter";
  }
  return "?";
}

// The op named in errors (MT_CUDNN_CHECK builds it only on failure).
std::string conv_op(Direction d, DType t) {
  return std::string("conv2d (cuDNN ") + direction_name(d) + ", " + dtype_name(t) + ")";
}

struct CudnnDevice {
  std::once_flag once;
  cudnnHandle_t handle = nullptr;
  std::mutex mutex;  // the handle's stream binding and calls
};
std::array<CudnnDevice, kMaxDevices> g_cudnn;

template <typename D, cudnnStatus_t (*Create)(D*), cudnnStatus_t (*Destroy)(D)>
struct Descriptor {
  D d = nullptr;
  Descriptor() { MT_CUDNN_CHECK("conv2d", Create(&d)); }
  ~Descriptor() {
    if (d) (void)Destroy(d);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
};
using TensorDesc = Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::Float32:
      return CUDNN_DATA_FLOAT;
    case DType::Float64:
      return CUDNN_DATA_DOUBLE;
    case DType::Float16:
      return CUDNN_DATA_HALF;
    case DType::BFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      MT_FAIL("conv2d", "expected a floating-point tensor, got ", dtype_name(t));
  }
}

// The math type asked for, and whether a candidate reporting `m` keeps the precision rule.
cudnnMathType_t wanted_math(DType t, bool tf32) {
  if (t == DType::Float16 || t == DType::BFloat16) return CUDNN_TENSOR_OP_MATH;
  if (t == DType::Float32 && !tf32) return CUDNN_FMA_MATH;
  return CUDNN_DEFAULT_MATH;
}
bool math_allowed(DType t, bool tf32, cudnnMathType_t m) { return t != DType::Float32 || tf32 || m == CUDNN_FMA_MATH; }

// Descriptors of one convolution: x [N, C, H, W], w [Cout, C/G, KH, KW], y [N, Cout, OH, OW].
struct ConvDescs {
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
  ConvDescs(const Conv2dGeometry& g, DType t, cudnnMathType_t math) {
    const cudnnDataType_t dt = cudnn_type(t);
    const cudnnDataType_t compute = t == DType::Float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    MT_CUDNN_CHECK("conv2d",
                   cudnnSetTensor4dDescriptor(x.d, CUDNN_TENSOR_NCHW, dt, int(g.N), int(g.C), int(g.H), int(g.W)));
    MT_CUDNN_CHECK("conv2d",
                   cudnnSetTensor4dDescriptor(y.d, CUDNN_TENSOR_NCHW, dt, int(g.N), int(g.Cout), int(g.OH), int(g.OW)));
    MT_CUDNN_CHECK("conv2d", cudnnSetFilter4dDescriptor(w.d, dt, CUDNN_TENSOR_NCHW, int(g.Cout), int(g.C / g.groups),
                                                        int(g.KH), int(g.KW)));
    MT_CUDNN_CHECK("conv2d", cudnnSetConvolution2dDescriptor(conv.d, int(g.PH), int(g.PW), int(g.SH), int(g.SW),
                                                             int(g.DH), int(g.DW), CUDNN_CROSS_CORRELATION, compute));
    MT_CUDNN_CHECK("conv2d", cudnnSetConvolutionGroupCount(conv.d, int(g.groups)));
    MT_CUDNN_CHECK("conv2d", cudnnSetConvolutionMathType(conv.d, math));
  }
};

// alpha = 1, beta = 0 in the type cuDNN expects for the compute type.
struct Scaling {
  float f[2] = {1.0f, 0.0f};
  double d[2] = {1.0, 0.0};
  const void* alpha(DType t) const { return t == DType::Float64 ? static_cast<const void*>(&d[0]) : &f[0]; }
  const void* beta(DType t) const { return t == DType::Float64 ? static_cast<const void*>(&d[1]) : &f[1]; }
};

// A workspace block of the caching allocator, returned when the scope ends.
class Workspace {
 public:
  Workspace(int dev, size_t bytes) : dev_(dev), bytes_(bytes) {
    if (bytes_) p_ = device_allocator(dev_)->allocate(bytes_);
  }
  ~Workspace() {
    if (p_) device_allocator(dev_)->deallocate(p_, bytes_);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* get() const { return p_; }
  size_t size() const { return bytes_; }

 private:
  int dev_;
  size_t bytes_;
  void* p_ = nullptr;
};

struct Algo {
  bool found = false;  // false: no candidate fits; use im2col + cuBLAS
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
};

using AlgoKey = std::array<int64_t, 19>;
std::mutex g_algo_mutex;
std::map<AlgoKey, Algo> g_algos;

AlgoKey algo_key(int dev, Direction dir, DType t, bool tf32, const Conv2dGeometry& g) {
  return {dev,  int64_t(dir), int64_t(t), tf32, g.N,  g.C,  g.H,  g.W,  g.Cout, g.groups,
          g.KH, g.KW,         g.SH,       g.SW, g.PH, g.PW, g.DH, g.DW, g.OH};  // OW follows from the rest
}

// The candidates of cuDNN's heuristics for one direction, in its order of preference.
struct Candidate {
  int algo;
  cudnnStatus_t status;
  cudnnMathType_t math;
};

std::vector<Candidate> candidates(cudnnHandle_t h, const ConvDescs& d, Direction dir) {
  std::vector<Candidate> out;
  int n = 0;
  switch (dir) {
    case Direction::Forward: {
      std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
      MT_CUDNN_CHECK("conv2d", cudnnGetConvolutionForwardAlgorithm_v7(h, d.x.d, d.w.d, d.conv.d, d.y.d,
                                                                      int(perf.size()), &n, perf.data()));
      for (int i = 0; i < n; ++i)
        out.push_back({int(perf[size_t(i)].algo), perf[size_t(i)].status, perf[size_t(i)].mathType});
      break;
    }
    case Direction::BackwardData: {
      std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf{};
      MT_CUDNN_CHECK("conv2d", cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w.d, d.y.d, d.conv.d, d.x.d,
                                                                           int(perf.size()), &n, perf.data()));
      for (int i = 0; i < n; ++i)
        out.push_back({int(perf[size_t(i)].algo), perf[size_t(i)].status, perf[size_t(i)].mathType});
      break;
    }
    case Direction::BackwardFilter: {
      std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> perf{};
      MT_CUDNN_CHECK("conv2d", cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x.d, d.y.d, d.conv.d, d.w.d,
                                                                             int(perf.size()), &n, perf.data()));
      for (int i = 0; i < n; ++i)
        out.push_back({int(perf[size_t(i)].algo), perf[size_t(i)].status, perf[size_t(i)].mathType});
      break;
    }
  }
  return out;
}

// The workspace `algo` needs, or false when cuDNN reports it unusable for these descriptors.
bool workspace_size(cudnnHandle_t h, const ConvDescs& d, Direction dir, int algo, size_t& bytes) {
  cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
  switch (dir) {
    case Direction::Forward:
      s = cudnnGetConvolutionForwardWorkspaceSize(h, d.x.d, d.w.d, d.conv.d, d.y.d, cudnnConvolutionFwdAlgo_t(algo),
                                                  &bytes);
      break;
    case Direction::BackwardData:
      s = cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w.d, d.y.d, d.conv.d, d.x.d,
                                                       cudnnConvolutionBwdDataAlgo_t(algo), &bytes);
      break;
    case Direction::BackwardFilter:
      s = cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x.d, d.y.d, d.conv.d, d.w.d,
                                                         cudnnConvolutionBwdFilterAlgo_t(algo), &bytes);
      break;
  }
  return s == CUDNN_STATUS_SUCCESS;
}

// The cached algorithm for this convolution, chosen on first use. Called with the device's
// handle lock held.
Algo choose_algo(cudnnHandle_t h, int dev, Direction dir, DType t, bool tf32, const Conv2dGeometry& g) {
  const AlgoKey key = algo_key(dev, dir, t, tf32, g);
  {
    std::lock_guard<std::mutex> lock(g_algo_mutex);
    auto it = g_algos.find(key);
    if (it != g_algos.end()) return it->second;
  }
  Algo chosen;
  ConvDescs d(g, t, wanted_math(t, tf32));
  for (const Candidate& c : candidates(h, d, dir)) {
    if (c.status != CUDNN_STATUS_SUCCESS || !math_allowed(t, tf32, c.math)) continue;
    MT_CUDNN_CHECK("conv2d", cudnnSetConvolutionMathType(d.conv.d, c.math));
    size_t bytes = 0;
    if (!workspace_size(h, d, dir, c.algo, bytes)) continue;
    try {
      Workspace probe(dev, bytes);  // too large for this GPU: try the next candidate
    } catch (const Error&) {
      continue;
    }
    chosen = {true, c.algo, c.math, bytes};
    break;
  }
  std::lock_guard<std::mutex> lock(g_algo_mutex);
  g_algos[key] = chosen;
  return chosen;
}

// Runs one direction through cuDNN; false when no algorithm fits (the caller falls back).
// x/gx, w/gw and y/gy are the three tensors of the convolution, whichever are read or written.
bool cudnn_conv(Direction dir, const Tensor& xt, const Tensor& wt, const Tensor& yt, const Conv2dGeometry& g) {
  const int dev = yt.device().index;
  const DType t = yt.dtype();
  const bool tf32 = t == DType::Float32 && allow_tf32();
  CudnnDevice& cd = g_cudnn[size_t(dev)];
  std::call_once(cd.once, [&] { MT_CUDNN_CHECK("conv2d", cudnnCreate(&cd.handle)); });
  std::lock_guard<std::mutex> lock(cd.mutex);
  MT_CUDNN_CHECK("conv2d", cudnnSetStream(cd.handle, current_stream(dev)));
  const Algo a = choose_algo(cd.handle, dev, dir, t, tf32, g);
  if (!a.found) return false;
  ConvDescs d(g, t, a.math);
  Workspace ws(dev, a.workspace);
  const Scaling s;
  switch (dir) {
    case Direction::Forward:
      MT_CUDNN_CHECK(conv_op(dir, t),
                     cudnnConvolutionForward(cd.handle, s.alpha(t), d.x.d, xt.raw_data(), d.w.d, wt.raw_data(),
                                             d.conv.d, cudnnConvolutionFwdAlgo_t(a.algo), ws.get(), ws.size(),
                                             s.beta(t), d.y.d, yt.raw_data()));
      break;
    case Direction::BackwardData:
      MT_CUDNN_CHECK(conv_op(dir, t),
                     cudnnConvolutionBackwardData(cd.handle, s.alpha(t), d.w.d, wt.raw_data(), d.y.d, yt.raw_data(),
                                                  d.conv.d, cudnnConvolutionBwdDataAlgo_t(a.algo), ws.get(), ws.size(),
                                                  s.beta(t), d.x.d, xt.raw_data()));
      break;
    case Direction::BackwardFilter:
      MT_CUDNN_CHECK(conv_op(dir, t),
                     cudnnConvolutionBackwardFilter(cd.handle, s.alpha(t), d.x.d, xt.raw_data(), d.y.d, yt.raw_data(),
                                                    d.conv.d, cudnnConvolutionBwdFilterAlgo_t(a.algo), ws.get(),
                                                    ws.size(), s.beta(t), d.w.d, wt.raw_data()));
      break;
  }
  return true;
}

#endif  // MANTISSA_WITH_CUDNN

// Whether cuDNN may run this geometry (its descriptors take int sizes).
[[maybe_unused]] bool use_cudnn(const Conv2dGeometry& g) {
#ifdef MANTISSA_WITH_CUDNN
  return !g_force_gemm.load() && fits_int({g.N, g.C, g.H, g.W, g.Cout, g.KH, g.KW, g.SH, g.SW, g.PH, g.PW, g.DH, g.DW,
                                           g.OH, g.OW, g.N * g.C * g.H * g.W, g.N * g.Cout * g.OH * g.OW});
#else
  (void)g;
  return false;
#endif
}

}  // namespace

#ifdef MANTISSA_WITH_CUDNN
void throw_cudnn_error(const std::string& op, cudnnStatus_t status, const char* expr, const char* file, int line) {
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  MT_FAIL(op, "cuDNN ", cudnnGetErrorString(status), " from ", expr, " at ", file, ":", line,
          detail[0] ? std::string(" (") + detail + ")" : std::string());
}
#endif

void set_conv_force_gemm(bool on) { g_force_gemm.store(on); }

void conv2d_forward(const Tensor& x0, const Tensor& w0, const Tensor& bias, const Tensor& y, const Conv2dGeometry& g) {
  if (y.numel() == 0) return;
  const int dev = y.device().index;
  DeviceGuard guard(dev);
  profiler::Range range("conv2d forward");
  if (g.C == 0) {  // an empty sum: y = bias
    fill(y, 0);
  } else {
    const Tensor x = aligned16(x0), w = aligned16(w0);
    bool done = false;
#ifdef MANTISSA_WITH_CUDNN
    if (use_cudnn(g)) done = cudnn_conv(Direction::Forward, x, w, y, g);
#endif
    if (!done) gemm_forward(x, w, y, g);
  }
  if (bias.defined()) add_channel_bias(y, bias, g.N, g.Cout, g.OH * g.OW);
}

void conv2d_backward(const Tensor& gy0, const Tensor& x0, const Tensor& w0, const Tensor& gx, const Tensor& gw,
                     const Tensor& gb, const Conv2dGeometry& g) {
  const int dev = gy0.device().index;
  DeviceGuard guard(dev);
  profiler::Range range("conv2d backward");
  const bool empty = g.N == 0 || g.OH * g.OW == 0 || g.Cout == 0;
  if (gb.defined() && gb.numel()) {
    if (empty)
      fill(gb, 0);
    else
      channel_sum(gy0, g.N, g.Cout, g.OH * g.OW, gb);
  }
  const bool want_x = gx.defined() && gx.numel(), want_w = gw.defined() && gw.numel();
  if (!want_x && !want_w) return;
  if (empty || g.C == 0) {
    if (want_x) fill(gx, 0);
    if (want_w) fill(gw, 0);
    return;
  }
  const Tensor gy = aligned16(gy0);
  if (want_x) {
    const Tensor w = aligned16(w0);
    bool done = false;
#ifdef MANTISSA_WITH_CUDNN
    if (use_cudnn(g)) done = cudnn_conv(Direction::BackwardData, gx, w, gy, g);
#endif
    if (!done) gemm_backward_data(gy, w, gx, g);
  }
  if (want_w) {
    const Tensor x = aligned16(x0);
    bool done = false;
#ifdef MANTISSA_WITH_CUDNN
    if (use_cudnn(g)) done = cudnn_conv(Direction::BackwardFilter, x, gw, gy, g);
#endif
    if (!done) gemm_backward_filter(gy, x, gw, g);
  }
}

}  // namespace mantissa::cuda
