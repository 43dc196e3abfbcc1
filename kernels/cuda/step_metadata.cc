#include "kernels/cuda/step_metadata.h"

#include <algorithm>
#include <limits>

#include "kernels/check.h"

namespace tpserve::cuda {
namespace {

int32_t ToWord(int64_t v, const char* what) {
  TP_CHECK(v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(),
           what);
  return static_cast<int32_t>(v);
}

}  // namespace

DeviceStep PackedStep::Resolve(const int32_t* base) const {
  DeviceStep d = counts;
  d.token_ids = base + offset_token_ids;
  d.positions = base + offset_positions;
  d.row_seq = base + offset_row_seq;
  d.seqs = reinterpret_cast<const DeviceSeq*>(base + offset_seqs);
  d.block_tables = base + offset_tables;
  d.logit_rows = base + offset_logit_rows;
  d.decode_seqs = base + offset_decode;
  d.prefill_tiles = base + offset_prefill;
  d.fi_qo_indptr = base + offset_fi_qo_indptr;
  d.fi_kv_indptr = base + offset_fi_kv_indptr;
  d.fi_kv_len = base + offset_fi_kv_len;
  d.fi_row_qo_indptr = base + offset_fi_row_qo_indptr;
  d.fi_row_kv_indptr = base + offset_fi_row_kv_indptr;
  d.fi_row_kv_len = base + offset_fi_row_kv_len;
  return d;
}

PackedStep PackStep(const StepInputs& step) {
  static_assert(sizeof(DeviceSeq) == 4 * sizeof(int32_t), "DeviceSeq is four words");
  PackedStep p;
  std::vector<int32_t>& w = p.words;
  DeviceStep& c = p.counts;

  p.offset_token_ids = 0;
  w.insert(w.end(), step.token_ids.begin(), step.token_ids.end());
  c.num_token_ids = ToWord(static_cast<int64_t>(step.token_ids.size()), "too many token ids");

  p.offset_positions = static_cast<int64_t>(w.size());
  w.insert(w.end(), step.positions.begin(), step.positions.end());
  c.num_positions = ToWord(static_cast<int64_t>(step.positions.size()), "too many positions");

  // Rows the sequences cover (WriteKv and attention may run without token ids, e.g. when a
  // test writes history): the largest first_row + num_query_tokens.
  int64_t num_rows = 0;
  for (const AttentionSequence& s : step.seqs) {
    TP_CHECK(s.first_row >= 0 && s.num_query_tokens >= 0 && s.start_position >= 0,
             "negative sequence field");
    num_rows = std::max(num_rows, s.first_row + s.num_query_tokens);
  }
  p.offset_row_seq = static_cast<int64_t>(w.size());
  w.resize(w.size() + num_rows, -1);
  c.num_rows = ToWord(num_rows, "too many rows");
  for (size_t s = 0; s < step.seqs.size(); ++s) {
    for (int64_t i = 0; i < step.seqs[s].num_query_tokens; ++i) {
      int32_t& slot = w[p.offset_row_seq + step.seqs[s].first_row + i];
      TP_CHECK(slot == -1, "two sequences claim the same row");
      slot = static_cast<int32_t>(s);
    }
  }

  // Fixed-size arrays first and the block tables last: for steps with the same counts every
  // array but the tables starts at the same offset, so a captured step's baked pointers stay
  // right when it replays over a later step (tables are reached through table_offset).
  p.offset_seqs = static_cast<int64_t>(w.size());
  c.num_seqs = ToWord(static_cast<int64_t>(step.seqs.size()), "too many sequences");
  std::vector<int32_t> table_starts;  // each sequence's first word in the tables, then the end
  int64_t table_words = 0;
  for (const AttentionSequence& s : step.seqs) {
    table_starts.push_back(ToWord(table_words, "block tables too long"));
    w.push_back(ToWord(s.first_row, "first_row"));
    w.push_back(ToWord(s.num_query_tokens, "num_query_tokens"));
    w.push_back(ToWord(s.start_position, "start_position"));
    w.push_back(s.padding ? -1 : table_starts.back());
    c.num_padding += s.padding ? 1 : 0;
    table_words += s.padding ? 1 : static_cast<int64_t>(s.block_table.size());
  }
  table_starts.push_back(ToWord(table_words, "block tables too long"));

  p.offset_logit_rows = static_cast<int64_t>(w.size());
  w.insert(w.end(), step.logit_rows.begin(), step.logit_rows.end());
  c.num_logit_rows = ToWord(static_cast<int64_t>(step.logit_rows.size()), "too many logit rows");

  // Attention work lists: one-token sequences go to the split-K decode kernel (padding rows
  // too, which write zeros), longer ones are cut into tiles of kPrefillTileRows query rows.
  p.offset_decode = static_cast<int64_t>(w.size());
  int64_t max_context = 0;
  for (size_t s = 0; s < step.seqs.size(); ++s) {
    if (step.seqs[s].num_query_tokens != 1) continue;
    w.push_back(static_cast<int32_t>(s));
    if (!step.seqs[s].padding) {
      max_context = std::max(max_context, step.seqs[s].start_position + 1);
    }
  }
  c.num_decode = ToWord(static_cast<int64_t>(w.size()) - p.offset_decode, "decode list");
  c.max_decode_context = ToWord(max_context, "context too long");

  p.offset_prefill = static_cast<int64_t>(w.size());
  for (size_t s = 0; s < step.seqs.size(); ++s) {
    const int64_t n = step.seqs[s].num_query_tokens;
    if (n < 2) continue;
    TP_CHECK(!step.seqs[s].padding, "padding sequences have one token");
    for (int64_t i = 0; i < n; i += kPrefillTileRows) {
      w.push_back(static_cast<int32_t>(s));
      w.push_back(static_cast<int32_t>(i));
    }
  }
  c.num_prefill_tiles =
      ToWord((static_cast<int64_t>(w.size()) - p.offset_prefill) / 2, "prefill tiles");

  // FlashInfer's request arrays (CSR over the step's sequences): rows through fi_qo_indptr,
  // keys through fi_kv_len, pages at block_tables + fi_kv_indptr. A table may be longer than
  // its sequence needs (FlashInfer reads only the pages fi_kv_len covers). A padding sequence
  // reads one key of page 0 through a table word of its own: its output is zeroed afterwards,
  // and keeping it a request keeps a recorded step's grid the same whatever the padding.
  // (An empty step has none of these: it packs nothing at all.)
  p.offset_fi_qo_indptr = static_cast<int64_t>(w.size());
  int64_t next_row = 0;
  c.fi_rows_in_order = true;
  for (const AttentionSequence& s : step.seqs) {
    if (s.first_row != next_row) c.fi_rows_in_order = false;
    next_row = s.first_row + s.num_query_tokens;
    w.push_back(ToWord(s.first_row, "first_row"));
  }
  if (!step.seqs.empty()) w.push_back(c.num_rows);
  p.offset_fi_kv_indptr = static_cast<int64_t>(w.size());
  if (!step.seqs.empty()) w.insert(w.end(), table_starts.begin(), table_starts.end());
  p.offset_fi_kv_len = static_cast<int64_t>(w.size());
  for (const AttentionSequence& s : step.seqs) {
    w.push_back(s.padding ? 1 : ToWord(s.start_position + s.num_query_tokens, "context"));
    c.fi_max_kv_len = std::max(c.fi_max_kv_len, w.back());
  }
  // Per row (only a batch in row order has them: rows then map to sequences one to one).
  p.offset_fi_row_qo_indptr = static_cast<int64_t>(w.size());
  if (c.fi_rows_in_order && !step.seqs.empty()) {
    for (int32_t r = 0; r <= c.num_rows; ++r) w.push_back(r);
  }
  p.offset_fi_row_kv_indptr = static_cast<int64_t>(w.size());
  if (c.fi_rows_in_order && !step.seqs.empty()) {
    for (size_t s = 0; s < step.seqs.size(); ++s) {
      w.insert(w.end(), step.seqs[s].num_query_tokens, table_starts[s]);
    }
    w.push_back(table_starts.back());
  }
  p.offset_fi_row_kv_len = static_cast<int64_t>(w.size());
  if (c.fi_rows_in_order) {
    for (const AttentionSequence& s : step.seqs) {
      for (int64_t i = 0; i < s.num_query_tokens; ++i) {
        w.push_back(s.padding ? 1 : ToWord(s.start_position + i + 1, "context"));
      }
    }
  }

  p.offset_tables = static_cast<int64_t>(w.size());
  for (const AttentionSequence& s : step.seqs) {
    if (s.padding) {
      w.push_back(0);
    } else {
      w.insert(w.end(), s.block_table.begin(), s.block_table.end());
    }
  }
  return p;
}

}  // namespace tpserve::cuda
