#include "checkpoint/stored_matrix.h"

#include <algorithm>
#include <cstring>

#include "base/status_macros.h"
#include "checkpoint/stored_tensors.h"
#include "base/str_cat.h"
#include "kernels/quantize_weights.h"

namespace tpserve {
namespace {

using stored_internal::ShapeString;

constexpr int64_t kConvertRows = 128;  // rows re-encoded at a time (one fp8 tile row)

absl::Status CheckSlice(const std::string& module, const TensorSlice& s, int64_t rows,
                        int64_t cols) {
  if (s.row_begin < 0 || s.num_rows < 0 || s.row_begin + s.num_rows > rows || s.col_begin < 0 ||
      s.num_cols < 0 || s.col_begin + s.num_cols > cols) {
    return absl::InvalidArgumentError(
        StrCat(module, ": slice rows [", s.row_begin, ", ", s.row_begin + s.num_rows,
               ") cols [", s.col_begin, ", ", s.col_begin + s.num_cols,
               ") is outside its [", rows, ", ", cols, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TensorUse::CheckAllUsed(const WeightSource& source) const {
  for (const std::string& name : source.TensorNames()) {
    const size_t dot = name.rfind('.');
    if (dot != std::string::npos && excused_modules_.count(name.substr(0, dot)) > 0) continue;
    bool unserved = false;
    for (const std::string& p : excused_prefixes_) unserved |= name.rfind(p, 0) == 0;
    if (unserved) continue;
    if (!Contains(name)) {
      return absl::InvalidArgumentError(StrCat(
          "tensor ", name, " in ", source.Describe(),
          " is not used by the model: a checkpoint tensor the loader does not apply (a scale, "
          "a zero point, a bias this architecture lacks) would change the answers, so the "
          "checkpoint is refused"));
    }
  }
  return absl::OkStatus();
}

namespace {

// A multi-token-prediction draft's one layer is its checkpoint's layer mtp_checkpoint_layer.
int64_t StoredLayer(const ModelSpec& spec, int64_t layer) {
  return spec.is_mtp_draft() ? spec.mtp_checkpoint_layer + layer : layer;
}

// A Hugging Face text model's name of `role` (ModuleName without the checkpoint's prefix).
std::string HfModuleName(const ModelSpec& spec, TensorRole role, int64_t layer, int64_t expert) {
  const std::string blk = StrCat("model.layers.", StoredLayer(spec, layer), ".");
  switch (role) {
    case TensorRole::kEmbedding: return "model.embed_tokens";
    case TensorRole::kAttnNorm: return blk + "input_layernorm";
    case TensorRole::kQ: return blk + "self_attn.q_proj";
    case TensorRole::kK: return blk + "self_attn.k_proj";
    case TensorRole::kV: return blk + "self_attn.v_proj";
    case TensorRole::kO: return blk + "self_attn.o_proj";
    case TensorRole::kFfnNorm:
      return blk + (spec.sandwich_norms ? "pre_feedforward_layernorm" : "post_attention_layernorm");
    case TensorRole::kGate: return blk + spec.hf_mlp_module + ".gate_proj";
    case TensorRole::kUp: return blk + spec.hf_mlp_module + ".up_proj";
    case TensorRole::kDown: return blk + spec.hf_mlp_module + ".down_proj";
    case TensorRole::kFinalNorm:
      return spec.is_mtp_draft() ? blk + "shared_head.norm" : "model.norm";
    case TensorRole::kLmHead: return "lm_head";
    case TensorRole::kMtpENorm: return blk + "enorm";
    case TensorRole::kMtpHNorm: return blk + "hnorm";
    case TensorRole::kMtpEhProj: return blk + "eh_proj";
    case TensorRole::kQBias: return blk + "self_attn.q_proj";
    case TensorRole::kKBias: return blk + "self_attn.k_proj";
    case TensorRole::kVBias: return blk + "self_attn.v_proj";
    case TensorRole::kQNorm: return blk + "self_attn.q_norm";
    case TensorRole::kKNorm: return blk + "self_attn.k_norm";
    case TensorRole::kPostAttnNorm: return blk + "post_attention_layernorm";
    case TensorRole::kPostFfnNorm: return blk + "post_feedforward_layernorm";
    case TensorRole::kRouter:
    case TensorRole::kExpertGate:
    case TensorRole::kExpertUp:
    case TensorRole::kExpertDown: {
      if (spec.moe.hf_names == MoeSpec::HfNames::kFusedFeedForward) {  // Llama 4
        if (role == TensorRole::kRouter) return blk + "feed_forward.router";
        return blk + (role == TensorRole::kExpertDown ? "feed_forward.experts.down_proj"
                                                      : "feed_forward.experts.gate_up_proj");
      }
      const bool mixtral = spec.moe.hf_names == MoeSpec::HfNames::kBlockSparseMoe;
      const std::string moe = blk + (mixtral ? "block_sparse_moe" : "mlp");
      if (role == TensorRole::kRouter) return moe + ".gate";
      const std::string e = StrCat(moe, ".experts.", expert, ".");
      if (role == TensorRole::kExpertGate) return e + (mixtral ? "w1" : "gate_proj");
      if (role == TensorRole::kExpertUp) return e + (mixtral ? "w3" : "up_proj");
      return e + (mixtral ? "w2" : "down_proj");
    }
    case TensorRole::kExpertBias: return blk + "mlp.gate";  // + ".e_score_correction_bias"
    case TensorRole::kSharedGate:
    case TensorRole::kSharedUp:
    case TensorRole::kSharedDown: {
      const std::string shared = spec.moe.hf_names == MoeSpec::HfNames::kFusedFeedForward
                                     ? "feed_forward.shared_expert."  // Llama 4
                                     : "mlp.shared_experts.";
      return blk + shared + (role == TensorRole::kSharedGate ? "gate_proj"
                             : role == TensorRole::kSharedUp ? "up_proj"
                                                             : "down_proj");
    }
    case TensorRole::kQA: return blk + "self_attn.q_a_proj";
    case TensorRole::kQANorm: return blk + "self_attn.q_a_layernorm";
    case TensorRole::kQB: return blk + "self_attn.q_b_proj";
    case TensorRole::kKvA: return blk + "self_attn.kv_a_proj_with_mqa";
    case TensorRole::kKvANorm: return blk + "self_attn.kv_a_layernorm";
    case TensorRole::kKvB:  // W_UK and W_UV stored together; the other forms cut from it
    case TensorRole::kKB:
    case TensorRole::kVB: return blk + "self_attn.kv_b_proj";
  }
  return "";
}

}  // namespace

std::string LayerPrefix(const ModelSpec& spec, CheckpointFormat format, int64_t layer) {
  if (format == CheckpointFormat::kGguf) return StrCat("blk.", StoredLayer(spec, layer), ".");
  return StrCat(spec.hf_weight_prefix, "model.layers.", StoredLayer(spec, layer), ".");
}

std::string ModuleName(const ModelSpec& spec, CheckpointFormat format, TensorRole role,
                       int64_t layer, int64_t expert) {
  if (format == CheckpointFormat::kGguf) {
    const std::string blk = LayerPrefix(spec, format, layer);
    switch (role) {
      case TensorRole::kEmbedding: return "token_embd";
      case TensorRole::kAttnNorm: return blk + "attn_norm";
      case TensorRole::kQ: return blk + "attn_q";
      case TensorRole::kK: return blk + "attn_k";
      case TensorRole::kV: return blk + "attn_v";
      case TensorRole::kO: return blk + "attn_output";
      case TensorRole::kFfnNorm:
        return blk + (spec.gguf_ffn_norm_is_post_attention ? "post_attention_norm" : "ffn_norm");
      case TensorRole::kGate: return blk + "ffn_gate";
      case TensorRole::kUp: return blk + "ffn_up";
      case TensorRole::kDown: return blk + "ffn_down";
      case TensorRole::kFinalNorm:
        return spec.is_mtp_draft() ? blk + "nextn.shared_head_norm" : "output_norm";
      case TensorRole::kLmHead: return "output";
      case TensorRole::kQBias: return blk + "attn_q";
      case TensorRole::kKBias: return blk + "attn_k";
      case TensorRole::kVBias: return blk + "attn_v";
      case TensorRole::kQNorm: return blk + "attn_q_norm";
      case TensorRole::kKNorm: return blk + "attn_k_norm";
      case TensorRole::kPostAttnNorm: return blk + "post_attention_norm";
      case TensorRole::kPostFfnNorm: return blk + "post_ffw_norm";
      case TensorRole::kRouter: return blk + "ffn_gate_inp";
      case TensorRole::kExpertGate: return blk + "ffn_gate_exps";  // every expert, stacked
      case TensorRole::kExpertUp: return blk + "ffn_up_exps";
      case TensorRole::kExpertDown: return blk + "ffn_down_exps";
      case TensorRole::kExpertBias: return blk + "exp_probs_b";
      case TensorRole::kSharedGate: return blk + "ffn_gate_shexp";
      case TensorRole::kSharedUp: return blk + "ffn_up_shexp";
      case TensorRole::kSharedDown: return blk + "ffn_down_shexp";
      case TensorRole::kQA: return blk + "attn_q_a";
      case TensorRole::kQANorm: return blk + "attn_q_a_norm";
      case TensorRole::kQB: return blk + "attn_q_b";
      case TensorRole::kKvA: return blk + "attn_kv_a_mqa";
      case TensorRole::kKvANorm: return blk + "attn_kv_a_norm";
      case TensorRole::kKvB: return blk + "attn_kv_b";
      case TensorRole::kKB: return blk + "attn_k_b";
      case TensorRole::kVB: return blk + "attn_v_b";
      case TensorRole::kMtpENorm: return blk + "nextn.enorm";
      case TensorRole::kMtpHNorm: return blk + "nextn.hnorm";
      case TensorRole::kMtpEhProj: return blk + "nextn.eh_proj";
    }
  }
  // A multimodal checkpoint keeps the text model under a prefix (Llama 4's "language_model.").
  return spec.hf_weight_prefix + HfModuleName(spec, role, layer, expert);
}

std::string TensorName(const ModelSpec& spec, CheckpointFormat format, TensorRole role,
                       int64_t layer) {
  const std::string module = ModuleName(spec, format, role, layer);
  if (role == TensorRole::kExpertBias && format != CheckpointFormat::kGguf) {
    return module + ".e_score_correction_bias";
  }
  return module + (IsGgufBiasTensor(role) ? ".bias" : ".weight");
}

absl::StatusOr<StoredMatrix> StoredMatrix::Open(const WeightSource& source,
                                                const QuantScheme& scheme,
                                                const std::string& module, int64_t rows,
                                                int64_t cols, TensorUse* used) {
  StoredMatrix m;
  m.module_ = module;
  m.scheme_ = scheme;
  m.rows_ = rows;
  m.cols_ = cols;
  if (!scheme.Quantizes(module)) {
    TP_RETURN_IF_ERROR(m.OpenPlain(source, used));
    return m;
  }
  switch (scheme.method) {
    case QuantMethod::kFp8Block: {
      // The router and whatever else the checkpoint keeps in bf16 beside its FP8 tiles.
      absl::StatusOr<TensorView> w = source.Find(module + ".weight");
      if (w.ok() && w->dtype != DType::kF8E4M3) {
        TP_RETURN_IF_ERROR(m.OpenPlain(source, used));
        break;
      }
      TP_RETURN_IF_ERROR(m.OpenFp8(source, used));
      break;
    }
    case QuantMethod::kFbgemmFp8:
    case QuantMethod::kCompressedFp8:
      TP_RETURN_IF_ERROR(m.OpenFp8(source, used));
      break;
    case QuantMethod::kAwq:
    case QuantMethod::kGptq:
      TP_RETURN_IF_ERROR(m.OpenInt4(source, used));
      break;
    case QuantMethod::kNone:
      break;  // Quantizes() is false
  }
  return m;
}

absl::Status StoredMatrix::OpenPlain(const WeightSource& source, TensorUse* used) {
  const std::string name = module_ + ".weight";
  TP_ASSIGN_OR_RETURN(TensorView values, source.Find(name));
  TP_RETURN_IF_ERROR(UsePlain(std::move(values), source));
  used->Mark(name);
  return absl::OkStatus();
}

absl::Status StoredMatrix::UsePlain(TensorView values, const WeightSource& source) {
  layout_ = Layout::kPlain;
  values_ = std::move(values);
  const std::string& name = values_.name;
  if (IsIntegerDType(values_.dtype)) {
    return absl::InvalidArgumentError(StrCat(
        "tensor ", name, " in ", source.Describe(), ": dtype ", DTypeName(values_.dtype),
        " holds integers, not weights (a quantized layout the config does not declare?)"));
  }
  if (values_.shape != std::vector<int64_t>{rows_, cols_}) {
    return absl::InvalidArgumentError(StrCat("tensor ", name, " in ", source.Describe(),
                                             ": shape ", ShapeString(values_.shape),
                                             ", expected ", ShapeString({rows_, cols_}),
                                             " from the model config"));
  }
  format_ = FormatOfDType(values_.dtype);
  return absl::OkStatus();
}

absl::StatusOr<StoredMatrix> StoredMatrix::OpenRole(const WeightSource& source,
                                                    const QuantScheme& scheme,
                                                    const ModelSpec& spec, TensorRole role,
                                                    int64_t layer, int64_t expert,
                                                    TensorUse* used) {
  const std::string module = ModuleName(spec, source.format(), role, layer, expert);
  const std::array<int64_t, 2> full = FullShape(spec, role);
  if (IsExpertRole(role) && source.format() != CheckpointFormat::kGguf &&
      spec.moe.hf_names == MoeSpec::HfNames::kFusedFeedForward) {
    return OpenFusedExpert(source, scheme, spec, role, layer, expert, used);
  }
  if ((role == TensorRole::kKB || role == TensorRole::kVB) &&
      source.format() == CheckpointFormat::kGguf && source.Find(module + ".weight").ok()) {
    // llama.cpp stores them per head: [heads, kv_lora, nope] and [heads, v, kv_lora], read as
    // the heads' rows one after another.
    const std::string name = module + ".weight";
    const int64_t heads = spec.num_heads;
    TP_ASSIGN_OR_RETURN(TensorView t, FindStacked(source, name, {heads, full[0] / heads, full[1]},
                                                  "heads"));
    t.shape = {full[0], full[1]};
    return PlainOver(std::move(t), module, scheme, name, source, used);
  }
  if (role == TensorRole::kKB || role == TensorRole::kVB || role == TensorRole::kKvB) {
    // kv_b_proj (HF) or attn_kv_b (older GGUF files): every head's W_UK and W_UV rows.
    const MlaSpec& mla = spec.mla;
    const std::string combined = ModuleName(spec, source.format(), TensorRole::kKvB, layer);
    return Open(source, scheme, combined,
                spec.num_heads * (mla.qk_nope_head_dim + mla.v_head_dim), mla.kv_lora_rank, used);
  }
  if (!IsExpertRole(role) || source.format() != CheckpointFormat::kGguf) {
    return Open(source, scheme, module, full[0], full[1], used);
  }
  const int64_t experts = spec.moe.routing.num_experts;
  if (expert < 0 || expert >= experts) {
    return absl::InvalidArgumentError(
        StrCat("expert ", expert, " of ", module, " is outside [0, ", experts, ")"));
  }
  const std::string name = module + ".weight";
  TP_ASSIGN_OR_RETURN(TensorView stacked,
                      FindStacked(source, name, {experts, full[0], full[1]}, "experts"));
  // The reader checked nbytes == rows * row bytes over every leading dim: each expert's rows
  // are nbytes / experts bytes, the same for every expert.
  const int64_t per_expert = stacked.nbytes / experts;
  TensorView mine = stacked;
  mine.name = StrCat(name, " (expert ", expert, ")");
  mine.shape = {full[0], full[1]};
  mine.data = stacked.data + expert * per_expert;
  mine.nbytes = per_expert;
  return PlainOver(std::move(mine), StrCat(module, " (expert ", expert, ")"), scheme, name,
                   source, used);
}

absl::StatusOr<TensorView> StoredMatrix::FindStacked(const WeightSource& source,
                                                     const std::string& name,
                                                     const std::vector<int64_t>& want,
                                                     std::string_view leading) {
  TP_ASSIGN_OR_RETURN(TensorView t, source.Find(name));
  if (t.shape != want) {
    return absl::InvalidArgumentError(StrCat("tensor ", name, " in ", source.Describe(),
                                             ": shape ", ShapeString(t.shape), ", expected ",
                                             ShapeString(want), " (", leading, ", rows, cols) "
                                             "from the model config"));
  }
  return t;
}

absl::StatusOr<StoredMatrix> StoredMatrix::PlainOver(TensorView view, const std::string& module,
                                                     const QuantScheme& scheme,
                                                     const std::string& name,
                                                     const WeightSource& source,
                                                     TensorUse* used) {
  StoredMatrix m;
  m.module_ = module;
  m.scheme_ = scheme;
  m.rows_ = view.shape[0];
  m.cols_ = view.shape[1];
  TP_RETURN_IF_ERROR(m.UsePlain(std::move(view), source));
  used->Mark(name);
  return m;
}

absl::StatusOr<StoredMatrix> StoredMatrix::OpenFusedExpert(const WeightSource& source,
                                                           const QuantScheme& scheme,
                                                           const ModelSpec& spec, TensorRole role,
                                                           int64_t layer, int64_t expert,
                                                           TensorUse* used) {
  const std::string name = ModuleName(spec, source.format(), role, layer, expert);
  const std::array<int64_t, 2> full = FullShape(spec, role);  // [rows = out, cols = in]
  const int64_t experts = spec.moe.routing.num_experts;
  if (expert < 0 || expert >= experts) {
    return absl::InvalidArgumentError(
        StrCat("expert ", expert, " of ", name, " is outside [0, ", experts, ")"));
  }
  if (scheme.Quantizes(name)) {
    return absl::UnimplementedError(StrCat(
        name, ": a quantized fused expert tensor is not read yet (only F32, F16 and BF16)"));
  }
  // gate_up_proj holds gate's rows and then up's as columns of one [in, 2 * ff] matrix.
  const bool gate_up = role != TensorRole::kExpertDown;
  const int64_t stored_rows = gate_up ? 2 * full[0] : full[0];
  TP_ASSIGN_OR_RETURN(
      TensorView fused,
      stored_internal::FindTensor(source, name, {DType::kF32, DType::kF16, DType::kBF16},
                                  {experts, full[1], stored_rows},
                                  gate_up ? "fused experts [experts, hidden, 2 * ff]"
                                          : "fused experts [experts, ff, hidden]",
                                  used));
  const int64_t per_expert = fused.nbytes / experts;
  TensorView mine = fused;
  mine.name = StrCat(name, " (expert ", expert, ")");
  mine.shape = {full[1], stored_rows};
  mine.data = fused.data + expert * per_expert;
  mine.nbytes = per_expert;
  StoredMatrix m;
  m.module_ = mine.name;
  m.scheme_ = scheme;
  m.layout_ = Layout::kTransposed;
  m.values_ = std::move(mine);
  m.format_ = FormatOfDType(fused.dtype);
  m.rows_ = full[0];
  m.cols_ = full[1];
  m.first_stored_row_ = role == TensorRole::kExpertUp ? full[0] : 0;
  return m;
}

absl::StatusOr<HostMatrix> StoredMatrix::ReadTransposed(const TensorSlice& s) const {
  const int64_t elem = BlockBytes(values_.dtype);
  const int64_t stored_rows = values_.shape[1];
  HostMatrix out;
  WeightMatrix& m = out.matrix;
  m.format = format_;
  m.rows = s.num_rows;
  m.cols = s.num_cols;
  m.row_bytes = s.num_cols * elem;
  out.values.resize(s.num_rows * m.row_bytes);
  // Tiles of 64 x 64 elements: each stored row (one input) is read contiguously for 64 rows.
  constexpr int64_t kTile = 64;
  for (int64_t c0 = 0; c0 < s.num_cols; c0 += kTile) {
    for (int64_t r0 = 0; r0 < s.num_rows; r0 += kTile) {
      for (int64_t c = c0; c < std::min(c0 + kTile, s.num_cols); ++c) {
        const uint8_t* src = values_.data +
                             ((s.col_begin + c) * stored_rows + first_stored_row_ + s.row_begin) *
                                 elem;
        for (int64_t r = r0; r < std::min(r0 + kTile, s.num_rows); ++r) {
          std::memcpy(out.values.data() + r * m.row_bytes + c * elem, src + r * elem, elem);
        }
      }
    }
  }
  m.data = out.values.data();
  return out;
}

absl::StatusOr<HostMatrix> StoredMatrix::Read(const TensorSlice& slice) const {
  TP_RETURN_IF_ERROR(CheckSlice(module_, slice, rows_, cols_));
  switch (layout_) {
    case Layout::kPlain:
      return ReadPlain(slice);
    case Layout::kFp8Channel:
    case Layout::kFp8Block:
      return ReadFp8(slice);
    case Layout::kAwq:
    case Layout::kGptq:
      return ReadInt4(slice);
    case Layout::kTransposed:
      return ReadTransposed(slice);
  }
  return absl::InternalError("unknown layout");
}

absl::StatusOr<HostMatrix> StoredMatrix::ReadPlain(const TensorSlice& s) const {
  const TensorView& t = values_;
  const int64_t block = InputBlockValues(format_);
  if (s.col_begin % block != 0 || s.num_cols % block != 0) {
    return absl::InvalidArgumentError(StrCat(
        "tensor ", t.name, ": column slice [", s.col_begin, ", ", s.col_begin + s.num_cols,
        ") is not aligned to ", TensorFormatName(format_), " blocks of ", block, " values"));
  }
  const int64_t src_row_bytes = PackedRowBytes(format_, cols_);
  HostMatrix out;
  WeightMatrix& m = out.matrix;
  m.format = format_;
  m.rows = s.num_rows;
  m.cols = s.num_cols;
  if (s.col_begin == 0 && s.num_cols == cols_) {  // whole rows: a view, zero copy
    m.row_bytes = src_row_bytes;
    m.data = t.data + s.row_begin * src_row_bytes;
    return out;
  }
  m.row_bytes = PackedRowBytes(format_, s.num_cols);
  const int64_t offset = PackedRowBytes(format_, s.col_begin);
  out.values.resize(s.num_rows * m.row_bytes);
  for (int64_t r = 0; r < s.num_rows; ++r) {
    std::memcpy(out.values.data() + r * m.row_bytes,
                t.data + (s.row_begin + r) * src_row_bytes + offset, m.row_bytes);
  }
  m.data = out.values.data();
  return out;
}

absl::StatusOr<HostMatrix> ConvertMatrix(HostMatrix src, const TensorFormat& target,
                                         std::string_view what) {
  const WeightMatrix& in = src.matrix;
  if (in.format == target) return src;
  TP_RETURN_IF_ERROR(MatrixBytes(target, in.rows, in.cols, what).status());
  if (PackedRowBytes(target, in.cols) < 0) {
    return absl::InvalidArgumentError(StrCat(what, ": ", in.cols, " columns do not fit ",
                                             TensorFormatName(target)));
  }
  HostMatrix out = AllocateHostMatrix(target, in.rows, in.cols);
  std::vector<float> rows(kConvertRows * in.cols), row(in.cols);
  for (int64_t r0 = 0; r0 < in.rows; r0 += kConvertRows) {
    const int64_t n = std::min(kConvertRows, in.rows - r0);
    for (int64_t r = 0; r < n; ++r) {
      float* dst = rows.data() + r * in.cols;
      if (in.input_perm == nullptr) {
        DequantizeWeightRow(in, r0 + r, dst);
      } else {  // back to input order: stored column j is input column perm[j]
        DequantizeWeightRow(in, r0 + r, row.data());
        for (int64_t j = 0; j < in.cols; ++j) dst[in.input_perm[j]] = row[j];
      }
    }
    const HostMatrix part = QuantizeWeights(target, rows.data(), n, in.cols);
    std::memcpy(out.values.data() + r0 * out.matrix.row_bytes, part.values.data(),
                part.values.size());
    // Scales of these rows (fp8-block: of this tile row, as r0 is a multiple of 128).
    const int64_t scale_rows = target.kind == FormatKind::kFp8Block128 ? r0 / 128 : r0;
    const int64_t scale_row_bytes = out.scales.empty() ? 0 : out.scales.size() /
        (target.kind == FormatKind::kFp8Block128 ? (in.rows + 127) / 128 : in.rows);
    if (!part.scales.empty()) {
      std::memcpy(out.scales.data() + scale_rows * scale_row_bytes, part.scales.data(),
                  part.scales.size());
    }
    if (!part.zeros.empty()) {
      std::memcpy(out.zeros.data() + scale_rows * scale_row_bytes, part.zeros.data(),
                  part.zeros.size());
    }
  }
  out.matrix.activation_scale_ub = in.activation_scale_ub;
  return out;
}

}  // namespace tpserve
