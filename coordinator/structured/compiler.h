// Compiles a request's constraint (constraint.h) into XGrammar's compiled grammar over the
// model's vocabulary, off the engine's thread, with bounds: the constraint's text size, the
// number of choices, the compile time and the compiled grammar's memory, each an
// INVALID_ARGUMENT naming the limit. Compiled grammars are cached by content in an LRU bounded
// in bytes; concurrent requests for the same constraint share one compilation.
//
//   TP_ASSIGN_OR_RETURN(auto compiler, ConstraintCompiler::Create(tokenizer, vocab, eos, limits));
//   TP_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledConstraint> c,
//                       compiler->Compile(spec, deadline));   // blocks this thread, not others
//   ConstraintMatcher matcher(c);  (matcher.h)
//
// Compilation runs on the compiler's own threads; Compile waits for it at most the time bound
// (or the request's deadline, if sooner). XGrammar cannot be interrupted, so a compilation
// that overruns keeps its thread until it ends; its result is then dropped, not cached, and the
// request has already been refused. With every compile thread held by such a schema, other
// new constraints wait and may time out too; cached ones are not affected.
//
// Threading: Compile and stats are thread-safe.
#ifndef TPSERVE_COORDINATOR_STRUCTURED_COMPILER_H_
#define TPSERVE_COORDINATOR_STRUCTURED_COMPILER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/structured/constraint.h"
#include "coordinator/tokenizer/tokenizer.h"

namespace xgrammar {
class CompiledGrammar;
}

namespace tpserve {

struct ConstraintLimits {
  int64_t max_text_bytes = 64 << 10;       // a schema, regex or grammar; all choices together
  int32_t max_choices = 1024;
  absl::Duration compile_timeout = absl::Seconds(10);
  int64_t max_compiled_bytes = 256 << 20;  // one compiled grammar (XGrammar's mask caches)
  int64_t cache_bytes = 1 << 30;           // all cached grammars
  int32_t compile_threads = 2;
};

// An immutable compiled constraint, shared by every request that sent the same one.
class CompiledConstraint {
 public:
  CompiledConstraint(std::unique_ptr<xgrammar::CompiledGrammar> grammar, int32_t vocab_size,
                     std::vector<std::string> dropped_keywords,
                     std::vector<std::string> annotations = {});
  ~CompiledConstraint();

  const xgrammar::CompiledGrammar& grammar() const { return *grammar_; }
  // Not strict: what was dropped because it would not be enforced (JSON pointers, or XGrammar's
  // own words for what it relaxed).
  const std::vector<std::string>& dropped_keywords() const { return dropped_; }
  // JSON pointers of the schema keywords taken as annotations (schema_policy.h): accepted, not
  // assertions in the schema's draft, so not enforced; strict or not.
  const std::vector<std::string>& annotations() const { return annotations_; }
  int64_t memory_bytes() const;
  int32_t vocab_size() const { return vocab_size_; }  // the width of the masks it makes

 private:
  std::unique_ptr<xgrammar::CompiledGrammar> grammar_;
  int32_t vocab_size_;
  std::vector<std::string> dropped_;
  std::vector<std::string> annotations_;
};

struct ConstraintCompilerStats {
  int64_t cache_hits = 0;     // includes joining a compilation already running
  int64_t cache_misses = 0;   // compilations started
  int64_t timeouts = 0;
  int64_t cached_grammars = 0;
  int64_t cached_bytes = 0;
};

class ConstraintCompiler {
 public:
  // `vocab_size` is the model's logits width (at least the tokenizer's); `stop_token_ids` end a
  // generation and are allowed exactly where the grammar may end.
  static absl::StatusOr<std::unique_ptr<ConstraintCompiler>> Create(
      const Tokenizer& tokenizer, int32_t vocab_size, std::vector<int32_t> stop_token_ids,
      ConstraintLimits limits = {});
  ~ConstraintCompiler();

  // INVALID_ARGUMENT naming spec.field for a bad constraint (schema policy, regex offset,
  // grammar line and column, XGrammar's reason for a structural tag it refuses, and the schema
  // policy's for a schema inside one, by its pointer from the tag's root) and for each bound
  // above.
  absl::StatusOr<std::shared_ptr<const CompiledConstraint>> Compile(
      const ConstraintSpec& spec, absl::Time deadline = absl::InfiniteFuture()) const;

  int32_t vocab_size() const { return vocab_size_; }
  const ConstraintLimits& limits() const;
  ConstraintCompilerStats stats() const;

 private:
  struct Shared;
  ConstraintCompiler(std::shared_ptr<Shared> shared, int32_t vocab_size);

  absl::Status CheckBounds(const ConstraintSpec& spec) const;

  std::shared_ptr<Shared> shared_;
  const int32_t vocab_size_;
};

// A json_schema constraint judged as Compile judges it (the schema policy, XGrammar's grammar
// and its warnings), without the compile over a vocabulary: for measuring which schemas are
// accepted (bench/jsonschemabench.cc). The same errors as Compile's, bounds aside.
struct SchemaCheck {
  std::vector<std::string> dropped;
  std::vector<std::string> annotations;
};
absl::StatusOr<SchemaCheck> CheckJsonSchemaConstraint(const ConstraintSpec& spec);

// An EBNF grammar (XGrammar's dialect) whose language is exactly `choices`.
std::string ChoiceGrammar(const std::vector<std::string>& choices);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_STRUCTURED_COMPILER_H_
