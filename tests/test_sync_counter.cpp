// Host-side contracts of the GPU path that need no GPU: the host-sync counter's API
// (core/host_sync.h) and the sticky index error (core/index_check.h): a device kernel's record
// is raised, naming the op, at the next host read and then cleared; on the CPU the one range
// check throws at once, for every op that uses it.
#include <gtest/gtest.h>
#include <mantissa.h>

#include <string>

#include "core/host_sync.h"
#include "core/index_check.h"

namespace mt = mantissa;
namespace F = mt::nn::functional;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const mt::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(SyncCounter, CountsPerDeviceAndResets) {
  mt::reset_host_sync_counts();
  EXPECT_EQ(mt::host_sync_counts(mt::Device::cuda(0)).synchronizations, 0);
  mt::detail::count_host_sync(1);
  mt::detail::count_host_sync(1);
  mt::detail::count_device_to_host(1);
  mt::detail::count_device_to_host(3);
  const mt::HostSyncCounts c1 = mt::host_sync_counts(mt::Device::cuda(1));
  EXPECT_EQ(c1.synchronizations, 2);
  EXPECT_EQ(c1.device_to_host_copies, 1);
  EXPECT_EQ(mt::host_sync_counts(mt::Device::cuda(3)).device_to_host_copies, 1);
  EXPECT_EQ(mt::host_sync_counts(mt::Device::cuda(0)).synchronizations, 0);
  EXPECT_EQ(mt::host_sync_counts(mt::Device::cpu()).synchronizations, 0);
  mt::reset_host_sync_counts();
  EXPECT_EQ(mt::host_sync_counts(mt::Device::cuda(1)).synchronizations, 0);
  EXPECT_EQ(mt::host_sync_counts(mt::Device::cuda(1)).device_to_host_copies, 0);
  EXPECT_THROW(mt::host_sync_counts(mt::Device::cuda(64)), mt::Error);
}

TEST(SyncCounter, CpuWorkCountsNothing) {
  if (mt::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: tests/test_cuda_sync.cpp covers it";
  mt::reset_host_sync_counts();
  mt::Tensor x = mt::randn({8, 5});
  mt::Tensor y = F::cross_entropy(x, mt::from_vector<int64_t>({0, 1, 2, 3, 4, 0, 1, 2}));
  (void)y.item<float>();
  (void)x.to(mt::Device::cpu(), true);
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(mt::host_sync_counts(mt::Device::cuda(d)).synchronizations, 0);
    EXPECT_EQ(mt::host_sync_counts(mt::Device::cuda(d)).device_to_host_copies, 0);
  }
}

TEST(StickyIndexError, ARecordIsRaisedOnceNamingTheOp) {
  const int32_t code = mt::index_error_code("embedding", "index");
  EXPECT_EQ(code, mt::index_error_code("embedding", "index"));
  EXPECT_NE(code, mt::index_error_code("nll_loss", "target"));
  mt::IndexErrorRecord r;
  EXPECT_NO_THROW(mt::throw_if_index_error(r));  // clear: nothing to report
  // What check_index_kernel writes for the first bad value.
  r.code = code;
  r.position = 3;
  r.value = 9;
  r.bound = 4;
  const std::string msg = error_of([&] { mt::throw_if_index_error(r); });
  EXPECT_NE(msg.find("embedding: index 9 at position 3 is out of range for size 4"), std::string::npos) << msg;
  EXPECT_EQ(r.code, 0) << "the record must be cleared once reported";
  EXPECT_NO_THROW(mt::throw_if_index_error(r));  // sticky until reported, then gone
}

TEST(StickyIndexError, CpuCheckThrowsAtOnceWithContext) {
  mt::Tensor idx = mt::from_vector<int64_t>({0, 2, -100, 5});
  const int64_t ignore = -100;
  EXPECT_NO_THROW(mt::launch::check_index_range("op", "target", mt::from_vector<int64_t>({0, 2, -100}), 3, &ignore));
  const std::string msg =
      error_of([&] { mt::launch::check_index_range("op", "target", idx, 3, &ignore, "3 classes"); });
  EXPECT_NE(msg.find("op: target 5 at position 3 is out of range for size 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ignore_index is -100"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3 classes"), std::string::npos) << msg;
  EXPECT_THROW(mt::launch::check_index_range("op", "index", idx, 6), mt::Error);  // -100 not ignored here
}

TEST(StickyIndexError, EveryIndexOpUsesTheOneCheck) {
  mt::Tensor w = mt::randn({4, 3});
  mt::Tensor bad = mt::from_vector<int64_t>({1, 4});
  auto expect_names = [](const std::string& msg, const std::string& what) {
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  };
  expect_names(error_of([&] { (void)F::embedding(bad, w); }), "embedding: index 4 at position 1");
  expect_names(error_of([&] { (void)mt::index_select(w, 0, bad); }), "index_select: index 4 at position 1");
  expect_names(error_of([&] {
                 (void)mt::gather(w, 1, mt::from_vector<int64_t>({0, 3, 1, 2, 0, 1, 2, 0, 1, 1, 1, 1}, {4, 3}));
               }),
               "gather: index 3 at position 1");
  mt::Tensor logits = mt::randn({2, 4});
  expect_names(error_of([&] { (void)F::cross_entropy(logits, bad); }), "cross_entropy: target 4 at position 1");
  expect_names(error_of([&] { (void)F::nll_loss(F::log_softmax(logits, 1), bad); }),
               "nll_loss: target 4 at position 1");
  expect_names(error_of([&] {
                 (void)F::cross_entropy(logits, mt::from_vector<int64_t>({-1, 0}));
               }),
               "cross_entropy: target -1 at position 0");
}
