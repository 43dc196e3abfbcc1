// The CPU backend's mixture-of-experts feed-forward (Backend::MoeExperts): each token's top-k
// slots grouped by expert, and every expert with tokens run once over its group (gate and up
// in one pass over the gathered rows, the gated activation, down cut into the caller's
// chunks), then each token's slots weighted and summed in slot order, and a shared expert's
// output added last.
//
//   CpuMoe moe(kernels, &pool, &matmul);
//   moe.Run(x, rows, experts, /*shared=*/nullptr, Activation::kSilu, ids, weights, top_k,
//           num_chunks, scratch, out);
//
// A token's floats depend only on its own row, ids and weights: CpuMatMul's rows do not depend
// on the rows multiplied beside them, and the slot sum runs per token in slot order.
// Threading: not thread-safe (owns scratch); the matmuls spread over the pool.
#ifndef TPSERVE_KERNELS_CPU_CPU_MOE_H_
#define TPSERVE_KERNELS_CPU_CPU_MOE_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "kernels/activation.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_matmul.h"

namespace tpserve {

class CpuMoe {
 public:
  CpuMoe(const CpuKernels& kernels, CpuMatMul* matmul) : kernels_(kernels), matmul_(matmul) {}

  // Backend::MoeExperts with f32 activations.
  void Run(const float* x, int64_t rows, absl::Span<const Backend::ExpertMlp> experts,
           const Backend::ExpertMlp* shared, Activation act, const int32_t* ids,
           const float* weights, int64_t top_k, int64_t num_chunks,
           const Backend::MoeWorkspace& scratch, float* out);

 private:
  // One gated MLP over n rows of x: gate and up into the scratch from row first_row, the down
  // output chunked into `down` ([num_chunks, n, hidden]).
  void RunMlp(const Backend::ExpertMlp& mlp, const float* x, int64_t n, Activation act,
              int64_t num_chunks, int64_t first_row, const Backend::MoeWorkspace& scratch,
              float* down);

  const CpuKernels& kernels_;
  CpuMatMul* matmul_;
  // The grouping (rows * top_k entries each; the big buffers are the caller's MoeWorkspace).
  std::vector<int64_t> counts_;    // slots per expert
  std::vector<int64_t> first_;     // first grouped position of each expert's slots
  std::vector<int64_t> order_;     // grouped position -> slot r * top_k + j
  std::vector<int64_t> position_;  // slot -> grouped position
};

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CPU_CPU_MOE_H_
