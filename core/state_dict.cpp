#include "core/state_dict.h"

#include "core/error.h"

namespace mantissa {

void StateDict::insert(const std::string& key, const Tensor& value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    items_[it->second].second = value;
    return;
  }
  index_.emplace(key, items_.size());
  items_.emplace_back(key, value);
}

const Tensor& StateDict::at(const std::string& key) const {
  auto it = index_.find(key);
  MT_CHECK(it != index_.end(), "StateDict", "no entry named '", key, "' (", items_.size(), " entries)");
  return items_[it->second].second;
}

Tensor& StateDict::operator[](const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    insert(key, Tensor());
    return items_.back().second;
  }
  return items_[it->second].second;
}

bool StateDict::erase(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  items_.erase(items_.begin() + int64_t(it->second));
  index_.clear();
  for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
  return true;
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> k;
  for (auto& [name, t] : items_) k.push_back(name);
  return k;
}

}  // namespace mantissa
