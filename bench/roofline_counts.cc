#include "bench/roofline_counts.h"

namespace tpserve {

double PrefillFlops(const ModelSpec& c, int64_t tokens, int64_t logit_rows) {
  const double t = static_cast<double>(tokens);
  const double linear = 2.0 * static_cast<double>(c.NumActiveLinearParameters()) * t;
  const double lm_head = 2.0 * static_cast<double>(c.vocab_size) *
                         static_cast<double>(c.hidden_size) * static_cast<double>(logit_rows);
  const double attended_pairs = t * (t + 1.0) / 2.0;
  const double attention = 4.0 * static_cast<double>(c.num_layers) *
                           static_cast<double>(c.num_heads) * static_cast<double>(c.head_dim) *
                           attended_pairs;
  return linear + lm_head + attention;
}

double DecodeBytesRead(const ModelSpec& c, const std::array<int64_t, kNumTensorRoles>& role_bytes,
                       const DecodeShape& shape) {
  double weights = 0;
  for (TensorRole role : kAllTensorRoles) {
    if (role == TensorRole::kEmbedding) continue;
    // Of the experts, those the batch's tokens choose (spread evenly).
    const double read = IsExpertRole(role) ? c.ExpertReadFraction(shape.batch) : 1.0;
    weights += static_cast<double>(role_bytes[static_cast<int>(role)]) * read;
  }
  const double embedding_row =
      static_cast<double>(role_bytes[static_cast<int>(TensorRole::kEmbedding)]) /
      static_cast<double>(c.vocab_size);
  // A tied LM head is the embedding table, read whole.
  if (c.tie_word_embeddings) weights += embedding_row * static_cast<double>(c.vocab_size);
  const double kv_per_token =
      2.0 * static_cast<double>(c.num_layers * c.num_kv_heads * c.head_dim * shape.kv_elem_bytes);
  return weights + embedding_row * static_cast<double>(shape.batch) +
         kv_per_token * static_cast<double>(shape.batch * shape.context_tokens);
}

}  // namespace tpserve
