// The GPU benchmark behind tools/gpu-check.sh: each Mantissa number next to a baseline
// measured in the same run, then one summary table with the goals.
//   * GEMM TFLOP/s, 4096^3 and 8192^3, fp32 / fp16 / bf16: mt::matmul vs cublasGemmEx called
//     directly with the same settings (fp32 accumulation, no TF32, no reduced-precision
//     split-K reductions);
//   * elementwise GB/s (bytes read + written) of add / relu / gelu on 256M floats vs a
//     device-to-device cudaMemcpy of the same buffer;
//   * training-step milliseconds (forward + loss + backward + optimizer + scaler update) in
//     fp32, fp16 autocast + GradScaler and bf16 autocast: the MNIST CNN at batch 64 (SGD,
//     momentum) and a transformer-sized MLP block on 32 x 512 tokens (AdamW).
// Every timed iteration ends in cuda::synchronize, so times are the GPU's.
//   cmake --build build-gpu --target bench_gpu && build-gpu/bench/bench_gpu --benchmark_min_time=0.2s
// Without a GPU (or built without CUDA) it prints "no GPU" and exits 0.
#include <benchmark/benchmark.h>
#include <mantissa.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../examples/mnist/models.h"
#include "cuda/cuda_api.h"

#ifdef MANTISSA_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

namespace mt = mantissa;
namespace F = mt::nn::functional;

namespace {

const mt::Device kGpu = mt::Device::cuda(0);

const char* short_name(mt::DType t) { return t == mt::kFloat32 ? "fp32" : (t == mt::kHalf ? "fp16" : "bf16"); }

// Runs `body` once per iteration, then waits for the GPU; a mantissa::Error (e.g. an op
// without CUDA kernels) turns into a skipped benchmark with the message.
template <typename Body>
void timed(benchmark::State& state, Body&& body) {
  try {
    body();  // warm-up: allocations, cuBLAS heuristics, working copies
    mt::cuda::synchronize();
    for (auto _ : state) {
      body();
      mt::cuda::synchronize();
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// Random inputs, made once per process and kept on the GPU: randn generates on the host,
// serially, and Google Benchmark calls each benchmark function several times.
const mt::Tensor& cached_randn(const std::string& key, const mt::Shape& shape) {
  static std::map<std::string, mt::Tensor> cache;
  mt::Tensor& t = cache[key];
  if (!t.defined()) {
    mt::manual_seed(std::hash<std::string>{}(key));
    t = mt::randn(shape).to(kGpu);
  }
  return t;
}

// ---------------------------------------------------------------- GEMM

void gemm_ours(benchmark::State& state, mt::DType dtype, int64_t n) {
  const mt::Tensor a = cached_randn("gemm_a" + std::to_string(n), {n, n}).to(dtype);
  const mt::Tensor b = cached_randn("gemm_b" + std::to_string(n), {n, n}).to(dtype);
  timed(state, [&] { benchmark::DoNotOptimize(mt::matmul(a, b)); });
  state.counters["TFLOPS"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) * double(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

#ifdef MANTISSA_WITH_CUDA
void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + " failed: status " + std::to_string(s));
}

void gemm_cublas(benchmark::State& state, mt::DType dtype, int64_t n) {
  const mt::Tensor a = cached_randn("gemm_a" + std::to_string(n), {n, n}).to(dtype);
  const mt::Tensor b = cached_randn("gemm_b" + std::to_string(n), {n, n}).to(dtype);
  mt::Tensor c = mt::empty({n, n}, {.dtype = dtype, .device = kGpu});
  const cudaDataType_t type = dtype == mt::kFloat32 ? CUDA_R_32F : (dtype == mt::kHalf ? CUDA_R_16F : CUDA_R_16BF);
  cublasHandle_t handle = nullptr;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    state.SkipWithError("cublasCreate failed");
    return;
  }
  // Mantissa's settings (cuda/matmul.cpp): fp32 accumulation, exact split-K reductions.
  if (cublasSetMathMode(handle, cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) !=
      CUBLAS_STATUS_SUCCESS) {
    state.SkipWithError("cublasSetMathMode failed");
    cublasDestroy(handle);  // already failing: its status adds nothing
    return;
  }
  const float alpha = 1.0f, beta = 0.0f;
  const int m = int(n);
  // Row-major C = A B is column-major C^T = B^T A^T.
  timed(state, [&] {
    check_cublas(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &alpha, b.raw_data(), type, m, a.raw_data(),
                              type, m, &beta, c.raw_data(), type, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  });
  if (cublasDestroy(handle) != CUBLAS_STATUS_SUCCESS) state.SkipWithError("cublasDestroy failed");
  state.counters["TFLOPS"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) * double(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

void d2d_copy(benchmark::State& state, int64_t n) {
  const mt::Tensor& src = cached_randn("elementwise_a", {n});
  mt::Tensor dst = mt::empty({n}, {.device = kGpu});
  timed(state, [&] {
    if (cudaMemcpyAsync(dst.raw_data(), src.raw_data(), size_t(n) * 4, cudaMemcpyDeviceToDevice, nullptr) !=
        cudaSuccess)
      throw std::runtime_error("cudaMemcpyAsync failed");
  });
  state.counters["GBps"] =
      benchmark::Counter(2.0 * 4.0 * double(n) * double(state.iterations()), benchmark::Counter::kIsRate);
}
#endif

// ---------------------------------------------------------------- elementwise

void elementwise(benchmark::State& state, const std::string& op, int64_t n) {
  const mt::Tensor& a = cached_randn("elementwise_a", {n});
  const mt::Tensor& b = cached_randn("elementwise_b", {n});
  mt::NoGradGuard no_grad;
  std::function<mt::Tensor()> f;
  double tensors = 2;  // read + written
  if (op == "add") {
    f = [&] { return a + b; };
    tensors = 3;
  } else if (op == "relu") {
    f = [&] { return mt::relu(a); };
  } else {
    f = [&] { return mt::gelu(a); };
  }
  timed(state, [&] { benchmark::DoNotOptimize(f()); });
  state.counters["GBps"] =
      benchmark::Counter(tensors * 4.0 * double(n) * double(state.iterations()), benchmark::Counter::kIsRate);
}

// ---------------------------------------------------------------- training steps

enum class Amp { Off, Fp16, Bf16 };

// Linear 768 -> 3072, GELU, Linear 3072 -> 768, layer_norm, then a 768 -> 8192 head for
// cross-entropy: the feed-forward half of a transformer layer plus an LM-style loss.
struct MlpBlock : mt::nn::Module {
  mt::nn::Linear up{768, 3072}, down{3072, 768}, head{768, 8192};
  mt::nn::LayerNorm norm{768};
  MlpBlock() {
    register_module("up", up);
    register_module("down", down);
    register_module("norm", norm);
    register_module("head", head);
  }
  mt::Tensor forward(const mt::Tensor& x) override { return head(norm(down(mt::gelu(up(x))))); }
};

template <typename Model, typename Optimizer>
void train_step(benchmark::State& state, const mt::Tensor& x, const mt::Tensor& y, Amp amp,
                const std::function<std::unique_ptr<Optimizer>(std::vector<mt::Tensor>)>& make_opt) {
  mt::manual_seed(7);
  Model net;
  net.to(kGpu);
  auto opt = make_opt(net.parameters());
  mt::amp::GradScaler scaler({.enabled = amp == Amp::Fp16});
  const mt::DType low = amp == Amp::Bf16 ? mt::kBFloat16 : mt::kHalf;
  timed(state, [&] {
    mt::Tensor loss;
    {
      mt::amp::Autocast ac(low, amp != Amp::Off, mt::DeviceType::CUDA);
      loss = F::cross_entropy(net(x), y);
    }
    opt->zero_grad();
    scaler.backward(loss);
    scaler.step(*opt);
    scaler.update();
  });
}

void cnn_step(benchmark::State& state, Amp amp) {
  mt::manual_seed(3);
  mt::Tensor x = mt::randn({64, 1, 28, 28}, {.device = kGpu});
  mt::Tensor y = mt::randint(0, 10, {64}).to(kGpu);
  train_step<mnist::Cnn, mt::optim::SGD>(state, x, y, amp, [](std::vector<mt::Tensor> ps) {
    return std::make_unique<mt::optim::SGD>(ps, mt::optim::SGDOptions{.lr = 0.01, .momentum = 0.9});
  });
}

void mlp_block_step(benchmark::State& state, Amp amp) {
  mt::manual_seed(4);
  mt::Tensor x = mt::randn({32 * 512, 768}, {.device = kGpu});
  mt::Tensor y = mt::randint(0, 8192, {32 * 512}).to(kGpu);
  train_step<MlpBlock, mt::optim::AdamW>(state, x, y, amp, [](std::vector<mt::Tensor> ps) {
    return std::make_unique<mt::optim::AdamW>(ps, mt::optim::AdamWOptions{.lr = 1e-4, .weight_decay = 0.01});
  });
}

// ---------------------------------------------------------------- the summary table

// Whether a run was skipped with an error, across Google Benchmark versions (1.7: error_*,
// 1.8+: skipped / skip_message).
template <typename Run>
bool failed(const Run& r, std::string& message) {
  if constexpr (requires { r.skip_message; }) {
    message = r.skip_message;
    return bool(r.skipped);
  } else {
    message = r.error_message;
    return r.error_occurred;
  }
}

// Collects each run's counters and real time, and prints the table gpu-check.sh shows.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      const std::string name = r.run_name.function_name;
      std::string message;
      if (failed(r, message)) {
        errors_[name] = message;
        continue;
      }
      for (const auto& [key, c] : r.counters) values_[name + "#" + key] = c.value;
      values_[name + "#ms"] = r.GetAdjustedRealTime();  // every benchmark reports milliseconds
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\n== summary (ours vs the baseline measured in the same run)\n");
    std::printf("%-34s %14s %14s %8s   %s\n", "benchmark", "mantissa", "baseline", "ratio", "goal");
    for (const char* dt : {"fp32", "fp16", "bf16"})
      for (const char* n : {"4096", "8192"}) {
        const std::string ours = std::string("gemm/mantissa/") + dt + "/" + n;
        const std::string base = std::string("gemm/cublas/") + dt + "/" + n;
        row("GEMM " + std::string(dt) + " " + n + "^3 (TFLOP/s)", ours + "#TFLOPS", base + "#TFLOPS", 1e12,
            std::string(dt) == "fp16" ? ">= 0.90 of cuBLAS" : "", 0.90, std::string(dt) == "fp16");
      }
    for (const char* op : {"add", "relu", "gelu"})
      row(std::string("elementwise ") + op + " 256M (GB/s)", std::string("elementwise/") + op + "#GBps",
          "elementwise/d2d_memcpy#GBps", 1e9, ">= 0.80 of D2D copy", 0.80, true);
    for (const char* model : {"cnn", "mlp_block"})
      for (const char* amp : {"fp16", "bf16"}) {
        const std::string fp32 = std::string("train/") + model + "/fp32#ms";
        const std::string low = std::string("train/") + model + "/" + amp + "#ms";
        const bool goal = std::string(model) == "mlp_block";
        // A speedup: fp32 time over AMP time.
        row(std::string("train step ") + model + " " + amp + " vs fp32 (ms)", low, fp32, 1,
            goal ? ">= 2.5x faster" : "", 2.5, goal, /*inverse=*/true);
      }
    for (const auto& [name, msg] : errors_) std::printf("skipped %s: %s\n", name.c_str(), msg.c_str());
    std::printf("goals missed: %d\n", missed_);
  }

 private:
  // ratio = ours / baseline (inverse: baseline / ours, a speedup) against `goal` when `check`.
  void row(const std::string& label, const std::string& ours, const std::string& base, double scale,
           const std::string& goal_text, double goal, bool check, bool inverse = false) {
    auto a = values_.find(ours), b = values_.find(base);
    if (a == values_.end() || b == values_.end()) {
      std::printf("%-34s %14s %14s %8s   %s\n", label.c_str(), a == values_.end() ? "n/a" : "", "", "",
                  goal_text.c_str());
      return;
    }
    const double ratio = inverse ? b->second / a->second : a->second / b->second;
    const bool ok = !check || ratio >= goal;
    if (!ok) ++missed_;
    std::printf("%-34s %14.2f %14.2f %7.2f%s   %s%s\n", label.c_str(), a->second / scale, b->second / scale, ratio,
                inverse ? "x" : " ", goal_text.c_str(), check ? (ok ? "  ok" : "  MISSED") : "");
  }

  std::map<std::string, double> values_;
  std::map<std::string, std::string> errors_;
  int missed_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (mt::cuda_device_count() == 0) {
    std::printf("no GPU: bench_gpu needs a CUDA device (and a build with MANTISSA_CUDA); nothing measured\n");
    return 0;
  }
  std::printf("device: %s (sm_%d)\n", mt::cuda::device_name().c_str(), mt::cuda::compute_capability());
  auto ms = [](benchmark::internal::Benchmark* b) { b->Unit(benchmark::kMillisecond)->UseRealTime(); };
  for (mt::DType t : {mt::kFloat32, mt::kHalf, mt::kBFloat16})
    for (int64_t n : {4096, 8192}) {
      const std::string suffix = std::string(short_name(t)) + "/" + std::to_string(n);
      ms(benchmark::RegisterBenchmark(("gemm/mantissa/" + suffix).c_str(), gemm_ours, t, n));
#ifdef MANTISSA_WITH_CUDA
      ms(benchmark::RegisterBenchmark(("gemm/cublas/" + suffix).c_str(), gemm_cublas, t, n));
#endif
    }
  const int64_t n = int64_t(1) << 28;  // 256M floats, 1 GiB per tensor
#ifdef MANTISSA_WITH_CUDA
  ms(benchmark::RegisterBenchmark("elementwise/d2d_memcpy", d2d_copy, n));
#endif
  for (const char* op : {"add", "relu", "gelu"})
    ms(benchmark::RegisterBenchmark((std::string("elementwise/") + op).c_str(), elementwise, std::string(op), n));
  for (Amp amp : {Amp::Off, Amp::Fp16, Amp::Bf16}) {
    const char* tag = amp == Amp::Off ? "fp32" : (amp == Amp::Fp16 ? "fp16" : "bf16");
    ms(benchmark::RegisterBenchmark((std::string("train/cnn/") + tag).c_str(), cnn_step, amp));
    ms(benchmark::RegisterBenchmark((std::string("train/mlp_block/") + tag).c_str(), mlp_block_step, amp));
  }
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
