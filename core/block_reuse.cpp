#include "core/block_reuse.h"

#include <algorithm>

namespace mantissa {

void BlockReuse::record_use(void* block, const StreamUse& use) {
  std::vector<StreamUse>& u = uses_[block];
  if (std::find(u.begin(), u.end(), use) == u.end()) u.push_back(use);
}

const std::vector<StreamUse>& BlockReuse::uses(void* block) const {
  static const std::vector<StreamUse> none;
  auto it = uses_.find(block);
  return it == uses_.end() ? none : it->second;
}

bool BlockReuse::release(void* block) {
  auto it = uses_.find(block);
  if (it == uses_.end()) return true;
  int events = 0;
  for (const StreamUse& use : it->second) {
    void* ev = ops_.record(use);
    if (ev == nullptr) continue;  // the stream was waited for instead
    events_.emplace_back(ev, block);
    ++events;
  }
  uses_.erase(it);
  if (events == 0) return true;
  waiting_[block] = events;
  return false;
}

std::vector<void*> BlockReuse::completed() {
  std::vector<void*> done;
  for (auto it = events_.begin(); it != events_.end();) {
    if (!ops_.query(it->first)) {
      ++it;
      continue;
    }
    void* block = it->second;
    it = events_.erase(it);
    if (--waiting_[block] == 0) {
      waiting_.erase(block);
      done.push_back(block);
    }
  }
  return done;
}

std::vector<void*> BlockReuse::wait_all() {
  std::vector<void*> done;
  for (auto& [ev, block] : events_) ops_.wait(ev);
  events_.clear();
  for (auto& [block, n] : waiting_) done.push_back(block);
  waiting_.clear();
  return done;
}

}  // namespace mantissa
