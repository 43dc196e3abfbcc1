// The CPU backend's mixture-of-experts feed-forward (Backend::MoeExperts): each token's top-k
// slots grouped by expert, and every expert with tokens run once over its group (gate and up
// in one pass over the gathered rows, the gated activation, down cut into the caller's
// chunks), then each token's slots weighted and summed in slot order, and a shared expert's
// output added last. Expert parallelism splits that in two (Backend::MoeExpertSlots and
// MoeCombine): RunSlots runs a rank's experts and writes each slot's output where the caller
// says, and Combine weights and sums slots that may have come from other ranks, with the
// same floating-point operations in the same order as Run, so either way gives the same bits.
//
// With the weights on the inputs (Llama 4) each slot's gathered row is multiplied by its weight
// before its expert runs, and the slots' outputs are summed unweighted.
//
//   CpuMoe moe(kernels, &pool, &matmul);
//   moe.Run(x, rows, experts, /*shared=*/nullptr, Activation::kSilu, ids, weights,
//           /*weights_on_input=*/false, top_k, num_chunks, scratch, out);
//
// A token's floats depend only on its own row, ids and weights: CpuMatMul's rows do not depend
// on the rows multiplied beside them, and the slot sum runs per token in slot order.
// Threading: not thread-safe (owns scratch); the matmuls spread over the pool.
#ifndef TPSERVE_KERNELS_CPU_CPU_MOE_H_
#define TPSERVE_KERNELS_CPU_CPU_MOE_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
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
           const float* weights, bool weights_on_input, int64_t top_k, int64_t num_chunks,
           const Backend::MoeWorkspace& scratch, float* out);
  // Backend::MoeExpertSlots with f32 activations; input_weights: the weights when they go on
  // the inputs, else null.
  void RunSlots(const float* x, int64_t rows, absl::Span<const Backend::ExpertMlp> experts,
                int64_t first_expert, Activation act, const int32_t* ids,
                const float* input_weights, int64_t top_k, int64_t num_chunks,
                const int32_t* slot_pos, const Backend::MoeWorkspace& scratch, float* slots);
  // Backend::MoeCombine with f32 activations (hidden: the rows' width).
  void Combine(const float* x, int64_t rows, const float* slots, const int32_t* slot_pos,
               const float* weights, bool weights_on_input, int64_t top_k, int64_t num_chunks,
               int64_t hidden, const Backend::ExpertMlp* shared, Activation act,
               const Backend::MoeWorkspace& scratch, float* out);

 private:
  // Groups the slots whose expert id is in [first_expert, first_expert + experts.size()) by
  // expert and runs each of those experts once over its group (down outputs in scratch.down,
  // a block per expert), each slot's row times input_weights[slot] when that is not null;
  // returns how many slots it ran.
  int64_t RunExperts(const float* x, int64_t rows, absl::Span<const Backend::ExpertMlp> experts,
                     int64_t first_expert, Activation act, const int32_t* ids,
                     const float* input_weights, int64_t top_k, int64_t num_chunks,
                     const Backend::MoeWorkspace& scratch);
  // out[c, r] = sum over j < top_k, in j order, of weights[r, j] * slot_out(c, r * top_k + j)
  // (weights null: each slot's output as it is).
  void WeightedSum(int64_t rows, int64_t hidden, const float* weights, int64_t top_k,
                   int64_t num_chunks,
                   absl::FunctionRef<const float*(int64_t c, int64_t s)> slot_out, float* out);
  // out[c, r] += the shared expert's chunk c of x[r] (nothing when shared is null).
  void AddShared(const float* x, int64_t rows, const Backend::ExpertMlp* shared, Activation act,
                 int64_t num_chunks, const Backend::MoeWorkspace& scratch, float* out);
  // One gated MLP over n rows of x: gate and up into the scratch from row first_row, the down
  // output chunked into `down` ([num_chunks, n, hidden]).
  void RunMlp(const Backend::ExpertMlp& mlp, const float* x, int64_t n, Activation act,
              int64_t num_chunks, int64_t first_row, const Backend::MoeWorkspace& scratch,
              float* down);

  const CpuKernels& kernels_;
  CpuMatMul* matmul_;
  // The grouping (the big buffers are the caller's MoeWorkspace).
  std::vector<int64_t> counts_;    // slots per local expert
  std::vector<int64_t> first_;     // first grouped position of each local expert's slots
  std::vector<int64_t> order_;     // grouped position -> slot r * top_k + j
  std::vector<int64_t> position_;  // slot -> grouped position (-1: another rank's expert)
};

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CPU_CPU_MOE_H_
