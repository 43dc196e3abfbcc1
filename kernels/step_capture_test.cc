#include "kernels/step_capture.h"

#include "gtest/gtest.h"

namespace tpserve {
namespace {

TEST(StepCaptureTest, BatchBucketsArePowersOfTwoWithinTheRowLimit) {
  EXPECT_EQ(CaptureBatchBucket(1, 256), 1);
  EXPECT_EQ(CaptureBatchBucket(3, 256), 4);
  EXPECT_EQ(CaptureBatchBucket(4, 256), 4);
  EXPECT_EQ(CaptureBatchBucket(129, 256), 256);
  EXPECT_EQ(CaptureBatchBucket(5, 6), 0);  // 8 rows would exceed the 6 a step may have
  EXPECT_EQ(CaptureBatchBucket(0, 256), 0);
  EXPECT_EQ(CaptureBatchBuckets(6), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(CaptureBatchBuckets(256).size(), 9u);
}

TEST(StepCaptureTest, ContextBucketsStartAt256) {
  EXPECT_EQ(CaptureContextBucket(1), 256);
  EXPECT_EQ(CaptureContextBucket(256), 256);
  EXPECT_EQ(CaptureContextBucket(257), 512);
  EXPECT_EQ(CaptureContextBucket(700), 1024);
  EXPECT_EQ(NumCaptureContextBuckets(100), 1);
  EXPECT_EQ(NumCaptureContextBuckets(256), 1);
  EXPECT_EQ(NumCaptureContextBuckets(8192), 6);  // 256 .. 8192
  // Every bucket a step up to the limit can reach is counted.
  EXPECT_EQ(NumCaptureContextBuckets(5000), 6);
  EXPECT_EQ(CaptureContextBucket(5000), 8192);
}

TEST(StepCaptureTest, RecordedBytesCountEveryBucketPair) {
  // 32 layers: (32 * 24 + 8) launches of 4 KiB = 3,178,496 bytes per recording.
  EXPECT_EQ(RecordedStepBytes(32), 3178496);
  // 256 rows: 9 batch buckets; 8192 keys: 6 context buckets.
  EXPECT_EQ(RecordedStepsBytes(32, 256, 8192), 9 * 6 * 3178496);
  EXPECT_EQ(RecordedStepsBytes(32, 1, 256), 3178496);
}

}  // namespace
}  // namespace tpserve
