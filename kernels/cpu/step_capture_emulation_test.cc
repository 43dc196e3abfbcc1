// The CPU backend's emulation of Backend::RunCaptured (CpuBackendOptions::emulate_step_capture),
// which the model's recorded-step tests run on: keys and counts as the CUDA backend records
// (warm run, recording, replays; a new context bucket is a new recording), refuses what a
// recorded body may not do, and a replay of a step shaped unlike its recording.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace tpserve {
namespace {

// A decode step of `rows` sequences at context `position + 1` each (the last `padding` of them
// padding rows).
struct DecodeStep {
  DecodeStep(int64_t rows, int64_t position, int64_t padding = 0) {
    for (int64_t r = 0; r < rows; ++r) {
      const bool pad = r >= rows - padding;
      seqs.push_back(AttentionSequence{r, 1, pad ? 0 : position, table, pad});
      tokens.push_back(1);
      positions.push_back(static_cast<int32_t>(pad ? 0 : position));
      logit_rows.push_back(static_cast<int32_t>(r));
    }
  }
  StepInputs inputs() const { return {tokens, positions, seqs, logit_rows}; }
  std::vector<int32_t> table = {0};
  std::vector<AttentionSequence> seqs;
  std::vector<int32_t> tokens, positions, logit_rows;
};

TEST(StepCaptureEmulation, CountsWarmRunRecordingAndReplaysPerKeyAndContextBucket) {
  CpuBackend backend(CpuBackendOptions{.emulate_step_capture = true});
  const int owner = 0;
  int bodies = 0;
  const auto body = [&] {
    ++bodies;
    return absl::OkStatus();
  };
  const DecodeStep short_ctx(4, 10, /*padding=*/1), long_ctx(4, 300);
  for (int i = 0; i < 4; ++i) {
    backend.BeginStep(short_ctx.inputs());
    ASSERT_TRUE(backend.RunCaptured(&owner, 4, body).ok());
  }
  EXPECT_EQ(bodies, 4);  // the CPU runs body every time
  EXPECT_EQ(backend.step_capture_counts().warm_runs, 1);
  EXPECT_EQ(backend.step_capture_counts().recordings, 1);
  EXPECT_EQ(backend.step_capture_counts().replays, 2);
  backend.BeginStep(long_ctx.inputs());  // context 301: bucket 512, a recording of its own
  ASSERT_TRUE(backend.RunCaptured(&owner, 4, body).ok());
  EXPECT_EQ(backend.step_capture_counts().warm_runs, 2);
  backend.ForgetCaptured(&owner);  // its recordings go: the next run is warm again
  backend.BeginStep(short_ctx.inputs());
  ASSERT_TRUE(backend.RunCaptured(&owner, 4, body).ok());
  EXPECT_EQ(backend.step_capture_counts().warm_runs, 3);
  EXPECT_EQ(backend.step_capture_counts().replays, 2);
}

TEST(StepCaptureEmulation, RefusesAReplayShapedUnlikeItsRecording) {
  CpuBackend backend(CpuBackendOptions{.emulate_step_capture = true});
  const int owner = 0;
  const auto body = [] { return absl::OkStatus(); };
  const DecodeStep four(4, 10), three(3, 10);
  backend.BeginStep(four.inputs());
  ASSERT_TRUE(backend.RunCaptured(&owner, 4, body).ok());  // warm
  ASSERT_TRUE(backend.RunCaptured(&owner, 4, body).ok());  // recorded with 4 rows
  backend.BeginStep(three.inputs());
  const absl::Status replay = backend.RunCaptured(&owner, 4, body);
  EXPECT_EQ(replay.code(), absl::StatusCode::kFailedPrecondition) << replay;
  EXPECT_EQ(replay.message(),
            "RunCaptured key 4 replayed for 3 rows, 3 sequences and 3 logit rows; recorded for "
            "4, 4 and 4");
}

TEST(StepCaptureEmulation, RefusesWaitsAndAllocationsInsideTheBody) {
  CpuBackend backend(CpuBackendOptions{.emulate_step_capture = true});
  const int owner = 0;
  const DecodeStep step(1, 3);
  backend.BeginStep(step.inputs());
  float host = 0, device = 1;
  const absl::Status copy = backend.RunCaptured(&owner, 1, [&] {
    return backend.CopyToHost(&host, &device, sizeof(float));
  });
  EXPECT_EQ(copy.code(), absl::StatusCode::kFailedPrecondition) << copy;
  EXPECT_EQ(backend.RunCaptured(&owner, 1, [&] { return backend.Synchronize(); }).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(backend.RunCaptured(&owner, 1, [&] { return backend.Allocate(4, "x").status(); })
                .code(),
            absl::StatusCode::kFailedPrecondition);
  // Outside a body they work as ever.
  EXPECT_TRUE(backend.CopyToHost(&host, &device, sizeof(float)).ok());
  EXPECT_EQ(host, 1.0f);
  EXPECT_TRUE(backend.Synchronize().ok());
}

TEST(StepCaptureEmulation, WithoutEmulationBodyJustRunsAndNothingIsCounted) {
  CpuBackend backend(CpuBackendOptions{});
  EXPECT_FALSE(backend.SupportsStepCapture());
  const int owner = 0;
  int bodies = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(backend.RunCaptured(&owner, 1, [&] {
                  ++bodies;
                  return absl::OkStatus();
                }).ok());
  }
  EXPECT_EQ(bodies, 3);
  EXPECT_EQ(backend.step_capture_counts().warm_runs + backend.step_capture_counts().recordings +
                backend.step_capture_counts().replays,
            0);
}

}  // namespace
}  // namespace tpserve
