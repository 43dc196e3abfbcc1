// A RankLoad survives the worker protocol: what RemoteExecutor sends is what every rank reads
// back, the draft model and all ranks' slices included; and the requests no RankLoad could
// have made are refused naming the field.
#include "step/rank_load_proto.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

namespace wpb = ::tpserve::worker::v1;
using ::testing::HasSubstr;

wpb::ShardAssignment Slice(int64_t first_head) {
  wpb::ShardAssignment a;
  a.set_first_head(first_head);
  a.set_num_heads(3);
  a.set_first_kv_head(first_head / 3);
  a.set_num_kv_heads(1);
  a.set_first_ffn_row(first_head * 512);
  a.set_num_ffn_rows(512);
  a.set_first_vocab_row(first_head * 1000);
  a.set_num_vocab_rows(1000);
  return a;
}

// Every field away from its default, so that a field the conversion drops fails the test.
RankLoad EveryFieldSet() {
  RankLoad load;
  load.world_size = 1;
  load.pipeline_stages = 2;
  load.model = {.path = "/models/target.gguf", .weights = "fp8", .max_logit_rows = 24,
                .assignments = {Slice(0), Slice(3)}};
  load.draft = ModelLoad{.path = "/models/draft", .weights = "int4", .max_logit_rows = 8,
                         .assignments = {Slice(0), Slice(1)}};
  load.vocab_size = 49152;
  load.kv_dtype = DType::kBF16;
  load.num_kv_blocks = 1234;
  load.block_size_tokens = 32;
  load.max_tokens_per_step = 2048;
  load.max_context_tokens = 8192;
  load.threads_per_rank = 7;
  load.deterministic_tp = true;
  load.expert_parallel = true;
  load.strict_kernels = true;
  load.enforce_eager = true;
  load.collective_timeout = absl::Milliseconds(2500);
  return load;
}

TEST(RankLoadProtoTest, EveryFieldRoundTrips) {
  const RankLoad load = EveryFieldSet();
  wpb::LoadRequest request;
  ToLoadRequest(load, &request);
  absl::StatusOr<RankLoad> back = RankLoadFromRequest(request);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == load) << request.ShortDebugString();
  EXPECT_EQ(request.kv_dtype(), "bf16");
  EXPECT_EQ(request.collective_timeout_ms(), 2500);
  EXPECT_EQ(request.assignments_size(), 2);
  EXPECT_TRUE(request.strict_kernels());
  EXPECT_TRUE(request.enforce_eager());  // field 35
}

TEST(RankLoadProtoTest, NoDraftRoundTripsAsNone) {
  RankLoad load = EveryFieldSet();
  load.draft.reset();
  wpb::LoadRequest request;
  request.set_draft_model_path("/stale");  // cleared, not left behind
  ToLoadRequest(load, &request);
  EXPECT_TRUE(request.draft_model_path().empty());
  absl::StatusOr<RankLoad> back = RankLoadFromRequest(request);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->draft.has_value());
  EXPECT_TRUE(*back == load);
}

TEST(RankLoadProtoTest, TheRequestsOwnFieldsAreLeftAlone) {
  wpb::LoadRequest request;
  request.set_rank(1);
  request.set_comm_kind("gloo");
  request.set_step_channel("/tpserve-ch");
  ToLoadRequest(EveryFieldSet(), &request);
  EXPECT_EQ(request.rank(), 1);
  EXPECT_EQ(request.comm_kind(), "gloo");
  EXPECT_EQ(request.step_channel(), "/tpserve-ch");
}

TEST(RankLoadProtoTest, ADefaultRequestIsOneRankWithTheDefaults) {
  wpb::LoadRequest request;
  request.set_world_size(1);
  absl::StatusOr<RankLoad> load = RankLoadFromRequest(request);
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_EQ(load->kv_dtype, DType::kF16);
  EXPECT_EQ(load->collective_timeout, absl::Seconds(10));
  EXPECT_TRUE(load->model.assignments.empty());
}

TEST(RankLoadProtoTest, RefusesWhatNoRankLoadMakes) {
  wpb::LoadRequest request;
  ToLoadRequest(EveryFieldSet(), &request);

  wpb::LoadRequest no_world = request;
  no_world.set_world_size(0);
  EXPECT_EQ(RankLoadFromRequest(no_world).status().message(),
            "world_size = 0 must be at least 1");

  wpb::LoadRequest bad_kv = request;
  bad_kv.set_kv_dtype("f64");
  EXPECT_EQ(RankLoadFromRequest(bad_kv).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(RankLoadFromRequest(bad_kv).status().message(), HasSubstr("kv_dtype = \"f64\""));

  wpb::LoadRequest short_plan = request;
  short_plan.mutable_assignments()->RemoveLast();
  EXPECT_EQ(RankLoadFromRequest(short_plan).status().message(),
            "assignments has 1 entries for 2 ranks (one per rank, or none)");

  wpb::LoadRequest negative_stages = request;
  negative_stages.set_pipeline_stages(-1);
  EXPECT_EQ(RankLoadFromRequest(negative_stages).status().message(),
            "pipeline_stages = -1 must be at least 1 (0: 1)");

  wpb::LoadRequest short_draft = request;
  *short_draft.add_draft_assignments() = Slice(2);
  EXPECT_EQ(RankLoadFromRequest(short_draft).status().message(),
            "draft_assignments has 3 entries for 2 ranks (one per rank, or none)");
}

TEST(RankLoadTest, TheDraftsLoadIsTheDraftOnTheSameRanks) {
  const RankLoad load = EveryFieldSet();
  const RankLoad draft = DraftLoad(load);
  EXPECT_EQ(draft.model.path, "/models/draft");
  EXPECT_EQ(draft.model.max_logit_rows, 8);
  EXPECT_FALSE(draft.draft.has_value());
  EXPECT_EQ(draft.num_kv_blocks, load.num_kv_blocks);
  EXPECT_EQ(draft.world_size, load.world_size);
  EXPECT_EQ(draft.kv_dtype, load.kv_dtype);
}

}  // namespace
}  // namespace tpserve
