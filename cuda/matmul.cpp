// Batched GEMM through cuBLAS. fp16/bf16/fp32 go through cublasGemmStridedBatchedEx with
// CUBLAS_COMPUTE_32F (fp32 accumulation, docs/amp.md; reduced-precision split-K reductions
// are disallowed), fp64 through cublasDgemmStridedBatched. TF32 for fp32 inputs only when
// cuda::set_allow_tf32(true).
//
// Layout: our tensors are row-major, cuBLAS is column-major. A row-major [M, N] matrix is a
// column-major [N, M] one, so we compute C^T (N x M) = B^T (N x K) * A^T (K x M): cuBLAS's
// "A" is our b and its "B" is our a. An operand with unit stride in its last dim is passed
// untransposed (ld = stride of its first dim); one with unit stride in its first dim (a
// transposed view) is passed with CUBLAS_OP_T (ld = stride of its last dim); anything else
// is copied to a contiguous buffer first.
//
// A single (unbatched) GEMM with a bias (linear's forward) goes through cuBLASLt with the bias
// epilogue: the bias is added to the fp32 accumulator in the GEMM's own epilogue and rounded
// once, without first broadcasting it into C (a full write of the output). Where cuBLASLt has
// no algorithm for the case, or MANTISSA_CUBLASLT=0, the bias is broadcast into C and the GEMM
// runs with beta = 1, which rounds the same way.
//
// gemm_batched (cuda/gemm.h) is the raw-buffer form for cuda/'s own compositions (attention's
// GEMM path), with the mapping of core/gemm_args.h.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/profiler.h"
#include "cuda/cuda_api.h"
#include "cuda/device.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"

#define MT_CUBLAS_CHECK(expr)                                                                                          \
  do {                                                                                                                 \
    cublasStatus_t mt_blas_status_ = (expr);                                                                           \
    if (mt_blas_status_ != CUBLAS_STATUS_SUCCESS)                                                                      \
      MT_FAIL("cuBLAS", cublasGetStatusName(mt_blas_status_), " (", cublasGetStatusString(mt_blas_status_), ") from ", \
              #expr, " at ", __FILE__, ":", __LINE__);                                                                 \
  } while (0)

namespace mantissa::cuda {

namespace {

std::atomic<bool> g_allow_tf32{false};

// A cuBLAS handle and its workspaces, one per stream it ran on: a workspace must not be
// shared by GEMMs that may run concurrently on different streams.
struct BlasHandle {
  cublasHandle_t handle = nullptr;
  std::unordered_map<cudaStream_t, void*> workspaces;
};

// Handles are pooled per device and lent to a thread for its lifetime. Handles and
// workspaces are never destroyed: at process exit the CUDA runtime may already be gone.
struct HandlePool {
  std::mutex mutex;
  std::vector<BlasHandle*> free;
};
std::array<HandlePool, kMaxDevices> g_pools;

struct ThreadHandles {
  std::array<BlasHandle*, kMaxDevices> lent{};
  ~ThreadHandles() {
    for (size_t d = 0; d < lent.size(); ++d)
      if (lent[d]) {
        std::lock_guard<std::mutex> lock(g_pools[d].mutex);
        g_pools[d].free.push_back(lent[d]);
      }
  }
};
thread_local ThreadHandles t_handles;

// The workspace size NVIDIA recommends: 32 MiB on Hopper, 4 MiB before.
size_t workspace_bytes(int dev) { return device_properties(dev).major >= 9 ? (size_t(32) << 20) : (size_t(4) << 20); }

// This thread's handle for `dev`, bound to `stream` with its workspace. The caller has
// made `dev` current.
cublasHandle_t blas_handle(int dev, cudaStream_t stream) {
  BlasHandle*& h = t_handles.lent[size_t(dev)];
  if (!h) {
    {
      std::lock_guard<std::mutex> lock(g_pools[size_t(dev)].mutex);
      if (!g_pools[size_t(dev)].free.empty()) {
        h = g_pools[size_t(dev)].free.back();
        g_pools[size_t(dev)].free.pop_back();
      }
    }
    if (!h) {
      auto fresh = std::make_unique<BlasHandle>();
      MT_CUBLAS_CHECK(cublasCreate(&fresh->handle));
      MT_CUBLAS_CHECK(cublasSetMathMode(
          fresh->handle, cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
      h = fresh.release();
    }
  }
  // cublasSetStream resets the workspace to cuBLAS's default pool, so set it after.
  MT_CUBLAS_CHECK(cublasSetStream(h->handle, stream));
  void*& ws = h->workspaces[stream];
  if (!ws) MT_CUDA_CHECK(cudaMalloc(&ws, workspace_bytes(dev)));
  MT_CUBLAS_CHECK(cublasSetWorkspace(h->handle, ws, workspace_bytes(dev)));
  return h->handle;
}

struct Layout {
  bool ok = false;
  bool row_major = true;  // unit stride along columns
  int64_t ld = 0;
};

// A rows x cols operand with element strides (rs, cs). Strides of size-1 dims are
// meaningless, so they do not disqualify a layout.
Layout layout_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (cs == 1 || cols == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
    if (ld >= std::max<int64_t>(cols, 1)) return {true, true, ld};
  }
  if (rs == 1 || rows == 1) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
    if (ld >= std::max<int64_t>(rows, 1)) return {true, false, ld};
  }
  return {};
}

Tensor contiguous_copy(const Tensor& t) {
  Tensor c = make_tensor(t.sizes(), t.dtype(), t.device());
  copy_same_device(t, c);
  return c;
}

void check_int(int64_t v, const char* what) {
  MT_CHECK(v <= INT_MAX, "matmul", what, " = ", v, " exceeds cuBLAS's 32-bit limit");
}

// This thread's cuBLAS workspace for (dev, stream), set up by blas_handle.
void* blas_workspace(int dev, cudaStream_t stream) { return t_handles.lent[size_t(dev)]->workspaces[stream]; }

bool cublaslt_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("MANTISSA_CUBLASLT");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

// One cuBLASLt handle per device (it holds no stream; cuBLASLt handles may be shared by
// threads), created on first use without a lock on later calls.
cublasLtHandle_t lt_handle(int dev) {
  static std::array<cublasLtHandle_t, kMaxDevices> handles{};
  static std::array<std::once_flag, kMaxDevices> created;
  std::call_once(created[size_t(dev)], [&] { MT_CUBLAS_CHECK(cublasLtCreate(&handles[size_t(dev)])); });
  return handles[size_t(dev)];
}

// The largest power of two up to 256 that divides the address: what cuBLASLt's heuristic
// must assume about a pointer (its default assumes 256, which views at an offset break).
uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

// The GEMM's shape as cuBLASLt sees it (column-major, see the file comment), and the
// alignments its algorithm choice depends on: the key of the algorithm cache.
struct LtKey {
  int dev;
  cudaDataType_t type;
  cublasComputeType_t compute;
  cublasOperation_t opa, opb;
  int m, n, k, lda, ldb, ldc;
  uint32_t align_a, align_b, align_c, align_bias;
  bool operator==(const LtKey& o) const { return std::memcmp(this, &o, sizeof(LtKey)) == 0; }
};
// Compared and hashed as bytes: only 4-byte members, so no padding bytes.
static_assert(sizeof(LtKey) == 15 * 4, "LtKey must have no padding");
struct LtKeyHash {
  size_t operator()(const LtKey& k) const {
    size_t h = 1469598103934665603ull;
    const auto* b = reinterpret_cast<const unsigned char*>(&k);
    for (size_t i = 0; i < sizeof(LtKey); ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
  }
};

// Owns the descriptors of one cuBLASLt call.
struct LtDescriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtDescriptors() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// C (m x n, column-major) = op(A) op(B) + bias (per row of C) through the bias epilogue.
// Returns false (nothing launched) where cuBLASLt has no algorithm for the case.
bool lt_matmul_bias(const LtKey& key, const void* A, const void* B, const void* bias, void* C, cudaStream_t stream) {
  static std::mutex mutex;
  static std::unordered_map<LtKey, std::pair<bool, cublasLtMatmulAlgo_t>, LtKeyHash> algos;
  LtDescriptors d;
  MT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&d.op, key.compute, CUDA_R_32F));
  MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &key.opa, sizeof(key.opa)));
  MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &key.opb, sizeof(key.opb)));
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  MT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  // Stored shapes (before op): A is m x k untransposed, k x m transposed; B likewise k x n / n x k.
  const bool ta = key.opa != CUBLAS_OP_N, tb = key.opb != CUBLAS_OP_N;
  MT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.a, key.type, ta ? key.k : key.m, ta ? key.m : key.k, key.lda));
  MT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.b, key.type, tb ? key.n : key.k, tb ? key.k : key.n, key.ldb));
  MT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.c, key.type, key.m, key.n, key.ldc));
  cublasLtMatmulAlgo_t algo{};
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = algos.find(key);
    if (it == algos.end()) {
      MT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&d.pref));
      const uint64_t ws = workspace_bytes(key.dev);
      // Split-K partial sums only in the fp32 compute type (as CUBLAS_MATH_DISALLOW_REDUCED_
      // PRECISION_REDUCTION for the cuBLAS path): never reduced in fp16/bf16.
      const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      MT_CUBLAS_CHECK(
          cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
      MT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                           sizeof(schemes)));
      const uint32_t align_c = std::min(key.align_c, key.align_bias);
      MT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                           &key.align_a, sizeof(uint32_t)));
      MT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                           &key.align_b, sizeof(uint32_t)));
      MT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                                                           sizeof(uint32_t)));
      MT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
                                                           sizeof(uint32_t)));
      cublasLtMatmulHeuristicResult_t result{};
      int found = 0;
      const cublasStatus_t st =
          cublasLtMatmulAlgoGetHeuristic(lt_handle(key.dev), d.op, d.a, d.b, d.c, d.c, d.pref, 1, &result, &found);
      const bool ok = st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS;
      it = algos.emplace(key, std::make_pair(ok, result.algo)).first;
    }
    if (!it->second.first) return false;
    algo = it->second.second;
  }
  const float alpha = 1.0f, beta = 0.0f;
  MT_CUBLAS_CHECK(cublasLtMatmul(lt_handle(key.dev), d.op, &alpha, A, d.a, B, d.b, &beta, C, d.c, C, d.c, &algo,
                                 blas_workspace(key.dev, stream), workspace_bytes(key.dev), stream));
  return true;
}

}  // namespace

void set_allow_tf32(bool on) { g_allow_tf32.store(on); }
bool allow_tf32() { return g_allow_tf32.load(); }

// a: [B, M, K], b: [B, K, N] (batch stride may be 0); bias: undefined or [N]; out: contiguous
// [B, M, N]. The bias joins the fp32 accumulator before the one rounding to out's dtype: in
// cuBLASLt's bias epilogue (B == 1), or broadcast into C with beta = 1 (bias values are exact
// in out's dtype).
void matmul(const Tensor& a0, const Tensor& b0, const Tensor& bias, const Tensor& out) {
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a0.size(2);
  MT_CHECK(out.is_contiguous(), "matmul", "the CUDA kernel expects a contiguous output");
  MT_CHECK(a0.dtype() == out.dtype() && b0.dtype() == out.dtype(), "matmul", "operands must share a dtype, got ",
           dtype_name(a0.dtype()), ", ", dtype_name(b0.dtype()), " -> ", dtype_name(out.dtype()));
  if (B == 0 || M == 0 || N == 0) return;
  const int dev = out.device().index;
  DeviceGuard g(dev);
  // The bias broadcast into every row of out (C of a beta = 1 GEMM).
  auto bias_into_out = [&] { copy_same_device(make_view(bias, out.sizes(), {0, 0, 1}, bias.offset()), out); };
  if (K == 0) {
    if (bias.defined())
      bias_into_out();
    else
      fill(out, 0);
    return;
  }
  profiler::Range range("cublas matmul");
  Tensor a = a0, b = b0;
  Layout la = layout_of(M, K, a.stride(1), a.stride(2));
  if (!la.ok) {
    a = contiguous_copy(a);
    la = layout_of(M, K, a.stride(1), a.stride(2));
  }
  Layout lb = layout_of(K, N, b.stride(1), b.stride(2));
  if (!lb.ok) {
    b = contiguous_copy(b);
    lb = layout_of(K, N, b.stride(1), b.stride(2));
  }
  const long long sa = B > 1 ? a.stride(0) : 0, sb = B > 1 ? b.stride(0) : 0, sc = M * N;
  check_int(M, "M");
  check_int(N, "N");
  check_int(K, "K");
  check_int(B, "batch");
  check_int(la.ld, "lda");
  check_int(lb.ld, "ldb");

  const cudaStream_t stream = current_stream(dev);
  cublasHandle_t h = blas_handle(dev, stream);
  // cuBLAS "A" = our b (N x K as seen column-major), "B" = our a (K x M).
  const cublasOperation_t opa = lb.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t opb = la.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const int m = int(N), n = int(M), k = int(K), lda = int(lb.ld), ldb = int(la.ld), ldc = int(N);

  if (out.dtype() == DType::Float64) {
    if (bias.defined()) bias_into_out();
    const double alpha = 1.0, beta = bias.defined() ? 1.0 : 0.0;
    MT_CUBLAS_CHECK(cublasDgemmStridedBatched(h, opa, opb, m, n, k, &alpha, static_cast<const double*>(b.raw_data()),
                                              lda, sb, static_cast<const double*>(a.raw_data()), ldb, sa, &beta,
                                              static_cast<double*>(out.raw_data()), ldc, sc, int(B)));
    return;
  }
  const cudaDataType_t type = gemm_type(out.dtype(), "matmul");
  const cublasComputeType_t compute =
      type == CUDA_R_32F && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (bias.defined() && B == 1 && cublaslt_enabled()) {
    const LtKey key{.dev = dev,
                    .type = type,
                    .compute = compute,
                    .opa = opa,
                    .opb = opb,
                    .m = m,
                    .n = n,
                    .k = k,
                    .lda = lda,
                    .ldb = ldb,
                    .ldc = ldc,
                    .align_a = alignment_of(b.raw_data()),
                    .align_b = alignment_of(a.raw_data()),
                    .align_c = alignment_of(out.raw_data()),
                    .align_bias = alignment_of(bias.raw_data())};
    if (lt_matmul_bias(key, b.raw_data(), a.raw_data(), bias.raw_data(), out.raw_data(), stream)) return;
  }
  if (bias.defined()) bias_into_out();
  const float alpha = 1.0f, beta = bias.defined() ? 1.0f : 0.0f;  // scalars in the compute type (fp32)
  MT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, opa, opb, m, n, k, &alpha, b.raw_data(), type, lda, sb, a.raw_data(),
                                             type, ldb, sa, &beta, out.raw_data(), type, ldc, sc, int(B), compute,
                                             CUBLAS_GEMM_DEFAULT));
}

cudaDataType_t gemm_type(DType t, const char* op) {
  switch (t) {
    case DType::Float32:
      return CUDA_R_32F;
    case DType::Float16:
      return CUDA_R_16F;
    case DType::BFloat16:
      return CUDA_R_16BF;
    default:
      MT_FAIL(op, "expected fp32, fp16 or bf16, got ", dtype_name(t));
  }
}

void gemm_batched(int device, const RowMajorGemm& g, const void* a, cudaDataType_t a_type, const void* b,
                  cudaDataType_t b_type, void* c, cudaDataType_t c_type) {
  if (g.batch == 0 || g.M == 0 || g.N == 0) return;
  const ColumnMajorGemm cm = column_major(g);
  for (int64_t v : {cm.m, cm.n, cm.k, cm.lda, cm.ldb, cm.ldc, cm.batch}) check_int(v, "gemm_batched dimension");
  auto at = [](const void* base, cudaDataType_t t, int64_t offset) {
    return static_cast<const char*>(base) + offset * (t == CUDA_R_32F ? 4 : 2);
  };
  DeviceGuard guard(device);
  const cudaStream_t stream = current_stream(device);
  cublasHandle_t h = blas_handle(device, stream);
  const cublasComputeType_t compute =
      a_type == CUDA_R_32F && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float beta = 0.0f;
  // cuBLAS's A is our b, its B our a (core/gemm_args.h).
  MT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      h, cm.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, cm.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, int(cm.m), int(cm.n),
      int(cm.k), &g.alpha, at(b, b_type, g.b.offset), b_type, int(cm.lda), cm.stride_a, at(a, a_type, g.a.offset),
      a_type, int(cm.ldb), cm.stride_b, &beta, const_cast<char*>(at(c, c_type, g.c_offset)), c_type, int(cm.ldc),
      cm.stride_c, int(cm.batch), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace mantissa::cuda
