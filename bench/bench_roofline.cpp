// The memory roofline of the generic ops: every op class a user's own layer is built from, in
// fp32 and bf16, on 1 and 2 threads, as achieved GB/s next to memcpy of the same bytes on the
// same threads measured in the same run. Bytes are the op's compulsory traffic: every input read
// once and every output written once (fwd+bwd rows add the backward's reads and writes); a
// kernel that re-reads from cache is not charged for it. Target: every row >= 50 % of memcpy at
// >= 1M elements. After the runs a table prints each row's share of memcpy and marks those below,
// and its share of the same op's rate at 64K elements on one thread times the threads (data in
// L2; a row near or above 100 % there is held back by its arithmetic, and only faster math would
// lift it; far above it, the 64K call is different work and gives no ceiling). On AVX-512 two
// rows measure the arithmetic ceiling itself (ceiling/fma512, ceiling/exp16: one thread, data in
// L1), and the table ends with what the line asks per element against what exp alone gives.
//   build/bench/bench_roofline                 # quick set: 64K, 1M and 4M elements
//   build/bench/bench_roofline --full          # 64K ... 64M elements
//   build/bench/bench_roofline --benchmark_filter=softmax
//   build/bench/bench_roofline --no-streaming  # plain stores only (core/cpu/streaming_store.h)
#include <benchmark/benchmark.h>
#include <mantissa.h>
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/cpu/streaming_store.h"
#include "core/cpu/vec_math.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;
using mt::Tensor;

namespace {

// A prepared op: run() once per iteration; bytes moved per run.
struct Prepared {
  std::function<void()> run;
  double bytes = 0;
};
using Make = std::function<Prepared(int64_t numel, mt::DType dt)>;

double esize(mt::DType dt) { return dt == mt::kFloat32 ? 4.0 : 2.0; }

Tensor input(const mt::Shape& s, mt::DType dt, bool grad = false) {
  Tensor x = mt::randn(s).to(dt);
  if (grad) x.requires_grad_();
  return x;
}

void keep(const Tensor& t) { benchmark::DoNotOptimize(t.raw_data()); }

// forward and backward of f at x with upstream g, via autograd::grad (no .grad accumulation).
Prepared fwd_bwd(const Tensor& x, std::function<Tensor(const Tensor&)> f, double bytes) {
  Tensor g = mt::randn(f(x.detach()).sizes()).to(x.dtype());
  return {[x, f, g] {
            Tensor y = f(x);
            keep(mt::autograd::grad({y}, {x}, {g.to(y.dtype())})[0]);
          },
          bytes};
}

// Rows of 256 (the attention scores' last dim) for softmax; rows of 1024 for reductions and norms.
constexpr int64_t kRow = 256, kNormRow = 1024;

std::vector<std::pair<std::string, Make>> ops() {
  std::vector<std::pair<std::string, Make>> v;
  auto add = [&](std::string name, Make m) { v.emplace_back(std::move(name), std::move(m)); };
  // Unary ops: relu, exp, and the activations of users' own layers (gated MLPs, recurrent
  // cells) outside the GPT.
  using Unary = Tensor (*)(const Tensor&);
  for (const auto& [name, op] :
       std::vector<std::pair<std::string, Unary>>{{"relu", [](const Tensor& x) { return mt::relu(x); }},
                                                  {"exp", [](const Tensor& x) { return mt::exp(x); }},
                                                  {"sigmoid", [](const Tensor& x) { return mt::sigmoid(x); }},
                                                  {"silu", [](const Tensor& x) { return mt::silu(x); }},
                                                  {"tanh", [](const Tensor& x) { return mt::tanh(x); }}})
    add(name, [op = op](int64_t n, mt::DType dt) {
      Tensor x = input({n}, dt);
      return Prepared{[x, op] { keep(op(x)); }, 2 * n * esize(dt)};
    });
  add("mul", [](int64_t n, mt::DType dt) {
    Tensor a = input({n}, dt), b = input({n}, dt);
    return Prepared{[a, b] { keep(a * b); }, 3 * n * esize(dt)};
  });
  add("add_bcast_row", [](int64_t n, mt::DType dt) {  // [n/1024, 1024] + [1024] (a bias)
    Tensor a = input({n / kNormRow, kNormRow}, dt), b = input({kNormRow}, dt);
    return Prepared{[a, b] { keep(a + b); }, 2 * n * esize(dt)};
  });
  add("add_bcast_col", [](int64_t n, mt::DType dt) {  // [n/1024, 1024] + [n/1024, 1] (a per-row scale)
    Tensor a = input({n / kNormRow, kNormRow}, dt), b = input({n / kNormRow, 1}, dt);
    return Prepared{[a, b] { keep(a + b); }, 2 * n * esize(dt)};
  });
  add("cast_to_f32", [](int64_t n, mt::DType dt) {  // dt -> fp32 (fp32: -> bf16)
    Tensor x = input({n}, dt);
    mt::DType to = dt == mt::kFloat32 ? mt::kBFloat16 : mt::kFloat32;
    return Prepared{[x, to] { keep(x.to(to)); }, n * (esize(dt) + esize(to))};
  });
  add("cast_fp16", [](int64_t n, mt::DType dt) {  // dt -> fp16
    Tensor x = input({n}, dt);
    return Prepared{[x] { keep(x.to(mt::kHalf)); }, n * (esize(dt) + 2)};
  });
  add("masked_fill_bcast", [](int64_t n, mt::DType dt) {  // [B, H, 256, 256] scores, causal [1, 1, 256, 256]
    const int64_t T = kRow, bh = std::max<int64_t>(1, n / (T * T));
    Tensor x = input({bh, 1, T, T}, dt);
    Tensor mask = mt::triu(mt::ones({T, T}), 1).to(mt::kBool).reshape({1, 1, T, T});
    return Prepared{[x, mask] { keep(mt::masked_fill(x, mask, -1e30)); }, 2 * double(bh * T * T) * esize(dt)};
  });
  for (bool log : {false, true}) {
    const std::string s = log ? "log_softmax" : "softmax";
    auto sm = [log](const Tensor& x, int64_t d) { return log ? mt::log_softmax(x, d) : mt::softmax(x, d); };
    add(s + "_last", [sm](int64_t n, mt::DType dt) {
      Tensor x = input({n / kRow, kRow}, dt);
      return Prepared{[x, sm] { keep(sm(x, 1)); }, 2 * n * esize(dt)};
    });
    add(s + "_mid", [sm](int64_t n, mt::DType dt) {  // [n/65536, 256, 256] along dim 1
      Tensor x = input({std::max<int64_t>(1, n / (kRow * kRow)), kRow, kRow}, dt);
      return Prepared{[x, sm] { keep(sm(x, 1)); }, 2 * double(x.numel()) * esize(dt)};
    });
    add(s + "_last_fwdbwd", [sm](int64_t n, mt::DType dt) {  // fwd: x, y; bwd: y, g, gx
      return fwd_bwd(
          input({n / kRow, kRow}, dt, true), [sm](const Tensor& x) { return sm(x, 1); }, 5 * n * esize(dt));
    });
    add(s + "_mid_fwdbwd", [sm](int64_t n, mt::DType dt) {
      Tensor x = input({std::max<int64_t>(1, n / (kRow * kRow)), kRow, kRow}, dt, true);
      return fwd_bwd(
          x, [sm](const Tensor& t) { return sm(t, 1); }, 5 * double(x.numel()) * esize(dt));
    });
  }
  // Autocast's pattern: a bf16 score tensor into the fp32 softmax (reads bf16, writes fp32).
  add("softmax_autocast_bf16_in", [](int64_t n, mt::DType) {
    Tensor x = input({n / kRow, kRow}, mt::kBFloat16);
    return Prepared{[x] {
                      mt::amp::Autocast ac(mt::kBFloat16);
                      keep(mt::softmax(x, 1));
                    },
                    6.0 * double(n)};
  });
  using Red = std::function<Tensor(const Tensor&, int64_t)>;
  const std::vector<std::pair<std::string, Red>> reds = {
      {"sum", [](const Tensor& x, int64_t d) { return mt::sum(x, {d}); }},
      {"mean", [](const Tensor& x, int64_t d) { return mt::mean(x, {d}); }},
      {"max", [](const Tensor& x, int64_t d) { return mt::amax(x, {d}); }},
      {"var", [](const Tensor& x, int64_t d) { return mt::var(x, {d}); }},
  };
  for (const auto& [name, f] : reds)
    for (int64_t d : {0, 1})
      add(name + "_dim" + std::to_string(d), [f = f, d](int64_t n, mt::DType dt) {
        Tensor x = input({n / kNormRow, kNormRow}, dt);
        return Prepared{[x, f, d] { keep(f(x, d)); }, n * esize(dt)};
      });
  add("layer_norm_fwd", [](int64_t n, mt::DType dt) {
    Tensor x = input({n / kNormRow, kNormRow}, dt), w = mt::ones({kNormRow}), b = mt::zeros({kNormRow});
    return Prepared{[x, w, b] { keep(F::layer_norm(x, {kNormRow}, w, b)); }, 2 * n * esize(dt)};
  });
  add("layer_norm_fwdbwd", [](int64_t n, mt::DType dt) {  // fwd: x, y; bwd: g, x, gx
    Tensor w = mt::ones({kNormRow}), b = mt::zeros({kNormRow});
    return fwd_bwd(
        input({n / kNormRow, kNormRow}, dt, true),
        [w, b](const Tensor& x) { return F::layer_norm(x, {kNormRow}, w, b); }, 5 * n * esize(dt));
  });
  add("gelu_fwd", [](int64_t n, mt::DType dt) {
    Tensor x = input({n}, dt);
    return Prepared{[x] { keep(mt::gelu(x)); }, 2 * n * esize(dt)};
  });
  add("gelu_fwdbwd", [](int64_t n, mt::DType dt) {
    return fwd_bwd(
        input({n}, dt, true), [](const Tensor& x) { return mt::gelu(x); }, 5 * n * esize(dt));
  });
  add("gelu_tanh_fwdbwd", [](int64_t n, mt::DType dt) {  // the GPTs' approximation
    return fwd_bwd(
        input({n}, dt, true), [](const Tensor& x) { return mt::gelu(x, "tanh"); }, 5 * n * esize(dt));
  });
  add("silu_fwdbwd", [](int64_t n, mt::DType dt) {
    return fwd_bwd(
        input({n}, dt, true), [](const Tensor& x) { return mt::silu(x); }, 5 * n * esize(dt));
  });
  add("dropout", [](int64_t n, mt::DType dt) {
    Tensor x = input({n}, dt);
    return Prepared{[x] { keep(F::dropout(x, 0.1, true)); }, 2 * n * esize(dt)};
  });
  add("dropout_fwdbwd", [](int64_t n, mt::DType dt) {  // fwd: x, y; bwd: g, gx (the mask is redrawn)
    return fwd_bwd(
        input({n}, dt, true), [](const Tensor& x) { return F::dropout(x, 0.1, true); }, 4 * n * esize(dt));
  });
  add("embedding_fwd", [](int64_t n, mt::DType dt) {  // rows of 256 from a 4096-row table
    const int64_t D = kRow;
    Tensor w = input({4096, D}, dt), idx = mt::randint(0, 4096, {n / D});
    return Prepared{[w, idx] { keep(F::embedding(idx, w)); }, 2 * n * esize(dt)};
  });
  add("embedding_fwdbwd", [](int64_t n, mt::DType dt) {  // fwd: rows, out; bwd: g, table rows read + written
    const int64_t D = kRow;
    Tensor idx = mt::randint(0, 4096, {n / D});
    return fwd_bwd(
        input({4096, D}, dt, true), [idx](const Tensor& w) { return F::embedding(idx, w); }, 5 * n * esize(dt));
  });
  add("transpose_copy", [](int64_t n, mt::DType dt) {
    Tensor x = input({n / kNormRow, kNormRow}, dt);
    return Prepared{[x] { keep(x.t().contiguous()); }, 2 * n * esize(dt)};
  });
  add("permute_0213_copy", [](int64_t n, mt::DType dt) {  // [B, T, H, E] -> [B, H, T, E] (heads split)
    Tensor x = input({n / (256 * 8 * 32), 256, 8, 32}, dt);
    return Prepared{[x] { keep(x.permute({0, 2, 1, 3}).contiguous()); }, 2 * n * esize(dt)};
  });
  // Ops on views a user's layer makes without a copy. Rotary embeddings' rotate_half:
  // cat(-x[..., E/2:], x[..., :E/2]) with E = 32 (negating a narrow whose rows are 16 long).
  add("rotate_half", [](int64_t n, mt::DType dt) {
    Tensor x = input({n / 32, 32}, dt);
    return Prepared{[x] { keep(mt::cat({-x.narrow(1, 16, 16), x.narrow(1, 0, 16)}, 1)); }, 2 * n * esize(dt)};
  });
  // A GLU's gate: sigmoid of the second half of the last dim (chunk: rows of 512 in rows of 1024).
  add("sigmoid_chunk", [](int64_t n, mt::DType dt) {
    Tensor x = input({n / kNormRow, kNormRow}, dt);
    return Prepared{[x] { keep(mt::sigmoid(mt::chunk(x, 2, 1)[1])); }, n * esize(dt)};
  });
  // Autocast's cast of a transposed operand (k^T before q k^T): fp32 -> bf16 rows read from
  // the other dtype (bf16 -> fp32 on the fp32 rows), transposed into a contiguous result.
  add("cast_transposed", [](int64_t n, mt::DType dt) {
    const mt::DType from = dt == mt::kFloat32 ? mt::kBFloat16 : mt::kFloat32;
    Tensor x = input({n / kNormRow, kNormRow}, from);
    return Prepared{[x, dt] { keep(x.t().to(dt)); }, n * (esize(dt) + esize(from))};
  });
  // A product with a transposed operand (a gradient arriving through a transpose).
  add("mul_transposed", [](int64_t n, mt::DType dt) {
    Tensor a = input({n / kNormRow, kNormRow}, dt), b = input({kNormRow, n / kNormRow}, dt);
    return Prepared{[a, b] { keep(a.t() * b); }, 3 * n * esize(dt)};
  });
  // An activation of a transposed view (the result is contiguous).
  add("silu_transposed", [](int64_t n, mt::DType dt) {
    Tensor x = input({n / kNormRow, kNormRow}, dt);
    return Prepared{[x] { keep(mt::silu(x.t())); }, 2 * n * esize(dt)};
  });
  // masked_fill of a transposed view (the mask contiguous).
  add("masked_fill_transposed", [](int64_t n, mt::DType dt) {
    Tensor x = input({kNormRow, n / kNormRow}, dt), m = mt::gt(mt::randn({n / kNormRow, kNormRow}), mt::zeros({}));
    return Prepared{[x, m] { keep(mt::masked_fill(x.t(), m, 0.0)); }, 2 * n * esize(dt)};
  });
  add("clamp", [](int64_t n, mt::DType dt) {
    Tensor x = input({n}, dt);
    return Prepared{[x] { keep(mt::clamp(x, -1.0, 1.0)); }, 2 * n * esize(dt)};
  });
  // Reductions of a transposed view: over its rows (the columns of its storage) and over its
  // columns.
  add("sum_transposed_dim1", [](int64_t n, mt::DType dt) {
    Tensor x = input({n / kNormRow, kNormRow}, dt);
    return Prepared{[x] { keep(mt::sum(x.t(), {1})); }, n * esize(dt)};
  });
  add("max_transposed_dim0", [](int64_t n, mt::DType dt) {
    Tensor x = input({n / kNormRow, kNormRow}, dt);
    return Prepared{[x] { keep(mt::amax(x.t(), {0})); }, n * esize(dt)};
  });
  add("cat_dim1", [](int64_t n, mt::DType dt) {
    Tensor a = input({n / kNormRow, kNormRow / 2}, dt), b = input({n / kNormRow, kNormRow / 2}, dt);
    return Prepared{[a, b] { keep(mt::cat({a, b}, 1)); }, 2 * n * esize(dt)};
  });
  return v;
}

// memcpy of `bytes` split over the threads (the ceiling for a threaded op).
void memcpy_bench(benchmark::State& state, double bytes, int threads) {
  std::vector<char> src(size_t(bytes), 1), dst(size_t(bytes), 0);
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    {
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t b = int64_t(bytes) * t / nt, e = int64_t(bytes) * (t + 1) / nt;
      std::memcpy(dst.data() + b, src.data() + b, size_t(e - b));
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.counters["GBps"] = benchmark::Counter(2 * bytes * double(state.iterations()), benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
}

void op_bench(benchmark::State& state, const Make& make, int64_t numel, mt::DType dt, int threads) {
  omp_set_num_threads(threads);
  mt::manual_seed(1);
  Prepared p = make(numel, dt);
  p.run();  // warm: the first call pays one-time costs (allocator, page faults) a step does not
  for (auto _ : state) {
    p.run();
    benchmark::ClobberMemory();
  }
  state.counters["GBps"] = benchmark::Counter(p.bytes * double(state.iterations()), benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
}

#if defined(__AVX512F__)
// The CPU's arithmetic ceiling, one thread, data in L1 (a 2048-float array, so the loop's
// iterations are independent): 512-bit FMAs issued per ns, and floats per ns through exp16 (the
// exp of softmax, sigmoid, silu and gelu). A row whose op needs more vector operations per
// element than the 50 % line leaves time for cannot reach it at any memory speed.
alignas(64) float g_issue_in[2048], g_issue_out[2048];
void issue_bench(benchmark::State& state, bool exp) {
  omp_set_num_threads(1);
  for (int i = 0; i < 2048; ++i) g_issue_in[i] = -5.0f + 0.004f * float(i);
  for (auto _ : state) {
    for (int i = 0; i < 2048; i += 16) {
      __m512 v = _mm512_load_ps(g_issue_in + i);
      if (exp) {
        v = mt::cpu::exp16(v);
      } else {
        const __m512 x = v;
        for (int k = 0; k < 12; ++k) v = _mm512_fmadd_ps(v, x, _mm512_set1_ps(0.5f));
      }
      _mm512_store_ps(g_issue_out + i, v);
    }
    benchmark::ClobberMemory();
  }
  // per ns: FMAs (12 per vector of the 128), or floats through exp16
  const double per_iter = exp ? 2048.0 : 12.0 * 128.0;
  state.counters["per_ns"] =
      benchmark::Counter(per_iter * double(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
}
#endif

std::string size_name(int64_t n) {
  return n >= (1 << 20) ? std::to_string(n >> 20) + "M" : std::to_string(n >> 10) + "K";
}

// Prints every op row's GB/s as a share of the memcpy row of the same element size, numel and threads.
class RooflineReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      auto it = r.counters.find("GBps");
      if (it != r.counters.end()) gbps_[r.run_name.function_name] = it->second.value / 1e9;
      auto per_ns = r.counters.find("per_ns");
      if (per_ns != r.counters.end()) issue_[r.run_name.function_name] = per_ns->second.value;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\n%-44s %10s %10s %7s %8s\n", "op/dtype/numel/threads", "GB/s", "memcpy", "share", "of 64K");
    std::vector<std::string> below;
    int compute_bound = 0, no_ceiling = 0;
    for (const auto& [name, g] : gbps_) {
      if (name.rfind("memcpy", 0) == 0) continue;
      // name: op/dtype/size/tN; memcpy row: memcpy/eK/size/tN with K the element size.
      const size_t a = name.find('/'), b = name.find('/', a + 1);
      const std::string dt = name.substr(a + 1, b - a - 1), rest = name.substr(b + 1);
      const std::string ref = std::string("memcpy/") + (dt == "fp32" ? "e4/" : "e2/") + rest;
      auto m = gbps_.find(ref);
      if (m == gbps_.end()) continue;
      const double share = g / m->second;
      const bool big = rest.find('M') != std::string::npos;
      // The same op on one thread at 64K elements, where its data stays in L2, times the
      // threads (64K on two threads is mostly the pool's overhead). A big row at or above it
      // (a 64K call also pays the per-call costs) moves its bytes as fast as from cache: memory
      // is not what holds it back, its arithmetic is.
      const int threads = std::stoi(rest.substr(rest.rfind('t') + 1));
      auto cached = gbps_.find(name.substr(0, b + 1) + "64K/t1");
      const double in_cache = cached != gbps_.end() && big ? g / (threads * cached->second) : 0;
      char note[32] = "";
      if (in_cache > 0) std::snprintf(note, sizeof note, "%6.0f%%", 100 * in_cache);
      std::printf("%-44s %10.2f %10.2f %6.0f%% %8s%s\n", name.c_str(), g, m->second, 100 * share, note,
                  big && share < 0.5 ? "  < 50%" : "");
      if (big && share < 0.5) {
        below.push_back(name);
        // Far above the 64K rate, the 64K call is not the same work at a smaller size (one
        // column tile on one thread, a lookup table's fixed cost): no ceiling from it.
        if (in_cache > 1.5)
          ++no_ceiling;
        else if (in_cache >= 0.7)
          ++compute_bound;
      }
    }
    std::printf("\n%zu rows at >= 1M elements below 50%% of memcpy", below.size());
    std::printf(
        ", %d of them at 70-150%% of their rate from cache (\"of 64K\": the op at 64K elements on one thread,\n"
        "times the threads): held back by their arithmetic, not by memory; %d above 150%% (the 64K call is not\n"
        "the same work: no ceiling from it)\n",
        compute_bound, no_ceiling);
    auto fma = issue_.find("ceiling/fma512"), exp = issue_.find("ceiling/exp16");
    auto line = gbps_.find("memcpy/e2/1M/t1");
    if (fma != issue_.end() && exp != issue_.end() && line != gbps_.end()) {
      // bf16 unary op: 4 bytes per element (2 read, 2 written); fp32: 8.
      const double bf16_need = 0.5 * line->second / 4.0, fp32_need = 0.5 * gbps_["memcpy/e4/1M/t1"] / 8.0;
      std::printf(
          "Arithmetic ceiling, one thread, data in L1: %.2f 512-bit FMAs per ns; exp16 %.2f floats per ns.\n"
          "The 50%% line at 1M on one thread asks %.2f elements per ns of a bf16 unary op (%.2f of an fp32 one):\n"
          "an op whose exp alone runs below that cannot reach it.\n",
          fma->second, exp->second, bf16_need, fp32_need);
    }
  }

 private:
  std::map<std::string, double> gbps_, issue_;
};

}  // namespace

int main(int argc, char** argv) {
  bool full = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--full") == 0)
      full = true;
    else if (std::strcmp(argv[i], "--no-streaming") == 0)
      mt::cpu::set_streaming_cache_bytes(int64_t(1) << 50);  // plain stores only: the A/B of streaming
    else
      args.push_back(argv[i]);
  }
  const std::vector<int64_t> sizes = full ? std::vector<int64_t>{1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26}
                                          : std::vector<int64_t>{1 << 16, 1 << 20, 1 << 22};
  const auto all = ops();
  for (int threads : {1, 2})
    for (int64_t n : sizes) {
      for (double es : {4.0, 2.0}) {
        const std::string name =
            "memcpy/e" + std::to_string(int(es)) + "/" + size_name(n) + "/t" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), memcpy_bench, es * double(n), threads)->UseRealTime();
      }
      // The contenders alternate: each op's fp32 and bf16 rows next to each other.
      for (const auto& [op, make] : all)
        for (mt::DType dt : {mt::kFloat32, mt::kBFloat16}) {
          if (dt == mt::kFloat32 && op.find("_bf16_in") != std::string::npos) continue;
          const std::string name =
              op + (dt == mt::kFloat32 ? "/fp32/" : "/bf16/") + size_name(n) + "/t" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), op_bench, make, n, dt, threads)->UseRealTime();
        }
    }
#if defined(__AVX512F__)
  benchmark::RegisterBenchmark("ceiling/fma512", issue_bench, false);
  benchmark::RegisterBenchmark("ceiling/exp16", issue_bench, true);
#endif
  int ac = int(args.size());
  benchmark::Initialize(&ac, args.data());
  if (benchmark::ReportUnrecognizedArguments(ac, args.data())) return 1;
  RooflineReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
