// What one rank launches for one step of the Llama forward pass, kind by kind: the Backend ops
// (kernels), the copies between host and device, and the collectives, from the model's
// description, its sharding plan and the backend's traits (how MatMulMany fuses). It follows
// worker/llama_model.cc's sequence op for op; step_launches_test runs the real Forward of a
// small model through counting wrappers of the Backend and the Communicator (launch_counting.h)
// and checks the counts equal this function's, so the figures it gives for a shape no test can
// load (Llama-3.1-405B at TP 8, docs/PERFORMANCE.md) are the engine's own sequence, not a hand
// table. One op is counted as one launch; where a CUDA op launches more than one kernel (an fp8
// GEMM of m > 16 quantizes x first, an unaligned x is staged, FlashInfer's split-KV merge), the
// kernel count is higher: these are lower bounds, and the eager figure a CUDA graph replaces.
//
//   TP_ASSIGN_OR_RETURN(StepLaunches s, StepLaunchesFor(config, plan, formats, /*chunks=*/1,
//                                                        backend.projection_fusion(),
//                                                        /*logit_rows=*/8));
//   s.per_layer[0].kernels();  // 16 for 405B's dense layer at TP 8 unfused, 15 fused
//
// Thread-safe: value types and pure functions.
#ifndef TPSERVE_WORKER_STEP_LAUNCHES_H_
#define TPSERVE_WORKER_STEP_LAUNCHES_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "model/sharding.h"
#include "model/weight_formats.h"

namespace tpserve {

enum class Launch : uint8_t {
  // Kernels: Backend ops.
  kNorm,        // RmsNorm
  kGemm,        // MatMul, MatMulChunked, each GEMM of a MatMulMany (one when fused)
  kSplit,       // a fused MatMulMany's split of its product into the outputs
  kRope,        // Rope
  kKvWrite,     // WriteKv
  kAttention,   // PagedAttention
  kActivation,  // GatedActivation
  kAdd,         // Add: the residual adds
  kEmbedding,   // EmbeddingRows
  kGatherRows,  // GatherLogitRows
  kChunkSum,    // SumChunks (--deterministic_tp's reduction)
  kFill,        // FillZero
  kCopy,        // Copy2D
  kScale,       // Scale
  kSoftCap,     // SoftCapF32
  kOtherOp,     // every other op (experts, latent attention)
  // Copies between host and device.
  kUpload,    // BeginStep's step metadata, CopyToDevice
  kDownload,  // CopyToHost (the logits)
  // Collectives.
  kAllReduce,
  kAllGather,
  kGather,
  kAllToAll,
  kBroadcast,
};
inline constexpr int kNumLaunchKinds = static_cast<int>(Launch::kBroadcast) + 1;
std::string_view LaunchName(Launch kind);  // "norm", "gemm", ..., "all-reduce"

struct LaunchCounts {
  std::array<int64_t, kNumLaunchKinds> n{};

  int64_t& operator[](Launch k) { return n[static_cast<int>(k)]; }
  int64_t operator[](Launch k) const { return n[static_cast<int>(k)]; }
  int64_t kernels() const;      // kNorm .. kOtherOp
  int64_t copies() const;       // kUpload, kDownload
  int64_t collectives() const;  // kAllReduce .. kBroadcast
  LaunchCounts& operator+=(const LaunchCounts& o);
  friend bool operator==(const LaunchCounts&, const LaunchCounts&) = default;
  // "norm 2, gemm 7, rope 2, ...": the kinds that occur, in enum order.
  std::string ToString() const;
};

struct StepLaunches {
  LaunchCounts before_layers;           // the metadata upload, the embedding (and its sum)
  std::vector<LaunchCounts> per_layer;  // decoder layer by layer
  LaunchCounts head;                    // final norm, LM head, its gather, the logits' copy
  LaunchCounts Total() const;
};

// One eager step of `plan`'s rank (worker/llama_model.cc's Forward without a recording) that
// asks for `logit_rows` rows of logits (0: a prompt chunk; the counts depend on no other
// property of the batch), with
// `reduction_chunks` (ReductionChunks: 1 for the default all-reduce) and a backend fusing as
// `fusion` says (Backend::projection_fusion; model/fused_projections.h per layer).
// UNIMPLEMENTED for what the model runs that this does not count yet, naming it: mixtures of
// experts, multi-head latent attention, a multi-token-prediction draft, data-parallel
// attention. (A target that also writes its hidden states for an MTP draft adds one kKvWrite.)
absl::StatusOr<StepLaunches> StepLaunchesFor(const ModelSpec& config, const ShardingPlan& plan,
                                             const WeightFormats& formats, int64_t reduction_chunks,
                                             const Backend::ProjectionFusion& fusion,
                                             int64_t logit_rows);

}  // namespace tpserve

#endif  // TPSERVE_WORKER_STEP_LAUNCHES_H_
