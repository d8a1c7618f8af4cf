#include "data/dataset.h"

#include "autograd/ops.h"
#include "core/error.h"

namespace mantissa::data {

Batch Dataset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (int64_t i : indices) examples.push_back(get(i));
  return default_collate(examples);
}

Batch default_collate(const std::vector<Example>& examples) {
  MT_CHECK(!examples.empty(), "default_collate", "cannot collate an empty list of examples");
  std::vector<Tensor> data, targets;
  data.reserve(examples.size());
  targets.reserve(examples.size());
  const bool labeled = examples.front().target.defined();
  for (size_t i = 0; i < examples.size(); ++i) {
    const Example& e = examples[i];
    MT_CHECK(e.data.defined(), "default_collate", "example ", i, " has no data tensor");
    MT_CHECK(e.target.defined() == labeled, "default_collate", "example ", i, (labeled ? " has no" : " has a"),
             " target but example 0 ", (labeled ? "has one" : "does not"));
    data.push_back(e.data);
    if (labeled) targets.push_back(e.target);
  }
  Batch b;
  b.data = stack(data);
  if (labeled) b.target = stack(targets);
  return b;
}

}  // namespace mantissa::data
