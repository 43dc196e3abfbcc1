// The CUDA backend's expert grouping (moe_plan.h) on the host, no GPU needed:
// - GroupSlotsByExpert equals the CPU backend's own grouping, read from what CpuMoe leaves in its
//   workspace (the gathered rows in grouped order, the down outputs in per-expert blocks), for
//   MoeExperts and for a rank's MoeExpertSlots;
// - the device's tiled steps (CountInTile, ExclusiveScan, TileBasesForExpert, RankInTile), run
//   here in the kernels' order, equal GroupSlotsByExpert on random ids of many sizes;
// - edge cases: every token to one expert, experts with no tokens, a batch of one, top_k = 1,
//   ids out of range refused (and counted by the tiled steps), and the buffer layout.
#include "kernels/cuda/moe_plan.h"

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/quantize_weights.h"

namespace tpserve::cuda {
namespace {

constexpr int64_t kHidden = 16, kFfn = 16;

// A straightforward reference of the documented order: for each expert, its slots in slot order.
MoeGrouping BruteForce(const std::vector<int32_t>& ids, ExpertRange range) {
  MoeGrouping g;
  g.counts.assign(range.count, 0);
  g.offsets.assign(range.count + 1, 0);
  g.position.assign(ids.size(), -1);
  for (int32_t e = 0; e < range.count; ++e) {
    for (size_t s = 0; s < ids.size(); ++s) {
      if (ids[s] != range.first + e) continue;
      g.position[s] = static_cast<int32_t>(g.order.size());
      g.order.push_back(static_cast<int32_t>(s));
      ++g.counts[e];
    }
    g.offsets[e + 1] = static_cast<int32_t>(g.order.size());
  }
  return g;
}

// The device's three kernels (moe_kernels.cu), step by step on the host, with the same TP_HD
// functions and the same buffer layout. Returns the grouping and the bad-id count.
std::pair<MoeGrouping, int32_t> TiledGrouping(const std::vector<int32_t>& ids, ExpertRange range,
                                              bool refuse_foreign) {
  const int64_t slots = static_cast<int64_t>(ids.size());
  const int32_t experts = range.count;
  const MoePlanLayout l = MoePlanLayoutFor(slots, experts);
  std::vector<int32_t> words(l.words, -7);  // the device buffer is not cleared either
  int32_t* tile_counts = words.data() + l.tile_counts;
  const int32_t stride = experts + 1;
  const auto local_tile = [&](int64_t t) {
    std::vector<int32_t> local;
    for (int64_t s = t * kMoeTileSlots; s < std::min(slots, (t + 1) * kMoeTileSlots); ++s) {
      local.push_back(LocalExpert(ids[s], range));
    }
    return local;
  };
  for (int64_t t = 0; t < l.num_tiles; ++t) {  // kernel 1: one block per tile
    const std::vector<int32_t> local = local_tile(t);
    const int32_t n = static_cast<int32_t>(local.size());
    for (int32_t e = 0; e < experts; ++e) {
      tile_counts[t * stride + e] = CountInTile(local.data(), n, e);
    }
    int32_t bad = 0;
    for (int32_t i = 0; i < n; ++i) {
      const int32_t id = ids[t * kMoeTileSlots + i];
      bad += local[i] < 0 && (refuse_foreign || id < 0) ? 1 : 0;
    }
    tile_counts[t * stride + experts] = bad;
  }
  // Kernel 2: one block; per expert the total, then the scan, then the tiles' bases.
  std::vector<int32_t> counts(experts, 0);
  int32_t bad = 0;
  for (int32_t e = 0; e <= experts; ++e) {
    int32_t total = 0;
    for (int64_t t = 0; t < l.num_tiles; ++t) total += tile_counts[t * stride + e];
    (e < experts ? counts[e] : bad) = total;
  }
  int32_t* offsets = words.data() + l.offsets;
  ExclusiveScan(counts.data(), experts, offsets);
  words[l.bad_ids] = bad;
  for (int32_t e = 0; e < experts; ++e) {
    TileBasesForExpert(tile_counts, static_cast<int32_t>(l.num_tiles), stride, e, offsets[e]);
  }
  // Kernel 3: one block per tile, a thread per slot.
  int32_t* position = words.data() + l.position;
  int32_t* order = words.data() + l.order;
  for (int64_t t = 0; t < l.num_tiles; ++t) {
    const std::vector<int32_t> local = local_tile(t);
    for (int32_t i = 0; i < static_cast<int32_t>(local.size()); ++i) {
      const int64_t s = t * kMoeTileSlots + i;
      if (local[i] < 0) {
        position[s] = -1;
        continue;
      }
      position[s] = tile_counts[t * stride + local[i]] + RankInTile(local.data(), i);
      order[position[s]] = static_cast<int32_t>(s);
    }
  }
  MoeGrouping g;
  g.counts = counts;
  g.offsets.assign(offsets, offsets + experts + 1);
  g.order.assign(order, order + offsets[experts]);
  g.position.assign(position, position + slots);
  return {g, words[l.bad_ids]};
}

void ExpectSame(const MoeGrouping& got, const MoeGrouping& want) {
  EXPECT_EQ(got.counts, want.counts);
  EXPECT_EQ(got.offsets, want.offsets);
  EXPECT_EQ(got.order, want.order);
  EXPECT_EQ(got.position, want.position);
}

std::vector<int32_t> RandomIds(int64_t slots, int32_t lo, int32_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(lo, hi - 1);
  std::vector<int32_t> ids(slots);
  for (int32_t& id : ids) id = pick(rng);
  return ids;
}

// Small experts the CPU backend runs, in bf16.
struct Experts {
  std::vector<HostMatrix> host;
  std::vector<Backend::ExpertMlp> mlps;
};
Experts MakeExperts(int64_t n) {
  Experts e;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.2f);
  const auto matrix = [&](int64_t rows, int64_t cols) {
    std::vector<float> w(rows * cols);
    for (float& v : w) v = normal(rng);
    return QuantizeWeights(TensorFormat::Of(FormatKind::kBF16), w.data(), rows, cols);
  };
  for (int64_t i = 0; i < n; ++i) {
    e.host.push_back(matrix(kFfn, kHidden));
    e.host.push_back(matrix(kFfn, kHidden));
    e.host.push_back(matrix(kHidden, kFfn));
  }
  for (int64_t i = 0; i < n; ++i) {
    e.mlps.push_back({&e.host[3 * i].matrix, &e.host[3 * i + 1].matrix,
                      &e.host[3 * i + 2].matrix});
  }
  return e;
}

// What the CPU backend's grouping was, read back from its workspace: with the weights on the
// inputs, gathered row p is weights[s] * x[s / top_k]; x[r, 0] = r + 1 and weights[s] = s + 1
// make its first element (r + 1)(s + 1), which grows with s, so it names the slot. Returns the
// grouped rows' slots, and checks the CPU's down blocks against GroupedDownRow on the way:
// MoeExperts' output with the weights on the inputs is the plain sum of its slots' rows there.
std::vector<int32_t> CpuOrder(const std::vector<int32_t>& ids, int64_t top_k, int64_t chunks,
                              ExpertRange range, bool slots_call) {
  const int64_t slots = static_cast<int64_t>(ids.size()), rows = slots / top_k;
  const Experts experts = MakeExperts(range.count);
  std::vector<float> x(rows * kHidden, 0.5f), w(slots);
  for (int64_t r = 0; r < rows; ++r) x[r * kHidden] = static_cast<float>(r + 1);
  std::map<float, int32_t> slot_of;
  for (int64_t s = 0; s < slots; ++s) {
    w[s] = static_cast<float>(s + 1);
    slot_of[static_cast<float>((s / top_k + 1) * (s + 1))] = static_cast<int32_t>(s);
  }
  std::vector<float> x_rows(slots * kHidden, NAN), gate(slots * kFfn), up(slots * kFfn),
      down(chunks * slots * kHidden, NAN), out(chunks * slots * kHidden, NAN);
  std::vector<int32_t> slot_pos(slots);
  for (int64_t s = 0; s < slots; ++s) slot_pos[s] = static_cast<int32_t>(s);
  CpuBackend be(CpuBackendOptions{.num_threads = 1, .isa = CpuIsa::kScalar});
  const Backend::MoeWorkspace scratch{x_rows.data(), gate.data(), up.data(), down.data()};
  if (slots_call) {
    be.MoeExpertSlots(x.data(), rows, experts.mlps, range.first, Activation::kSilu, ids.data(),
                      w.data(), /*weights_on_input=*/true, top_k, chunks, slot_pos.data(),
                      scratch, out.data());
  } else {
    be.MoeExperts(x.data(), rows, experts.mlps, nullptr, Activation::kSilu, ids.data(),
                  w.data(), /*weights_on_input=*/true, top_k, chunks, scratch, out.data());
  }
  std::vector<int32_t> order;
  for (int64_t p = 0; p < slots && !std::isnan(x_rows[p * kHidden]); ++p) {
    const auto it = slot_of.find(x_rows[p * kHidden]);
    EXPECT_NE(it, slot_of.end()) << "grouped row " << p << " is no slot's row";
    if (it == slot_of.end()) return {};
    order.push_back(it->second);
  }
  // The CPU's down blocks are where GroupedDownRow says.
  const absl::StatusOr<MoeGrouping> g =
      GroupSlotsByExpert(ids, top_k, range, slots_call ? ForeignIds::kSkip : ForeignIds::kRefuse);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return order;
  const auto down_row = [&](int64_t s, int64_t c) {
    const int32_t e = LocalExpert(ids[s], range);
    return down.data() + GroupedDownRow(g->offsets.data(), e, g->position[s], chunks, c) * kHidden;
  };
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t s = 0; s < slots; ++s) {
      if (slots_call) {  // each local slot's chunk, copied from its expert's block
        if (g->position[s] < 0) continue;
        EXPECT_EQ(0, std::memcmp(out.data() + (s * chunks + c) * kHidden, down_row(s, c),
                                 kHidden * sizeof(float)))
            << "slot " << s << " chunk " << c;
        continue;
      }
      if (s % top_k != 0) continue;
      for (int64_t d = 0; d < kHidden; ++d) {  // o = slot 0 + slot 1 + ..., in slot order
        float o = down_row(s, c)[d];
        for (int64_t j = 1; j < top_k; ++j) o += down_row(s + j, c)[d];
        EXPECT_EQ(o, out[(c * rows + s / top_k) * kHidden + d]) << "row " << s / top_k;
      }
    }
  }
  return order;
}

struct Case {
  const char* name;
  int64_t top_k;
  std::vector<int32_t> ids;
};

std::vector<Case> EdgeCases() {
  return {
      {"mixed, expert 4 idle", 2, {0, 1, 2, 0, 1, 3, 3, 2, 0, 2, 1, 0, 3, 1}},
      {"every token to expert 2", 1, {2, 2, 2, 2, 2, 2}},
      {"every token to experts 3 and 0, in both orders", 2, {3, 0, 0, 3, 3, 0, 0, 3}},
      {"a batch of one", 2, {4, 1}},
      {"a batch of one, top_k 1", 1, {3}},
      {"top_k 1, every expert", 1, {4, 0, 3, 1, 2, 0, 4}},
      {"top_k 3", 3, {1, 3, 4, 4, 3, 1, 0, 1, 2, 2, 4, 3}},
  };
}

TEST(MoePlanTest, GroupingEqualsTheCpuBackendsForMoeExperts) {
  const ExpertRange all{0, 5};
  for (const Case& c : EdgeCases()) {
    for (int64_t chunks : {1, 2}) {
      SCOPED_TRACE(std::string(c.name) + " chunks " + std::to_string(chunks));
      const absl::StatusOr<MoeGrouping> g =
          GroupSlotsByExpert(c.ids, c.top_k, all, ForeignIds::kRefuse);
      ASSERT_TRUE(g.ok()) << g.status();
      EXPECT_EQ(g->order, CpuOrder(c.ids, c.top_k, chunks, all, /*slots_call=*/false));
      ExpectSame(*g, BruteForce(c.ids, all));
    }
  }
}

TEST(MoePlanTest, GroupingEqualsTheCpuBackendsForARanksExpertSlots) {
  // Expert parallelism: this rank holds experts [first, first + count); the others' slots are
  // skipped (no grouped row).
  for (const ExpertRange range : {ExpertRange{0, 2}, ExpertRange{2, 2}, ExpertRange{4, 1},
                                  ExpertRange{1, 3}}) {
    for (const Case& c : EdgeCases()) {
      SCOPED_TRACE(std::string(c.name) + " experts from " + std::to_string(range.first));
      const absl::StatusOr<MoeGrouping> g =
          GroupSlotsByExpert(c.ids, c.top_k, range, ForeignIds::kSkip);
      ASSERT_TRUE(g.ok()) << g.status();
      EXPECT_EQ(g->order, CpuOrder(c.ids, c.top_k, 2, range, /*slots_call=*/true));
      ExpectSame(*g, BruteForce(c.ids, range));
    }
  }
}

TEST(MoePlanTest, EveryTokenToOneExpertAndIdleExperts) {
  // 6 rows of top_k 2, every slot expert 3 (a router never picks an expert twice for one
  // token; the grouping does not rely on it).
  const std::vector<int32_t> ids(12, 3);
  const absl::StatusOr<MoeGrouping> g = GroupSlotsByExpert(ids, 2, {0, 8}, ForeignIds::kRefuse);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->counts, (std::vector<int32_t>{0, 0, 0, 12, 0, 0, 0, 0}));
  EXPECT_EQ(g->offsets, (std::vector<int32_t>{0, 0, 0, 0, 12, 12, 12, 12, 12}));
  for (int32_t p = 0; p < 12; ++p) {
    EXPECT_EQ(g->order[p], p);
    EXPECT_EQ(g->position[p], p);
  }
}

TEST(MoePlanTest, IdsOutOfRangeAreRefusedNamingTheSlot) {
  absl::StatusOr<MoeGrouping> g = GroupSlotsByExpert({0, 1, 5, 2}, 2, {0, 5}, ForeignIds::kRefuse);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(),
            "expert grouping: slot 2 (row 1, choice 0) has expert id 5, outside [0, 5)");
  g = GroupSlotsByExpert({0, -1}, 1, {0, 5}, ForeignIds::kRefuse);
  EXPECT_FALSE(g.ok());
  // Another rank's expert is skipped; a negative id is nobody's.
  g = GroupSlotsByExpert({0, 7}, 1, {0, 5}, ForeignIds::kSkip);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->position, (std::vector<int32_t>{0, -1}));
  g = GroupSlotsByExpert({0, -3}, 1, {0, 5}, ForeignIds::kSkip);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "expert grouping: slot 1 (row 1, choice 0) has expert id -3, outside [0, "
            "num_experts)");
  EXPECT_FALSE(GroupSlotsByExpert({0, 1, 2}, 2, {0, 5}, ForeignIds::kRefuse).ok());
  EXPECT_FALSE(GroupSlotsByExpert({0}, 0, {0, 5}, ForeignIds::kRefuse).ok());
}

TEST(MoePlanTest, DeviceTiledStepsEqualTheHostGrouping) {
  uint32_t seed = 1;
  for (const int64_t slots : {int64_t{1}, int64_t{7}, int64_t{kMoeTileSlots - 1},
                              int64_t{kMoeTileSlots}, int64_t{kMoeTileSlots + 1},
                              int64_t{5 * kMoeTileSlots + 17}, int64_t{8192}}) {
    for (const ExpertRange range : {ExpertRange{0, 1}, ExpertRange{0, 8}, ExpertRange{0, 128},
                                    ExpertRange{32, 32}, ExpertRange{0, 300}}) {
      SCOPED_TRACE("slots " + std::to_string(slots) + " experts " + std::to_string(range.first) +
                   "+" + std::to_string(range.count));
      // Every id in range (MoeExperts), and ids of a 4x wider model (a rank's slots).
      std::vector<int32_t> ids = RandomIds(slots, range.first, range.first + range.count, ++seed);
      auto [tiled, bad] = TiledGrouping(ids, range, /*refuse_foreign=*/true);
      EXPECT_EQ(bad, 0);
      ExpectSame(tiled, *GroupSlotsByExpert(ids, 1, range, ForeignIds::kRefuse));
      ids = RandomIds(slots, 0, 4 * (range.first + range.count), ++seed);
      std::tie(tiled, bad) = TiledGrouping(ids, range, /*refuse_foreign=*/false);
      EXPECT_EQ(bad, 0);
      ExpectSame(tiled, *GroupSlotsByExpert(ids, 1, range, ForeignIds::kSkip));
      ExpectSame(tiled, BruteForce(ids, range));
    }
  }
}

TEST(MoePlanTest, DeviceTiledStepsCountIdsOutOfRange) {
  std::vector<int32_t> ids = RandomIds(3 * kMoeTileSlots, 0, 8, 3);
  ids[5] = 8;                    // tile 0
  ids[kMoeTileSlots + 2] = -1;   // tile 1
  ids[2 * kMoeTileSlots] = 100;  // tile 2
  EXPECT_EQ(TiledGrouping(ids, {0, 8}, /*refuse_foreign=*/true).second, 3);
  EXPECT_EQ(TiledGrouping(ids, {0, 8}, /*refuse_foreign=*/false).second, 1);  // the -1 only
}

TEST(MoePlanTest, LayoutPartsFollowEachOtherWithoutOverlap) {
  for (const auto& [slots, experts] : {std::pair<int64_t, int64_t>{1, 1}, {16, 8},
                                       {kMoeTileSlots + 1, 128}, {65536, 384}}) {
    const MoePlanLayout l = MoePlanLayoutFor(slots, experts);
    EXPECT_EQ(l.offsets, 0);
    EXPECT_EQ(l.bad_ids, experts + 1);
    EXPECT_EQ(l.header_words, experts + 2);
    EXPECT_EQ(l.position, l.header_words);
    EXPECT_EQ(l.order, l.position + slots);
    EXPECT_EQ(l.tile_counts, l.order + slots);
    EXPECT_EQ(l.num_tiles, (slots + kMoeTileSlots - 1) / kMoeTileSlots);
    EXPECT_EQ(l.words, l.tile_counts + l.num_tiles * (experts + 1));
  }
}

}  // namespace
}  // namespace tpserve::cuda
