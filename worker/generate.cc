#include "worker/generate.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "step/step_batch.h"

namespace tpserve {
namespace {

bool IsEos(const ModelSpec& c, int32_t id) {
  if (id == c.eos_token_id) return true;
  return std::find(c.extra_eos_token_ids.begin(), c.extra_eos_token_ids.end(), id) !=
         c.extra_eos_token_ids.end();
}

}  // namespace

int32_t ArgMax(absl::Span<const float> values) {
  return static_cast<int32_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

absl::StatusOr<GenerateResult> GenerateGreedy(LlamaModel& model, KvCache* cache,
                                              absl::Span<const int32_t> prompt,
                                              const GenerateOptions& options) {
  const int64_t prompt_len = static_cast<int64_t>(prompt.size());
  if (prompt_len == 0) return absl::InvalidArgumentError("generate: the prompt is empty");
  const int64_t total = prompt_len + options.max_new_tokens;
  if (total > cache->capacity_tokens()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "generate: prompt (%d) + max_new_tokens (%d) exceeds the KV cache's %d tokens",
        prompt_len, options.max_new_tokens, cache->capacity_tokens()));
  }
  // Blocks handed out sequentially: the whole cache belongs to this one sequence.
  std::vector<int32_t> block_table(cache->shape().num_blocks);
  std::iota(block_table.begin(), block_table.end(), 0);

  const int64_t vocab = model.config().vocab_size;
  std::vector<float> logits(vocab);
  const int64_t chunk =
      std::clamp<int64_t>(options.prefill_chunk_tokens, 1, model.max_tokens_per_step());
  for (int64_t begin = 0; begin < prompt_len; begin += chunk) {
    const int64_t end = std::min(prompt_len, begin + chunk);
    StepBatch step;
    step.Add(/*seq_id=*/0, begin, absl::MakeConstSpan(prompt).subspan(begin, end - begin),
             block_table);
    TP_RETURN_IF_ERROR(model.Forward(step, cache, logits.data()));
  }
  GenerateResult result;
  result.prompt_last_logits = logits;
  int64_t position = prompt_len;
  Communicator& comm = model.communicator();
  for (int64_t i = 0; i < options.max_new_tokens; ++i) {
    // Chosen where the logits are, then sent to every rank, as the engine's steps do.
    int32_t next = comm.rank() == kSamplingRank ? ArgMax(logits) : -1;
    if (comm.world_size() > 1) {
      TP_RETURN_IF_ERROR(BroadcastInt32s(comm, absl::MakeSpan(&next, 1), kSamplingRank));
    }
    result.tokens.push_back(next);
    if (options.stop_at_eos && IsEos(model.config(), next)) break;
    if (i + 1 == options.max_new_tokens) break;  // no need to run the last token
    StepBatch step;
    step.Add(/*seq_id=*/0, position++, {next}, block_table);
    TP_RETURN_IF_ERROR(model.Forward(step, cache, logits.data()));
  }
  return result;
}

}  // namespace tpserve
