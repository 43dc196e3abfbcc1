// Backend::MoeExperts on the CPU against the same experts run one token and one slot at a time
// (MatMul, GatedActivation, MatMulChunked, then the slot sum in slot order), bit for bit: the
// grouping by expert changes nothing, a token's floats do not depend on the other tokens, and
// each chunk is what MatMulChunked gives. Routing edge cases: every token to the same experts,
// an expert with no tokens, a batch of one; weight formats whose tiles take several rows; with
// and without a shared expert; the weights on the experts' outputs and (Llama 4) on their
// inputs. And expert parallelism's halves (MoeExpertSlots, MoeCombine) against MoeExperts.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
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

// out [chunks, rows, hidden] one token and one slot at a time. on_input (Llama 4): each slot's
// expert runs on weight * row and the slots' outputs are summed as they are.
std::vector<float> OneAtATime(CpuBackend& be, const Experts& e, const std::vector<float>& x,
                              int64_t rows, const std::vector<int32_t>& ids,
                              const std::vector<float>& weights, int64_t top_k, int64_t chunks,
                              const Backend::ExpertMlp* shared, bool on_input = false) {
  const CpuKernels& k = CpuKernelsFor(be.isa());
  std::vector<float> out(chunks * rows * kHidden);
  std::vector<float> g(kFfn), u(kFfn), d(chunks * kHidden), in(kHidden);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < top_k; ++j) {
      const Backend::ExpertMlp& m = e.mlps[ids[r * top_k + j]];
      const float w = weights[r * top_k + j];
      std::copy(x.begin() + r * kHidden, x.begin() + (r + 1) * kHidden, in.begin());
      if (on_input) {
        for (float& v : in) v *= w;
      }
      be.MatMul(in.data(), 1, *m.gate, g.data(), DType::kF32);
      be.MatMul(in.data(), 1, *m.up, u.data(), DType::kF32);
      be.GatedActivation(Activation::kSilu, g.data(), u.data(), kFfn, g.data());
      be.MatMulChunked(g.data(), 1, *m.down, chunks, d.data());
      for (int64_t c = 0; c < chunks; ++c) {
        float* o = out.data() + (c * rows + r) * kHidden;
        const float* dc = d.data() + c * kHidden;
        if (on_input) {
          if (j == 0) std::copy(dc, dc + kHidden, o);
          if (j > 0) k.add(o, dc, kHidden, o);
        } else if (j == 0) {
          for (int64_t i = 0; i < kHidden; ++i) o[i] = w * dc[i];
        } else {
          k.axpy(w, dc, kHidden, o);
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
                           const Backend::ExpertMlp* shared, bool on_input = false) {
  std::vector<float> x_rows(rows * top_k * kHidden), gate(rows * top_k * kFfn),
      up(rows * top_k * kFfn), down(chunks * rows * top_k * kHidden);
  std::vector<float> out(chunks * rows * kHidden, -1.0f);
  be.MoeExperts(x.data(), rows, e.mlps, shared, Activation::kSilu, ids.data(),
                weights.data(), on_input, top_k,
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
        // The weights on the inputs (Llama 4), with and without the shared expert.
        for (const Backend::ExpertMlp* shared : {static_cast<const Backend::ExpertMlp*>(nullptr),
                                                 &e.mlps[4]}) {
          const std::vector<float> on_input = Grouped(be, e, x, c.rows, c.ids, w, 2, chunks,
                                                      shared, /*on_input=*/true);
          EXPECT_EQ(on_input, OneAtATime(be, e, x, c.rows, c.ids, w, 2, chunks, shared, true));
          // SiLU is not linear: weighting the input is another computation.
          EXPECT_NE(on_input, Grouped(be, e, x, c.rows, c.ids, w, 2, chunks, shared));
        }
      }
    }
  }
}

// Llama 4's layer: top-1 with the sigmoid weight on the expert's input, plus a shared expert,
// against one token at a time, for tokens whose weights range from near 0 to near 1.
TEST(CpuMoeTest, TopOneWeightOnInputWithSharedExpertEqualsOneTokenAtATime) {
  const int64_t rows = 9;
  std::vector<int32_t> ids(rows);
  std::vector<float> w(rows);
  for (int64_t r = 0; r < rows; ++r) {
    ids[r] = static_cast<int32_t>((3 * r) % 4);  // expert 4 only shared
    w[r] = 1.0f / (1.0f + std::exp(-(static_cast<float>(r) - 4.0f)));
  }
  const std::vector<float> x = Random(rows * kHidden, 9, 1.0f);
  const Experts e = MakeExperts(TensorFormat::Of(FormatKind::kF32));
  for (int64_t chunks : {1, 2}) {
    CpuBackend be(CpuBackendOptions{.num_threads = 2});
    EXPECT_EQ(Grouped(be, e, x, rows, ids, w, 1, chunks, &e.mlps[4], true),
              OneAtATime(be, e, x, rows, ids, w, 1, chunks, &e.mlps[4], true))
        << "chunks " << chunks;
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
      for (const auto& [shared, on_input] :
           {std::pair{static_cast<const Backend::ExpertMlp*>(nullptr), false},
            std::pair{&e.mlps[4], false}, std::pair{&e.mlps[4], true}}) {
        CpuBackend be(CpuBackendOptions{.num_threads = 2});
        const std::vector<float> want =
            Grouped(be, e, x, rows, ids, w, top_k, chunks, shared, on_input);
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
                              Activation::kSilu, ids.data(), w.data(), on_input, top_k, chunks,
                              pos.data(),
                              {x_rows.data(), gate.data(), up.data(), down.data()},
                              slots.data());
          }
          for (const auto& splits : row_splits) {
            for (const auto& [r0, m] : splits) {
              SCOPED_TRACE(TensorFormatName(format) + (on_input ? " weights on inputs" : "") +
                           " chunks " + std::to_string(chunks) +
                           " expert ranks " + std::to_string(experts.size()) + " rows from " +
                           std::to_string(r0) + " x" + std::to_string(m));
              std::vector<float> x_rows(rows * top_k * kHidden), gate(rows * top_k * kFfn),
                  up(rows * top_k * kFfn), down(chunks * rows * top_k * kHidden);
              std::vector<float> out(chunks * m * kHidden, -1.0f);
              be.MoeCombine(x.data() + r0 * kHidden, m, slots.data(), pos.data() + r0 * top_k,
                            w.data() + r0 * top_k, on_input, top_k, chunks, kHidden, shared,
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
