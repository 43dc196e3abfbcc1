// The host-side decisions of the mixed-input GEMM (mixed_gemm.h): which weights and batches it
// takes, the tile and split-K count of a call, the prepared byte counts, column chunks.
#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernels/check.h"
#include "kernels/cuda/mixed_gemm/mixed_gemm.h"

namespace tpserve::cuda {
namespace {

// M side of both tiles (weight rows), and the N side (tokens) of each.
constexpr int64_t kTileRows = 128;
constexpr int64_t kDecodeTileTokens = 16;
constexpr int64_t kLargeTileTokens = 128;
// A split sums at least this many K tiles (256 columns): shorter ones spend more on the
// partial-sum round trip through the workspace than they save.
constexpr int64_t kMinKTilesPerSplit = 4;
constexpr int64_t kMaxSplits = 16;
// Batch-invariant plans (deterministic mode) split every k the same way, whatever the rows:
// 4 parts keep a 4096-row decode matrix on 128 of an H100's 132 SMs (32 row tiles x 4).
constexpr int64_t kBatchInvariantSplits = 4;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

bool FitsInt(int64_t v) { return v >= 0 && v <= INT32_MAX; }

bool IsFp8(FormatKind kind) {
  return kind == FormatKind::kF8E4M3 || kind == FormatKind::kFp8PerChannel ||
         kind == FormatKind::kFp8Block128;
}

}  // namespace

bool MixedGemmTakesWeight(const TensorFormat& format, int64_t n, int64_t k) {
  if (n <= 0 || k <= 0 || n % kMixedGemmRowMultiple != 0) return false;
  if (format.kind == FormatKind::kInt4Group) {
    // The collective loads one scale column per K tile: groups must be whole K tiles (32 is a
    // valid engine group the library cannot take: README.md, "library gaps").
    return format.group_size > 0 && format.group_size % kMixedGemmTileK == 0 &&
           k % format.group_size == 0;
  }
  return IsFp8(format.kind) && k % kFp8ScaleGroup == 0;
}

bool MixedGemmSupports(const TensorFormat& format, int64_t m, int64_t n, int64_t k,
                       bool batch_invariant) {
  if (m < 1 || !MixedGemmTakesWeight(format, n, k)) return false;
  return format.kind == FormatKind::kInt4Group || batch_invariant || m <= kMixedGemmDecodeTokens;
}

MixedGemmPlan PlanMixedGemm(const TensorFormat& format, int64_t m, int64_t n, int64_t k,
                            int sm_count, bool batch_invariant) {
  TP_CHECK(MixedGemmSupports(format, m, n, k, batch_invariant),
           "PlanMixedGemm: shape not supported");
  TP_CHECK(sm_count >= 1, "PlanMixedGemm: sm_count < 1");
  MixedGemmPlan plan;
  plan.kind = format.kind == FormatKind::kInt4Group ? MixedGemmKind::kInt4 : MixedGemmKind::kFp8;
  plan.tile = batch_invariant || m <= kMixedGemmDecodeTokens ? MixedGemmTile::kDecode
                                                             : MixedGemmTile::kLarge;
  const int64_t k_tiles = CeilDiv(k, kMixedGemmTileK);
  int64_t splits = 1;
  if (batch_invariant) {
    // A row's floats must depend on neither the batch (m) nor the slice of rows a
    // tensor-parallel rank holds (n), nor the GPU model (sm_count): a split count of k alone.
    splits = std::min(k_tiles / kMinKTilesPerSplit, kBatchInvariantSplits);
  } else {
    const int64_t tokens_per_tile =
        plan.tile == MixedGemmTile::kDecode ? kDecodeTileTokens : kLargeTileTokens;
    const int64_t tiles = CeilDiv(n, kTileRows) * CeilDiv(m, tokens_per_tile);
    // Decode matrices have far fewer output tiles than SMs (n = 4096: 32 tiles for 132 SMs),
    // and a weight-streaming GEMM is only as fast as the SMs pulling weights: split k until
    // every SM has a part, as long as each part keeps kMinKTilesPerSplit K tiles.
    if (tiles < sm_count) {
      splits = std::min({CeilDiv(sm_count, tiles), k_tiles / kMinKTilesPerSplit, kMaxSplits});
    }
  }
  plan.splits = static_cast<int32_t>(std::max<int64_t>(splits, 1));
  return plan;
}

MixedGemmPreparedBytes PreparedBytes(const TensorFormat& format, int64_t n, int64_t k) {
  TP_CHECK(MixedGemmTakesWeight(format, n, k), "PreparedBytes: weight not supported");
  MixedGemmPreparedBytes bytes;
  if (format.kind == FormatKind::kInt4Group) {
    const int64_t groups = k / format.group_size;
    bytes.codes = n * k / 2;
    bytes.scales = n * groups * 4;
    bytes.offsets = n * groups * 4;
  } else {
    bytes.scales = n * (k / kFp8ScaleGroup) * 4;
  }
  return bytes;
}

bool MixedGemmCallFits(const MixedGemmWeight& w, const MixedGemmCall& c,
                       const MixedGemmPlan& plan) {
  if (w.kind != plan.kind || c.m < 1 || c.num_chunks < 1 || c.sm_count < 1) return false;
  if (plan.kind == MixedGemmKind::kFp8 && plan.tile != MixedGemmTile::kDecode) return false;
  // CUTLASS's problem shape is int.
  if (!FitsInt(w.n) || !FitsInt(c.m) || !FitsInt(w.k * c.num_chunks)) return false;
  if (w.n % kMixedGemmRowMultiple != 0 || w.k % kMixedGemmTileK != 0) return false;
  if (w.group_size <= 0 || w.k % w.group_size != 0) return false;
  // TMA: 16-byte aligned bases and row strides (x rows of 8 bf16, fp8 rows of 16 bytes).
  if (c.x_row_elems % 8 != 0 || c.x_row_elems < c.num_chunks * w.k) return false;
  if (!Aligned16(c.x) || !Aligned16(c.y) || !Aligned16(w.codes) || !Aligned16(w.scales)) {
    return false;
  }
  if (w.kind == MixedGemmKind::kInt4) return w.offsets != nullptr && Aligned16(w.offsets);
  return w.row_bytes % 16 == 0 && w.row_bytes >= c.num_chunks * w.k;
}

MixedGemmWeight MixedGemmColumnChunk(const MixedGemmWeight& w, int64_t c, int64_t kc) {
  TP_CHECK(kc > 0 && kc % kMixedGemmTileK == 0 && kc % w.group_size == 0 && (c + 1) * kc <= w.k,
           "MixedGemmColumnChunk: chunk not whole K tiles and groups of the weight");
  MixedGemmWeight chunk = w;
  chunk.k = kc;
  const int64_t groups_before = c * (kc / w.group_size);
  chunk.scales = w.scales + groups_before * w.n;
  if (w.offsets != nullptr) chunk.offsets = w.offsets + groups_before * w.n;
  // int4: atoms run down the rows first, so columns [c*kc, (c+1)*kc) of all rows are the
  // n * kc / 2 bytes after the first c * n * kc / 2 (prepared_layout.h). fp8: a column offset
  // into each row.
  chunk.codes = static_cast<const uint8_t*>(w.codes) +
                (w.kind == MixedGemmKind::kInt4 ? c * w.n * kc / 2 : c * kc);
  return chunk;
}

}  // namespace tpserve::cuda
