// On a GPU: with CudaBackendOptions::deterministic, a query row's attention output is the same
// bits whatever else shares its step (other sequences, other chunkings of its own prompt) and
// whichever slice of the heads a tensor-parallel rank holds. Without a device it skips.
#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"

namespace tpserve {
namespace {

constexpr int64_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlock = 16, kBlocks = 512;

uint16_t ToBf16(float v) {  // round to nearest even (inputs are finite)
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

std::vector<uint16_t> RandomBf16(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) x = ToBf16(normal(rng));
  return v;
}

struct Seq {
  int64_t context;  // keys: positions 0 .. context - 1, all in the pool
  std::vector<int32_t> table;
};

class Fixture {
 public:
  explicit Fixture(Backend& be) : be_(be) {}

  // K and V pools holding `kv_heads` of the full model's heads [0, kv_heads) for every key.
  absl::Status MakePool(int64_t kv_heads, const std::vector<uint16_t>& k_all,
                        const std::vector<uint16_t>& v_all) {
    const int64_t slot_elems = kv_heads * kHeadDim;
    std::vector<uint16_t> k(kBlocks * kBlock * slot_elems), v(k.size());
    for (int64_t slot = 0; slot < kBlocks * kBlock; ++slot) {
      std::memcpy(&k[slot * slot_elems], &k_all[slot * kKvHeads * kHeadDim], slot_elems * 2);
      std::memcpy(&v[slot * slot_elems], &v_all[slot * kKvHeads * kHeadDim], slot_elems * 2);
    }
    TP_ASSIGN_OR_RETURN(k_, Upload(be_, k.data(), k.size() * 2, "k pool"));
    TP_ASSIGN_OR_RETURN(v_, Upload(be_, v.data(), v.size() * 2, "v pool"));
    pool_ = KvPoolView{k_.data(), v_.data(), DType::kBF16, 1.0f, 1.0f, kBlocks, kBlock,
                       kv_heads, kHeadDim};
    return absl::OkStatus();
  }

  // Attention of each part {sequence, first position, rows} in one step, rows in order; a row's
  // query is q_all's row for (sequence, position), heads [0, heads).
  absl::StatusOr<std::vector<uint16_t>> Run(const std::vector<Seq>& seqs,
                                            const std::vector<std::array<int64_t, 3>>& parts,
                                            int64_t heads, const std::vector<uint16_t>& q_all) {
    std::vector<AttentionSequence> step;
    std::vector<uint16_t> q;
    int64_t row = 0;
    for (const auto& [s, first, n] : parts) {
      step.push_back({row, n, first, seqs[s].table});
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t* src = &q_all[((s * 4096) + first + i) * kHeads * kHeadDim];
        q.insert(q.end(), src, src + heads * kHeadDim);
      }
      row += n;
    }
    TP_ASSIGN_OR_RETURN(DeviceBuffer qb, Upload(be_, q.data(), q.size() * 2, "q"));
    TP_ASSIGN_OR_RETURN(DeviceBuffer out, be_.Allocate(q.size() * 2, "out"));
    be_.BeginStep(StepInputs{{}, {}, step, {}});
    be_.PagedAttention(qb.data(), heads, {.scale = 0.088f}, pool_, out.data());
    std::vector<uint16_t> host(q.size());
    TP_RETURN_IF_ERROR(be_.CopyToHost(host.data(), out.data(), host.size() * 2));
    return host;
  }

 private:
  Backend& be_;
  DeviceBuffer k_, v_;
  KvPoolView pool_;
};

// Row `i` of a Run's output, heads [0, heads) of `row_heads` per row.
std::vector<uint16_t> RowOf(const std::vector<uint16_t>& out, int64_t i, int64_t row_heads,
                            int64_t heads) {
  const uint16_t* p = &out[i * row_heads * kHeadDim];
  return std::vector<uint16_t>(p, p + heads * kHeadDim);
}

TEST(AttentionInvariance, DeterministicRowsIgnoreTheirBatchAndTheirRank) {
  const absl::StatusOr<int> devices = CudaDeviceCount();
  if (!devices.ok() || *devices == 0) {
    GTEST_SKIP() << "no CUDA device: "
                 << (devices.ok() ? "cudaGetDeviceCount found 0" : devices.status().message());
  }
  absl::StatusOr<std::unique_ptr<Backend>> be = CreateCudaBackend(0, {.deterministic = true});
  ASSERT_TRUE(be.ok()) << be.status();
  // Three sequences with disjoint block tables: 3,000 keys (splits into two 2,048-key chunks),
  // 700 and 140.
  std::vector<Seq> seqs(3);
  int32_t next_block = 0;
  for (int64_t s = 0; s < 3; ++s) {
    seqs[s].context = s == 0 ? 3000 : s == 1 ? 700 : 140;
    for (int64_t b = 0; b < (seqs[s].context + kBlock - 1) / kBlock; ++b) {
      seqs[s].table.push_back(next_block++);
    }
  }
  ASSERT_LE(next_block, kBlocks);
  const std::vector<uint16_t> k = RandomBf16(kBlocks * kBlock * kKvHeads * kHeadDim, 1);
  const std::vector<uint16_t> v = RandomBf16(kBlocks * kBlock * kKvHeads * kHeadDim, 2);
  const std::vector<uint16_t> q = RandomBf16(3 * 4096 * kHeads * kHeadDim, 3);
  Fixture full(**be);
  ASSERT_TRUE(full.MakePool(kKvHeads, k, v).ok());

  // The last row of sequence 0 (a decode row at position 2999) and sequence 2's rows 100-139.
  // Batched: a decode, a 40-row chunk of sequence 2, a decode of sequence 1.
  const absl::StatusOr<std::vector<uint16_t>> batched =
      full.Run(seqs, {{0, 2999, 1}, {2, 100, 40}, {1, 699, 1}}, kHeads, q);
  ASSERT_TRUE(batched.ok()) << batched.status();
  // Alone, and sequence 2's chunk cut in two steps of 25 and 15 rows.
  const absl::StatusOr<std::vector<uint16_t>> alone = full.Run(seqs, {{0, 2999, 1}}, kHeads, q);
  const absl::StatusOr<std::vector<uint16_t>> first = full.Run(seqs, {{2, 100, 25}}, kHeads, q);
  const absl::StatusOr<std::vector<uint16_t>> second = full.Run(seqs, {{2, 125, 15}}, kHeads, q);
  ASSERT_TRUE(alone.ok() && first.ok() && second.ok());
  EXPECT_EQ(RowOf(*batched, 0, kHeads, kHeads), RowOf(*alone, 0, kHeads, kHeads));
  for (int64_t i = 0; i < 40; ++i) {
    const std::vector<uint16_t> want = i < 25 ? RowOf(*first, i, kHeads, kHeads)
                                              : RowOf(*second, i - 25, kHeads, kHeads);
    EXPECT_EQ(RowOf(*batched, 1 + i, kHeads, kHeads), want) << "chunk row " << i;
  }

  // A rank of tp=2 holds heads 0-15 over KV heads 0-3: its rows are the first half of the
  // full rows, bit for bit.
  Fixture half(**be);
  ASSERT_TRUE(half.MakePool(kKvHeads / 2, k, v).ok());
  const absl::StatusOr<std::vector<uint16_t>> tp2 =
      half.Run(seqs, {{0, 2999, 1}, {2, 100, 40}, {1, 699, 1}}, kHeads / 2, q);
  ASSERT_TRUE(tp2.ok()) << tp2.status();
  for (int64_t r = 0; r < 42; ++r) {
    EXPECT_EQ(RowOf(*tp2, r, kHeads / 2, kHeads / 2), RowOf(*batched, r, kHeads, kHeads / 2))
        << "row " << r;
  }
}

}  // namespace
}  // namespace tpserve
