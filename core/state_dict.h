#pragma once
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace mantissa {

// The one checkpointable snapshot type of modules, optimizers, schedulers and the GradScaler:
// tensors by dotted name in insertion order, and numbers (steps, hyper-parameters, the loss
// scale) by name.
//
//   mt::StateDict sd = net.state_dict();
//   sd.at("fc1.weight").shape_str();       // throws mantissa::Error naming a missing key
//   for (auto& [name, t] : sd) ...          // registration order
class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;
  // Adds `key`, or replaces its value in place (keeping its position).
  void insert(const std::string& key, const Tensor& value);
  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  const Tensor& at(const std::string& key) const;
  Tensor& operator[](const std::string& key);  // inserts an undefined tensor when missing
  bool erase(const std::string& key);
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const;
  std::vector<Item>::const_iterator begin() const { return items_.begin(); }
  std::vector<Item>::const_iterator end() const { return items_.end(); }
  std::vector<Item>::iterator begin() { return items_.begin(); }  // values may change, names not
  std::vector<Item>::iterator end() { return items_.end(); }

  std::map<std::string, double> scalars;  // "state.3.step", "param_groups.0.lr", "scale", ...

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace mantissa
