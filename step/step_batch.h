// One model step, as the scheduler plans it, the executors take it and every rank runs it: for
// each sequence, its new tokens at consecutive positions, the KV blocks they live in, and how
// many of its last tokens want logits. The only type a step travels in, from the scheduler to
// the ranks; it becomes proto only at the process boundary (step/step_batch_proto.h).
//
//   StepBatch batch;
//   batch.Add(/*seq_id=*/7, /*start_position=*/0, prompt_ids, block_table, /*num_logits=*/1);
//   batch.Add(/*seq_id=*/9, /*start_position=*/41, {last_token}, block_table, 1);
//   // the logits come back as batch.num_logit_rows() rows, sequence by sequence
//
// A sequence may bring any number of tokens: a prompt chunk, one decode token, or a drafted
// continuation that speculative or jump-forward decoding wants scored (num_logits = its tokens).
#ifndef TPSERVE_STEP_STEP_BATCH_H_
#define TPSERVE_STEP_STEP_BATCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tpserve {

// The rank of a replica's tensor-parallel group that receives a step's logits (the LM head
// gathers its vocab slices there, and only there) and whose result the executor returns. The
// other ranks compute their slice and send it; they receive no logits.
inline constexpr int kSamplingRank = 0;

struct StepBatch {
  struct Sequence {
    int64_t seq_id = 0;          // the engine's id; the ranks do not need it
    int64_t first_token = 0;     // its new tokens are token_ids[first_token, + num_tokens)
    int64_t num_tokens = 0;
    int64_t start_position = 0;  // position of its first new token (= its tokens already cached)
    // Its last num_logits new tokens want a row of logits each: 1 to sample after a prompt chunk
    // or a decode token, 0 for a chunk that does not finish its prompt, num_tokens to score them
    // all. Rows come back sequence by sequence, in token order.
    int64_t num_logits = 1;
    // Logical block -> physical KV block; covers positions [0, start_position + num_tokens).
    // With data-parallel attention, blocks of the cache of rank attention_rank.
    std::vector<int32_t> block_table;
    // Data-parallel attention (model/sharding.h): the rank that attends for this sequence and
    // holds its KV, its blocks numbered in that rank's cache; -1 (without it): every rank.
    // Each rank's sequences form one run of the batch, runs in rank order.
    int32_t attention_rank = -1;
    // The scheduler's word to the engine (the ranks do not read them, and the wire does not
    // carry them): whether this step puts the sequence's last known token in the cache, so that
    // its last 1 + num_drafts rows sample; and how many of its new tokens, the last ones, are
    // drafted (speculative decoding) rather than known.
    bool samples = false;
    int64_t num_drafts = 0;

    int64_t end_position() const { return start_position + num_tokens; }
  };

  std::vector<int32_t> token_ids;  // every sequence's new tokens, in sequence order
  std::vector<Sequence> sequences;

  // Appends a sequence with these new tokens (copied).
  Sequence& Add(int64_t seq_id, int64_t start_position, absl::Span<const int32_t> tokens,
                std::vector<int32_t> block_table, int64_t num_logits = 1);
  absl::Span<const int32_t> tokens(const Sequence& s) const {
    return absl::MakeConstSpan(token_ids).subspan(s.first_token, s.num_tokens);
  }
  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_logit_rows() const;
  bool empty() const { return sequences.empty(); }

  // OK when the sequences tile token_ids in order and every count is in range; else
  // INVALID_ARGUMENT naming the sequence and the field. What a rank checks a batch from the
  // wire against before anything else reads it.
  absl::Status CheckShape() const;
};

// Pipeline micro-batches: the batch's sequences cut into at most `parts` runs (fewer when it has
// fewer sequences), in order, each about an equal share of the tokens; a sequence is never cut.
// Every stage of a pipeline cuts a step alike, so the micro-batches meet stage to stage. Each
// run as a batch of its own (rows from 0); their logit rows, in order, are the batch's.
std::vector<StepBatch> MicroBatches(const StepBatch& batch, int parts);

}  // namespace tpserve

#endif  // TPSERVE_STEP_STEP_BATCH_H_
