// Thread-local switch for recording the autograd graph.
//
//   { mt::NoGradGuard g; w.sub_(lr * w.grad()); }   // not recorded
#pragma once

namespace mantissa {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Disables recording in its scope and restores the previous state on exit.
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Enables recording in its scope (inside a NoGradGuard, say) and restores on exit.
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(true); }
  ~EnableGradGuard() { GradMode::set_enabled(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace mantissa
