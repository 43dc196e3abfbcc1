// Backend::MoeExperts on the CPU against the same experts run one token and one slot at a time
// (MatMul, GatedActivation, MatMulChunked, then the slot sum in slot order), bit for bit: the
// grouping by expert changes nothing, a token's floats do not depend on the other tokens, and
// each chunk is what MatMulChunked gives. Routing edge cases: every token to the same experts,
// an expert with no tokens, a batch of one; weight formats whose tiles take several rows; with
// and without a shared expert. And expert parallelism's halves (MoeExpertSlots, MoeCombine)
// against MoeExperts.
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/parity_test_util.h"
#include "kernels/quantize_weights.h"

namespace tpserve {
namespace {

using parity_test::Random;

constexpr int64_t kHidden = 64, kFfn = 64, kExperts = 5;

struct Experts {
  std::vector<HostMatrix> gate, up, down;
  std::vector<Backend::ExpertMlp> mlps;
};

Experts MakeExperts(const TensorFormat& format) {
  Experts e;
  for (int64_t i = 0; i < kExperts; ++i) {
    e.gate.push_back(QuantizeWeights(format, Random(kFfn * kHidden, 10 + i, 0.2f).data(), kFfn,
                                     kHidden));
    e.up.push_back(QuantizeWeights(format, Random(kFfn * kHidden, 20 + i, 0.2f).data(), kFfn,
                                   kHidden));
    e.down.push_back(QuantizeWeights(format, Random(kHidden * kFfn, 30 + i, 0.2f).data(),
                                     kHidden, kFfn));
  }
  for (int64_t i = 0; i < kExperts; ++i) {
    e.mlps.push_back({&e.gate[i].matrix, &e.up[i].matrix, &e.down[i].matrix});
  }
  return e;
}

// out [chunks, rows, hidden] one token and one slot at a time.
std::vector<float> OneAtATime(CpuBackend& be, const Experts& e, const std::vector<float>& x,
                              int64_t rows, const std::vector<int32_t>& ids,
                              const std::vector<float>& weights, int64_t top_k, int64_t chunks,
                              const Backend::ExpertMlp* shared) {
  const CpuKernels& k = CpuKernelsFor(be.isa());
  std::vector<float> out(chunks * rows * kHidden);
  std::vector<float> g(kFfn), u(kFfn), d(chunks * kHidden);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < top_k; ++j) {
      const Backend::ExpertMlp& m = e.mlps[ids[r * top_k + j]];
      be.MatMul(x.data() + r * kHidden, 1, *m.gate, g.data(), DType::kF32);
      be.MatMul(x.data() + r * kHidden, 1, *m.up, u.data(), DType::kF32);
      be.GatedActivation(Activation::kSilu, g.data(), u.data(), kFfn, g.data());
      be.MatMulChunked(g.data(), 1, *m.down, chunks, d.data());
      const float w = weights[r * top_k + j];
      for (int64_t c = 0; c < chunks; ++c) {
        float* o = out.data() + (c * rows + r) * kHidden;
        if (j == 0) {
          for (int64_t i = 0; i < kHidden; ++i) o[i] = w * d[c * kHidden + i];
        } else {
          k.axpy(w, d.data() + c * kHidden, kHidden, o);
        }
      }
    }
    if (shared == nullptr) continue;
    be.MatMul(x.data() + r * kHidden, 1, *shared->gate, g.data(), DType::kF32);
    be.MatMul(x.data() + r * kHidden, 1, *shared->up, u.data(), DType::kF32);
    be.GatedActivation(Activation::kSilu, g.data(), u.data(), kFfn, g.data());
    be.MatMulChunked(g.data(), 1, *shared->down, chunks, d.data());
    for (int64_t c = 0; c < chunks; ++c) {
      float* o = out.data() + (c * rows + r) * kHidden;
      k.add(o, d.data() + c * kHidden, kHidden, o);
    }
  }
  return out;
}

std::vector<float> Grouped(CpuBackend& be, const Experts& e, const std::vector<float>& x,
                           int64_t rows, const std::vector<int32_t>& ids,
                           const std::vector<float>& weights, int64_t top_k, int64_t chunks,
                           const Backend::ExpertMlp* shared) {
  std::vector<float> x_rows(rows * top_k * kHidden), gate(rows * top_k * kFfn),
      up(rows * top_k * kFfn), down(chunks * rows * top_k * kHidden);
  std::vector<float> out(chunks * rows * kHidden, -1.0f);
  be.MoeExperts(x.data(), rows, e.mlps, shared, Activation::kSilu, ids.data(),
                weights.data(), top_k,
                chunks, {x_rows.data(), gate.data(), up.data(), down.data()}, out.data());
  return out;
}

struct Routing {
  const char* name;
  int64_t rows;
  std::vector<int32_t> ids;  // [rows, 2]
};

TEST(CpuMoeTest, GroupedExpertsEqualEachSlotAloneBitForBit) {
  const Routing cases[] = {
      {"mixed, expert 4 idle", 7, {0, 1, 2, 0, 1, 3, 3, 2, 0, 2, 1, 0, 3, 1}},
      {"every token to experts 2 and 0", 6, {2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0}},
      {"a batch of one", 1, {4, 1}},
      {"many tokens, few experts (tiles of several rows)", 20,
       std::vector<int32_t>(40, 0)},
  };
  for (const TensorFormat format :
       {TensorFormat::Of(FormatKind::kBF16), TensorFormat::Of(FormatKind::kQ8_0),
        TensorFormat::Of(FormatKind::kQ4_1)}) {
    const Experts e = MakeExperts(format);
    for (Routing c : cases) {
      if (c.rows == 20) {
        for (int64_t r = 0; r < 20; ++r) c.ids[2 * r + 1] = 1 + r % 2;
      }
      const std::vector<float> x = Random(c.rows * kHidden, 7, 1.0f);
      std::vector<float> w(c.rows * 2);
      for (int64_t r = 0; r < c.rows; ++r) {
        w[2 * r] = 0.25f + 0.05f * r;
        w[2 * r + 1] = 0.75f - 0.05f * r;
      }
      for (int64_t chunks : {1, 2}) {
        CpuBackend be(CpuBackendOptions{.num_threads = 2});
        SCOPED_TRACE(TensorFormatName(format) + " " + c.name + " chunks " +
                     std::to_string(chunks));
        EXPECT_EQ(Grouped(be, e, x, c.rows, c.ids, w, 2, chunks, nullptr),
                  OneAtATime(be, e, x, c.rows, c.ids, w, 2, chunks, nullptr));
        // Expert 4 also as an always-on shared expert (GLM-4.5, DeepSeek-V3), added last.
        EXPECT_EQ(Grouped(be, e, x, c.rows, c.ids, w, 2, chunks, &e.mlps[4]),
                  OneAtATime(be, e, x, c.rows, c.ids, w, 2, chunks, &e.mlps[4]));
      }
    }
  }
}

// Expert parallelism's two halves (MoeExpertSlots on each rank's experts, MoeCombine on each
// rank's rows, slots handed over as the all-to-all would) against MoeExperts on one rank: the
// same bits, whatever the ranks' expert ranges and row ranges (uneven, empty ones included).
TEST(CpuMoeTest, ExpertSlotsThenCombineEqualMoeExpertsBitForBit) {
  const int64_t rows = 7, top_k = 2;
  const std::vector<int32_t> ids = {0, 1, 2, 0, 1, 3, 3, 2, 0, 2, 1, 4, 3, 1};
  std::vector<float> w(rows * top_k);
  for (int64_t i = 0; i < rows * top_k; ++i) w[i] = 0.1f + 0.07f * static_cast<float>(i);
  const std::vector<float> x = Random(rows * kHidden, 8, 1.0f);
  // Expert ranges of 1, 2 and 3 "ranks"; row ranges the combining ranks take.
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> expert_splits = {
      {{0, 5}}, {{0, 3}, {3, 2}}, {{0, 2}, {2, 2}, {4, 1}}};
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> row_splits = {
      {{0, 7}}, {{0, 4}, {4, 3}}, {{0, 3}, {3, 3}, {6, 1}, {7, 0}}};
  for (const TensorFormat format :
       {TensorFormat::Of(FormatKind::kBF16), TensorFormat::Of(FormatKind::kQ4_1)}) {
    const Experts e = MakeExperts(format);
    for (int64_t chunks : {1, 2}) {
      for (const Backend::ExpertMlp* shared : {static_cast<const Backend::ExpertMlp*>(nullptr),
                                               &e.mlps[4]}) {
        CpuBackend be(CpuBackendOptions{.num_threads = 2});
        const std::vector<float> want = Grouped(be, e, x, rows, ids, w, top_k, chunks, shared);
        for (const auto& experts : expert_splits) {
          // Every slot's output at its own slot index, written by the rank of its expert.
          std::vector<float> slots(rows * top_k * chunks * kHidden, -7.0f);
          std::vector<int32_t> pos(rows * top_k);
          for (int64_t i = 0; i < rows * top_k; ++i) pos[i] = static_cast<int32_t>(i);
          for (const auto& [first, count] : experts) {
            std::vector<float> x_rows(rows * top_k * kHidden), gate(rows * top_k * kFfn),
                up(rows * top_k * kFfn), down(chunks * rows * top_k * kHidden);
            be.MoeExpertSlots(x.data(), rows,
                              absl::MakeConstSpan(e.mlps).subspan(first, count), first,
                              Activation::kSilu, ids.data(), top_k, chunks, pos.data(),
                              {x_rows.data(), gate.data(), up.data(), down.data()},
                              slots.data());
          }
          for (const auto& splits : row_splits) {
            for (const auto& [r0, m] : splits) {
              SCOPED_TRACE(TensorFormatName(format) + " chunks " + std::to_string(chunks) +
                           " expert ranks " + std::to_string(experts.size()) + " rows from " +
                           std::to_string(r0) + " x" + std::to_string(m));
              std::vector<float> x_rows(rows * top_k * kHidden), gate(rows * top_k * kFfn),
                  up(rows * top_k * kFfn), down(chunks * rows * top_k * kHidden);
              std::vector<float> out(chunks * m * kHidden, -1.0f);
              be.MoeCombine(x.data() + r0 * kHidden, m, slots.data(), pos.data() + r0 * top_k,
                            w.data() + r0 * top_k, top_k, chunks, kHidden, shared,
                            Activation::kSilu,
                            {x_rows.data(), gate.data(), up.data(), down.data()}, out.data());
              for (int64_t c = 0; c < chunks; ++c) {
                const float* expected = want.data() + (c * rows + r0) * kHidden;
                EXPECT_EQ(std::vector<float>(out.begin() + c * m * kHidden,
                                             out.begin() + (c + 1) * m * kHidden),
                          std::vector<float>(expected, expected + m * kHidden));
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tpserve
