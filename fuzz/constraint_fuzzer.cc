// libFuzzer target: structured-output constraints (coordinator/structured): the JSON-schema
// policy and XGrammar's schema, regex and EBNF compilers behind it. The last byte picks the
// kind (FuzzedDataProvider reads integers from the end: schema strict or not, regex, grammar,
// choice, structural tag strict or not); the rest is the constraint. What
// compiles is then walked: masks filled and allowed tokens accepted, as the engine does. A schema
// the policy (its draft vocabulary, $ref resolution against $id, the merges of allOf and of the
// keywords beside combinators: schema_normalize.h) accepts strict must pass unchanged without
// strict, nothing dropped (the seeds under fuzz/corpus/constraint_fuzzer/schema_* exercise them).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/structured/compiler.h"
#include "coordinator/structured/matcher.h"
#include "coordinator/structured/schema_policy.h"
#include "coordinator/tokenizer/test_vocab.h"

namespace {

const tpserve::ConstraintCompiler& Compiler() {
  static const tpserve::Tokenizer* tokenizer =
      new tpserve::Tokenizer(*tpserve::Tokenizer::Create(tpserve::MakeTestTokenizerData()));
  static const tpserve::ConstraintCompiler* compiler = [] {
    tpserve::ConstraintLimits limits;
    limits.max_text_bytes = 4096;
    limits.cache_bytes = 0;  // every input compiles
    return tpserve::ConstraintCompiler::Create(*tokenizer, tpserve::kTestVocabSize,
                                               {tpserve::kTestImEnd}, limits)
        ->release();
  }();
  return *compiler;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  tpserve::ConstraintSpec spec;
  spec.field = "constraint";
  switch (input.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
    case 1:
      spec.kind = tpserve::ConstraintKind::kJsonSchema;
      spec.strict = input.ConsumeBool();
      break;
    case 2:
      spec.kind = tpserve::ConstraintKind::kRegex;
      break;
    case 3:
      spec.kind = tpserve::ConstraintKind::kGrammar;
      break;
    case 5:
      spec.kind = tpserve::ConstraintKind::kStructuralTag;
      spec.strict = input.ConsumeBool();
      break;
    default:
      spec.kind = tpserve::ConstraintKind::kChoice;
      while (input.remaining_bytes() > 0 && spec.choices.size() < 16) {
        spec.choices.push_back(input.ConsumeRandomLengthString(64));
      }
      break;
  }
  if (spec.kind != tpserve::ConstraintKind::kChoice) spec.text = input.ConsumeRemainingBytesAsString();
  if (spec.kind == tpserve::ConstraintKind::kJsonSchema) {
    auto strict = tpserve::CheckSchema(spec.text, /*strict=*/true, "constraint");
    if (strict.ok()) {
      auto loose = tpserve::CheckSchema(spec.text, /*strict=*/false, "constraint");
      if (!loose.ok() || !loose->dropped.empty() || loose->schema != strict->schema ||
          loose->annotations != strict->annotations) {
        __builtin_trap();  // strict acceptance promises nothing would be dropped
      }
    }
  }
  auto compiled = Compiler().Compile(spec);
  if (!compiled.ok()) return 0;
  tpserve::ConstraintMatcher matcher(*compiled);
  std::vector<int32_t> mask(tpserve::TokenMaskWords(tpserve::kTestVocabSize));
  for (int step = 0; step < 32 && !matcher.terminated(); ++step) {
    matcher.FillMask(absl::MakeSpan(mask));
    int32_t next = -1;
    for (int32_t id = 0; id < tpserve::kTestVocabSize && next < 0; ++id) {
      if ((static_cast<uint32_t>(mask[id / 32]) >> (id % 32)) & 1u) next = id;
    }
    if (next < 0 || !matcher.Accept(next)) break;
    (void)matcher.JumpForwardString();  // also after the stop token: "" then
  }
  return 0;
}
