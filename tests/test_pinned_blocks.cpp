// The reuse bookkeeping of the CUDA caching allocators (core/block_reuse.h), driven with fake
// events and several device ids: a freed block's events are recorded on the device of each use
// (not the current one), and it is reusable only once all of them completed.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/block_reuse.h"

namespace mt = mantissa;

namespace {

void* handle(int i) { return reinterpret_cast<void*>(uintptr_t(0x1000) * uintptr_t(i + 1)); }

// Events are small integers (as handles); the test completes them by hand.
class FakeEvents final : public mt::EventOps {
 public:
  struct Recorded {
    mt::StreamUse use;
    bool done = false;
    bool destroyed = false;
  };
  std::vector<Recorded> events;
  bool fail_next = false;
  int waited_streams = 0;

  void* record(const mt::StreamUse& use) override {
    if (fail_next) {  // as cuda/: could not record, so the stream was waited for
      fail_next = false;
      ++waited_streams;
      return nullptr;
    }
    events.push_back({use});
    return reinterpret_cast<void*>(uintptr_t(events.size()));
  }
  bool query(void* ev) override {
    Recorded& r = at(ev);
    EXPECT_FALSE(r.destroyed) << "queried a destroyed event";
    if (r.done) r.destroyed = true;
    return r.done;
  }
  void wait(void* ev) override {
    Recorded& r = at(ev);
    EXPECT_FALSE(r.destroyed);
    r.done = r.destroyed = true;
  }
  Recorded& at(void* ev) { return events.at(size_t(reinterpret_cast<uintptr_t>(ev)) - 1); }
};

}  // namespace

TEST(PinnedBlocks, EventsAreRecordedOnTheDeviceOfEachUse) {
  FakeEvents ev;
  mt::BlockReuse reuse(ev);
  void* block = handle(0);
  // Uploads to cuda:1 and cuda:3 on their legacy default streams (the null handle on both:
  // the device tells them apart), and cuda:1's null stream again (recorded once).
  reuse.record_use(block, {1, nullptr});
  reuse.record_use(block, {3, nullptr});
  reuse.record_use(block, {1, nullptr});
  reuse.record_use(block, {3, handle(7)});
  ASSERT_EQ(reuse.uses(block).size(), 3u);
  EXPECT_FALSE(reuse.release(block));
  ASSERT_EQ(ev.events.size(), 3u);
  EXPECT_EQ(ev.events[0].use, (mt::StreamUse{1, nullptr}));
  EXPECT_EQ(ev.events[1].use, (mt::StreamUse{3, nullptr}));
  EXPECT_EQ(ev.events[2].use, (mt::StreamUse{3, handle(7)}));
  for (const auto& r : ev.events) EXPECT_NE(r.use.device, 0) << "an event on a device the block never used";
  EXPECT_TRUE(reuse.uses(block).empty());

  // Not reusable until every use completed, in any order.
  EXPECT_TRUE(reuse.completed().empty());
  ev.events[1].done = true;
  EXPECT_TRUE(reuse.completed().empty());
  ev.events[2].done = true;
  EXPECT_TRUE(reuse.completed().empty());
  ev.events[0].done = true;
  EXPECT_EQ(reuse.completed(), std::vector<void*>{block});
  EXPECT_TRUE(reuse.completed().empty()) << "returned twice";
  EXPECT_EQ(reuse.pending_events(), 0u);
  for (const auto& r : ev.events) EXPECT_TRUE(r.destroyed);
}

TEST(PinnedBlocks, BlocksOnManyDevicesCompleteIndependently) {
  FakeEvents ev;
  mt::BlockReuse reuse(ev);
  constexpr int kBlocks = 6, kDevices = 4;
  for (int b = 0; b < kBlocks; ++b) reuse.record_use(handle(b), {b % kDevices, handle(100 + b % 2)});
  for (int b = 0; b < kBlocks; ++b) EXPECT_FALSE(reuse.release(handle(b)));
  ASSERT_EQ(ev.events.size(), size_t(kBlocks));
  for (int b = 0; b < kBlocks; ++b) EXPECT_EQ(ev.events[size_t(b)].use.device, b % kDevices);
  // Device 2's work finishes first: only its blocks come back, though they were freed later.
  for (int b = 0; b < kBlocks; ++b) ev.events[size_t(b)].done = b % kDevices == 2;
  std::vector<void*> first = reuse.completed();
  std::sort(first.begin(), first.end());
  EXPECT_EQ(first, (std::vector<void*>{handle(2)}));
  for (auto& r : ev.events) r.done = true;
  std::vector<void*> rest = reuse.completed();
  EXPECT_EQ(rest.size(), size_t(kBlocks - 1));
  EXPECT_EQ(std::count(rest.begin(), rest.end(), handle(2)), 0);
}

TEST(PinnedBlocks, UnusedAndUnrecordableBlocksAreReusableAtOnce) {
  FakeEvents ev;
  mt::BlockReuse reuse(ev);
  EXPECT_TRUE(reuse.release(handle(0)));  // never used by a stream
  reuse.record_use(handle(1), {2, nullptr});
  ev.fail_next = true;
  EXPECT_TRUE(reuse.release(handle(1)));  // the stream was waited for instead
  EXPECT_EQ(ev.waited_streams, 1);
  EXPECT_EQ(reuse.pending_events(), 0u);
}

TEST(PinnedBlocks, WaitAllReturnsEveryPendingBlock) {
  FakeEvents ev;
  mt::BlockReuse reuse(ev);
  reuse.record_use(handle(0), {1, nullptr});
  reuse.record_use(handle(1), {5, handle(9)});
  reuse.record_use(handle(1), {0, nullptr});
  EXPECT_FALSE(reuse.release(handle(0)));
  EXPECT_FALSE(reuse.release(handle(1)));
  std::vector<void*> all = reuse.wait_all();
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<void*>{handle(0), handle(1)}));
  for (const auto& r : ev.events) EXPECT_TRUE(r.destroyed);
  EXPECT_TRUE(reuse.completed().empty());
}
