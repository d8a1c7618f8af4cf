#include "core/cpu/streaming_store.h"

#include <atomic>
#include <fstream>
#include <string>

namespace mantissa::cpu {

namespace {
std::atomic<int64_t> cache_bytes_override{0};

// sysconf's _SC_LEVEL3_CACHE_SIZE gives the whole socket's L3 on some virtual machines (320 MiB
// on a 2-core Zen 5 slice); sysfs gives the cache this CPU shares (32 MiB there).
int64_t read_last_level_cache_bytes() {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string s;
  if (f >> s) {
    int64_t v = 0;
    size_t i = 0;
    for (; i < s.size() && i < 12 && s[i] >= '0' && s[i] <= '9'; ++i) v = v * 10 + (s[i] - '0');
    const char unit = i < s.size() ? s[i] : ' ';
    v *= unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1;
    if (v > 0) return v;
  }
  return int64_t(32) << 20;
}
}  // namespace

int64_t last_level_cache_bytes() {
  static const int64_t machine = read_last_level_cache_bytes();
  const int64_t o = cache_bytes_override.load(std::memory_order_relaxed);
  return o > 0 ? o : machine;
}

int64_t set_streaming_cache_bytes(int64_t bytes) { return cache_bytes_override.exchange(bytes > 0 ? bytes : 0); }

}  // namespace mantissa::cpu
