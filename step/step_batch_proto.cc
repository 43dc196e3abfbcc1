#include "step/step_batch_proto.h"

#include <vector>

#include "base/status_macros.h"

namespace tpserve {

namespace wpb = tpserve::worker::v1;

wpb::StepRequest ToProto(const StepBatch& batch, int64_t step_id) {
  wpb::StepRequest req;
  req.set_step_id(step_id);
  for (const StepBatch::Sequence& s : batch.sequences) {
    wpb::SequenceChunk* c = req.add_chunks();
    c->set_seq_id(s.seq_id);
    const absl::Span<const int32_t> tokens = batch.tokens(s);
    c->mutable_token_ids()->Add(tokens.begin(), tokens.end());
    c->set_start_position(s.start_position);
    c->mutable_block_table()->Add(s.block_table.begin(), s.block_table.end());
    c->set_num_logits(s.num_logits);
    if (s.attention_rank >= 0) c->set_attention_rank(s.attention_rank);
  }
  return req;
}

absl::StatusOr<StepBatch> FromProto(const wpb::StepRequest& request) {
  StepBatch batch;
  for (const wpb::SequenceChunk& c : request.chunks()) {
    StepBatch::Sequence& s =
        batch.Add(c.seq_id(), c.start_position(),
                  absl::MakeConstSpan(c.token_ids().data(), c.token_ids().size()),
                  std::vector<int32_t>(c.block_table().begin(), c.block_table().end()),
                  c.num_logits());
    s.attention_rank = c.has_attention_rank() ? c.attention_rank() : -1;
  }
  TP_RETURN_IF_ERROR(batch.CheckShape());
  return batch;
}

}  // namespace tpserve
