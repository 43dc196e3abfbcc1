#include "kernels/cuda/flashinfer/scoring.h"

#include <limits>

namespace tpserve::cuda::fi {

FiScoring FiScoringFor(int64_t window, float softcap) {
  FiScoring s;
  if (window > 0 && window - 1 <= std::numeric_limits<int32_t>::max()) {
    s.window_left = static_cast<int32_t>(window - 1);
  }
  if (softcap > 0.0f) {
    s.variant = FiVariant::kWindowSoftCap;
    s.logits_soft_cap = softcap;
  } else if (s.window_left >= 0) {
    s.variant = FiVariant::kWindow;
  }
  return s;
}

bool Fa3Serves(const FiScoring& scoring) { return scoring.variant == FiVariant::kPlain; }

PlanConstraints PlanConstraintsFor(const FiScoring& scoring) {
  return {.no_fa3 = !Fa3Serves(scoring), .no_split_keys = scoring.window_left >= 0};
}

bool PlanServes(bool uses_fa3, bool splits_keys, const FiScoring& scoring) {
  if (uses_fa3 && !Fa3Serves(scoring)) return false;
  return !(splits_keys && scoring.window_left >= 0);
}

}  // namespace tpserve::cuda::fi
