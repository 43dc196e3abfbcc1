// Launchers for the CUDA backend's own mixture-of-experts kernels (moe_kernels.cu): the router's
// top-k per token, the grouping of slots by expert, the gather of each slot's input row into
// grouped order, and the weighted combine of the slots' down outputs per token. The experts'
// GEMMs between them are the backend's MatMul paths (library GEMMs: cuBLASLt, CUTLASS's
// mixed-input GEMM), run per expert by cuda_moe.cc. Plain C++ (see device_types.h); every
// launcher queues its kernels on `stream` and returns cudaGetLastError(); counts of zero launch
// nothing.
//
//   TPK_LAUNCH(LaunchGroupByExpert(ids, rows * top_k, {0, num_experts}, true, plan, stream));
//
// Every pointer is device memory. Activations are bf16, down outputs and sums f32. Nothing here
// uses atomics: every output element is written by one thread from a fixed order of operations,
// so the results are the same bits every run and a token's do not depend on the other tokens.
// Thread-safe: stateless.
#ifndef TPSERVE_KERNELS_CUDA_MOE_KERNELS_H_
#define TPSERVE_KERNELS_CUDA_MOE_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_types.h"
#include "kernels/cuda/moe_plan.h"
#include "kernels/cuda/moe_routing.h"

namespace tpserve::cuda {

// ids [rows, rule.top_k] and weights [rows, rule.top_k] from logits f32 [rows, num_experts]
// by RouteToken (moe_routing.h), one thread per token; bias f32 [num_experts] or nullptr.
LaunchResult LaunchRouteExperts(const RoutingRule& rule, const float* logits, int64_t rows,
                                const float* bias, int32_t* ids, float* weights, void* stream);

// The grouping of `slots` ids into `plan` (int32 words laid out by MoePlanLayoutFor(slots,
// range.count)): offsets, the count of ids no range may hold (refuse_foreign: every id outside
// `range`; else the negative ones) in bad_ids, each slot's grouped row (position, -1 outside the
// range or bad) and the grouped rows' slots (order). Three kernels, moe_plan.h's steps.
// REQUIRES: range.count >= 1.
LaunchResult LaunchGroupByExpert(const int32_t* ids, int64_t slots, ExpertRange range,
                                 bool refuse_foreign, int32_t* plan, void* stream);

// x_rows[position[s], :] = x[s / top_k, :] for every slot s < slots with a grouped row; with
// input_weights (Llama 4), bf16(x * input_weights[s]) (the CPU's scale, one rounding).
// x bf16 [slots / top_k, hidden], x_rows bf16 [grouped rows, hidden].
LaunchResult LaunchGatherExpertRows(const void* x, int64_t slots, int64_t top_k, int64_t hidden,
                                    const int32_t* position, const float* input_weights,
                                    void* x_rows, void* stream);

// Where each slot's down output is: in the grouped experts' blocks (MoeExperts: slot s of local
// expert ids[s] - first_expert at its grouped row, GroupedDownRow), or in a buffer of slots
// (MoeCombine: slots[slot_pos[s], c, :]).
struct SlotOutputs {
  const float* data = nullptr;
  const int32_t* offsets = nullptr;   // grouped: the plan's offsets
  const int32_t* position = nullptr;  // grouped: the plan's positions
  const int32_t* ids = nullptr;       // grouped: the slots' expert ids
  int32_t first_expert = 0;
  const int32_t* slot_pos = nullptr;  // a slot buffer: each slot's index (set: not grouped)
};

// out[c, r, :] (f32 [num_chunks, rows, hidden]) = sum over j < top_k, in j order, of
// weights[r * top_k + j] * slot (r, j)'s chunk c: the first product, then fmaf of each next
// one into it; with weights == nullptr (weights on the inputs) the plain sum in j order.
LaunchResult LaunchCombineExperts(const SlotOutputs& slots, int64_t rows, int64_t top_k,
                                  int64_t num_chunks, int64_t hidden, const float* weights,
                                  float* out, void* stream);

// out[slot_pos[s], c, :] = the grouped down output of slot s's chunk c, for every slot s < slots
// with a grouped row and slot_pos[s] >= 0 (MoeExpertSlots); other slots' rows are not written.
LaunchResult LaunchWriteExpertSlots(const SlotOutputs& grouped, int64_t slots,
                                    int64_t num_chunks, int64_t hidden, const int32_t* slot_pos,
                                    float* out, void* stream);

// out[i] = a[i] + b[i] in f32; out may alias a or b.
LaunchResult LaunchAddF32(const float* a, const float* b, int64_t count, float* out,
                          void* stream);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_MOE_KERNELS_H_
