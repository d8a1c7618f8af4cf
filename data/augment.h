// Random data augmentation for images, run on the DataLoader's worker thread:
// RandomCrop (with zero padding), RandomHorizontalFlip, Pad, and Compose to chain them
// with any other transform (Normalize).
//
//   mt::data::Compose augment{mt::data::RandomCrop(32, 4), mt::data::RandomHorizontalFlip(),
//                             mt::data::Normalize({0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616})};
//   mt::data::DataLoader loader(train, {.batch_size = 128, .shuffle = true, .seed = 1,
//                                       .random_transform = augment});
//
// Every transform takes an image [C, H, W] or a batch [N, C, H, W] (CPU; uint8, float32
// or float64) and draws one crop offset / flip per image from the Generator it is given.
// The DataLoader seeds that generator from (seed, epoch, batch) alone, so augmented batches
// are identical on every run, with any prefetch, and after resuming from a checkpoint.
#pragma once
#include <concepts>
#include <functional>
#include <utility>
#include <vector>

#include "core/random.h"
#include "data/dataset.h"

namespace mantissa::data {

// Crops a size x size window at a uniformly random position of the image padded with
// `padding` zeros on every side (torchvision's RandomCrop(size, padding)).
//   RandomCrop(32, 4): [N, 3, 32, 32] -> [N, 3, 32, 32], each image shifted by -4..4 pixels.
class RandomCrop {
 public:
  explicit RandomCrop(int64_t size, int64_t padding = 0);
  Tensor operator()(const Tensor& x, Generator& gen) const;
  Example operator()(Example e, Generator& gen) const {
    e.data = (*this)(e.data, gen);
    return e;
  }

 private:
  int64_t size_, padding_;
};

// Mirrors each image left-right with probability p.
class RandomHorizontalFlip {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  Tensor operator()(const Tensor& x, Generator& gen) const;
  Example operator()(Example e, Generator& gen) const {
    e.data = (*this)(e.data, gen);
    return e;
  }

 private:
  double p_;
};

// Adds `padding` zeros on every side (deterministic): [.., H, W] -> [.., H + 2p, W + 2p].
// E.g. 28x28 Fashion-MNIST to the 32x32 a CIFAR network expects.
class Pad {
 public:
  explicit Pad(int64_t padding);
  Tensor operator()(const Tensor& x) const;
  Example operator()(Example e) const {
    e.data = (*this)(e.data);
    return e;
  }

 private:
  int64_t padding_;
};

// Applies its transforms in order. Each is a callable taking (Example, Generator&) or just
// (Example) (Normalize, Pad, a lambda), so a Compose is itself usable as a
// DataLoaderOptions::random_transform, or inside another Compose.
class Compose {
 public:
  using Step = std::function<Example(Example, Generator&)>;
  template <typename... Ts>
  explicit Compose(Ts... transforms) {
    (steps_.push_back(wrap(std::move(transforms))), ...);
  }
  Example operator()(Example e, Generator& gen) const;
  size_t size() const { return steps_.size(); }

 private:
  template <typename T>
  static Step wrap(T t) {
    if constexpr (std::invocable<const T&, Example, Generator&>)
      return [t = std::move(t)](Example e, Generator& g) { return Example(t(std::move(e), g)); };
    else {
      static_assert(std::invocable<const T&, Example>, "Compose: a transform must take (Example[, Generator&])");
      return [t = std::move(t)](Example e, Generator&) { return Example(t(std::move(e))); };
    }
  }
  std::vector<Step> steps_;
};

}  // namespace mantissa::data
