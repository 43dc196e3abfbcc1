#include "worker/step_launches.h"

#include "base/str_cat.h"
#include "model/fused_projections.h"
#include "model/step_buffers.h"
#include "step/step_batch.h"

namespace tpserve {
namespace {

constexpr std::array<std::string_view, kNumLaunchKinds> kNames = {
    "norm",       "gemm",       "split",     "rope",        "kv-write",  "attention",
    "activation", "add",        "embedding", "gather-rows", "chunk-sum", "fill",
    "copy",       "scale",      "soft-cap",  "other-op",    "upload",    "download",
    "all-reduce", "all-gather", "gather",    "all-to-all",  "broadcast"};

int64_t SumKinds(const LaunchCounts& c, Launch first, Launch last) {
  int64_t sum = 0;
  for (int k = static_cast<int>(first); k <= static_cast<int>(last); ++k) sum += c.n[k];
  return sum;
}

// A MatMulMany of `parts` matrices: one GEMM and the backend's split where it fuses them.
void AddMatMulMany(const FusedLayout& layout, const Backend::ProjectionFusion& fusion,
                   LaunchCounts& c) {
  if (layout.fused) {
    c[Launch::kGemm] += 1;
    c[Launch::kSplit] += fusion.split_launches;
  } else {
    c[Launch::kGemm] += static_cast<int64_t>(layout.parts.size());
  }
}

// RowParallel (o, down): this rank's product, then the all-reduce; or its chunk sums, their
// all-gather and the ordered sum (--deterministic_tp).
void AddRowParallel(int world, int64_t chunks, LaunchCounts& c) {
  c[Launch::kGemm] += 1;  // MatMul, or MatMulChunked
  if (chunks == 1) {
    if (world > 1) c[Launch::kAllReduce] += 1;
    return;
  }
  if (world > 1) c[Launch::kAllGather] += 1;
  c[Launch::kChunkSum] += 1;
}

// AttentionBlock and FeedForwardBlock of one dense grouped-query-attention layer.
LaunchCounts Layer(const ModelSpec& config, const ShardingPlan& plan, const WeightFormats& formats,
                   int64_t layer, int64_t chunks, const Backend::ProjectionFusion& fusion) {
  const int world = plan.shard().world_size;
  const LayerSpec spec = config.Layer(layer);
  LaunchCounts c;
  c[Launch::kNorm] += 1;  // attention norm
  AddMatMulMany(FusedLayoutFor(config, plan, formats, layer, FusedGroup::kQkv, fusion), fusion, c);
  if (config.qk_norm) c[Launch::kNorm] += 2;
  if (spec.rope) c[Launch::kRope] += 2;  // q, k
  if (spec.qk_l2_norm) c[Launch::kNorm] += 2;
  c[Launch::kKvWrite] += 1;
  c[Launch::kAttention] += 1;
  AddRowParallel(world, chunks, c);  // o
  if (config.sandwich_norms) c[Launch::kNorm] += 1;
  c[Launch::kAdd] += 1;
  c[Launch::kNorm] += 1;  // ffn norm
  AddMatMulMany(FusedLayoutFor(config, plan, formats, layer, FusedGroup::kGateUp, fusion), fusion,
                c);
  c[Launch::kActivation] += 1;
  AddRowParallel(world, chunks, c);  // down
  // In the MLP's units (--deterministic_tp, an uneven split): a narrower rank's zero chunks.
  const DownChunks down = DenseDownChunks(config, plan, chunks);
  if (down.units && down.own < down.per_rank) {
    c[Launch::kFill] += 1;
  }
  if (config.sandwich_norms) c[Launch::kNorm] += 1;
  c[Launch::kAdd] += 1;
  return c;
}

// LmHead: the logit rows' gather, final norm and LM head (QueueLocalLogits), padded into the
// gather to the sampling rank, and the logits' copy to the host there.
LaunchCounts Head(const ModelSpec& config, const ShardingPlan& plan, int64_t logit_rows) {
  LaunchCounts c;
  if (logit_rows == 0) return c;
  const int world = plan.shard().world_size;
  const bool local = world == 1 || plan.num_local_vocab_rows() > 0;
  if (local) {
    c[Launch::kGatherRows] += 1;
    c[Launch::kNorm] += 1;
    c[Launch::kGemm] += 1;
    if (config.final_logit_softcap > 0) c[Launch::kSoftCap] += 1;
  }
  if (world > 1) {
    c[Launch::kFill] += 1;
    c[Launch::kCopy] += 1;
    c[Launch::kGather] += 1;
  }
  if (plan.shard().rank == kSamplingRank) c[Launch::kDownload] += 1;
  return c;
}

}  // namespace

std::string_view LaunchName(Launch kind) { return kNames[static_cast<int>(kind)]; }

int64_t LaunchCounts::kernels() const { return SumKinds(*this, Launch::kNorm, Launch::kOtherOp); }
int64_t LaunchCounts::copies() const { return SumKinds(*this, Launch::kUpload, Launch::kDownload); }
int64_t LaunchCounts::collectives() const {
  return SumKinds(*this, Launch::kAllReduce, Launch::kBroadcast);
}

LaunchCounts& LaunchCounts::operator+=(const LaunchCounts& o) {
  for (int k = 0; k < kNumLaunchKinds; ++k) n[k] += o.n[k];
  return *this;
}

std::string LaunchCounts::ToString() const {
  std::string s;
  for (int k = 0; k < kNumLaunchKinds; ++k) {
    if (n[k] == 0) continue;
    s += StrCat(s.empty() ? "" : ", ", kNames[k], " ", n[k]);
  }
  return s;
}

LaunchCounts StepLaunches::Total() const {
  LaunchCounts t = before_layers;
  for (const LaunchCounts& l : per_layer) t += l;
  t += head;
  return t;
}

absl::StatusOr<StepLaunches> StepLaunchesFor(const ModelSpec& config, const ShardingPlan& plan,
                                             const WeightFormats& formats, int64_t reduction_chunks,
                                             const Backend::ProjectionFusion& fusion,
                                             int64_t logit_rows) {
  const char* missing = config.moe.enabled()    ? "mixture-of-experts layers"
                        : config.mla.enabled()  ? "multi-head latent attention"
                        : config.is_mtp_draft() ? "a multi-token-prediction draft"
                        : plan.attention_dp()   ? "data-parallel attention"
                                                : nullptr;
  if (missing != nullptr) {
    return absl::UnimplementedError(
        StrCat("StepLaunchesFor does not count the launches of ", missing, " yet"));
  }
  StepLaunches s;
  s.before_layers[Launch::kUpload] += 1;  // BeginStep
  s.before_layers[Launch::kEmbedding] += 1;
  if (plan.shard().world_size > 1) s.before_layers[Launch::kAllReduce] += 1;
  if (config.embedding_multiplier != 1.0) s.before_layers[Launch::kScale] += 1;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    s.per_layer.push_back(Layer(config, plan, formats, l, reduction_chunks, fusion));
  }
  s.head = Head(config, plan, logit_rows);
  return s;
}

}  // namespace tpserve
