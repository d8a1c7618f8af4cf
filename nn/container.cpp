#include "nn/container.h"

namespace mantissa::nn {

Module& ModuleContainer::operator[](size_t i) const {
  auto kids = named_children();
  MT_CHECK(i < kids.size(), name(), "index ", i, " is out of range for ", kids.size(), " elements");
  return *kids[i].second;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (Module* m : children()) h = m->forward(h);
  return h;
}

}  // namespace mantissa::nn
