// Structured output on the real SmolLM2 through the engine: the output obeys its constraint,
// EOS comes exactly where the grammar may end, and the promises of the engine hold for
// constrained requests too: batch invariance (alone or among free and constrained requests),
// preemption (the matcher survives recomputation), tensor parallelism, cancellation (the
// matcher and the KV are freed), the length bound and stop sequences (completed = false).
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/admission.h"
#include "coordinator/engine.h"
#include "coordinator/model_bundle.h"
#include "coordinator/structured/compiler.h"
#include "model/bundled_model.h"
#include "nlohmann/json.hpp"
#include "worker/local_executor.h"

namespace tpserve {
namespace {

constexpr char kPersonSchema[] = R"({
  "type": "object", "additionalProperties": false, "required": ["name", "age"],
  "properties": {"name": {"type": "string", "maxLength": 20},
                 "age": {"type": "integer", "minimum": 0, "maximum": 120}}})";

struct Output {
  std::vector<int32_t> ids;
  std::string text;
  FinishReason finish = FinishReason::kNone;
  std::optional<StructuredOutcome> structured;
};

struct EngineSetup {
  int tp = 1;
  int32_t kv_blocks = 64;
  int32_t max_num_seqs = 4;
  bool jump_forward = true;
};

class StructuredOutputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::string> path = BundledModelPath();
    ASSERT_TRUE(path.ok()) << path.status();
    absl::StatusOr<ModelBundle> bundle = LoadModelBundle(*path);
    ASSERT_TRUE(bundle.ok()) << bundle.status();
    bundle_ = new ModelBundle(*std::move(bundle));
    auto compiler = ConstraintCompiler::Create(*bundle_->tokenizer,
                                               static_cast<int32_t>(bundle_->files.config.vocab_size),
                                               bundle_->EosTokenIds());
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = compiler->release();
  }

  void MakeEngine(const EngineSetup& setup) {
    RankLoad load;
    load.world_size = setup.tp;
    load.num_kv_blocks = setup.kv_blocks;
    load.block_size_tokens = 16;
    load.max_tokens_per_step = 256;
    load.model.max_logit_rows = setup.max_num_seqs;
    load.deterministic_tp = true;
    auto exec = LocalExecutor::Create(bundle_->files, load);
    ASSERT_TRUE(exec.ok()) << exec.status();
    EngineOptions eo;
    eo.num_kv_blocks = setup.kv_blocks;
    eo.block_size_tokens = 16;
    eo.context_length = 1024;
    eo.scheduler.max_num_seqs = setup.max_num_seqs;
    eo.scheduler.max_tokens_per_step = 256;
    eo.eos_token_ids = bundle_->EosTokenIds();
    eo.jump_forward = setup.jump_forward;
    engine_ = std::make_unique<Engine>(eo, *std::move(exec), &*bundle_->tokenizer);
    door_ = std::make_unique<Admitter>(
        bundle_->Door(eo.context_length, engine_->kv_capacity(), compiler_));
  }

  static tpserve::v1::GenerateRequest Chat(const std::string& question, int max_new_tokens) {
    tpserve::v1::GenerateRequest proto;
    tpserve::v1::ChatMessage* m = proto.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content(question);
    proto.mutable_sampling()->set_temperature(0.0f);
    proto.set_max_new_tokens(max_new_tokens);
    return proto;
  }

  // Submits every request, runs the engine dry, returns each one's output.
  std::vector<Output> Run(const std::vector<tpserve::v1::GenerateRequest>& protos,
                          int cancel_after_steps = -1) {
    std::vector<Output> out(protos.size());
    std::vector<int64_t> ids;
    for (size_t i = 0; i < protos.size(); ++i) {
      absl::StatusOr<AdmittedRequest> r = door_->Admit(protos[i]);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) return {};
      absl::StatusOr<int64_t> id = engine_->Submit(*std::move(r), [&out, i](GenerationEvent e) {
        out[i].ids.insert(out[i].ids.end(), e.token_ids.begin(), e.token_ids.end());
        out[i].text += e.text;
        if (e.finish != FinishReason::kNone) {
          out[i].finish = e.finish;
          out[i].structured = e.structured;
        }
      });
      EXPECT_TRUE(id.ok());
      ids.push_back(*id);
    }
    for (int step = 0; engine_->Step(); ++step) {
      if (step + 1 == cancel_after_steps) {
        for (int64_t id : ids) engine_->Cancel(id);
      }
    }
    return out;
  }

  static void ExpectPerson(const Output& o) {
    EXPECT_EQ(o.finish, FinishReason::kEos) << o.text;
    ASSERT_TRUE(o.structured.has_value());
    EXPECT_TRUE(o.structured->completed) << o.text;
    nlohmann::json j = nlohmann::json::parse(o.text, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << o.text;
    ASSERT_TRUE(j.is_object()) << o.text;
    EXPECT_EQ(j.size(), 2u) << o.text;
    ASSERT_TRUE(j.contains("name") && j["name"].is_string()) << o.text;
    EXPECT_LE(j["name"].get<std::string>().size(), 20u * 4) << o.text;  // chars, at most 4 bytes
    ASSERT_TRUE(j.contains("age") && j["age"].is_number_integer()) << o.text;
    EXPECT_GE(j["age"].get<int64_t>(), 0);
    EXPECT_LE(j["age"].get<int64_t>(), 120);
  }

  static tpserve::v1::GenerateRequest Person() {
    tpserve::v1::GenerateRequest p =
        Chat("Describe a fictional person as JSON with a name and an age.", 64);
    p.set_json_schema(kPersonSchema);
    return p;
  }

  static ModelBundle* bundle_;
  static ConstraintCompiler* compiler_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Admitter> door_;
};

ModelBundle* StructuredOutputTest::bundle_ = nullptr;
ConstraintCompiler* StructuredOutputTest::compiler_ = nullptr;

TEST_F(StructuredOutputTest, SchemaOutputValidatesAndIsTheSameAloneOrInABatch) {
  MakeEngine({});
  const Output alone = Run({Person()})[0];
  ExpectPerson(alone);
  EXPECT_GT(engine_->stats().jump_forward_tokens, 0);  // {"name": " is forced

  tpserve::v1::GenerateRequest choice = Chat("Is the sky blue? Answer yes or no.", 8);
  for (const char* c : {"yes", "no", "maybe"}) choice.mutable_choice()->add_choices(c);
  tpserve::v1::GenerateRequest date = Chat("When did the first moon landing happen?", 16);
  date.set_regex(R"(\d{4}-\d{2}-\d{2})");
  tpserve::v1::GenerateRequest free = Chat("Name three colors.", 24);
  MakeEngine({});
  const std::vector<Output> batch = Run({free, Person(), choice, date});
  EXPECT_EQ(batch[1].ids, alone.ids) << batch[1].text << " vs " << alone.text;
  EXPECT_FALSE(batch[0].structured.has_value());
  EXPECT_TRUE(batch[2].text == "yes" || batch[2].text == "no" || batch[2].text == "maybe")
      << batch[2].text;
  EXPECT_TRUE(std::regex_match(batch[3].text, std::regex(R"(\d{4}-\d{2}-\d{2})"))) << batch[3].text;
  for (int i : {2, 3}) {
    EXPECT_EQ(batch[i].finish, FinishReason::kEos);
    EXPECT_TRUE(batch[i].structured->completed);
  }
}

TEST_F(StructuredOutputTest, JumpForwardSavesStepsWithoutBreakingTheSchema) {
  MakeEngine({.jump_forward = false});
  const Output plain = Run({Person()})[0];
  const int64_t plain_steps = engine_->stats().steps;
  ExpectPerson(plain);
  EXPECT_EQ(engine_->stats().jump_forward_tokens, 0);
  MakeEngine({.jump_forward = true});
  const Output jumped = Run({Person()})[0];
  ExpectPerson(jumped);
  EXPECT_LT(engine_->stats().steps, plain_steps);
}

TEST_F(StructuredOutputTest, MatcherSurvivesPreemption) {
  MakeEngine({});
  const Output alone = Run({Person()})[0];
  // Seven KV blocks of 16 tokens for two sequences of a 43-token prompt and ~20 generated: one is
  // preempted and recomputed while its matcher keeps its place.
  MakeEngine({.kv_blocks = 7});
  const std::vector<Output> both = Run({Person(), Person()});
  EXPECT_GT(engine_->stats().preemptions, 0);
  EXPECT_EQ(both[0].ids, alone.ids);
  EXPECT_EQ(both[1].ids, alone.ids);
}

TEST_F(StructuredOutputTest, SameTokensAtTp3) {
  MakeEngine({});
  const Output tp1 = Run({Person()})[0];
  MakeEngine({.tp = 3});
  const Output tp3 = Run({Person()})[0];
  EXPECT_EQ(tp3.ids, tp1.ids) << tp3.text << " vs " << tp1.text;
}

TEST_F(StructuredOutputTest, LengthStopAndCancelSayNotCompletedAndFreeEverything) {
  MakeEngine({});
  tpserve::v1::GenerateRequest short_one = Person();
  short_one.set_max_new_tokens(4);
  const Output cut = Run({short_one})[0];
  EXPECT_EQ(cut.finish, FinishReason::kLength);
  ASSERT_TRUE(cut.structured.has_value());
  EXPECT_FALSE(cut.structured->completed);

  // A stop sequence inside the document ends it there, incomplete.
  tpserve::v1::GenerateRequest stopped = Person();
  stopped.add_stop_sequences("\"age\"");
  const Output stop = Run({stopped})[0];
  EXPECT_EQ(stop.finish, FinishReason::kStopSequence) << stop.text;
  ASSERT_TRUE(stop.structured.has_value());
  EXPECT_FALSE(stop.structured->completed);
  EXPECT_EQ(stop.text.find("age"), std::string::npos) << stop.text;

  const Output cancelled = Run({Person()}, /*cancel_after_steps=*/3)[0];
  EXPECT_EQ(cancelled.finish, FinishReason::kCancelled);
  ASSERT_TRUE(cancelled.structured.has_value());
  EXPECT_FALSE(cancelled.structured->completed);
  const EngineStats s = engine_->stats();
  EXPECT_EQ(s.running + s.waiting, 0);
  EXPECT_EQ(s.free_kv_blocks, s.total_kv_blocks);
}

}  // namespace
}  // namespace tpserve
