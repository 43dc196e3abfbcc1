#include "worker/llama_weights.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace tpserve {
namespace {

std::string GgufName(LlamaTensor t, int64_t layer) {
  const std::string blk = absl::StrCat("blk.", layer, ".");
  switch (t) {
    case LlamaTensor::kEmbedding: return "token_embd.weight";
    case LlamaTensor::kAttnNorm: return blk + "attn_norm.weight";
    case LlamaTensor::kQ: return blk + "attn_q.weight";
    case LlamaTensor::kK: return blk + "attn_k.weight";
    case LlamaTensor::kV: return blk + "attn_v.weight";
    case LlamaTensor::kO: return blk + "attn_output.weight";
    case LlamaTensor::kFfnNorm: return blk + "ffn_norm.weight";
    case LlamaTensor::kGate: return blk + "ffn_gate.weight";
    case LlamaTensor::kUp: return blk + "ffn_up.weight";
    case LlamaTensor::kDown: return blk + "ffn_down.weight";
    case LlamaTensor::kOutputNorm: return "output_norm.weight";
    case LlamaTensor::kLmHead: return "output.weight";
    case LlamaTensor::kRopeFreqs: return "rope_freqs.weight";
  }
  return "";
}

std::string HfName(LlamaTensor t, int64_t layer) {
  const std::string blk = absl::StrCat("model.layers.", layer, ".");
  switch (t) {
    case LlamaTensor::kEmbedding: return "model.embed_tokens.weight";
    case LlamaTensor::kAttnNorm: return blk + "input_layernorm.weight";
    case LlamaTensor::kQ: return blk + "self_attn.q_proj.weight";
    case LlamaTensor::kK: return blk + "self_attn.k_proj.weight";
    case LlamaTensor::kV: return blk + "self_attn.v_proj.weight";
    case LlamaTensor::kO: return blk + "self_attn.o_proj.weight";
    case LlamaTensor::kFfnNorm: return blk + "post_attention_layernorm.weight";
    case LlamaTensor::kGate: return blk + "mlp.gate_proj.weight";
    case LlamaTensor::kUp: return blk + "mlp.up_proj.weight";
    case LlamaTensor::kDown: return blk + "mlp.down_proj.weight";
    case LlamaTensor::kOutputNorm: return "model.norm.weight";
    case LlamaTensor::kLmHead: return "lm_head.weight";
    case LlamaTensor::kRopeFreqs: return "rope_freqs.weight";  // not in HF checkpoints
  }
  return "";
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Finds `name` and checks its shape.
absl::StatusOr<TensorView> FindShaped(const WeightSource& source, const std::string& name,
                                      const std::vector<int64_t>& shape) {
  TP_ASSIGN_OR_RETURN(TensorView t, source.Find(name));
  if (t.shape != shape) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor %s in %s: shape %s, expected %s from the model config", name, source.Describe(),
        ShapeString(t.shape), ShapeString(shape)));
  }
  return t;
}

absl::Status CheckMatMulType(const TensorView& t, const Backend& backend) {
  if (!backend.SupportsWeightType(t.dtype)) {
    return absl::UnimplementedError(absl::StrFormat("tensor %s: type %s is not supported by %s",
                                                    t.name, std::string(DTypeName(t.dtype)),
                                                    std::string(backend.name())));
  }
  return absl::OkStatus();
}

// Loads a norm-style vector as f32 (checkpoints store F32, F16 or BF16).
absl::StatusOr<std::vector<float>> LoadVector(const WeightSource& source, const std::string& name,
                                              int64_t size, int64_t* bytes_copied) {
  TP_ASSIGN_OR_RETURN(TensorView t, FindShaped(source, name, {size}));
  if (BlockElems(t.dtype) != 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor %s: vector of type %s, expected a float type", name,
        std::string(DTypeName(t.dtype))));
  }
  std::vector<float> out(size);
  DequantizeRow(t.dtype, t.data, out.data(), size);
  *bytes_copied += size * static_cast<int64_t>(sizeof(float));
  return out;
}

class Loader {
 public:
  Loader(const LlamaConfig& c, const WeightSource& s, const ShardingPlan& p, const Backend& b)
      : c_(c), s_(s), p_(p), b_(b) {}

  std::string Name(LlamaTensor t, int64_t layer = 0) const {
    return LlamaTensorName(s_.format(), t, layer);
  }

  // Rows [row_begin, +num_rows) of a [rows, cols] tensor, viewed in place.
  absl::StatusOr<ShardedMatrix> Rows(LlamaTensor t, int64_t layer, int64_t rows, int64_t cols,
                                     int64_t row_begin, int64_t num_rows) {
    TP_ASSIGN_OR_RETURN(TensorView view, FindShaped(s_, Name(t, layer), {rows, cols}));
    TP_RETURN_IF_ERROR(CheckMatMulType(view, b_));
    ShardedMatrix m;
    TP_ASSIGN_OR_RETURN(m.matrix, SliceRows(view, row_begin, num_rows));
    out_->bytes_viewed += num_rows * m.matrix.row_bytes;
    return m;
  }

  // Columns [col_begin, +num_cols) of a [rows, cols] tensor, copied.
  absl::StatusOr<ShardedMatrix> Columns(LlamaTensor t, int64_t layer, int64_t rows, int64_t cols,
                                        int64_t col_begin, int64_t num_cols) {
    TP_ASSIGN_OR_RETURN(TensorView view, FindShaped(s_, Name(t, layer), {rows, cols}));
    TP_RETURN_IF_ERROR(CheckMatMulType(view, b_));
    TP_ASSIGN_OR_RETURN(ShardedMatrix m, CopyColumns(view, col_begin, num_cols));
    out_->bytes_copied += m.owned_bytes;
    return m;
  }

  absl::StatusOr<LlamaLayerWeights> Layer(int64_t l) {
    const int64_t hidden = c_.hidden_size, hd = c_.head_dim;
    const int64_t q_rows = c_.num_heads * hd, kv_rows = c_.num_kv_heads * hd;
    LlamaLayerWeights w;
    int64_t* copied = &out_->bytes_copied;
    TP_ASSIGN_OR_RETURN(w.attn_norm,
                        LoadVector(s_, Name(LlamaTensor::kAttnNorm, l), hidden, copied));
    TP_ASSIGN_OR_RETURN(w.ffn_norm,
                        LoadVector(s_, Name(LlamaTensor::kFfnNorm, l), hidden, copied));
    // Whole heads per rank; each KV head stays with the query heads of its group.
    TP_ASSIGN_OR_RETURN(w.q, Rows(LlamaTensor::kQ, l, q_rows, hidden, p_.first_head() * hd,
                                  p_.num_local_heads() * hd));
    TP_ASSIGN_OR_RETURN(w.k, Rows(LlamaTensor::kK, l, kv_rows, hidden, p_.first_kv_head() * hd,
                                  p_.num_local_kv_heads() * hd));
    TP_ASSIGN_OR_RETURN(w.v, Rows(LlamaTensor::kV, l, kv_rows, hidden, p_.first_kv_head() * hd,
                                  p_.num_local_kv_heads() * hd));
    TP_ASSIGN_OR_RETURN(w.o, Columns(LlamaTensor::kO, l, hidden, q_rows, p_.first_head() * hd,
                                     p_.num_local_heads() * hd));
    const int64_t ffn = c_.intermediate_size, local_ffn = p_.local_intermediate_size();
    TP_ASSIGN_OR_RETURN(w.gate, Rows(LlamaTensor::kGate, l, ffn, hidden, p_.first_ffn_row(),
                                     local_ffn));
    TP_ASSIGN_OR_RETURN(w.up, Rows(LlamaTensor::kUp, l, ffn, hidden, p_.first_ffn_row(),
                                   local_ffn));
    TP_ASSIGN_OR_RETURN(w.down, Columns(LlamaTensor::kDown, l, hidden, ffn, p_.first_ffn_row(),
                                        local_ffn));
    return w;
  }

  absl::Status LoadAll(LlamaWeights* out) {
    out_ = out;
    const int64_t vocab = c_.vocab_size, hidden = c_.hidden_size;
    TP_ASSIGN_OR_RETURN(out->embedding, Rows(LlamaTensor::kEmbedding, 0, vocab, hidden,
                                             p_.first_vocab_row(), p_.num_local_vocab_rows()));
    const bool has_head = s_.Find(Name(LlamaTensor::kLmHead)).ok();
    out->lm_head_tied = c_.tie_word_embeddings || !has_head;
    if (!out->lm_head_tied) {
      TP_ASSIGN_OR_RETURN(out->lm_head, Rows(LlamaTensor::kLmHead, 0, vocab, hidden,
                                             p_.first_vocab_row(), p_.num_local_vocab_rows()));
    }
    TP_ASSIGN_OR_RETURN(out->output_norm, LoadVector(s_, Name(LlamaTensor::kOutputNorm), hidden,
                                                     &out->bytes_copied));
    if (s_.format() == CheckpointFormat::kGguf && s_.Find(Name(LlamaTensor::kRopeFreqs)).ok()) {
      TP_ASSIGN_OR_RETURN(out->rope_freq_factors,
                          LoadVector(s_, Name(LlamaTensor::kRopeFreqs), c_.head_dim / 2,
                                     &out->bytes_copied));
    }
    for (int64_t l = 0; l < c_.num_layers; ++l) {
      TP_ASSIGN_OR_RETURN(LlamaLayerWeights layer, Layer(l));
      out->layers.push_back(std::move(layer));
    }
    return absl::OkStatus();
  }

 private:
  const LlamaConfig& c_;
  const WeightSource& s_;
  const ShardingPlan& p_;
  const Backend& b_;
  LlamaWeights* out_ = nullptr;
};

}  // namespace

std::string LlamaTensorName(CheckpointFormat format, LlamaTensor tensor, int64_t layer) {
  return format == CheckpointFormat::kGguf ? GgufName(tensor, layer) : HfName(tensor, layer);
}

absl::StatusOr<LlamaWeights> LoadLlamaWeights(const LlamaConfig& config,
                                              const WeightSource& source,
                                              const ShardingPlan& plan, const Backend& backend) {
  LlamaWeights weights;
  Loader loader(config, source, plan, backend);
  TP_RETURN_IF_ERROR(loader.LoadAll(&weights));
  return weights;
}

}  // namespace tpserve
