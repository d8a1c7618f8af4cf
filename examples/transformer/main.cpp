// Trains a character-level GPT (mt::nn::GPT, or with --model lstm an LSTM language model,
// lstm_lm.h) on real English text, in fp32 or with
// automatic mixed precision (fp16 with dynamic loss scaling, or bf16), reports the
// validation loss in nats per character, and samples text from the trained model.
//
//   transformer                                   # fortunes corpus, tiny 4 x 128 model, 1000 steps
//   transformer --amp bf16 --steps 500 --save run.safetensors
//   transformer --resume run.safetensors --steps 1000     # continues exactly where it stopped
//   transformer --text book.txt --sample 500 --prompt "Once upon a time" --temperature 0.8 --top-k 20
//   transformer --model lstm --layers 2 --d-model 256 --amp fp16   # the recurrent model
//   transformer --amp bf16 --steps 20 --profile trace.json --amp-report --metrics run.jsonl
//   # GPT-2-small-like on a GPU: --layers 12 --heads 12 --d-model 768 --context 1024 --device cuda --amp bf16
#include <mantissa.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "../common/onnx_export.h"
#include "../common/parallel.h"
#include "../common/run_log.h"
#include "corpus.h"
#include "lstm_lm.h"

namespace mt = mantissa;
namespace nn = mantissa::nn;
namespace F = mantissa::nn::functional;
using namespace gpt_example;

namespace {

struct Options {
  std::string model = "gpt", text_path, amp = "off", device = "cpu", save, resume, prompt = "\n", export_path;
  int64_t layers = 4, heads = 4, d_model = 128, context = 128, batch_size = 16, steps = 1000, warmup = 100;
  int64_t eval_every = 100, eval_batches = 8, sample = 300, top_k = 20;
  int64_t stop_at = 0;          // > 0: stop (and save) at this step, as an interrupted run would
  bool distributed = false;     // data parallel over the ranks of mpirun (--batch-size per rank)
  examples::RunLogOptions log;  // --profile, --amp-report, --metrics
  double lr = 2e-3, weight_decay = 0.1, clip = 1.0, dropout = 0.0, temperature = 0.8;
  uint64_t seed = 0;
};

// The model shape as recorded in checkpoints: resuming with another one is an error.
std::string config_string(const Options& o, int64_t vocab) {
  if (o.model == "lstm")
    return mt::detail::concat("model=lstm layers=", o.layers, " d_model=", o.d_model, " context=", o.context,
                              " vocab=", vocab);
  return mt::detail::concat("layers=", o.layers, " heads=", o.heads, " d_model=", o.d_model, " context=", o.context,
                            " vocab=", vocab);
}

std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string h;
  for (unsigned char c : s) {
    h += d[c >> 4];
    h += d[c & 15];
  }
  return h;
}

// Mean cross-entropy (nats per character) over `count` fixed validation batches.
double evaluate(nn::Module& gpt, const Corpus& c, const Options& o, std::optional<mt::DType> amp, mt::Device dev) {
  mt::NoGradGuard no_grad;
  gpt.eval();
  double sum = 0;
  for (int64_t i = 0; i < o.eval_batches; ++i) {
    Batch b = val_batch(c.val, o.batch_size, o.context, i, o.eval_batches);
    mt::Tensor logits;
    {
      mt::amp::Autocast ac(amp.value_or(mt::kHalf), amp.has_value(), dev.type);
      logits = gpt(b.x.to(dev));
    }
    sum += F::cross_entropy(logits.reshape({-1, c.vocab.size()}), b.y.to(dev).reshape({-1})).item<double>();
  }
  gpt.train();
  return sum / double(o.eval_batches);
}

// Next-character sampling: softmax(logits / temperature) restricted to the top_k most likely
// characters (0: all), drawn from the default generator. Returns a vocabulary index.
int64_t sample_next(const mt::Tensor& last_logits, double temperature, int64_t top_k) {
  std::vector<double> l = last_logits.to(mt::kFloat64).to_vector<double>();
  const auto V = int64_t(l.size());
  if (temperature <= 0) return int64_t(std::max_element(l.begin(), l.end()) - l.begin());
  std::vector<double> sorted = l;
  double cutoff = -INFINITY;
  if (top_k > 0 && top_k < V) {
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<>());
    cutoff = sorted[size_t(top_k - 1)];
  }
  const double mx = *std::max_element(l.begin(), l.end());
  std::vector<double> p(l.size());
  double total = 0;
  for (size_t i = 0; i < l.size(); ++i) total += p[i] = l[i] >= cutoff ? std::exp((l[i] - mx) / temperature) : 0.0;
  double u = mt::default_generator().uniform() * total;
  for (int64_t i = 0; i < V; ++i) {
    u -= p[size_t(i)];
    if (u < 0 && p[size_t(i)] > 0) return i;
  }
  for (int64_t i = V - 1; i >= 0; --i)  // rounding left u >= 0: the last candidate
    if (p[size_t(i)] > 0) return i;
  return 0;
}

std::string generate(nn::Module& gpt, const Vocab& vocab, const Options& o, std::optional<mt::DType> amp,
                     mt::Device dev) {
  std::vector<int64_t> ids;
  for (char32_t ch : decode_utf8(o.prompt, "--prompt")) {
    const int64_t id = vocab.id(ch);
    MT_CHECK(id >= 0, "--prompt", "the character '", encode_utf8(ch), "' (U+", std::hex, uint32_t(ch), std::dec,
             ") is not in the vocabulary of the training text");
    ids.push_back(id);
  }
  MT_CHECK(!ids.empty(), "--prompt", "the prompt must not be empty");
  mt::NoGradGuard no_grad;
  gpt.eval();
  std::string out = o.prompt;
  for (int64_t n = 0; n < o.sample; ++n) {
    const int64_t T = std::min<int64_t>(int64_t(ids.size()), o.context);
    std::vector<int64_t> window(ids.end() - T, ids.end());
    mt::Tensor logits;
    {
      mt::amp::Autocast ac(amp.value_or(mt::kHalf), amp.has_value(), dev.type);
      logits = gpt(mt::from_vector(window, {1, T}).to(dev));
    }
    const int64_t next =
        sample_next(logits.select(1, T - 1).select(0, 0).to(mt::Device::cpu()), o.temperature, o.top_k);
    ids.push_back(next);
    out += encode_utf8(vocab.chars[size_t(next)]);
  }
  gpt.train();
  return out;
}

// FNV-1a over every parameter's bytes: equal runs print equal digests.
std::string parameter_digest(nn::Module& m) {
  uint64_t h = 1469598103934665603ULL;
  for (const mt::Tensor& p : m.parameters()) {
    mt::Tensor c = p.to(mt::Device::cpu()).contiguous();
    const auto* b = static_cast<const unsigned char*>(c.raw_data());
    for (size_t i = 0; i < c.nbytes(); ++i) h = (h ^ b[i]) * 1099511628211ULL;
  }
  std::ostringstream os;
  os << std::hex << h;
  return os.str();
}

void progress(int64_t step, int64_t steps, double loss, double tokens_per_s, double scale, double lr) {
  const int width = 24;
  const int filled = int(double(width) * double(step) / double(steps));
  std::printf("\rstep %lld/%lld [%s%s] loss %.4f  %.0f tok/s  lr %.2e  loss scale %g   ", (long long)step,
              (long long)steps, std::string(size_t(filled), '#').c_str(),
              std::string(size_t(width - filled), '.').c_str(), loss, tokens_per_s, lr, scale);
  std::fflush(stdout);
}

int run(const Options& o) {
  examples::Parallel parallel(o.distributed);
  const bool lead = parallel.rank == 0;  // the rank that prints, saves and samples
  const mt::Device dev = mt::Device::parse(o.device);
  std::optional<mt::DType> amp;
  if (o.amp == "fp16") amp = mt::kHalf;
  if (o.amp == "bf16") amp = mt::kBFloat16;

  const std::string bytes = o.text_path.empty() ? read_fortunes() : read_file(o.text_path);
  const std::string source = o.text_path.empty() ? std::string("the fortunes corpus") : o.text_path;
  MT_CHECK(!bytes.empty(), "text", source, " is empty");
  const Corpus corpus = make_corpus(decode_utf8(bytes, source), o.context);
  const int64_t V = corpus.vocab.size();
  if (lead)
    std::printf("text: %s, %zu train + %zu validation characters, vocabulary %lld\n", source.c_str(),
                corpus.train.size(), corpus.val.size(), (long long)V);

  mt::manual_seed(o.seed);
  MT_CHECK(o.model == "gpt" || o.export_path.empty(), "--export", "ONNX export supports --model gpt only (the LSTM's ",
           "fused cell has no ONNX mapping yet)");
  std::unique_ptr<nn::Module> net;
  if (o.model == "lstm")
    net = std::make_unique<LstmLm>(V, o.d_model, std::max<int64_t>(o.layers, 1), o.dropout);
  else
    net = std::make_unique<nn::GPT>(nn::GPTConfig{.vocab_size = V,
                                                  .context = o.context,
                                                  .n_layer = o.layers,
                                                  .n_head = o.heads,
                                                  .d_model = o.d_model,
                                                  .dropout = o.dropout});
  nn::Module& gpt = *net;
  gpt.to(dev);
  nn::Module& model = parallel.wrap(gpt);  // DistributedDataParallel under --distributed
  // Decay the weight matrices (embeddings included, as GPT-2), not biases or LayerNorms.
  mt::optim::AdamW opt(mt::optim::weight_decay_groups(gpt.named_parameters(), o.weight_decay),
                       {.lr = o.lr, .betas = {0.9, 0.99}});
  mt::optim::WarmupCosineLR sched(opt, std::min(o.warmup, o.steps), o.steps, o.lr * 0.1);
  mt::amp::GradScaler scaler({.enabled = o.amp == "fp16"});
  mt::optim::Checkpoint parts{.model = &gpt, .optimizer = &opt, .scheduler = &sched, .scaler = &scaler};
  const std::string config = config_string(o, V), vocab_hex = hex(corpus.vocab.to_utf8());

  int64_t start = 0;
  if (!o.resume.empty()) {
    // The model shape and vocabulary first, for a clearer message than mismatching tensors.
    const auto meta = mt::load_safetensors(o.resume).metadata;
    auto get = [&](const char* key) {
      auto it = meta.find(std::string("extra.") + key);
      return it == meta.end() ? std::string("an unknown model") : it->second;
    };
    MT_CHECK(get("config") == config, "--resume", o.resume, " was written for ", get("config"), ", not for this run's ",
             config);
    MT_CHECK(get("vocab") == vocab_hex, "--resume", o.resume,
             " was trained on a text with another character vocabulary");
    mt::optim::CheckpointInfo info;
    try {
      info = mt::optim::load_checkpoint(o.resume, parts);
    } catch (const mt::Error& e) {
      MT_FAIL("--resume", "cannot resume from ", o.resume, " with this model (", config, "): ", e.what());
    }
    start = info.epoch;
    if (lead) std::printf("resumed from %s at step %lld\n", o.resume.c_str(), (long long)start);
  }
  if (lead)
    std::printf("model: %s, %lld parameters, amp %s, device %s, ranks %d\n", config.c_str(),
                (long long)gpt.num_parameters(), o.amp.c_str(), dev.str().c_str(), parallel.world);

  auto save = [&](int64_t step) {
    if (o.save.empty()) return;
    parallel.save(o.save, parts, {.epoch = step, .extra = {{"config", config}, {"vocab", vocab_hex}}});
  };

  double first_loss = NAN, running = NAN, val = NAN;
  // Rank 0 profiles and logs; the other ranks train only.
  examples::StepProfiler step_profiler(lead ? o.log : examples::RunLogOptions{}, lead, o.steps - start);
  examples::MetricsLog metrics(lead ? o.log.metrics_path : "");
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = start; step < o.steps; ++step) {
    step_profiler.begin_step();
    Batch b = train_batch(corpus.train, o.batch_size, o.context, o.seed, step, parallel.rank * o.batch_size);
    mt::Tensor loss;
    {
      mt::amp::Autocast ac(amp.value_or(mt::kHalf), amp.has_value(), dev.type);
      loss = F::cross_entropy(model(b.x.to(dev)).reshape({-1, V}), b.y.to(dev).reshape({-1}));
    }
    opt.zero_grad();
    scaler.backward(loss);
    if (o.clip > 0) {
      scaler.unscale_(opt);  // clip the true gradients, not the scaled ones
      mt::optim::clip_grad_norm_(gpt.parameters(), o.clip);
    }
    scaler.step(opt);
    scaler.update();
    const double lr_now = opt.param_groups()[0].lr.value();
    sched.step();
    const double l = loss.item<double>();
    step_profiler.end_step();
    if (std::isnan(first_loss)) first_loss = l;
    running = std::isnan(running) ? l : 0.95 * running + 0.05 * l;
    const int64_t done = step + 1;
    if (lead && (done % 10 == 0 || done == o.steps)) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      progress(done, o.steps, running, double((done - start) * o.batch_size * o.context) / s, scaler.scale(),
               opt.param_groups()[0].lr.value());
      if (metrics.enabled())
        metrics.train({done, 0, l, lr_now, scaler.scale(), scaler.skipped_steps(), (done - start) * o.batch_size,
                       examples::peak_memory(dev)});
    }
    if ((o.eval_every > 0 && done % o.eval_every == 0) || done == o.steps) {
      step_profiler.finish();  // the profiled window outlasted the run: report what it saw
      val = evaluate(gpt, corpus, o, amp, dev);
      metrics.eval(done, 0, {{"val_loss", val}});
      if (lead)
        std::printf("\nstep %lld: train loss %.4f, validation loss %.4f nats/char\n", (long long)done, running, val);
      save(done);
    }
    if (done == o.stop_at) {
      save(done);
      if (lead) std::printf("\nstopped at step %lld (--stop-at)\n", (long long)done);
      return 0;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (start >= o.steps) val = evaluate(gpt, corpus, o, amp, dev);
  if (!lead) return 0;
  if (!o.export_path.empty())
    examples::export_onnx(gpt, mt::zeros({1, o.context}, {.dtype = mt::kInt64}), o.export_path, amp, dev, "tokens",
                          "logits");
  std::printf(
      "final: steps=%lld amp=%s first_loss=%.4f train_loss=%.4f val_loss=%.4f time=%.1fs loss_scale=%g "
      "skipped_steps=%lld params=%s%s\n",
      (long long)o.steps, o.amp.c_str(), first_loss, running, val, secs, scaler.scale(),
      (long long)scaler.skipped_steps(), parameter_digest(gpt).c_str(), parallel.summary().c_str());
  if (o.sample > 0) {
    std::printf("--- sample (temperature %g, top-k %lld) ---\n%s\n--- end of sample ---\n", o.temperature,
                (long long)o.top_k, generate(gpt, corpus.vocab, o, amp, dev).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train a character-level GPT on real text with optional mixed precision, then sample from it"};
  Options o;
  app.add_option("--model", o.model, "gpt (mt::nn::GPT) or lstm (an LSTM language model, --layers x --d-model)")
      ->check(CLI::IsMember({"gpt", "lstm"}));
  app.add_option("--text", o.text_path, "UTF-8 text file to train on (default: the Debian fortunes corpus)");
  app.add_option("--layers", o.layers, "transformer blocks")->check(CLI::NonNegativeNumber);
  app.add_option("--heads", o.heads, "attention heads per block")->check(CLI::PositiveNumber);
  app.add_option("--d-model", o.d_model, "embedding width (a multiple of --heads)")->check(CLI::PositiveNumber);
  app.add_option("--context", o.context, "characters per training window")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", o.batch_size, "windows per step")->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "total optimizer steps (including those of a resumed run)")
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", o.lr, "peak AdamW learning rate (cosine decay to a tenth)")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "linear warmup steps")->check(CLI::NonNegativeNumber);
  app.add_option("--weight-decay", o.weight_decay, "AdamW decay of the weight matrices")->check(CLI::NonNegativeNumber);
  app.add_option("--clip", o.clip, "gradient clipping by global norm (0: off)")->check(CLI::NonNegativeNumber);
  app.add_option("--dropout", o.dropout, "dropout on attention and residual branches")->check(CLI::Range(0.0, 0.99));
  app.add_option("--amp", o.amp, "mixed precision: off, fp16 (with loss scaling) or bf16")
      ->check(CLI::IsMember({"off", "fp16", "bf16"}));
  app.add_option("--device", o.device, "cpu or cuda[:N]");
  app.add_option("--seed", o.seed, "random seed (initialization, batches, dropout, sampling)");
  app.add_option("--save", o.save, "write a checkpoint here at every evaluation");
  app.add_option("--resume", o.resume, "resume from this checkpoint (same model and text)");
  app.add_option("--export", o.export_path, "write the trained GPT as ONNX here (after training, or from --resume)");
  app.add_option("--eval-every", o.eval_every, "steps between validation passes (0: at the end only)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--eval-batches", o.eval_batches, "validation batches per pass")->check(CLI::PositiveNumber);
  app.add_option("--sample", o.sample, "characters to generate after training (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--prompt", o.prompt, "text the sample starts from (its characters must be in the vocabulary)");
  app.add_option("--temperature", o.temperature, "sampling temperature (0: greedy)")->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", o.top_k, "sample among the k likeliest characters (0: all)")->check(CLI::NonNegativeNumber);
  app.add_option("--stop-at", o.stop_at, "stop after this step, saving a checkpoint (to test --resume)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--distributed", o.distributed,
               "data parallel over the ranks of mpirun (--batch-size per rank; rank 0 prints and saves)");
  examples::add_run_log_options(app, o.log);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const mt::Error& e) {
    std::cerr << "\ntransformer: " << e.what() << "\n";
    return 1;
  }
}
