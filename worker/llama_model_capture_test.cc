// Decode steps recorded at tensor-parallel degrees > 1 (issue 38). W ranks run as threads, each
// with a CPU backend emulating Backend::RunCaptured (CpuBackendOptions::emulate_step_capture:
// it keys and counts runs as the CUDA backend does and runs body every time, refusing what a
// recording may not do) and an in-process communicator behind RecordableComm, a fake that says
// its collectives can be recorded (as NCCL's can) and logs every collective. The CPU cannot
// replay, so what stands in for a replay's fidelity is that every recorded step of a bucket
// makes the same collectives in the same order on every rank, the LM head's gather inside,
// the one wait outside.
#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/str_cat.h"
#include "checkpoint/testing/tiny_llama.h"
#include "comm/in_process_communicator.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "step/step_batch.h"
#include "worker/llama_model.h"
#include "worker/timed_communicator.h"

namespace tpserve {
namespace {

// Forwards to `inner` and logs each collective ("AllReduceSum 128 F32"); capturable() as told.
// Inside RunRecorded the collectives go to the current recorded step's log, and an
// AwaitCollectives there is counted as misplaced (a step's wait belongs after its recording).
class RecordableComm final : public Communicator {
 public:
  RecordableComm(Communicator* inner, bool capturable) : inner_(inner), capturable_(capturable) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  bool capturable() const override { return capturable_; }

  absl::Status AllReduceSum(absl::Span<float> data) override {
    Log(StrCat("AllReduceSum ", data.size(), " F32"));
    return inner_->AllReduceSum(data);
  }
  absl::Status AllGather(absl::Span<const float> in, absl::Span<float> out) override {
    Log(StrCat("AllGather ", in.size(), " F32"));
    return inner_->AllGather(in, out);
  }
  absl::Status AllReduceSum(void* data, int64_t count, DType dtype) override {
    Log(StrCat("AllReduceSum ", count, " ", DTypeName(dtype)));
    return inner_->AllReduceSum(data, count, dtype);
  }
  absl::Status AllGather(const void* in, int64_t in_count, DType dtype, void* out) override {
    Log(StrCat("AllGather ", in_count, " ", DTypeName(dtype)));
    return inner_->AllGather(in, in_count, dtype, out);
  }
  absl::Status Gather(const void* in, int64_t in_count, DType dtype, void* out,
                      int root) override {
    Log(StrCat("Gather ", in_count, " ", DTypeName(dtype), " to ", root));
    return inner_->Gather(in, in_count, dtype, out, root);
  }
  absl::Status AllToAll(const void* in, absl::Span<const int64_t> send_counts, void* out,
                        absl::Span<const int64_t> recv_counts, DType dtype) override {
    Log("AllToAll");
    return inner_->AllToAll(in, send_counts, out, recv_counts, dtype);
  }
  absl::Status Broadcast(absl::Span<uint8_t> data, int root) override {
    Log("Broadcast");
    return inner_->Broadcast(data, root);
  }
  absl::Status Barrier() override { return inner_->Barrier(); }
  absl::Status AwaitCollectives() override {
    if (in_recorded_) {
      ++misplaced_waits;
    } else {
      ++waits;
    }
    return inner_->AwaitCollectives();
  }
  absl::Status RunRecorded(std::string_view what, absl::FunctionRef<absl::Status()> run) override {
    recorded.push_back({std::string(what), {}});
    in_recorded_ = true;
    const absl::Status status = run();
    in_recorded_ = false;
    return status;
  }

  struct RecordedStep {
    std::string what;                      // RunRecorded's name for it
    std::vector<std::string> collectives;  // in call order
  };
  std::vector<RecordedStep> recorded;
  int waits = 0;           // AwaitCollectives outside a recorded step
  int misplaced_waits = 0; // ... and inside one

 private:
  void Log(std::string call) {
    if (in_recorded_) recorded.back().collectives.push_back(std::move(call));
  }

  Communicator* inner_;
  const bool capturable_;
  bool in_recorded_ = false;
};

struct RankRun {
  std::vector<float> logits;  // every step's, concatenated (the sampling rank's only)
  StepCaptureCounts counts;
  std::vector<RecordableComm::RecordedStep> recorded;
  int waits = 0;
  int misplaced_waits = 0;
};

struct Setup {
  int world = 2;
  bool record = true;            // LlamaLoadOptions::record_decode_steps
  bool capturable = true;        // what the communicator says
  bool emulate_capture = true;   // the backend records (emulated)
};

// Three prompts, then four decode steps of the three sequences (padded to 4 rows when
// recorded), then two of the first sequence alone (1 row): each rank's results.
std::vector<RankRun> RunRanks(const Setup& setup, const ModelSpec& config,
                         const WeightSource& source) {
  std::vector<RankRun> runs(setup.world);
  auto group = std::make_shared<InProcessGroup>(setup.world);
  std::vector<std::thread> threads;
  for (int r = 0; r < setup.world; ++r) {
    threads.emplace_back([&, r] {
      CpuBackend backend(CpuBackendOptions{.num_threads = 1,
                                           .emulate_step_capture = setup.emulate_capture});
      InProcessCommunicator inner(group, r);
      RecordableComm comm(&inner, setup.capturable);
      LlamaLoadOptions options;
      options.reduction = TpReduction::kDeterministic;
      options.record_decode_steps = setup.record;
      auto model = LlamaModel::Load(config, source, {r, setup.world}, &backend, &comm, options);
      ASSERT_TRUE(model.ok()) << "rank " << r << ": " << model.status();
      auto cache = KvCache::Create((*model)->KvShape(32, 4, DType::kF32), backend);
      ASSERT_TRUE(cache.ok()) << cache.status();
      const std::vector<std::vector<int32_t>> prompts = {{1, 17, 42}, {5, 98, 0, 63, 63}, {12, 77}};
      const std::vector<std::vector<int32_t>> tables = {{2, 1, 0}, {5, 4, 3}, {8, 7, 6}};
      std::vector<int64_t> length(3);
      const auto step = [&](const StepBatch& batch) {
        std::vector<float> logits(batch.num_logit_rows() * config.vocab_size, -1.0f);
        const absl::Status s = (*model)->Forward(batch, cache->get(), logits.data());
        ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s;
        if (r == kSamplingRank) {
          runs[r].logits.insert(runs[r].logits.end(), logits.begin(), logits.end());
        }
      };
      for (int s = 0; s < 3; ++s) {
        StepBatch prefill;
        prefill.Add(/*seq_id=*/s, 0, prompts[s], tables[s]);
        step(prefill);
        length[s] = static_cast<int64_t>(prompts[s].size());
      }
      for (int i = 0; i < 6; ++i) {
        StepBatch decode;
        for (int s = 0; s < (i < 4 ? 3 : 1); ++s) {
          decode.Add(/*seq_id=*/s, length[s], std::vector<int32_t>{7 * i + s + 1}, tables[s]);
          ++length[s];
        }
        step(decode);
      }
      runs[r].counts = backend.step_capture_counts();
      runs[r].recorded = comm.recorded;
      runs[r].waits = comm.waits;
      runs[r].misplaced_waits = comm.misplaced_waits;
    });
  }
  for (std::thread& t : threads) t.join();
  return runs;
}

class LlamaModelCaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = TinyLlamaSpec();
    source_ = MakeTinyLlama(config_, {.linear = DType::kQ4_1, .embedding = DType::kQ8_0});
  }
  ModelSpec config_;
  std::unique_ptr<InMemoryWeightSource> source_;
};

// Padded recorded decode steps give the eager steps' logits bit for bit at TP 2 and TP 4 under
// --deterministic_tp (and so TP 1's), recorded as the CUDA backend would: per bucket one warm
// run, one recording, replays after. On the old code nothing was recorded at tp > 1
// (CaptureBucket asked for world_size == 1): the counts assertion fails with {0, 0, 0}.
TEST_F(LlamaModelCaptureTest, RecordedDecodeMatchesEagerBitForBitAtTp2AndTp4) {
  const std::vector<float> tp1 = RunRanks({.world = 1, .record = false}, config_, *source_)[0].logits;
  ASSERT_FALSE(tp1.empty());
  for (int world : {2, 4}) {
    SCOPED_TRACE(StrCat("TP=", world));
    const std::vector<RankRun> eager = RunRanks({.world = world, .record = false}, config_, *source_);
    const std::vector<RankRun> recorded = RunRanks({.world = world}, config_, *source_);
    EXPECT_EQ(recorded[kSamplingRank].logits, eager[kSamplingRank].logits);
    EXPECT_EQ(recorded[kSamplingRank].logits, tp1);
    for (int r = 0; r < world; ++r) {
      SCOPED_TRACE(StrCat("rank ", r));
      // Bucket 4 (four steps): warm, recorded, two replays; bucket 1 (two steps): warm,
      // recorded. Prompts are never recorded.
      EXPECT_EQ(recorded[r].counts.warm_runs, 2);
      EXPECT_EQ(recorded[r].counts.recordings, 2);
      EXPECT_EQ(recorded[r].counts.replays, 2);
      EXPECT_EQ(eager[r].counts.warm_runs + eager[r].counts.recordings +
                    eager[r].counts.replays, 0);
    }
  }
}

// What a replay would run: every recorded step of a bucket makes the same collectives in the
// same order on every rank (the embedding's all-reduce, the layers' chunk gathers, then the
// LM head's gather to the sampling rank, last and inside), and the step's one wait for them
// comes after the recording, never inside it.
TEST_F(LlamaModelCaptureTest, RecordedStepsMakeTheSameCollectivesInOrderOnEveryRank) {
  for (int world : {2, 4}) {
    SCOPED_TRACE(StrCat("TP=", world));
    const std::vector<RankRun> runs = RunRanks({.world = world}, config_, *source_);
    const std::vector<RankRun> eager = RunRanks({.world = world, .record = false}, config_, *source_);
    for (int r = 0; r < world; ++r) {
      SCOPED_TRACE(StrCat("rank ", r));
      const std::vector<RecordableComm::RecordedStep>& steps = runs[r].recorded;
      ASSERT_EQ(steps.size(), 6u);  // the six decode steps
      for (int i = 0; i < 6; ++i) {
        const RecordableComm::RecordedStep& first = steps[i < 4 ? 0 : 4];
        EXPECT_EQ(steps[i].what, i < 4 ? "decode step of 4 rows" : "decode step of 1 rows");
        EXPECT_EQ(steps[i].collectives, first.collectives) << "step " << i;
        EXPECT_EQ(steps[i].collectives, runs[0].recorded[i].collectives) << "step " << i;
      }
      // Embedding all-reduce, two reductions per layer, and the LM head's gather of the padded
      // rows' logits (4 rows x this rank's padded vocab slice).
      const std::vector<std::string>& calls = steps[0].collectives;
      ASSERT_EQ(static_cast<int64_t>(calls.size()), 1 + 2 * config_.num_layers + 1);
      EXPECT_EQ(calls.back(),
                StrCat("Gather ", 4 * ((config_.vocab_size + world - 1) / world), " F32 to 0"));
      EXPECT_EQ(runs[r].misplaced_waits, 0);
      EXPECT_EQ(runs[r].waits, eager[r].waits);  // one per step, as eager
      EXPECT_EQ(runs[r].waits, 9);
    }
  }
}

// --enforce_eager (record_decode_steps = false) records nothing, at one rank as at two; a
// host communicator (not capturable) keeps tp > 1 eager too. On the old code one rank recorded
// whatever the flag (it did not exist): the TP 1 counts assertion fails.
TEST_F(LlamaModelCaptureTest, EagerFlagAndHostCommunicatorsRecordNothing) {
  for (int world : {1, 2}) {
    const std::vector<RankRun> eager = RunRanks({.world = world, .record = false}, config_, *source_);
    for (const RankRun& rank : eager) {
      EXPECT_EQ(rank.counts.warm_runs + rank.counts.recordings + rank.counts.replays, 0)
          << "TP=" << world;
      EXPECT_TRUE(rank.recorded.empty()) << "TP=" << world;
    }
  }
  const std::vector<RankRun> host = RunRanks({.world = 2, .capturable = false}, config_, *source_);
  const std::vector<RankRun> recorded = RunRanks({.world = 2}, config_, *source_);
  EXPECT_EQ(host[kSamplingRank].logits, recorded[kSamplingRank].logits);
  for (const RankRun& rank : host) {
    EXPECT_EQ(rank.counts.recordings, 0);
    EXPECT_TRUE(rank.recorded.empty());
  }
  // One rank records with the flag on (its bucket-4 and bucket-1 steps).
  const std::vector<RankRun> one = RunRanks({.world = 1}, config_, *source_);
  EXPECT_EQ(one[0].counts.recordings, 2);
}

// The worker wraps its communicator (TimedCommunicator): the wrapper must say what the wrapped
// NCCL communicator says and let it watch the recorded step. On the old code it said false
// (Communicator's default), so no GPU rank at tp > 1 would ever have recorded.
TEST(TimedCommunicatorTest, ForwardsCapturableAndRunRecorded) {
  SingleRankCommunicator single;
  auto fake = std::make_unique<RecordableComm>(&single, /*capturable=*/true);
  RecordableComm* inner = fake.get();
  TimedCommunicator timed(std::move(fake));
  EXPECT_TRUE(timed.capturable());
  int ran = 0;
  EXPECT_TRUE(timed.RunRecorded("decode step of 2 rows", [&] {
                ++ran;
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(ran, 1);
  ASSERT_EQ(inner->recorded.size(), 1u);
  EXPECT_EQ(inner->recorded[0].what, "decode step of 2 rows");
}

}  // namespace
}  // namespace tpserve
