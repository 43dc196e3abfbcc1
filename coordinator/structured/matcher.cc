#include "coordinator/structured/matcher.h"

#include <utility>

#include "xgrammar/xgrammar.h"

namespace tpserve {

int32_t TokenMaskWords(int32_t vocab_size) { return xgrammar::GetBitmaskSize(vocab_size); }

ConstraintMatcher::ConstraintMatcher(std::shared_ptr<const CompiledConstraint> constraint)
    : constraint_(std::move(constraint)),
      matcher_(std::make_unique<xgrammar::GrammarMatcher>(
          constraint_->grammar(), std::nullopt, /*terminate_without_stop_token=*/false,
          /*max_rollback_tokens=*/-1)) {}

ConstraintMatcher::~ConstraintMatcher() = default;
ConstraintMatcher::ConstraintMatcher(ConstraintMatcher&&) noexcept = default;

void ConstraintMatcher::FillMask(absl::Span<int32_t> mask) {
  int64_t shape[1] = {static_cast<int64_t>(mask.size())};
  DLTensor tensor;
  tensor.data = mask.data();
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = 1;
  tensor.dtype = xgrammar::GetBitmaskDLType();
  tensor.shape = shape;
  tensor.strides = nullptr;
  tensor.byte_offset = 0;
  matcher_->FillNextTokenBitmask(&tensor);
}

bool ConstraintMatcher::Accept(int32_t token) { return matcher_->AcceptToken(token); }

void ConstraintMatcher::Rollback(int32_t num_tokens) {
  if (num_tokens > 0) matcher_->Rollback(num_tokens);
}

std::string ConstraintMatcher::JumpForwardString() {
  // XGrammar refuses (a fatal check) once the stop token is in: nothing is forced after it.
  return matcher_->IsTerminated() ? std::string() : matcher_->FindJumpForwardString();
}

bool ConstraintMatcher::completed() const {
  return matcher_->IsTerminated() || matcher_->IsCompleted();
}

bool ConstraintMatcher::terminated() const { return matcher_->IsTerminated(); }

}  // namespace tpserve
