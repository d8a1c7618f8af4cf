// Where a tensor lives: the CPU or one CUDA device.
#pragma once
#include <ostream>
#include <string>

namespace mantissa {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  // The fastest device present: CUDA:0 when a GPU is usable, else the CPU.
  static Device best();
  // Parses "cpu", "cuda", "cuda:1"; throws mantissa::Error otherwise.
  static Device parse(const std::string& s);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

// Number of usable CUDA devices (0 when built without CUDA or no GPU is present).
int cuda_device_count();

}  // namespace mantissa
