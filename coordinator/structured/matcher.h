// One constrained sequence's grammar state: which token ids may come next (a bitmask over the
// model's vocabulary), advancing on each token the sequence takes, and the text the grammar
// forces next (jump-forward). EOS is allowed exactly where the grammar may end.
//
//   ConstraintMatcher m(compiled);
//   m.FillMask(mask);  sampler.Sample(logits, history, mask) -> t;  m.Accept(t);
//
// Threading: one thread at a time (the engine's mask worker or its step thread, never both).
#ifndef TPSERVE_COORDINATOR_STRUCTURED_MATCHER_H_
#define TPSERVE_COORDINATOR_STRUCTURED_MATCHER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "coordinator/structured/compiler.h"

namespace xgrammar {
class GrammarMatcher;
}

namespace tpserve {

// Words of the bitmask over `vocab_size` ids: bit (id % 32) of word id / 32, 1 = allowed.
int32_t TokenMaskWords(int32_t vocab_size);

class ConstraintMatcher {
 public:
  explicit ConstraintMatcher(std::shared_ptr<const CompiledConstraint> constraint);
  ~ConstraintMatcher();
  ConstraintMatcher(ConstraintMatcher&&) noexcept;

  // `mask` has TokenMaskWords(vocab) words. REQUIRES: !terminated().
  void FillMask(absl::Span<int32_t> mask);
  // False (and no change) when the grammar does not allow `token` here.
  bool Accept(int32_t token);
  // Undoes the last `num_tokens` Accepts (speculative decoding checks drafted tokens, then
  // takes them back). REQUIRES: at most the tokens accepted since construction.
  void Rollback(int32_t num_tokens);
  // The longest text every continuation must start with ("" when there is a choice, and once
  // terminated).
  std::string JumpForwardString();
  // The grammar's root is matched (it may end here) or its stop token was accepted.
  bool completed() const;
  // A stop token was accepted: nothing more may follow.
  bool terminated() const;
  const CompiledConstraint& constraint() const { return *constraint_; }

 private:
  std::shared_ptr<const CompiledConstraint> constraint_;
  std::unique_ptr<xgrammar::GrammarMatcher> matcher_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_STRUCTURED_MATCHER_H_
