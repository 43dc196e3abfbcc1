#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/model_bundle.h"
#include "coordinator/structured/compiler.h"
#include "coordinator/structured/corpus.h"
#include "coordinator/structured/matcher.h"
#include "model/bundled_model.h"

namespace tpserve {
namespace {

bool Allowed(const std::vector<int32_t>& mask, int32_t id) {
  return (static_cast<uint32_t>(mask[id / 32]) >> (id % 32)) & 1u;
}

TEST(StructuredCorpus, EveryCaseCompilesStrictlyAndAcceptsItsExample) {
  absl::StatusOr<std::string> path = BundledModelPath();
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<ModelBundle> bundle = LoadModelBundle(*path);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  const int32_t vocab = static_cast<int32_t>(bundle->files.config.vocab_size);
  const std::vector<int32_t> eos = bundle->EosTokenIds();
  // The bound is not under test here; schemas with bounded strings take seconds under the
  // sanitizers (calendar_event: 0.75 s at -O2, over 10 s under ASan).
  ConstraintLimits limits;
  limits.compile_timeout = absl::Seconds(600);
  auto compiler = ConstraintCompiler::Create(*bundle->tokenizer, vocab, eos, limits);
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  absl::StatusOr<std::vector<CorpusCase>> cases =
      LoadCorpus("tests/structured/corpus.json", "tests/structured/walks.json");
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_GE(cases->size(), 20u);
  for (const CorpusCase& c : *cases) {
    SCOPED_TRACE(c.name);
    ASSERT_FALSE(c.walk.empty());
    absl::StatusOr<std::vector<int32_t>> ids = bundle->tokenizer->Encode(c.example);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, c.walk);
    absl::StatusOr<std::shared_ptr<const CompiledConstraint>> compiled = (*compiler)->Compile(c.spec);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    EXPECT_TRUE((*compiled)->dropped_keywords().empty());
    ConstraintMatcher m(*compiled);
    std::vector<int32_t> mask(TokenMaskWords(vocab));
    for (size_t i = 0; i < c.walk.size(); ++i) {
      m.FillMask(absl::MakeSpan(mask));
      if (!Allowed(mask, c.walk[i])) {
        std::string some;
        int n = 0;
        for (int32_t id = 0; id < vocab && n < 20; ++id) {
          if (Allowed(mask, id)) {
            some += "[" + std::string(*bundle->tokenizer->TokenBytes(id)) + "]";
            ++n;
          }
        }
        ADD_FAILURE() << "token " << i << " (" << c.walk[i] << ") not allowed; allowed: " << some
                      << " accept=" << m.Accept(c.walk[i]);
        break;
      }
      EXPECT_FALSE(Allowed(mask, eos[0]) && i == 0);
      ASSERT_TRUE(m.Accept(c.walk[i]));
    }
    m.FillMask(absl::MakeSpan(mask));
    EXPECT_TRUE(Allowed(mask, eos[0]));
    EXPECT_TRUE(m.completed());
    EXPECT_TRUE(m.Accept(eos[0]));
    EXPECT_TRUE(m.terminated());
  }
}

}  // namespace
}  // namespace tpserve
