#include "nn/container.h"

namespace mantissa::nn {

Module& ModuleContainer::operator[](size_t i) const {
  auto kids = named_children();
  MT_CHECK(i < kids.size(), name(), "index ", i, " is out of range for ", kids.size(), " elements");
  return *kids[i].second;
}

bool ModuleDict::contains(const std::string& name) const {
  for (const auto& [n, m] : named_children())
    if (n == name) return true;
  return false;
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> k;
  for (const auto& [n, m] : named_children()) k.push_back(n);
  return k;
}

Module& ModuleDict::operator[](const std::string& name) const {
  std::string known;
  for (const auto& [n, m] : named_children()) {
    if (n == name) return *m;
    known += (known.empty() ? "" : ", ") + n;
  }
  MT_FAIL("ModuleDict", "no module named '", name, "' (keys: ", known.empty() ? "none" : known, ")");
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (Module* m : children()) h = m->forward(h);
  return h;
}

}  // namespace mantissa::nn
