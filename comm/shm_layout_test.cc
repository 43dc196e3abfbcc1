#include "comm/shm_layout.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// A zeroed, cache-line-aligned heap buffer standing in for the mapped segment.
std::unique_ptr<void, FreeDeleter> FakeSegment(size_t bytes) {
  void* memory = std::aligned_alloc(kShmLine, bytes);
  std::memset(memory, 0, bytes);
  return std::unique_ptr<void, FreeDeleter>(memory);
}

TEST(ShmLayout, SizesAndOffsetsAreWholeCacheLines) {
  ShmLayout layout = ShmLayout::For(3, 100);
  EXPECT_EQ(layout.slot_bytes, 128u);
  // header + 3 controls + 3 ranks x 2 slots x (slot header + 128 bytes)
  EXPECT_EQ(layout.total_bytes, 64u + 3 * 64 + 3 * 2 * (64 + 128));
  auto segment = FakeSegment(layout.total_bytes);
  layout.Bind(segment.get());
  const auto* base = static_cast<const uint8_t*>(segment.get());
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(layout.control(2)) - base, 64 + 2 * 64);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(layout.slot_header(0, 0)) - base, 64 + 3 * 64);
  EXPECT_EQ(layout.data(1, 1) - base, 64 + 3 * 64 + 3 * (64 + 128) + 64);
  EXPECT_EQ(layout.data(2, 1) + layout.slot_bytes - base,
            static_cast<ptrdiff_t>(layout.total_bytes));
  EXPECT_EQ(layout.slot_data[1][2], layout.data(2, 1));
}

TEST(ShmLayout, StepsCompareAcrossTheCounterWrap) {
  ShmLayout layout = ShmLayout::For(2, 64);
  auto segment = FakeSegment(layout.total_bytes);
  layout.Bind(segment.get());
  InitShmSegment(layout);
  EXPECT_EQ(layout.header()->magic, kShmMagic);
  PublishStep(layout, 1, 0xffffffffu);
  EXPECT_TRUE(StepReached(layout, 1, 0xfffffffeu));
  EXPECT_FALSE(StepReached(layout, 1, 0u));  // the step after 2^32 - 1
  PublishStep(layout, 1, 0u);
  EXPECT_TRUE(StepReached(layout, 1, 0xffffffffu));
  EXPECT_TRUE(StepReached(layout, 1, 0u));
  EXPECT_FALSE(StepReached(layout, 1, 1u));
}

TEST(ShmLayout, WaitWakesOnPublishTimesOutAndSeesABreak) {
  ShmLayout layout = ShmLayout::For(2, 64);
  auto segment = FakeSegment(layout.total_bytes);
  layout.Bind(segment.get());
  InitShmSegment(layout);
  const absl::Time far = absl::Now() + absl::Seconds(20);
  std::thread publisher([&] {
    absl::SleepFor(absl::Milliseconds(20));  // long enough for the waiter to sleep on the futex
    PublishStep(layout, 1, 1);
  });
  EXPECT_EQ(WaitForStep(layout, 1, 1, far, /*spin_iterations=*/0), ShmWait::kArrived);
  publisher.join();
  const absl::Time start = absl::Now();
  EXPECT_EQ(WaitForStep(layout, 1, 2, start + absl::Milliseconds(30), 0), ShmWait::kTimedOut);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(30));
  std::thread breaker([&] {
    absl::SleepFor(absl::Milliseconds(20));
    BreakShmGroup(layout, 0, ShmBreak::kFailed);
  });
  EXPECT_EQ(WaitForStep(layout, 1, 2, far, 0), ShmWait::kBroken);
  breaker.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(ShmBrokenByText(layout.header()->broken_by.load()),
            "rank 0 broke the group after a timeout or an error");
  // Arrival wins over a break: a step published before the break is still seen.
  EXPECT_EQ(WaitForStep(layout, 1, 1, far, 0), ShmWait::kArrived);
}

}  // namespace
}  // namespace tpserve
