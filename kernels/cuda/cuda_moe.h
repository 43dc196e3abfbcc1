// The CUDA backend's mixture-of-experts ops (Backend::RouteExperts, MoeExperts, MoeExpertSlots,
// MoeCombine; their contracts are in kernels/backend.h), the CPU backend's algorithm
// (kernels/cpu/cpu_moe.h) on the device:
//   1. group the slots by expert on the device (moe_kernels.h: counts, offsets, permutation; no
//      atomics), and copy the offsets and the out-of-range count to the host: ONE STREAM SYNC
//      PER CALL (the per-expert path below is sized by the offsets; the bad ids are reported
//      from it; README.md);
//   2. gather each slot's input row into grouped order (times its weight with the weights on
//      the inputs);
//   3. bf16 and fp8 128x128 experts (MoeGroupedFormFor; not in deterministic mode): CUTLASS's
//      sm90 grouped GEMM (moe_grouped_gemm.h), sized on the device from the plan's offsets: one
//      call for gate and up, one gated activation over the slots, one call for the chunked
//      down into the same blocks as below. Every other form, and deterministic mode: per
//      expert with rows, gate and up through CudaMatMul::Run over its contiguous block of
//      rows (cuBLASLt, or CUTLASS's mixed-input GEMM for prepared int4 / fp8 weights: the
//      library GEMMs with their fp8 block scales inside), one gated activation over every
//      grouped row, then down through CudaMatMul::RunChunked into the expert's f32 block
//      [num_chunks, n_e, hidden] (the CPU's layout); experts without rows launch nothing;
//   4. weigh and sum each token's slots in slot order (or, for expert parallelism, write each
//      slot's chunks where the caller says), then add the shared expert's chunks in f32.
// A token's floats depend on the other tokens only through the GEMMs' batch size (the experts'
// group sizes), exactly as MatMul's do: deterministic mode's batch-invariant GEMM plans make
// them invariant too. MoeExpertSlots then MoeCombine run the same kernels and the same GEMMs
// (an expert's group holds the same rows in the same order) as MoeExperts.
//
//   CudaMoe moe(matmul, &generation, &abort, {.compute_capability = 90, .sm_count = 132});
//   TP_RETURN_IF_ERROR(moe.Run(x, rows, experts, shared, act, ids, weights, false, top_k,
//                              num_chunks, scratch, out, stream));
//
// Threading: not thread-safe (owns scratch); one call at a time, in stream order. Not inside a
// stream capture (step 1 waits on the host).
#ifndef TPSERVE_KERNELS_CUDA_CUDA_MOE_H_
#define TPSERVE_KERNELS_CUDA_CUDA_MOE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/activation.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/cuda/device_scratch.h"
#include "kernels/cuda/moe_grouped_gemm.h"
#include "kernels/cuda/moe_kernels.h"
#include "kernels/cuda/moe_plan.h"
#include "kernels/expert_routing.h"

namespace tpserve::cuda {

// What decides the experts' GEMM path (MoeGroupedFormFor): deterministic mode keeps the
// per-expert path; the grouped GEMM is sm_90a only; its tile scheduler takes the SM count.
struct CudaMoeOptions {
  bool deterministic = false;
  int compute_capability = 0;  // major * 10 + minor
  int sm_count = 0;
};

// How many MoE op calls (MoeExperts, MoeExpertSlots) in this process ran their experts through
// the grouped GEMM (moe_grouped_gemm.h) rather than one expert at a time (tests: which path ran).
int64_t MoeGroupedGemmCalls();

class CudaMoe {
 public:
  // `matmul` runs the experts' GEMMs and outlives this object; `scratch_generation` and `abort`
  // as CudaMatMul's (device_scratch.h).
  CudaMoe(CudaMatMul* matmul, int64_t* scratch_generation, const std::atomic<bool>* abort,
          CudaMoeOptions options = {});
  ~CudaMoe();
  CudaMoe(const CudaMoe&) = delete;
  CudaMoe& operator=(const CudaMoe&) = delete;

  // Backend::RouteExperts. UNIMPLEMENTED for a rule the kernel cannot apply
  // (RoutingRuleProblem), INVALID_ARGUMENT for one RouteTokens refuses.
  absl::Status Route(const ExpertRouting& routing, const float* logits, int64_t rows,
                     const float* correction_bias, int32_t* ids, float* weights, void* stream);

  // Backend::MoeExperts. INVALID_ARGUMENT naming how many ids are outside [0, experts) (read
  // back with the counts; nothing past the grouping runs then).
  absl::Status Run(const void* x, int64_t rows, absl::Span<const Backend::ExpertMlp> experts,
                   const Backend::ExpertMlp* shared, Activation act, const int32_t* ids,
                   const float* weights, bool weights_on_input, int64_t top_k,
                   int64_t num_chunks, const Backend::MoeWorkspace& scratch, float* out,
                   void* stream);

  // Backend::MoeExpertSlots; input_weights: the weights when they go on the inputs, else null.
  // A local slot whose slot_pos is negative is not written (REQUIRES says it never is).
  absl::Status RunSlots(const void* x, int64_t rows, absl::Span<const Backend::ExpertMlp> experts,
                        int64_t first_expert, Activation act, const int32_t* ids,
                        const float* input_weights, int64_t top_k, int64_t num_chunks,
                        const int32_t* slot_pos, const Backend::MoeWorkspace& scratch,
                        float* slots, void* stream);

  // Backend::MoeCombine.
  absl::Status Combine(const void* x, int64_t rows, const float* slots, const int32_t* slot_pos,
                       const float* weights, bool weights_on_input, int64_t top_k,
                       int64_t num_chunks, int64_t hidden, const Backend::ExpertMlp* shared,
                       Activation act, const Backend::MoeWorkspace& scratch, float* out,
                       void* stream);

  // The last grouping's offsets, as the host read them (tests).
  const std::vector<int32_t>& host_offsets() const { return offsets_; }

 private:
  // Step 1: the grouping of rows * top_k slots into plan_, its offsets into offsets_.
  absl::Status Group(const int32_t* ids, int64_t slots, ExpertRange range, bool refuse_foreign,
                     void* stream);
  // Steps 2 and 3 over the grouping Group made.
  absl::Status RunExperts(const void* x, int64_t rows,
                          absl::Span<const Backend::ExpertMlp> experts, Activation act,
                          const float* input_weights, int64_t top_k, int64_t num_chunks,
                          const Backend::MoeWorkspace& scratch, void* stream);
  // The same with the grouped GEMM (`form`: MoeGroupedFormFor's): one argument kernel and one
  // CUTLASS grouped GEMM for gate and up together, one for the chunked down, sized on the
  // device by the plan's offsets (fp8: x and the activated rows quantized per 1x128 group, the
  // weights' tile scales copied MN-major per call).
  absl::Status RunExpertsGrouped(MoeGroupedForm form, const void* x, int64_t rows,
                                 absl::Span<const Backend::ExpertMlp> experts, Activation act,
                                 const float* input_weights, int64_t top_k, int64_t num_chunks,
                                 const Backend::MoeWorkspace& scratch, void* stream);
  // The experts' weight table (gate x E, up x E, down x E) in device memory, uploaded once per
  // set of experts (a layer's never change) and kept: 3 x E x 32 bytes per MoE layer.
  absl::StatusOr<const MoeGemmWeight*> WeightTable(absl::Span<const Backend::ExpertMlp> experts,
                                                   int bytes_per_value, void* stream);
  // out[c, r] += the shared expert's chunk c of x[r] (nothing when shared is null).
  absl::Status AddShared(const void* x, int64_t rows, const Backend::ExpertMlp* shared,
                         Activation act, int64_t num_chunks, const Backend::MoeWorkspace& scratch,
                         float* out, void* stream);
  // The grouped down outputs in scratch.down, for the combine and slot kernels.
  SlotOutputs Grouped(const float* down, const int32_t* ids, int32_t first_expert) const;

  CudaMatMul* matmul_;
  const std::atomic<bool>* abort_;
  const CudaMoeOptions options_;
  // Pinned host memory (cudaHostAlloc), freed with cudaFreeHost: the source of an async copy
  // that must not make the host wait in the driver (a copy from pageable memory would).
  struct PinnedFree {
    void operator()(void* p) const;
  };
  struct Table {
    std::unique_ptr<MoeGemmWeight[], PinnedFree> host;  // pinned: the copy's source, kept
    std::unique_ptr<DeviceScratch> device;
  };
  std::map<std::vector<int64_t>, Table> tables_;  // WeightTable's, by what they hold
  int64_t* scratch_generation_;
  DeviceScratch grouped_args_;    // the grouped GEMMs' argument arrays and CUTLASS workspace
  DeviceScratch grouped_scales_;  // fp8: the weights' tile scales, MN-major
  DeviceScratch x_fp8_;           // fp8: e4m3 rows (x_rows, then the activated gate rows)
  DeviceScratch x_scales_;        // fp8: their 1x128 scales
  DeviceScratch plan_;               // MoePlanLayoutFor's words
  MoePlanLayout layout_;             // of the last grouping
  // Pinned: the offsets and bad-id count read back; sized for kHeaderWords (more experts than
  // any model has) the first time, so it never grows on a later step.
  int32_t* host_header_ = nullptr;
  int64_t host_header_words_ = 0;
  std::vector<int32_t> offsets_;     // [experts + 1] of the last grouping
};

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_CUDA_MOE_H_
