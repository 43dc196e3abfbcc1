// The grouping of a mixture-of-experts layer's slots by expert, as the CUDA backend computes it
// on the device (moe_kernels.cu) before it runs each expert once over a contiguous block of rows:
// per-expert counts, expert offsets (their exclusive prefix sum) and the permutation of slots
// into grouped rows, with its inverse. Plain C++, built and tested everywhere: the kernels call
// the TP_HD steps below, and GroupSlotsByExpert is the host reference they are checked against
// (moe_plan_test.cc: equal to the CPU backend's grouping, kernels/cpu/cpu_moe.cc).
//
//   absl::StatusOr<MoeGrouping> g = GroupSlotsByExpert(ids, top_k, {0, num_experts},
//                                                      ForeignIds::kRefuse);
//   // expert e's rows: g->order[g->offsets[e] .. g->offsets[e + 1]), in slot order
//
// The order (the one the CPU backend uses too): slot s = r * top_k + j (token r's j-th choice)
// goes to grouped row offsets[e] + (the number of slots s' < s of the same expert e): by
// expert, then by slot index. A slot whose expert is outside the call's range (another rank's,
// under expert parallelism) has no grouped row (position -1).
//
// The device computes the same thing without atomics, in tiles of kMoeTileSlots slots:
//   1. per tile, each expert's count in it (CountInTile), and its out-of-range ids;
//   2. per expert, the total over tiles, then the offsets (ExclusiveScan), then each tile's
//      first grouped row for that expert (TileBasesForExpert);
//   3. per slot, its tile's base for its expert plus its rank among the tile's earlier slots of
//      that expert (RankInTile).
// Every step is a sum of integers in a fixed order, so the result is the same bits every run.
// Thread-safe: pure functions and value types.
#ifndef TPSERVE_KERNELS_CUDA_MOE_PLAN_H_
#define TPSERVE_KERNELS_CUDA_MOE_PLAN_H_

#include <cstdint>
#include <vector>

#include "kernels/cuda/host_device.h"

#ifndef __CUDACC__
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#endif

namespace tpserve::cuda {

// Slots per tile of the device grouping (moe_kernels.cu): one thread block each.
inline constexpr int32_t kMoeTileSlots = 256;

// The experts a call runs: local expert e is expert id first + e, for e < count.
struct ExpertRange {
  int32_t first = 0;
  int32_t count = 0;
};

// Expert `id`'s index in `range`, or -1 when it is not in it.
TP_HD int32_t LocalExpert(int32_t id, ExpertRange range) {
  return id >= range.first && id - range.first < range.count ? id - range.first : -1;
}

// How many of the tile's n local expert indices (-1: none) are `e`.
TP_HD int32_t CountInTile(const int32_t* tile_local, int32_t n, int32_t e) {
  int32_t count = 0;
  for (int32_t i = 0; i < n; ++i) count += tile_local[i] == e ? 1 : 0;
  return count;
}

// How many of the tile's slots before slot i have slot i's local expert.
TP_HD int32_t RankInTile(const int32_t* tile_local, int32_t i) {
  return CountInTile(tile_local, i, tile_local[i]);
}

// offsets[0] = 0, offsets[e + 1] = offsets[e] + counts[e] for e < n.
TP_HD void ExclusiveScan(const int32_t* counts, int32_t n, int32_t* offsets) {
  offsets[0] = 0;
  for (int32_t e = 0; e < n; ++e) offsets[e + 1] = offsets[e] + counts[e];
}

// tile_counts is [num_tiles][stride] (expert e's count in tile t at t * stride + e): replaces
// column e with each tile's first grouped row for expert e, starting at `first_row` (the
// expert's offset).
TP_HD void TileBasesForExpert(int32_t* tile_counts, int32_t num_tiles, int32_t stride,
                              int32_t e, int32_t first_row) {
  int32_t next = first_row;
  for (int32_t t = 0; t < num_tiles; ++t) {
    const int32_t count = tile_counts[t * stride + e];
    tile_counts[t * stride + e] = next;
    next += count;
  }
}

// Where chunk c of the down output of the slot at grouped row p (local expert e) lies, as a
// row index of `hidden` floats into MoeWorkspace::down: expert e's block [num_chunks, n_e,
// hidden] starts at row num_chunks * offsets[e] (the CPU backend's layout, cpu_moe.cc).
TP_HD int64_t GroupedDownRow(const int32_t* offsets, int32_t e, int32_t p, int64_t num_chunks,
                             int64_t c) {
  const int64_t first = offsets[e], n = offsets[e + 1] - offsets[e];
  return num_chunks * first + c * n + (p - first);
}

// The device grouping's int32 words in one buffer: what the host reads back first (offsets
// and the out-of-range count: one copy), then the per-slot arrays and the tiles' counts.
struct MoePlanLayout {
  int64_t offsets = 0;      // [experts + 1]
  int64_t bad_ids = 0;      // [1]: slots whose id no range may hold (kRefuse: outside it)
  int64_t header_words = 0; // offsets and bad_ids: the host's copy
  int64_t position = 0;     // [slots]: slot -> grouped row, -1 outside the range
  int64_t order = 0;        // [slots]: grouped row -> slot (the first offsets[experts] used)
  int64_t tile_counts = 0;  // [num_tiles][experts + 1]: counts, then bases; column experts:
                            // the tile's bad ids
  int64_t num_tiles = 0;
  int64_t words = 0;        // the whole buffer
};
TP_HD MoePlanLayout MoePlanLayoutFor(int64_t slots, int64_t experts) {
  MoePlanLayout l;
  l.num_tiles = (slots + kMoeTileSlots - 1) / kMoeTileSlots;
  l.offsets = 0;
  l.bad_ids = experts + 1;
  l.header_words = experts + 2;
  l.position = l.header_words;
  l.order = l.position + slots;
  l.tile_counts = l.order + slots;
  l.words = l.tile_counts + l.num_tiles * (experts + 1);
  return l;
}

#ifndef __CUDACC__

// What the ids outside the range are.
enum class ForeignIds {
  kRefuse,  // an error (MoeExperts: every expert is in the call)
  kSkip,    // other ranks' experts (MoeExpertSlots); negative ids are refused still
};

// The grouping of the slots whose expert is in `range`.
struct MoeGrouping {
  std::vector<int32_t> counts;    // [range.count]: slots per local expert
  std::vector<int32_t> offsets;   // [range.count + 1]: exclusive prefix sum of counts
  std::vector<int32_t> order;     // [offsets.back()]: grouped row -> slot r * top_k + j
  std::vector<int32_t> position;  // [ids.size()]: slot -> grouped row; -1 outside the range
};

// The grouping of ids [rows, top_k] (flattened; rows = ids.size() / top_k) in the order above.
// INVALID_ARGUMENT naming the slot, the id and the range for an id outside [range.first,
// range.first + range.count) under kRefuse, or a negative one under kSkip; for a top_k < 1, an
// ids size that is not whole rows, or more slots than int32 indexes.
absl::StatusOr<MoeGrouping> GroupSlotsByExpert(absl::Span<const int32_t> ids, int64_t top_k,
                                               ExpertRange range, ForeignIds foreign);

#endif  // __CUDACC__

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_MOE_PLAN_H_
