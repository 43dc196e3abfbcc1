#include "coordinator/structured/compiler.h"

#include <algorithm>
#include <deque>
#include <list>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "base/field_error.h"
#include "base/status_macros.h"
#include "coordinator/structured/schema_policy.h"
#include "coordinator/structured/structural_tag_policy.h"
#include "coordinator/structured/xgrammar_log.h"
#include "xgrammar/xgrammar.h"

namespace tpserve {
namespace {

using Compiled = std::shared_ptr<const CompiledConstraint>;

// Any JSON object: properties of any name and value.
constexpr char kAnyObjectSchema[] = R"({"type": "object"})";

std::string Seconds(absl::Duration d) { return absl::StrFormat("%g s", absl::ToDoubleSeconds(d)); }

// The kinds whose schemas pass the schema policy, so that strict=false relaxes them.
bool HasSchemas(ConstraintKind kind) {
  return kind == ConstraintKind::kJsonSchema || kind == ConstraintKind::kStructuralTag;
}

// XGrammar's grammar for a structural tag, or INVALID_ARGUMENT naming `field` with XGrammar's
// reason ("Invalid structural tag error: ..."). Not GrammarCompiler::CompileStructuralTag: that
// reports a bad tag as a failed internal check. `info` resolves the tag's token formats by
// their text (not control tokens: their text here is empty).
absl::StatusOr<xgrammar::Grammar> StructuralTagGrammar(const std::string& tag,
                                                       const xgrammar::TokenizerInfo& info,
                                                       std::string_view field) {
  std::variant<xgrammar::Grammar, xgrammar::StructuralTagError> parsed =
      xgrammar::Grammar::FromStructuralTag(tag, info);
  if (const auto* error = std::get_if<xgrammar::StructuralTagError>(&parsed)) {
    return FieldError(field, StrCat(": ", std::visit([](const auto& e) {
                                      return std::string(e.what());
                                    }, *error)));
  }
  return std::get<xgrammar::Grammar>(std::move(parsed));
}

// XGrammar warns where it relaxes what it was given instead of failing: strict (and the kinds
// without a schema policy) refuse, not strict lists the warning among the dropped keywords.
absl::Status JudgeXGrammarWarnings(const ConstraintSpec& spec,
                                   const std::vector<std::string>& warnings,
                                   SchemaPolicyResult& policy) {
  for (const std::string& warning : warnings) {
    std::string what = warning;
    if (absl::StrContains(warning, "oneOf") && !policy.one_of_pointers.empty()) {
      what = StrCat(what, " (oneOf at ", absl::StrJoin(policy.one_of_pointers, ", "), ")");
    }
    if (!HasSchemas(spec.kind) || spec.strict) {
      return FieldError(spec.field, StrCat(": would not be enforced exactly: ", what));
    }
    policy.dropped.push_back(std::move(what));
  }
  return absl::OkStatus();
}

// The schema policy's equivalent schema (into `policy`) and XGrammar's grammar for it, with
// compact separators (", " and ": ") and no free whitespace: a model cannot wander off into
// endless blanks, and more of each document is forced (jump-forward).
absl::StatusOr<xgrammar::Grammar> JsonSchemaGrammar(const ConstraintSpec& spec,
                                                    SchemaPolicyResult& policy) {
  TP_ASSIGN_OR_RETURN(policy, CheckSchema(spec.text, spec.strict, spec.field));
  return xgrammar::Grammar::FromJSONSchema(policy.schema, /*any_whitespace=*/false, std::nullopt,
                                           std::nullopt, /*strict_mode=*/true);
}

}  // namespace

absl::StatusOr<SchemaCheck> CheckJsonSchemaConstraint(const ConstraintSpec& spec) {
  if (spec.kind != ConstraintKind::kJsonSchema) {
    return absl::InvalidArgumentError("CheckJsonSchemaConstraint: not a json_schema constraint");
  }
  XGrammarWarningCapture capture;
  SchemaPolicyResult policy;
  try {
    TP_RETURN_IF_ERROR(JsonSchemaGrammar(spec, policy).status());
  } catch (const std::exception& e) {
    return FieldError(spec.field, StrCat(": ", e.what()));
  }
  TP_RETURN_IF_ERROR(JudgeXGrammarWarnings(spec, capture.warnings(), policy));
  return SchemaCheck{std::move(policy.dropped), std::move(policy.annotations)};
}

CompiledConstraint::CompiledConstraint(std::unique_ptr<xgrammar::CompiledGrammar> grammar,
                                       int32_t vocab_size, std::vector<std::string> dropped_keywords,
                                       std::vector<std::string> annotations)
    : grammar_(std::move(grammar)),
      vocab_size_(vocab_size),
      dropped_(std::move(dropped_keywords)),
      annotations_(std::move(annotations)) {}

CompiledConstraint::~CompiledConstraint() = default;

int64_t CompiledConstraint::memory_bytes() const {
  return static_cast<int64_t>(grammar_->MemorySizeBytes());
}

std::string ChoiceGrammar(const std::vector<std::string>& choices) {
  std::string ebnf = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) ebnf += " | ";
    ebnf += '"';
    for (unsigned char c : choices[i]) {
      if (c == '"' || c == '\\') {
        ebnf += '\\';
        ebnf += static_cast<char>(c);
      } else if (c < 0x20 || c == 0x7f) {
        ebnf += absl::StrFormat("\\x%02x", c);
      } else {
        ebnf += static_cast<char>(c);  // UTF-8 passes through whole
      }
    }
    ebnf += '"';
  }
  return ebnf;
}

struct ConstraintCompiler::Shared {
  struct Job {
    ConstraintSpec spec;
    std::string key;
    absl::Notification done;
    absl::StatusOr<Compiled> result;
    bool too_slow = false;  // took longer than the limit: a timeout for every waiter
  };
  struct Entry {
    std::string key;
    Compiled compiled;
    int64_t bytes = 0;
  };

  Shared(const xgrammar::TokenizerInfo& info, ConstraintLimits limits)
      : info(info),
        compiler(info, std::max(1, limits.compile_threads), /*cache_enabled=*/false),
        limits(limits) {}

  absl::StatusOr<Compiled> CompileNow(const ConstraintSpec& spec);
  void Finish(const std::shared_ptr<Job>& job, absl::StatusOr<Compiled> result,
              absl::Duration took);
  void WorkerLoop();

  const xgrammar::TokenizerInfo info;
  xgrammar::GrammarCompiler compiler;  // thread-safe; its own cache is off (ours is below)
  const ConstraintLimits limits;

  absl::Mutex mu;
  std::deque<std::shared_ptr<Job>> queue ABSL_GUARDED_BY(mu);
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::unordered_map<std::string, std::shared_ptr<Job>> running ABSL_GUARDED_BY(mu);
  std::list<Entry> lru ABSL_GUARDED_BY(mu);  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index ABSL_GUARDED_BY(mu);
  // Constraints that compiled for longer than the bound: refused at once when sent again,
  // rather than taking a compile thread each time.
  std::unordered_set<std::string> too_slow ABSL_GUARDED_BY(mu);
  ConstraintCompilerStats stats ABSL_GUARDED_BY(mu);
};

absl::StatusOr<Compiled> ConstraintCompiler::Shared::CompileNow(const ConstraintSpec& spec) {
  XGrammarWarningCapture capture;
  SchemaPolicyResult policy;  // for the kinds that hold schemas
  std::unique_ptr<xgrammar::CompiledGrammar> grammar;
  try {
    switch (spec.kind) {
      case ConstraintKind::kJsonSchema: {
        TP_ASSIGN_OR_RETURN(xgrammar::Grammar g, JsonSchemaGrammar(spec, policy));
        grammar = std::make_unique<xgrammar::CompiledGrammar>(compiler.CompileGrammar(g));
        break;
      }
      case ConstraintKind::kJsonObject:
        grammar = std::make_unique<xgrammar::CompiledGrammar>(compiler.CompileJSONSchema(
            kAnyObjectSchema, /*any_whitespace=*/false, std::nullopt, std::nullopt,
            /*strict_mode=*/false));
        break;
      case ConstraintKind::kRegex:
        grammar = std::make_unique<xgrammar::CompiledGrammar>(compiler.CompileRegex(spec.text));
        break;
      case ConstraintKind::kGrammar:
        grammar = std::make_unique<xgrammar::CompiledGrammar>(
            compiler.CompileGrammar(spec.text, "root"));
        break;
      case ConstraintKind::kChoice:
        grammar = std::make_unique<xgrammar::CompiledGrammar>(
            compiler.CompileGrammar(ChoiceGrammar(spec.choices), "root"));
        break;
      case ConstraintKind::kStructuralTag: {
        // XGrammar compiles a tag's schemas with free whitespace, up to the tag's
        // max_whitespace_cnt in a row (coordinator/tools/structural_tag.cc sets it).
        TP_ASSIGN_OR_RETURN(policy, CheckStructuralTagSchemas(spec.text, spec.strict, spec.field));
        TP_ASSIGN_OR_RETURN(xgrammar::Grammar tag,
                            StructuralTagGrammar(policy.schema, info, spec.field));
        grammar = std::make_unique<xgrammar::CompiledGrammar>(compiler.CompileGrammar(tag));
        break;
      }
      case ConstraintKind::kNone:
        return absl::InternalError("Compile called without a constraint");
    }
  } catch (const std::exception& e) {
    return FieldError(spec.field, StrCat(": ", e.what()));
  }
  TP_RETURN_IF_ERROR(JudgeXGrammarWarnings(spec, capture.warnings(), policy));
  const int32_t vocab_size = grammar->GetTokenizerInfo().GetVocabSize();
  return std::make_shared<const CompiledConstraint>(
      std::move(grammar), vocab_size, std::move(policy.dropped), std::move(policy.annotations));
}

void ConstraintCompiler::Shared::Finish(const std::shared_ptr<Job>& job,
                                        absl::StatusOr<Compiled> result, absl::Duration took) {
  absl::MutexLock lock(&mu);
  running.erase(job->key);
  if (took > limits.compile_timeout) {
    // Its waiters were told it timed out; so will everyone who sends it again, and a waiter
    // that looks only now (a limit of 0 s is shorter than the hand-over to it).
    job->too_slow = true;
    if (too_slow.size() >= 4096) too_slow.clear();
    too_slow.insert(job->key);
  } else if (result.ok()) {
    const int64_t bytes = (*result)->memory_bytes();
    if (bytes > limits.max_compiled_bytes) {
      result = FieldError(job->spec.field, StrCat(
          ": the compiled grammar takes ", bytes, " bytes, over the limit of ",
          limits.max_compiled_bytes, " (--structured_max_grammar_bytes); simplify the constraint"));
    } else {
      lru.push_front(Entry{job->key, *result, bytes});
      index[job->key] = lru.begin();
      stats.cached_bytes += bytes;
      while (stats.cached_bytes > limits.cache_bytes && lru.size() > 1) {
        stats.cached_bytes -= lru.back().bytes;
        index.erase(lru.back().key);
        lru.pop_back();
      }
    }
  }
  job->result = std::move(result);
  job->done.Notify();
}

void ConstraintCompiler::Shared::WorkerLoop() {
  while (true) {
    std::shared_ptr<Job> job;
    {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(
          +[](Shared* s) ABSL_SHARED_LOCKS_REQUIRED(s->mu) { return s->stop || !s->queue.empty(); },
          this));
      if (queue.empty()) return;  // stopping
      job = std::move(queue.front());
      queue.pop_front();
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<Compiled> result = CompileNow(job->spec);
    Finish(job, std::move(result), absl::Now() - start);
  }
}

absl::StatusOr<std::unique_ptr<ConstraintCompiler>> ConstraintCompiler::Create(
    const Tokenizer& tokenizer, int32_t vocab_size, std::vector<int32_t> stop_token_ids,
    ConstraintLimits limits) {
  if (vocab_size < tokenizer.vocab_size()) {
    return absl::InvalidArgumentError(StrCat(
        "structured output: the model's vocabulary (", vocab_size,
        ") is smaller than the tokenizer's (", tokenizer.vocab_size(), ")"));
  }
  // Each id's bytes; control and unused tokens are empty, which XGrammar takes as special:
  // never allowed inside constrained text (they are not text a client reads).
  std::vector<std::string> vocab(tokenizer.vocab_size());
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    TP_ASSIGN_OR_RETURN(TokenType type, tokenizer.GetTokenType(id));
    if (type == TokenType::kControl || type == TokenType::kUnused) continue;
    TP_ASSIGN_OR_RETURN(std::string_view bytes, tokenizer.TokenBytes(id));
    vocab[id] = std::string(bytes);
  }
  std::shared_ptr<Shared> shared;
  try {
    xgrammar::TokenizerInfo info(vocab, xgrammar::VocabType::RAW, vocab_size, stop_token_ids);
    shared = std::make_shared<Shared>(info, limits);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(StrCat("structured output: ", e.what()));
  }
  return std::unique_ptr<ConstraintCompiler>(
      new ConstraintCompiler(std::move(shared), vocab_size));
}

ConstraintCompiler::ConstraintCompiler(std::shared_ptr<Shared> shared, int32_t vocab_size)
    : shared_(std::move(shared)), vocab_size_(vocab_size) {
  // Detached: a compilation XGrammar cannot stop must not hold up this object's destruction.
  // Each thread keeps the shared state alive until it has seen `stop`.
  for (int i = 0; i < std::max(1, limits().compile_threads); ++i) {
    std::thread([shared = shared_] { shared->WorkerLoop(); }).detach();
  }
}

const ConstraintLimits& ConstraintCompiler::limits() const { return shared_->limits; }

ConstraintCompiler::~ConstraintCompiler() {
  absl::MutexLock lock(&shared_->mu);
  shared_->stop = true;
}

absl::Status ConstraintCompiler::CheckBounds(const ConstraintSpec& spec) const {
  int64_t bytes = static_cast<int64_t>(spec.text.size());
  if (spec.kind == ConstraintKind::kChoice) {
    if (spec.choices.empty()) return FieldError(spec.field, " is empty: give at least one choice");
    if (static_cast<int64_t>(spec.choices.size()) > limits().max_choices) {
      return FieldError(spec.field, StrCat(" has ", spec.choices.size(),
                                                 " choices, over the limit of ",
                                                 limits().max_choices));
    }
    for (size_t i = 0; i < spec.choices.size(); ++i) {
      if (spec.choices[i].empty()) {
        return FieldError(StrCat(spec.field, "[", i, "]"), " is empty");
      }
      bytes += static_cast<int64_t>(spec.choices[i].size());
    }
  } else if (spec.kind != ConstraintKind::kJsonObject && spec.text.empty()) {
    return FieldError(spec.field, " is empty");
  }
  if (bytes > limits().max_text_bytes) {
    return FieldError(spec.field, StrCat(" is ", bytes, " bytes, over the limit of ",
                                               limits().max_text_bytes,
                                               " (--structured_max_constraint_bytes)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Compiled> ConstraintCompiler::Compile(const ConstraintSpec& spec,
                                                      absl::Time deadline) const {
  TP_RETURN_IF_ERROR(CheckBounds(spec));
  const std::string timeout_message = StrCat(
      ": compiling it took longer than the limit of ", Seconds(limits().compile_timeout),
      " (--structured_compile_timeout_ms); simplify the constraint");
  std::string key = spec.CacheKey();
  std::shared_ptr<Shared::Job> job;
  {
    absl::MutexLock lock(&shared_->mu);
    if (auto it = shared_->index.find(key); it != shared_->index.end()) {
      shared_->lru.splice(shared_->lru.begin(), shared_->lru, it->second);
      ++shared_->stats.cache_hits;
      return it->second->compiled;
    }
    if (shared_->too_slow.count(key) > 0) {
      ++shared_->stats.timeouts;
      return FieldError(spec.field, timeout_message);
    }
    if (auto it = shared_->running.find(key); it != shared_->running.end()) {
      ++shared_->stats.cache_hits;
      job = it->second;
    } else {
      ++shared_->stats.cache_misses;
      job = std::make_shared<Shared::Job>();
      job->spec = spec;
      job->key = std::move(key);
      shared_->running[job->key] = job;
      shared_->queue.push_back(job);
    }
  }
  const absl::Time now = absl::Now();
  const absl::Time give_up = std::min(deadline, now + limits().compile_timeout);
  if (!job->done.WaitForNotificationWithDeadline(give_up)) {
    absl::MutexLock lock(&shared_->mu);
    ++shared_->stats.timeouts;
    if (give_up == deadline && deadline < now + limits().compile_timeout) {
      return absl::DeadlineExceededError(
          StrCat("the request's deadline passed while compiling ", spec.field));
    }
    return FieldError(spec.field, timeout_message);
  }
  if (job->too_slow) {
    absl::MutexLock lock(&shared_->mu);
    ++shared_->stats.timeouts;
    return FieldError(spec.field, timeout_message);
  }
  // Another request's field name may be in a shared job's error: name this one's.
  if (!job->result.ok() && job->spec.field != spec.field) {
    std::string message(job->result.status().message());
    if (absl::StartsWith(message, job->spec.field)) message.erase(0, job->spec.field.size());
    return FieldError(spec.field, message);
  }
  return job->result;
}

ConstraintCompilerStats ConstraintCompiler::stats() const {
  absl::MutexLock lock(&shared_->mu);
  ConstraintCompilerStats s = shared_->stats;
  s.cached_grammars = static_cast<int64_t>(shared_->lru.size());
  return s;
}

}  // namespace tpserve
