// Square matmul: mantissa::matmul (allocating its result, as user code does) in fp32, bf16
// and fp16 next to a raw Eigen fp32 GEMM on row-major maps into preallocated buffers and, when
// built with oneDNN, a raw oneDNN matmul primitive (fp32 and bf16, created once), all on the
// same OpenMP threads. Goals: mantissa >= 0.9x its raw baseline (Eigen fp32; oneDNN bf16).
//   build/bench/bench_matmul --benchmark_min_time=0.2
#include <mantissa.h>
#ifdef MANTISSA_BENCH_ONEDNN
#include <dnnl.hpp>
#endif

// GCC 12 reports -Wmaybe-uninitialized false positives inside Eigen's AVX-512 GEMM.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <cstdio>
#include <string>
#include <vector>

#include "core/cpu/onednn.h"
#include "ratio_reporter.h"

namespace mt = mantissa;

namespace {

constexpr int64_t kSizes[] = {256, 512, 1024, 2048};

void set_flops(benchmark::State& state, int64_t n) {
  // kIsRate: divided by the measured time, so this reads as FLOP/s (printed with a G suffix).
  state.counters["FLOPS"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) * double(state.iterations()),
                                               benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

constexpr mt::DType kDtypes[] = {mt::kFloat32, mt::kBFloat16, mt::kFloat16};

void mantissa_matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const mt::DType dt = kDtypes[state.range(1)];
  mt::manual_seed(1);
  mt::Tensor a = mt::randn({n, n}).to(dt), b = mt::randn({n, n}).to(dt);
  for (auto _ : state) {
    mt::Tensor c = mt::matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}

#ifdef MANTISSA_BENCH_ONEDNN
// The raw oneDNN matmul primitive on plain row-major buffers, created before timing.
void onednn_matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const mt::DType dt = kDtypes[state.range(1)];
  using dnnl::memory;
  const auto ddt = dt == mt::kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  memory::desc md({n, n}, ddt, memory::format_tag::ab);
  dnnl::matmul mm(dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), eng));
  mt::manual_seed(1);
  mt::Tensor a = mt::randn({n, n}).to(dt), b = mt::randn({n, n}).to(dt), c = mt::zeros({n, n}, {.dtype = dt});
  memory A(md, eng, a.raw_data()), B(md, eng, b.raw_data()), C(md, eng, c.raw_data());
  for (auto _ : state) {
    mm.execute(s, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}});
    s.wait();
    benchmark::DoNotOptimize(c.raw_data());
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}
#endif

void eigen_gemm(benchmark::State& state) {
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int64_t n = state.range(0);
  mt::manual_seed(1);
  std::vector<float> a = mt::randn({n, n}).to_vector<float>(), b = mt::randn({n, n}).to_vector<float>();
  std::vector<float> c(size_t(n * n));
  Eigen::Map<const RowMat> A(a.data(), n, n), B(b.data(), n, n);
  Eigen::Map<RowMat> C(c.data(), n, n);
  for (auto _ : state) {
    C.noalias() = A * B;
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<mantissa_bench::RatioReporter::Pair> pairs;
  auto reg = [](const char* name, void (*fn)(benchmark::State&), int64_t n, int dtype) {
    benchmark::RegisterBenchmark(name, fn)->Args({n, dtype})->Unit(benchmark::kMillisecond)->UseRealTime();
  };
  for (int64_t n : kSizes) {
    // Interleaved, so both sides of a pair see the same machine state.
    benchmark::RegisterBenchmark("eigen_gemm", eigen_gemm)->Arg(n)->Unit(benchmark::kMillisecond)->UseRealTime();
    for (int d = 0; d < 3; ++d) reg("mantissa_matmul", mantissa_matmul, n, d);
    const std::string sz = std::to_string(n) + "/", eigen = "eigen_gemm/" + sz + "real_time";
    auto ours = [&](int d) { return "mantissa_matmul/" + sz + std::to_string(d) + "/real_time"; };
    pairs.push_back({ours(0), eigen, "FLOPS"});
    pairs.push_back({ours(2), eigen, "FLOPS"});  // fp16: widened to fp32 and rounded
#ifdef MANTISSA_BENCH_ONEDNN
    for (int d = 0; d < 2; ++d) reg("onednn_matmul", onednn_matmul, n, d);
    auto raw = [&](int d) { return "onednn_matmul/" + sz + std::to_string(d) + "/real_time"; };
    pairs.push_back({raw(0), eigen, "FLOPS"});
    pairs.push_back({ours(1), raw(1), "FLOPS"});
#else
    pairs.push_back({ours(1), eigen, "FLOPS"});
#endif
  }
  std::printf("%s\n(dtype argument: 0 fp32, 1 bf16, 2 fp16)\n", mt::cpu::onednn::describe().c_str());
  return mantissa_bench::run(argc, argv, pairs);
}
