// Fuzzes load_checkpoint into a small model, optimizer, scheduler and scaler. A failed load
// must leave all of them (and the global RNG) exactly as they were: checked after each input.
#include <mantissa.h>

#include <cstdlib>
#include <new>
#include <vector>

#include "fuzz_input.h"

namespace mt = mantissa;

namespace {

struct Parts {
  mt::nn::Linear net{3, 2};
  mt::optim::AdamW opt{net.parameters(), {.lr = 0.01}};
  mt::optim::StepLR sched{opt, 2, 0.5};
  mt::amp::GradScaler scaler{{.init_scale = 256.0, .growth_interval = 3}};
  mt::optim::Checkpoint parts() { return {.model = &net, .optimizer = &opt, .scheduler = &sched, .scaler = &scaler}; }
};

// Everything a load may change, as text, to compare before and after a failed load.
std::string fingerprint(Parts& p) {
  std::string s = mt::default_generator().get_state();
  for (const auto& [k, t] : p.net.state_dict()) {
    const std::vector<double> v = t.to_vector<double>();
    s += k;
    s.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
  }
  for (const auto& [k, v] : p.opt.state_dict().scalars) s += k + std::to_string(v);
  for (const auto& [k, v] : p.sched.state_dict().scalars) s += k + std::to_string(v);
  for (const auto& [k, v] : p.scaler.state_dict().scalars) s += k + std::to_string(v);
  return s;
}

}  // namespace

// A valid checkpoint of these parts, for the seed corpus (replay_main --write-seeds).
void fuzz_write_seeds(const std::string& dir) {
  mt::manual_seed(1);
  Parts p;
  mt::optim::save_checkpoint(dir + "/checkpoint.safetensors", p.parts(), {.epoch = 3, .extra = {{"note", "seed"}}});
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Parts p;
  const std::string path = fuzz::write_input(data, size, ".ckpt");
  mt::manual_seed(7);
  const std::string before = fingerprint(p);
  try {
    mt::optim::load_checkpoint(path, p.parts());
    // Loaded: restore the fixed state so inputs stay independent.
    p.~Parts();
    new (&p) Parts();
  } catch (const mt::Error&) {
    if (fingerprint(p) != before) std::abort();  // a failed load changed something
  }
  return 0;
}
