#include "onnx/custom.h"

#include <map>
#include <mutex>

#include "onnx/tracer.h"

namespace mantissa::onnx {

namespace {
std::mutex g_mutex;
std::map<std::string, FunctionExporter>& registry() {
  static std::map<std::string, FunctionExporter> r;
  return r;
}
}  // namespace

void register_function_exporter(const std::string& function_name, FunctionExporter exporter) {
  MT_CHECK(exporter != nullptr, "onnx::register_function_exporter", "null exporter for '", function_name, "'");
  std::lock_guard<std::mutex> lock(g_mutex);
  registry()[function_name] = std::move(exporter);
}

// Entries are never removed, so the pointer stays valid (a replacement reuses the slot).
const FunctionExporter* find_function_exporter(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : &it->second;
}

}  // namespace mantissa::onnx
