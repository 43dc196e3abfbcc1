// The experts' grouped GEMM arguments (moe_grouped_gemm.h) on the host, no GPU needed: the
// argument kernel's own __host__ __device__ functions, for several expert-offset patterns
// (random, experts with zero rows first / last / between, every slot to one expert, one row,
// a rank's slice of the experts), against the CPU backend's grouping:
// - bf16: the groups' GEMMs, emulated here from the argument arrays alone (pointers, leading
//   dimensions, M/N/K), over the CPU backend's own grouped rows (its MoeExperts workspace),
//   give the CPU's gate / up per slot and its chunked down blocks (GroupedDownRow's layout);
// - fp8: every group's A / B / D byte offsets (1-byte elements) and its scale pointers and
//   strides read the scales of its own rows, k blocks and weight tile (the MN-major order the
//   per-call transpose writes);
// - the compaction: a permutation of the groups, those with rows first in (p, e, c) order;
// - MoeGroupedFormFor: bf16 and fp8 128x128 take the grouped path, every other form,
//   deterministic mode, another compute capability, a misaligned shape, a bias or mixed
//   activation bounds keep the per-expert one.
#include "kernels/cuda/moe_grouped_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/moe_plan.h"
#include "kernels/quantize_weights.h"

namespace tpserve::cuda {
namespace {

constexpr int64_t kHidden = 256, kFfn = 256;

uint16_t Bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
float F32(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Experts {
  std::vector<HostMatrix> host;  // gate, up, down per expert (bf16)
  std::vector<Backend::ExpertMlp> mlps;
};
Experts MakeExperts(int64_t n, TensorFormat format = TensorFormat::Of(FormatKind::kBF16)) {
  Experts e;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  for (int64_t i = 0; i < 3 * n; ++i) {
    const int64_t rows = i % 3 == 2 ? kHidden : kFfn, cols = i % 3 == 2 ? kFfn : kHidden;
    std::vector<float> w(rows * cols);
    for (float& v : w) v = normal(rng);
    e.host.push_back(QuantizeWeights(format, w.data(), rows, cols));
  }
  for (int64_t i = 0; i < n; ++i) {
    e.mlps.push_back({&e.host[3 * i].matrix, &e.host[3 * i + 1].matrix, &e.host[3 * i + 2].matrix});
  }
  return e;
}

// Offsets patterns over `experts` experts, as ids [rows, top_k].
std::vector<std::vector<int32_t>> IdPatterns(int32_t experts, int64_t top_k) {
  std::vector<std::vector<int32_t>> out;
  std::mt19937 rng(11);
  for (const int64_t rows : {1, 7, 40}) {
    std::vector<int32_t> ids;  // random distinct experts per token
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int32_t> pool(experts);
      std::iota(pool.begin(), pool.end(), 0);
      std::shuffle(pool.begin(), pool.end(), rng);
      ids.insert(ids.end(), pool.begin(), pool.begin() + top_k);
    }
    out.push_back(ids);
  }
  // Experts 0 and the last idle; only the middle ones busy; every slot to expert 2 (top_k 1).
  std::vector<int32_t> middle, one;
  for (int64_t r = 0; r < 9; ++r) {
    for (int64_t j = 0; j < top_k; ++j)
      middle.push_back(static_cast<int32_t>(1 + (r + j) % (experts - 2)));
    one.push_back(2);
  }
  out.push_back(middle);
  if (top_k == 1) out.push_back(one);
  return out;
}

// The CPU backend's MoeExperts on bf16-exact inputs, its workspace kept.
struct CpuRun {
  std::vector<float> x, weights, x_rows, gate, up, down, out;
};
CpuRun RunCpu(const Experts& e, const std::vector<int32_t>& ids, int64_t top_k, int64_t chunks) {
  const int64_t slots = static_cast<int64_t>(ids.size()), rows = slots / top_k;
  CpuRun c;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  c.x.resize(rows * kHidden);
  for (float& v : c.x) v = F32(Bf16(normal(rng)));
  c.weights.assign(slots, 0.5f);
  c.x_rows.assign(slots * kHidden, NAN);
  c.gate.assign(slots * kFfn, NAN);
  c.up.assign(slots * kFfn, NAN);
  c.down.assign(chunks * slots * kHidden, NAN);
  c.out.assign(chunks * rows * kHidden, NAN);
  CpuBackend be(CpuBackendOptions{.num_threads = 1, .isa = CpuIsa::kScalar});
  be.MoeExperts(c.x.data(), rows, e.mlps, nullptr, Activation::kSilu, ids.data(), c.weights.data(),
                false, top_k, chunks, {c.x_rows.data(), c.gate.data(), c.up.data(), c.down.data()},
                c.out.data());
  return c;
}

std::vector<MoeGemmWeight> Table(const Experts& e, bool gate_up, int bytes) {
  std::vector<MoeGemmWeight> t;
  for (int p = 0; p < (gate_up ? 2 : 1); ++p) {
    for (const Backend::ExpertMlp& m : e.mlps) {
      const WeightMatrix* w = gate_up ? (p == 0 ? m.gate : m.up) : m.down;
      t.push_back(
          {w->data, w->row_bytes / bytes, static_cast<const float*>(w->scales), w->scale_stride});
    }
  }
  return t;
}

// D = A * B^T per group, from the group's arguments alone, bf16 operands, f32 sums; D bf16 or
// f32 as the call says.
void EmulateBf16(const MoeGemmCall& call, const int32_t* offsets,
                 const std::vector<MoeGemmWeight>& table) {
  for (int64_t g = 0; g < MoeGroupCount(call); ++g) {
    const MoeGemmGroup grp = MoeGemmGroupFor(call, offsets, table.data(), g);
    const auto* a = static_cast<const uint16_t*>(grp.a);
    const auto* b = static_cast<const uint16_t*>(grp.b);
    for (int32_t i = 0; i < grp.m; ++i) {
      for (int32_t j = 0; j < grp.n; ++j) {
        float s = 0.0f;
        for (int32_t k = 0; k < grp.k; ++k) s += F32(a[i * grp.lda + k]) * F32(b[j * grp.ldb + k]);
        if (call.d_f32) {
          static_cast<float*>(grp.d)[i * grp.ldd + j] = s;
        } else {
          static_cast<uint16_t*>(grp.d)[i * grp.ldd + j] = Bf16(s);
        }
      }
    }
  }
}

double RelErr(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

TEST(MoeGroupedGemmTest, Bf16GroupsReproduceTheCpuGrouping) {
  for (const int32_t experts : {4, 6}) {
    const Experts e = MakeExperts(experts);
    for (const int64_t top_k : {1, 2}) {
      for (const std::vector<int32_t>& ids : IdPatterns(experts, top_k)) {
        for (const int64_t chunks : {1, 2}) {
          const int64_t slots = static_cast<int64_t>(ids.size());
          const absl::StatusOr<MoeGrouping> grouping =
              GroupSlotsByExpert(ids, top_k, {0, experts}, ForeignIds::kRefuse);
          ASSERT_TRUE(grouping.ok()) << grouping.status();
          const std::vector<int32_t>& off = grouping->offsets;
          const CpuRun cpu = RunCpu(e, ids, top_k, chunks);
          // The CPU's grouped rows are bf16 already (x is, the weights are on the outputs).
          std::vector<uint16_t> x_rows(slots * kHidden), gate(slots * kFfn), up(slots * kFfn);
          for (size_t i = 0; i < x_rows.size(); ++i) x_rows[i] = Bf16(cpu.x_rows[i]);
          // Gate and up: one call of 2 x E groups.
          const std::vector<MoeGemmWeight> gu = Table(e, true, 2);
          MoeGemmCall call;
          call.form = MoeGroupedForm::kBf16;
          call.num_experts = experts;
          call.projections = 2;
          call.n = kFfn;
          call.k = kHidden;
          call.a = x_rows.data();
          call.a_rows = slots;
          call.d[0] = gate.data();
          call.d[1] = up.data();
          EmulateBf16(call, off.data(), gu);
          // Against the slot's own product: grouped row q is slot order[q] of expert ids[slot].
          for (int64_t q = 0; q < off[experts]; ++q) {
            const int32_t s = grouping->order[q], ex = ids[s];
            const auto* wg = static_cast<const uint16_t*>(e.mlps[ex].gate->data);
            const auto* wu = static_cast<const uint16_t*>(e.mlps[ex].up->data);
            for (int64_t j = 0; j < kFfn; j += 37) {
              float sg = 0, su = 0;
              for (int64_t k = 0; k < kHidden; ++k) {
                const float xv = cpu.x[(s / top_k) * kHidden + k];
                sg += xv * F32(wg[j * kHidden + k]);
                su += xv * F32(wu[j * kHidden + k]);
              }
              ASSERT_NEAR(F32(gate[q * kFfn + j]), sg, 1e-2 * (1 + std::fabs(sg))) << q << " " << j;
              ASSERT_NEAR(F32(up[q * kFfn + j]), su, 1e-2 * (1 + std::fabs(su))) << q << " " << j;
            }
          }
          // Down: E x chunks groups over the CPU's activated rows, into its down blocks.
          std::vector<uint16_t> act(slots * kFfn);
          for (size_t i = 0; i < act.size(); ++i) act[i] = Bf16(cpu.gate[i]);
          std::vector<float> down(chunks * slots * kHidden, NAN);
          const std::vector<MoeGemmWeight> dn = Table(e, false, 2);
          MoeGemmCall dcall = call;
          dcall.projections = 1;
          dcall.num_chunks = static_cast<int32_t>(chunks);
          dcall.n = kHidden;
          dcall.k = kFfn;
          dcall.a = act.data();
          dcall.d[0] = down.data();
          dcall.d[1] = nullptr;
          dcall.d_f32 = true;
          EmulateBf16(dcall, off.data(), dn);
          const int64_t used = chunks * off[experts] * kHidden;
          const std::vector<float> got(down.begin(), down.begin() + used);
          const std::vector<float> want(cpu.down.begin(), cpu.down.begin() + used);
          // bf16 rounding of the activated rows only: ~3e-3; a wrong row, expert or chunk ~1.
          EXPECT_LT(RelErr(got, want), 2e-2) << experts << " experts, top_k " << top_k << ", "
                                             << slots << " slots, " << chunks << " chunks";
        }
      }
    }
  }
}

TEST(MoeGroupedGemmTest, Fp8GroupsReadTheirOwnRowsTilesAndScales) {
  const int32_t experts = 5;
  for (const int64_t chunks : {1, 2}) {
    for (const bool gate_up : {true, false}) {
      const int64_t n = gate_up ? 384 : 256, k = gate_up ? 256 : 512;  // n: a partial tile too
      const int64_t k_tiles = k / 128, n_tiles = MoeCeilDiv(n, 128);
      const int projections = gate_up ? 2 : 1;
      const int64_t cn = gate_up ? 1 : chunks;
      for (const std::vector<int32_t>& ids : IdPatterns(experts, 1)) {
        const absl::StatusOr<MoeGrouping> grouping =
            GroupSlotsByExpert(ids, 1, {0, experts}, ForeignIds::kRefuse);
        ASSERT_TRUE(grouping.ok());
        const std::vector<int32_t>& off = grouping->offsets;
        const int64_t a_rows = static_cast<int64_t>(ids.size()) + 3;
        // Scales that name themselves: stored tile (w, i, j) = w * 1e4 + i * 100 + j (rows of
        // stride k_tiles + 1, as a checkpoint may pad them), activation (r, j) = r * 100 + j.
        std::vector<std::vector<float>> stored(projections * experts);
        std::vector<MoeGemmWeight> table(projections * experts);
        std::vector<uint8_t> wbytes(projections * experts * n * k);
        for (int64_t w = 0; w < projections * experts; ++w) {
          stored[w].assign(n_tiles * (k_tiles + 1), -1.0f);
          for (int64_t i = 0; i < n_tiles; ++i) {
            for (int64_t j = 0; j < k_tiles; ++j)
              stored[w][i * (k_tiles + 1) + j] = w * 1e4f + i * 100 + j;
          }
          table[w] = {wbytes.data() + w * n * k, k, stored[w].data(), k_tiles + 1};
        }
        std::vector<float> b_scales(projections * experts * k_tiles * n_tiles, NAN);
        for (int64_t w = 0; w < projections * experts; ++w) {  // LaunchMoeScalesMnMajor's rule
          for (int64_t j = 0; j < k_tiles; ++j) {
            for (int64_t i = 0; i < n_tiles; ++i) {
              b_scales[MoeScaleMnMajorIndex(w, i, j, k_tiles, n_tiles)] =
                  table[w].scales[i * table[w].scale_stride + j];
            }
          }
        }
        std::vector<float> a_scales(k_tiles * a_rows);
        for (int64_t j = 0; j < k_tiles; ++j) {
          for (int64_t r = 0; r < a_rows; ++r) a_scales[j * a_rows + r] = r * 100.0f + j;
        }
        std::vector<uint8_t> a(a_rows * k);
        std::vector<uint8_t> d0(cn * a_rows * n * 4), d1(a_rows * n * 4);
        MoeGemmCall call;
        call.form = MoeGroupedForm::kFp8Block128;
        call.num_experts = experts;
        call.projections = projections;
        call.num_chunks = static_cast<int32_t>(cn);
        call.n = n;
        call.k = k;
        call.a = a.data();
        call.a_rows = a_rows;
        call.a_scales = a_scales.data();
        call.b_scales = b_scales.data();
        call.d[0] = d0.data();
        call.d[1] = gate_up ? d1.data() : nullptr;
        call.d_f32 = !gate_up;
        const int64_t kc = k / cn, groups = MoeGroupCount(call);
        ASSERT_EQ(groups, projections * experts * cn);
        for (int64_t g = 0; g < groups; ++g) {
          const int64_t p = g / (experts * cn), ex = (g / cn) % experts, c = g % cn;
          const int64_t first = off[ex], m = off[ex + 1] - off[ex];
          const MoeGemmGroup grp = MoeGemmGroupFor(call, off.data(), table.data(), g);
          EXPECT_EQ(grp.m, m);
          EXPECT_EQ(grp.n, n);
          EXPECT_EQ(grp.k, kc);
          EXPECT_EQ(static_cast<const uint8_t*>(grp.a) - a.data(), first * k + c * kc);
          EXPECT_EQ(grp.lda, k);
          EXPECT_EQ(static_cast<const uint8_t*>(grp.b) - wbytes.data(),
                    (p * experts + ex) * n * k + c * kc);
          EXPECT_EQ(grp.ldb, k);
          const int64_t d_row = GroupedDownRow(off.data(), static_cast<int32_t>(ex),
                                               static_cast<int32_t>(first), cn, c);
          EXPECT_EQ(static_cast<uint8_t*>(grp.d) - static_cast<uint8_t*>(call.d[p]),
                    d_row * n * (gate_up ? 2 : 4));
          for (int64_t r = 0; r < m; ++r) {
            for (int64_t j = 0; j < kc / 128; ++j) {
              ASSERT_EQ(grp.sfa[r + j * grp.sfa_k_stride],
                        (first + r) * 100.0f + (c * kc / 128 + j));
            }
          }
          for (int64_t i = 0; i < n_tiles; ++i) {
            for (int64_t j = 0; j < kc / 128; ++j) {
              ASSERT_EQ(grp.sfb[i + j * grp.sfb_k_stride],
                        (p * experts + ex) * 1e4f + i * 100 + (c * kc / 128 + j));
            }
          }
        }
      }
    }
  }
}

TEST(MoeGroupedGemmTest, CompactionPutsTheGroupsWithRowsFirstInOrder) {
  for (const int32_t experts : {1, 3, 8}) {
    for (const int32_t chunks : {1, 3}) {
      for (const int32_t projections : {1, 2}) {
        std::mt19937 rng(experts * 100 + chunks * 10 + projections);
        for (int trial = 0; trial < 20; ++trial) {
          std::vector<int32_t> off(experts + 1, 0);
          for (int32_t e = 0; e < experts; ++e)
            off[e + 1] = off[e] + (rng() % 3 == 0 ? 0 : rng() % 5 + 1);
          if (trial == 0) std::fill(off.begin(), off.end(), 0);  // no rows at all
          MoeGemmCall call;
          call.num_experts = experts;
          call.num_chunks = chunks;
          call.projections = projections;
          const int64_t groups = MoeGroupCount(call);
          std::vector<int64_t> slot_of(groups);
          std::vector<bool> used(groups, false);
          for (int64_t g = 0; g < groups; ++g) {
            const int64_t s = MoeCompactedSlot(call, off.data(), g);
            ASSERT_GE(s, 0);
            ASSERT_LT(s, groups);
            ASSERT_FALSE(used[s]) << "two groups in slot " << s;
            used[s] = true;
            slot_of[g] = s;
          }
          // In slot order: every busy group before every idle one, each kind in g order.
          std::vector<int64_t> by_slot(groups);
          for (int64_t g = 0; g < groups; ++g) by_slot[slot_of[g]] = g;
          const auto busy = [&](int64_t g) {
            const int64_t e = (g / chunks) % experts;
            return off[e + 1] > off[e];
          };
          for (int64_t s = 1; s < groups; ++s) {
            const int64_t prev = by_slot[s - 1], cur = by_slot[s];
            EXPECT_TRUE(busy(prev) || !busy(cur));
            if (busy(prev) == busy(cur)) {
              EXPECT_LT(prev, cur);
            }
          }
        }
      }
    }
  }
}

TEST(MoeGroupedGemmTest, FormsThatTakeTheGroupedPath) {
  const Experts bf16 = MakeExperts(3);
  EXPECT_EQ(MoeGroupedFormFor(bf16.mlps, 1, false, 90), MoeGroupedForm::kBf16);
  EXPECT_EQ(MoeGroupedFormFor(bf16.mlps, 2, false, 90), MoeGroupedForm::kBf16);
  EXPECT_EQ(MoeGroupedFormFor(bf16.mlps, 1, true, 90), MoeGroupedForm::kNone);  // deterministic
  EXPECT_EQ(MoeGroupedFormFor(bf16.mlps, 1, false, 100), MoeGroupedForm::kNone);
  EXPECT_EQ(MoeGroupedFormFor(bf16.mlps, 3, false, 90), MoeGroupedForm::kNone);  // 256 % 3
  const Experts fp8 = MakeExperts(3, TensorFormat::Of(FormatKind::kFp8Block128));
  // Host vectors are 16-byte aligned by the allocator where the TMA needs it.
  EXPECT_EQ(MoeGroupedFormFor(fp8.mlps, 1, false, 90), MoeGroupedForm::kFp8Block128);
  EXPECT_EQ(MoeGroupedFormFor(fp8.mlps, 2, false, 90), MoeGroupedForm::kFp8Block128);
  EXPECT_EQ(MoeGroupedFormFor(fp8.mlps, 4, false, 90), MoeGroupedForm::kNone);  // 64-col chunks
  for (const TensorFormat f :
       {TensorFormat::Of(FormatKind::kFp8PerChannel), TensorFormat::Int4(128),
        TensorFormat::Of(FormatKind::kF16), TensorFormat::Of(FormatKind::kF32)}) {
    const Experts other = MakeExperts(2, f);
    EXPECT_EQ(MoeGroupedFormFor(other.mlps, 1, false, 90), MoeGroupedForm::kNone)
        << TensorFormatName(f);
  }
  // One matrix with a bias, or another activation bound: the per-expert path.
  Experts biased = MakeExperts(2);
  const float bias[kFfn] = {};
  biased.host[1].matrix.bias = bias;
  EXPECT_EQ(MoeGroupedFormFor(biased.mlps, 1, false, 90), MoeGroupedForm::kNone);
  Experts bounded = MakeExperts(2, TensorFormat::Of(FormatKind::kFp8Block128));
  bounded.host[3].matrix.activation_scale_ub = 448.0f;
  EXPECT_EQ(MoeGroupedFormFor(bounded.mlps, 1, false, 90), MoeGroupedForm::kNone);
  // A mixed set: the per-expert path.
  std::vector<Backend::ExpertMlp> mixed = {bf16.mlps[0], fp8.mlps[1]};
  EXPECT_EQ(MoeGroupedFormFor(mixed, 1, false, 90), MoeGroupedForm::kNone);
}

TEST(MoeGroupedGemmTest, ArgumentBytesBound) {
  EXPECT_EQ(MoeGroupedArgumentBytesBound(0), kMoeGroupedArraySlack);
  EXPECT_EQ(MoeGroupedArgumentBytesBound(256),
            256 * kMoeGroupedBytesPerGroup + kMoeGroupedArraySlack);
  // 128 experts x 2 projections (gate and up) at most 70 KB: the runtime reserve holds it.
  EXPECT_LT(MoeGroupedArgumentBytesBound(256), 70 << 10);
}

}  // namespace
}  // namespace tpserve::cuda
