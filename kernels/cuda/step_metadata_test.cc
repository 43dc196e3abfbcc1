#include "kernels/cuda/step_metadata.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace tpserve::cuda {
namespace {

TEST(PackStep, LaysOutEveryArrayAndTheAttentionWorkLists) {
  // A prompt of 40 tokens (two prefill tiles), one decode row, and a 2-token chunk.
  const std::vector<int32_t> ids(43, 7), positions(43, 0);
  const std::vector<int32_t> table_a = {3, 4, 5}, table_b = {9}, table_c = {1, 2};
  const std::vector<AttentionSequence> seqs = {
      {0, 40, 0, table_a}, {40, 1, 11, table_b}, {41, 2, 20, table_c}};
  const std::vector<int32_t> logit_rows = {39, 40, 42};
  const PackedStep p = PackStep(StepInputs{ids, positions, seqs, logit_rows});
  const DeviceStep& c = p.counts;
  EXPECT_EQ(c.num_token_ids, 43);
  EXPECT_EQ(c.num_positions, 43);
  EXPECT_EQ(c.num_rows, 43);
  EXPECT_EQ(c.num_seqs, 3);
  EXPECT_EQ(c.num_logit_rows, 3);
  EXPECT_EQ(c.num_decode, 1);
  EXPECT_EQ(c.max_decode_context, 12);
  EXPECT_EQ(c.num_prefill_tiles, 3);  // (0, 0), (0, 32), (2, 0)

  const std::vector<int32_t>& w = p.words;
  EXPECT_EQ(w[p.offset_row_seq + 0], 0);
  EXPECT_EQ(w[p.offset_row_seq + 39], 0);
  EXPECT_EQ(w[p.offset_row_seq + 40], 1);
  EXPECT_EQ(w[p.offset_row_seq + 42], 2);
  // Sequence 2: first_row 41, 2 tokens, start 20, its table after the 3 + 1 entries before it.
  EXPECT_EQ(w[p.offset_seqs + 8], 41);
  EXPECT_EQ(w[p.offset_seqs + 9], 2);
  EXPECT_EQ(w[p.offset_seqs + 10], 20);
  EXPECT_EQ(w[p.offset_seqs + 11], 4);
  EXPECT_EQ(w[p.offset_tables + 4], 1);
  EXPECT_EQ(w[p.offset_tables + 5], 2);
  EXPECT_EQ(w[p.offset_logit_rows + 2], 42);
  EXPECT_EQ(w[p.offset_decode], 1);
  const std::vector<int32_t> tiles(w.begin() + p.offset_prefill,
                                   w.begin() + p.offset_fi_qo_indptr);
  EXPECT_EQ(tiles, (std::vector<int32_t>{0, 0, 0, 32, 2, 0}));

  // Resolve points into a copy of the words at the same offsets.
  const DeviceStep d = p.Resolve(w.data());
  EXPECT_EQ(d.seqs[2].table_offset, 4);
  EXPECT_EQ(d.block_tables[d.seqs[0].table_offset + 2], 5);
  EXPECT_EQ(d.prefill_tiles[3], 32);
}

TEST(PackStep, RowsWithoutTokenIdsComeFromTheSequences) {
  // A history write: sequences but no token ids or positions; a gap row belongs to nobody.
  const std::vector<int32_t> table = {0};
  const std::vector<AttentionSequence> seqs = {{0, 2, 0, table}, {3, 1, 0, table}};
  const PackedStep p = PackStep(StepInputs{{}, {}, seqs, {}});
  EXPECT_EQ(p.counts.num_rows, 4);
  EXPECT_EQ(p.words[p.offset_row_seq + 2], -1);
  EXPECT_EQ(p.words[p.offset_row_seq + 3], 1);
}

TEST(PackStep, PaddingRowsDecodeWithoutTablesAndOffsetsDependOnlyOnCounts) {
  // Two steps of the same shape (2 real decode rows + 2 padding rows) whose block tables have
  // different lengths: every array but the tables starts at the same offset, as a recorded
  // step replaying over the second needs.
  const std::vector<int32_t> ids = {5, 6, 0, 0}, positions = {3, 9, 0, 0}, rows = {0, 1, 2, 3};
  const std::vector<int32_t> short_table = {7}, long_table = {7, 8, 9};
  auto step = [&](const std::vector<int32_t>& table) {
    const std::vector<AttentionSequence> seqs = {{0, 1, 3, table}, {1, 1, 9, table},
                                                 {2, 1, 0, {}, true}, {3, 1, 0, {}, true}};
    return PackStep(StepInputs{ids, positions, seqs, rows});
  };
  const PackedStep a = step(short_table), b = step(long_table);
  EXPECT_EQ(a.counts.num_decode, 4);  // padding rows are decode rows: the grid stays the same
  EXPECT_EQ(a.counts.num_padding, 2);
  EXPECT_EQ(a.counts.max_decode_context, 10);  // from the real rows only
  EXPECT_EQ(a.words[a.offset_seqs + 4 * 2 + 3], -1);  // padding: no table
  EXPECT_EQ(a.words[a.offset_seqs + 4 * 1 + 3], 1);   // the second real row's table follows
  EXPECT_EQ(a.offset_logit_rows, b.offset_logit_rows);
  EXPECT_EQ(a.offset_decode, b.offset_decode);
  EXPECT_EQ(a.offset_prefill, b.offset_prefill);
  EXPECT_EQ(a.offset_tables, b.offset_tables);
  EXPECT_EQ(a.words.size() + 4, b.words.size());  // only the tables grew
}

// Where FlashInfer's batch prefill kernel reads key j of request b, by its own index
// arithmetic (flashinfer/attention/prefill.cuh: packed_page_iter_base =
// paged_kv.indptr[request_idx] * page_size + chunk_start, divmod by page_size, then
// page.cuh's protective_get_kv_offset: indices[page_iter] while page_iter <
// indptr[batch_size], else offset 0): the (block, slot) it loads, or (-1, -1) for offset 0.
std::pair<int32_t, int32_t> FlashInferKeySlot(const DeviceStep& d, const int32_t* kv_indptr,
                                              int32_t num_requests, int32_t b, int32_t j,
                                              int32_t page_size) {
  const uint32_t packed = static_cast<uint32_t>(kv_indptr[b]) * page_size + j;
  const uint32_t page_iter = packed / page_size, entry = packed % page_size;
  const int32_t last_indptr = kv_indptr[num_requests];
  if (static_cast<int32_t>(page_iter) >= last_indptr) return {-1, -1};
  return {d.block_tables[page_iter], static_cast<int32_t>(entry)};
}

TEST(PackStep, FlashInferRequestsReadEveryKeyThroughItsOwnBlockTable) {
  // Block size 4. A 10-key prompt chunk after 3 cached keys (table longer than it needs), a
  // padding row between real rows, a decode row at position 8, another padding row.
  constexpr int32_t kPage = 4;
  const std::vector<int32_t> table_a = {6, 2, 9, 4, 11}, table_b = {5, 1, 3};
  const std::vector<AttentionSequence> seqs = {{0, 7, 3, table_a},
                                               {7, 1, 0, {}, true},
                                               {8, 1, 8, table_b},
                                               {9, 1, 0, {}, true}};
  const PackedStep p = PackStep(StepInputs{{}, {}, seqs, {}});
  const DeviceStep d = p.Resolve(p.words.data());
  ASSERT_TRUE(d.fi_rows_in_order);
  EXPECT_EQ(std::vector<int32_t>(d.fi_qo_indptr, d.fi_qo_indptr + 5),
            (std::vector<int32_t>{0, 7, 8, 9, 10}));
  EXPECT_EQ(std::vector<int32_t>(d.fi_kv_len, d.fi_kv_len + 4),
            (std::vector<int32_t>{10, 1, 9, 1}));
  for (int32_t b = 0; b < 4; ++b) {
    for (int32_t j = 0; j < d.fi_kv_len[b]; ++j) {
      // What our block tables say key j of the sequence is (a padding row: block 0, slot 0).
      const std::vector<int32_t>& table = b == 0 ? table_a : table_b;
      const std::pair<int32_t, int32_t> want =
          seqs[b].padding ? std::pair<int32_t, int32_t>{0, 0}
                          : std::pair<int32_t, int32_t>{table[j / kPage], j % kPage};
      EXPECT_EQ(FlashInferKeySlot(d, d.fi_kv_indptr, 4, b, j, kPage), want)
          << "request " << b << " key " << j;
    }
  }
  // One request per row (the deterministic plan): row r of a sequence attends to the keys up
  // to its own position, through the same table.
  EXPECT_EQ(std::vector<int32_t>(d.fi_row_qo_indptr, d.fi_row_qo_indptr + 11),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(std::vector<int32_t>(d.fi_row_kv_len, d.fi_row_kv_len + 10),
            (std::vector<int32_t>{4, 5, 6, 7, 8, 9, 10, 1, 9, 1}));
  for (int32_t r = 0; r < 10; ++r) {
    const int32_t seq = r < 7 ? 0 : r - 6;  // rows 0-6: the chunk; then one row each
    for (int32_t j = 0; j < d.fi_row_kv_len[r]; ++j) {
      const std::vector<int32_t>& table = seq == 0 ? table_a : table_b;
      const std::pair<int32_t, int32_t> want =
          seqs[seq].padding ? std::pair<int32_t, int32_t>{0, 0}
                            : std::pair<int32_t, int32_t>{table[j / kPage], j % kPage};
      EXPECT_EQ(FlashInferKeySlot(d, d.fi_row_kv_indptr, 10, r, j, kPage), want)
          << "row " << r << " key " << j;
    }
  }
  // The tables hold one word for each padding row; the SIMT kernels' offsets skip them.
  EXPECT_EQ(d.seqs[2].table_offset, 6);
  EXPECT_EQ(d.seqs[1].table_offset, -1);
}

TEST(PackStep, RowsOutOfOrderAreNotAFlashInferBatch) {
  const std::vector<int32_t> table = {0};
  const std::vector<AttentionSequence> gap = {{0, 2, 0, table}, {3, 1, 0, table}};
  EXPECT_FALSE(PackStep(StepInputs{{}, {}, gap, {}}).counts.fi_rows_in_order);
  const std::vector<AttentionSequence> swapped = {{1, 1, 0, table}, {0, 1, 0, table}};
  EXPECT_FALSE(PackStep(StepInputs{{}, {}, swapped, {}}).counts.fi_rows_in_order);
  const std::vector<AttentionSequence> in_order = {{0, 1, 0, table}, {1, 1, 0, table}};
  EXPECT_TRUE(PackStep(StepInputs{{}, {}, in_order, {}}).counts.fi_rows_in_order);
}

TEST(PackStep, EmptyStepPacksNothing) {
  const PackedStep p = PackStep(StepInputs{});
  EXPECT_TRUE(p.words.empty());
  EXPECT_EQ(p.counts.num_decode, 0);
  EXPECT_EQ(p.counts.num_prefill_tiles, 0);
}

}  // namespace
}  // namespace tpserve::cuda
