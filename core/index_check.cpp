#include "core/index_check.h"

#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/backend_registry.h"
#include "core/error.h"

namespace mantissa {

namespace {

std::mutex g_codes_mutex;
std::vector<std::pair<std::string, std::string>>& codes() {
  static std::vector<std::pair<std::string, std::string>> c;
  return c;
}

}  // namespace

int32_t index_error_code(const char* op, const char* what) {
  std::lock_guard<std::mutex> lock(g_codes_mutex);
  auto& c = codes();
  for (size_t i = 0; i < c.size(); ++i)
    if (c[i].first == op && c[i].second == what) return int32_t(i + 1);
  MT_CHECK(c.size() < 255, "index_error_code", "too many index checks registered");
  c.emplace_back(op, what);
  return int32_t(c.size());
}

std::string index_error_message(const IndexErrorRecord& r) {
  std::string op = "index check", what = "index";
  {
    std::lock_guard<std::mutex> lock(g_codes_mutex);
    const auto& c = codes();
    if (r.code >= 1 && size_t(r.code) <= c.size()) std::tie(op, what) = c[size_t(r.code - 1)];
  }
  return op + ": " + what + " " + std::to_string(r.value) + " at position " + std::to_string(r.position) +
         " is out of range for size " + std::to_string(r.bound);
}

void throw_if_index_error(IndexErrorRecord& r) {
  if (r.code == 0) return;
  const IndexErrorRecord copy = r;
  r = IndexErrorRecord{};
  throw Error(index_error_message(copy) + " (found on the device by an earlier op, reported at this host read)");
}

namespace launch {

void check_index_range(const char* op, const char* what, const Tensor& index, int64_t bound, const int64_t* ignore,
                       const std::string& context) {
  MT_CHECK(index.dtype() == DType::Int64 && index.is_contiguous(), op,
           "internal: the range check expects a "
           "contiguous int64 index, got ",
           dtype_name(index.dtype()));
  if (index.numel() == 0) return;
  if (!index.device().is_cpu()) {
    const DeviceBackend* b = find_backend(index.device().type);
    MT_CHECK(b != nullptr && b->check_index != nullptr, op, "no index check for ", index.device().str());
    b->check_index(index, bound, ignore != nullptr, ignore != nullptr ? *ignore : 0, index_error_code(op, what));
    return;
  }
  const int64_t* p = index.data_ptr<int64_t>();
  const int64_t n = index.numel();
  for (int64_t i = 0; i < n; ++i) {
    if ((p[i] >= 0 && p[i] < bound) || (ignore != nullptr && p[i] == *ignore)) continue;
    IndexErrorRecord r{.code = index_error_code(op, what), .position = i, .value = p[i], .bound = bound};
    std::string msg = index_error_message(r);
    if (ignore != nullptr) msg += " (ignore_index is " + std::to_string(*ignore) + ")";
    if (!context.empty()) msg += " (" + context + ")";
    throw Error(msg);
  }
}

}  // namespace launch

}  // namespace mantissa
