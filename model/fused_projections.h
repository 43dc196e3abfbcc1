// Which column-parallel projections of a layer one rank multiplies as ONE GEMM, and where each
// lands in it: the fused layout the loader stacks at load (worker/llama_weights.cc) and the
// backend's MatMulMany multiplies (kernels/backend.h). The sharding table (model/sharding.h)
// gives each rank whole slices of q, k and v (whole heads) and of gate and up; a rank's fused
// matrix is those slices concatenated along n, each whole:
//   q/k/v     [nq + nk + nv, hidden]   rows [0, nq) q, [nq, nq + nk) k, then v
//   gate/up   [2 * local_ffn, hidden]  rows [0, local_ffn) gate, then up
// so the product [m, n] holds each projection's output in a contiguous range of columns.
//
//   const FusedLayout qkv = FusedLayoutFor(config, plan, formats, /*layer=*/0, FusedGroup::kQkv,
//                                          backend.projection_fusion());
//   if (qkv.fused) { ... StackRows of the three slices ... } else { log qkv.why_not once }
//
// Fusing needs the parts held alike: one format (so one kernel and one scale layout), no part
// but the last ending inside an output scale block (fp8 128x128 tiles: a 128-row tile must not
// straddle the q|k boundary), and every part a multiple of the backend's row tile, so that the
// stack is held in the form, and so the bytes, its parts would be (the memory plan counts per
// role and stays exact). The weights' bytes do not change: the stack replaces the parts.
// Thread-safe: value types and pure functions.
#ifndef TPSERVE_MODEL_FUSED_PROJECTIONS_H_
#define TPSERVE_MODEL_FUSED_PROJECTIONS_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "model/config.h"
#include "model/sharding.h"
#include "model/weight_formats.h"

namespace tpserve {

enum class FusedGroup : uint8_t {
  kQkv,     // q, k, v (grouped-query attention; not MLA's)
  kGateUp,  // gate, up (a dense MLP; not a MoE layer's experts)
};
std::string_view FusedGroupName(FusedGroup group);  // "q/k/v", "gate/up"

// One projection inside the fused matrix: its rows [n_begin, n_begin + rows), which are its
// output's columns in the fused product.
struct FusedPart {
  TensorRole role = TensorRole::kQ;
  int64_t n_begin = 0;
  int64_t rows = 0;
  friend bool operator==(const FusedPart&, const FusedPart&) = default;
};

struct FusedLayout {
  FusedGroup group = FusedGroup::kQkv;
  // The group's projections on this rank, in fused order; empty where the layer has none (MLA
  // attention, a MoE layer's MLP).
  std::vector<FusedPart> parts;
  int64_t rows = 0;  // n of the fused matrix: the parts' rows summed
  int64_t cols = 0;  // k, which the parts share
  bool fused = false;
  // Why the parts stay separate GEMMs ("" when fused or when there are no parts).
  std::string why_not;
  // The backend fuses but this layer's parts cannot: the loader says so, once per reason.
  bool fallback = false;
};

// The layout of `group` in `layer` on `plan`'s rank for a backend fusing as `fusion` says
// (Backend::projection_fusion; the default, no fusion, gives why_not "the backend multiplies
// them apart" and fallback false).
FusedLayout FusedLayoutFor(const ModelSpec& config, const ShardingPlan& plan,
                           const WeightFormats& formats, int64_t layer, FusedGroup group,
                           const Backend::ProjectionFusion& fusion);

// The fallback lines a rank prints while it loads: "<group> of layer <l> stays <k> GEMMs
// (<backend>): <why>", once per (group, reason), the first layer that has it.
class FusionFallbackLog {
 public:
  std::optional<std::string> Add(const FusedLayout& layout, int64_t layer,
                                 std::string_view backend);

 private:
  std::set<std::pair<FusedGroup, std::string>> said_;
};

}  // namespace tpserve

#endif  // TPSERVE_MODEL_FUSED_PROJECTIONS_H_
