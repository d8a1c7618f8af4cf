// The index terms of Tensor::index, as LibTorch spells them (torch::indexing):
//
//   using namespace mt::indexing;
//   x.index({Slice(), 0})            // x[:, 0]
//   x.index({Slice(1, None), Ellipsis, None})   // x[1:, ..., None]
//   x.index_put_({Slice(), 0}, 1.5)  // x[:, 0] = 1.5
//
// Every term gives a view: an integer selects (removing the dim), a Slice narrows with a
// step, None inserts a dim of size 1, Ellipsis stands for the dims no other term names.
// (Tensor and boolean-mask terms are index_select / masked_select / where in autograd/ops.h.)
#pragma once
#include <cstdint>
#include <optional>
#include <variant>

namespace mantissa::indexing {

struct NoneIndex {};
struct EllipsisIndex {};
inline constexpr NoneIndex None{};
inline constexpr EllipsisIndex Ellipsis{};

// A slice bound: an integer (negative counts from the end) or None (the dim's start or end).
struct SliceBound {
  std::optional<int64_t> value;
  SliceBound(NoneIndex) {}
  SliceBound(int64_t v) : value(v) {}
  SliceBound(int v) : value(int64_t(v)) {}
};

// start:stop:step, as Python's.
struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
  Slice(SliceBound start_ = None, SliceBound stop_ = None, int64_t step_ = 1)
      : start(start_.value), stop(stop_.value), step(step_) {}
};

class TensorIndex {
 public:
  TensorIndex(int64_t i) : v_(i) {}
  TensorIndex(int i) : v_(int64_t(i)) {}
  TensorIndex(Slice s) : v_(s) {}
  TensorIndex(NoneIndex n) : v_(n) {}
  TensorIndex(EllipsisIndex e) : v_(e) {}
  const std::variant<int64_t, Slice, NoneIndex, EllipsisIndex>& value() const { return v_; }

 private:
  std::variant<int64_t, Slice, NoneIndex, EllipsisIndex> v_;
};

}  // namespace mantissa::indexing
