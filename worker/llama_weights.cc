#include "worker/llama_weights.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>

#include "base/status_macros.h"
#include "checkpoint/stored_matrix.h"
#include "base/str_cat.h"
#include "kernels/check.h"
#include "kernels/stacked_matrix.h"
#include "model/fused_projections.h"

namespace tpserve {
namespace {

class Loader {
 public:
  Loader(const ModelSpec& c, const WeightSource& s, const QuantScheme& q,
         const ShardingPlan& p, const WeightFormats& f, Backend& b, LlamaWeights* out,
         bool mla_expanded_form)
      : c_(c), s_(s), q_(q), p_(p), f_(f), b_(b), out_(out),
        mla_expanded_form_(mla_expanded_form) {}

  absl::Status LoadAll() {
    // A multimodal checkpoint's other towers (Llama 4's vision model) are not served.
    for (const std::string& p : c_.hf_unserved_weight_prefixes) used_.ExcusePrefix(p);
    // A pipeline stage holds its own layers; the first embeds, the last holds the final norm
    // and the LM head (the embedding too, when the head is tied to it). The others' tensors
    // are their stages' to read and check.
    const std::string head = ModuleName(c_, s_.format(), TensorRole::kLmHead, 0);
    const bool has_head = s_.Find(head + ".weight").ok() || s_.Find(head + ".qweight").ok();
    out_->lm_head_tied = c_.tie_word_embeddings || !has_head;
    if (p_.first_stage() || (p_.last_stage() && out_->lm_head_tied)) {
      TP_ASSIGN_OR_RETURN(out_->embedding, Matrix(TensorRole::kEmbedding, 0));
      if (!p_.first_stage()) {  // held only as the tied LM head, as the memory plan says
        std::swap(out_->role_bytes[static_cast<int>(TensorRole::kEmbedding)],
                  out_->role_bytes[static_cast<int>(TensorRole::kLmHead)]);
      }
    } else {
      used_.ExcuseModule(ModuleName(c_, s_.format(), TensorRole::kEmbedding, 0));
    }
    if (!p_.last_stage()) {
      used_.ExcuseModule(head);
      used_.ExcuseModule(ModuleName(c_, s_.format(), TensorRole::kFinalNorm, 0));
    } else if (!out_->lm_head_tied) {
      TP_ASSIGN_OR_RETURN(out_->lm_head, Matrix(TensorRole::kLmHead, 0));
    } else if (has_head) {
      TP_RETURN_IF_ERROR(CheckTiedCopy(head + ".weight"));
    }
    if (p_.last_stage()) {
      TP_ASSIGN_OR_RETURN(out_->output_norm, Norm(TensorRole::kFinalNorm, 0));
    }
    if (c_.is_mtp_draft()) {
      TP_ASSIGN_OR_RETURN(out_->mtp_enorm, Norm(TensorRole::kMtpENorm, 0));
      TP_ASSIGN_OR_RETURN(out_->mtp_hnorm, Norm(TensorRole::kMtpHNorm, 0));
      TP_ASSIGN_OR_RETURN(out_->mtp_eh_proj, Matrix(TensorRole::kMtpEhProj, 0));
    }
    const std::string rope = "rope_freqs.weight";
    if (s_.format() == CheckpointFormat::kGguf && s_.Find(rope).ok()) {
      TP_ASSIGN_OR_RETURN(out_->rope_freq_factors, HostVector(rope, c_.RopeDim() / 2));
    }
    const int64_t first = p_.first_layer(), end = first + p_.num_local_layers();
    for (int64_t l = 0; l < c_.num_layers; ++l) {
      if (l < first || l >= end) {  // another stage's: an empty entry, its tensors excused
        used_.ExcusePrefix(LayerPrefix(c_, s_.format(), l));
        out_->layers.emplace_back();
        continue;
      }
      LlamaLayerWeights w;
      TP_ASSIGN_OR_RETURN(w.attn_norm, Norm(TensorRole::kAttnNorm, l));
      TP_ASSIGN_OR_RETURN(w.ffn_norm, Norm(TensorRole::kFfnNorm, l));
      if (c_.mla.enabled()) {
        TP_RETURN_IF_ERROR(LoadLatentAttention(l, w));
      } else {
        TP_RETURN_IF_ERROR(Projections(FusedGroup::kQkv, l, w));
      }
      TP_ASSIGN_OR_RETURN(w.o, Matrix(TensorRole::kO, l));
      if (c_.IsMoeLayer(l)) {
        TP_ASSIGN_OR_RETURN(w.router, Matrix(TensorRole::kRouter, l));
        // This rank's experts (all of them, each a slice, unless placed whole by expert
        // parallelism); the others' tensors are their ranks' to read.
        const int64_t first = p_.first_local_expert(), local = p_.num_local_experts();
        w.experts.resize(local);
        for (int64_t e = 0; e < c_.moe.routing.num_experts; ++e) {
          if (e < first || e >= first + local) {
            for (TensorRole role : {TensorRole::kExpertGate, TensorRole::kExpertUp,
                                    TensorRole::kExpertDown}) {
              used_.ExcuseModule(ModuleName(c_, s_.format(), role, l, e));
            }
            continue;
          }
          LlamaLayerWeights::Expert& mine = w.experts[e - first];
          TP_ASSIGN_OR_RETURN(mine.gate, ExpertMatrix(TensorRole::kExpertGate, l, e));
          TP_ASSIGN_OR_RETURN(mine.up, ExpertMatrix(TensorRole::kExpertUp, l, e));
          TP_ASSIGN_OR_RETURN(mine.down, ExpertMatrix(TensorRole::kExpertDown, l, e));
        }
        if (HasRole(c_, TensorRole::kSharedGate)) {
          TP_ASSIGN_OR_RETURN(w.shared.gate, Matrix(TensorRole::kSharedGate, l));
          TP_ASSIGN_OR_RETURN(w.shared.up, Matrix(TensorRole::kSharedUp, l));
          TP_ASSIGN_OR_RETURN(w.shared.down, Matrix(TensorRole::kSharedDown, l));
        }
        if (HasRole(c_, TensorRole::kExpertBias)) {
          TP_ASSIGN_OR_RETURN(w.expert_bias, Norm(TensorRole::kExpertBias, l));
        }
      } else {
        TP_RETURN_IF_ERROR(Projections(FusedGroup::kGateUp, l, w));
        TP_ASSIGN_OR_RETURN(w.down, Matrix(TensorRole::kDown, l));
      }
      const std::pair<TensorRole, DeviceBuffer*> vectors[] = {
          {TensorRole::kQBias, &w.q_bias},        {TensorRole::kKBias, &w.k_bias},
          {TensorRole::kVBias, &w.v_bias},        {TensorRole::kQNorm, &w.q_norm},
          {TensorRole::kKNorm, &w.k_norm},        {TensorRole::kPostAttnNorm, &w.post_attn_norm},
          {TensorRole::kPostFfnNorm, &w.post_ffn_norm}};
      for (const auto& [role, buffer] : vectors) {
        if (!HasRole(c_, role)) continue;
        if (IsBiasRole(role) && w.FusedQkv() != nullptr) continue;  // StackedQkvBias's
        TP_ASSIGN_OR_RETURN(*buffer, Norm(role, l));
      }
      if (w.FusedQkv() != nullptr && HasRole(c_, TensorRole::kQBias)) {
        TP_RETURN_IF_ERROR(StackedQkvBias(l, w));
      }
      // A bias belongs to its matrix: the backend adds it where the product is written.
      const std::pair<LoadedMatrix*, const DeviceBuffer*> biased[] = {
          {&w.q, &w.q_bias}, {&w.k, &w.k_bias}, {&w.v, &w.v_bias}};
      for (const auto& [matrix, bias] : biased) {
        if (bias->data() != nullptr) matrix->matrix.bias = bias->as<float>();
      }
      out_->layers.push_back(std::move(w));
      LlamaLayerWeights& placed = out_->layers.back();  // the experts no longer move
      for (const LlamaLayerWeights::Expert& e : placed.experts) {
        placed.expert_mlps.push_back({&e.gate.matrix, &e.up.matrix, &e.down.matrix});
      }
    }
    return used_.CheckAllUsed(s_);
  }

 private:
  // One role's slice: read in the checkpoint's layout, converted to the target format, placed.
  // (Expert `expert`'s matrix of an expert role.)
  absl::StatusOr<LoadedMatrix> Matrix(TensorRole role, int64_t layer, int64_t expert = 0) {
    TP_ASSIGN_OR_RETURN(StoredMatrix stored,
                        StoredMatrix::OpenRole(s_, q_, c_, role, layer, expert, &used_));
    TP_ASSIGN_OR_RETURN(HostMatrix host, stored.Read(p_.Slice(role)));
    return Place(std::move(host), role, layer, stored.module());
  }

  // A layer's q/k/v or gate/up: one stack where FusedLayoutFor and the slices' own data allow
  // it (each projection then a view of its rows), else each placed on its own; a fallback from
  // a backend that fuses is said on stderr once per (group, reason).
  absl::Status Projections(FusedGroup group, int64_t l, LlamaLayerWeights& w) {
    FusedLayout layout = FusedLayoutFor(c_, p_, f_, l, group, b_.projection_fusion());
    const std::vector<LoadedMatrix*> outs = group == FusedGroup::kQkv
                                                ? std::vector<LoadedMatrix*>{&w.q, &w.k, &w.v}
                                                : std::vector<LoadedMatrix*>{&w.gate, &w.up};
    if (!layout.fused) {
      SayFallback(layout, l);
      for (size_t i = 0; i < outs.size(); ++i) {
        TP_ASSIGN_OR_RETURN(*outs[i], Matrix(layout.parts[i].role, l));
      }
      return absl::OkStatus();
    }
    std::vector<HostMatrix> hosts;
    std::vector<std::string> modules;
    for (const FusedPart& part : layout.parts) {
      TP_ASSIGN_OR_RETURN(StoredMatrix stored,
                          StoredMatrix::OpenRole(s_, q_, c_, part.role, l, 0, &used_));
      TP_ASSIGN_OR_RETURN(HostMatrix host, stored.Read(p_.Slice(part.role)));
      TP_ASSIGN_OR_RETURN(host, ConvertMatrix(std::move(host), f_.At(part.role, l),
                                              stored.module()));
      hosts.push_back(std::move(host));
      modules.push_back(stored.module());
    }
    std::vector<const WeightMatrix*> parts;
    for (const HostMatrix& h : hosts) parts.push_back(&h.matrix);
    const std::string problem = StackRowsProblem(parts);  // what only the slices' data say
    if (problem.empty()) {
      LoadedMatrix& stack = group == FusedGroup::kQkv ? w.qkv : w.gate_up;
      return PlaceStack(layout, hosts, StackName(modules), outs, stack);
    }
    layout.fused = false;
    layout.fallback = true;
    layout.why_not = problem;
    SayFallback(layout, l);
    for (size_t i = 0; i < hosts.size(); ++i) {
      TP_ASSIGN_OR_RETURN(*outs[i],
                          Place(std::move(hosts[i]), layout.parts[i].role, l, modules[i]));
    }
    return absl::OkStatus();
  }

  void SayFallback(const FusedLayout& layout, int64_t l) {
    if (std::optional<std::string> line = fusion_log_.Add(layout, l, b_.name())) {
      std::fprintf(stderr, "LoadLlamaWeights: %s\n", line->c_str());
    }
  }

  // "model.layers.3.self_attn.q_proj+k_proj+v_proj": the first module, then the others' last
  // component where they share its prefix (WeightRoleName makes the fused role of it).
  static std::string StackName(const std::vector<std::string>& modules) {
    std::string name = modules[0];
    const std::string prefix = name.substr(0, name.rfind('.') + 1);
    for (size_t i = 1; i < modules.size(); ++i) {
      const bool shared = modules[i].compare(0, prefix.size(), prefix) == 0;
      name += "+" + (shared ? modules[i].substr(prefix.size()) : modules[i]);
    }
    return name;
  }

  // The stack of `hosts` (already in their roles' format) placed as one matrix into `stack`,
  // each of `outs` a view of its rows. Its bytes are counted to the parts' roles as they would
  // be held apart: each part's stored bytes, and the backend's own-form bytes by rows (linear
  // in rows for every form, the parts whole tiles: model/fused_projections.h).
  absl::Status PlaceStack(const FusedLayout& layout, const std::vector<HostMatrix>& hosts,
                          const std::string& module, const std::vector<LoadedMatrix*>& outs,
                          LoadedMatrix& stack) {
    std::vector<const WeightMatrix*> parts;
    for (const HostMatrix& h : hosts) parts.push_back(&h.matrix);
    const HostMatrix host = StackRows(parts);
    TP_RETURN_IF_ERROR(CheckSupported(host, module));
    TP_ASSIGN_OR_RETURN(stack, b_.PlaceWeight(host, WeightUse::kFused, module));
    out_->bytes_viewed += stack.bytes_viewed;
    out_->bytes_copied += stack.bytes_copied;
    const int64_t own_form = stack.bytes_held() - WeightMatrixBytes(host.matrix);
    for (size_t i = 0; i < outs.size(); ++i) {
      const FusedPart& part = layout.parts[i];
      out_->role_bytes[static_cast<int>(part.role)] +=
          WeightMatrixBytes(hosts[i].matrix) + own_form * part.rows / layout.rows;
      *outs[i] = LoadedMatrix{};
      outs[i]->matrix = RowRange(stack.matrix, part.n_begin, part.rows);
    }
    return absl::OkStatus();
  }

  // Qwen2's q, k and v biases of a stacked q/k/v: one buffer in the stack's row order, which
  // the stack's bias and its views' point into (each role's bytes counted as Norm counts them).
  absl::Status StackedQkvBias(int64_t l, LlamaLayerWeights& w) {
    std::vector<float> all;
    for (TensorRole role : {TensorRole::kQBias, TensorRole::kKBias, TensorRole::kVBias}) {
      TP_ASSIGN_OR_RETURN(std::vector<float> v, VectorValues(role, l));
      const int64_t bytes = static_cast<int64_t>(v.size() * sizeof(float));
      out_->bytes_copied += bytes;
      out_->role_bytes[static_cast<int>(role)] += bytes;
      all.insert(all.end(), v.begin(), v.end());
    }
    TP_CHECK(static_cast<int64_t>(all.size()) == w.qkv.matrix.rows,
             "q/k/v biases do not cover the stacked rows");
    TP_ASSIGN_OR_RETURN(w.qkv_bias, Upload(b_, all.data(), all.size() * sizeof(float),
                                           TensorName(c_, s_.format(), TensorRole::kQBias, l)));
    w.qkv.matrix.bias = w.qkv_bias.as<float>();
    int64_t at = 0;
    for (LoadedMatrix* m : {&w.q, &w.k, &w.v}) {
      m->matrix.bias = w.qkv_bias.as<float>() + at;
      at += m->matrix.rows;
    }
    return absl::OkStatus();
  }

  // UNIMPLEMENTED naming `module` when the backend cannot multiply `host`'s format.
  absl::Status CheckSupported(const HostMatrix& host, const std::string& module) const {
    if (b_.SupportsWeight(host.matrix.format)) return absl::OkStatus();
    return absl::UnimplementedError(StrCat(module, ": format ",
                                           TensorFormatName(host.matrix.format),
                                           " is not supported by the ", b_.name(), " backend"));
  }

  // `host` converted to the role's format and placed by the backend, its bytes counted.
  absl::StatusOr<LoadedMatrix> Place(HostMatrix host, TensorRole role, int64_t layer,
                                     const std::string& module) {
    TP_ASSIGN_OR_RETURN(host, ConvertMatrix(std::move(host), f_.At(role, layer), module));
    TP_RETURN_IF_ERROR(CheckSupported(host, module));
    // The embedding is read row by row (EmbeddingRows) as well as multiplied when tied; every
    // other matrix is only multiplied, so the backend may hold a form of its own.
    const WeightUse use = role == TensorRole::kEmbedding ? WeightUse::kTable : WeightUse::kMatMul;
    // What `host` owns (converted values) is copied; what it views (the checkpoint's bytes,
    // which outlive the weights) a host backend keeps using in place.
    TP_ASSIGN_OR_RETURN(LoadedMatrix loaded, b_.PlaceWeight(host, use, module));
    out_->bytes_viewed += loaded.bytes_viewed;
    out_->bytes_copied += loaded.bytes_copied;
    out_->role_bytes[static_cast<int>(role)] += loaded.bytes_held();
    return loaded;
  }

  // Multi-head latent attention's projections: the query's (q, or q_a, its norm and q_b), kv_a,
  // the latent's norm, and W_UK and
  // W_UV of this rank's heads in the three forms the forward pass multiplies by (kv_b for a
  // fresh prefill's expansion, k_b and v_b per head for the absorbed form), all from whichever
  // form the checkpoint stores: kv_b_proj (Hugging Face, older GGUF files' attn_kv_b) or
  // llama.cpp's attn_k_b and attn_v_b.
  absl::Status LoadLatentAttention(int64_t l, LlamaLayerWeights& w) {
    const MlaSpec& m = c_.mla;
    if (m.q_lora_rank > 0) {
      TP_ASSIGN_OR_RETURN(w.q_a, Matrix(TensorRole::kQA, l));
      TP_ASSIGN_OR_RETURN(w.q_a_norm, Norm(TensorRole::kQANorm, l));
      TP_ASSIGN_OR_RETURN(w.q_b, Matrix(TensorRole::kQB, l));
    } else {
      TP_ASSIGN_OR_RETURN(w.q, Matrix(TensorRole::kQ, l));
    }
    TP_ASSIGN_OR_RETURN(w.kv_a, Matrix(TensorRole::kKvA, l));
    TP_ASSIGN_OR_RETURN(w.kv_a_norm, Norm(TensorRole::kKvANorm, l));
    // This rank's heads of W_UK [nope, kv_lora] and W_UV [v, kv_lora], in f32 on the host.
    const int64_t heads = p_.num_local_heads(), nope = m.qk_nope_head_dim, v = m.v_head_dim;
    const int64_t r = m.kv_lora_rank;
    std::vector<float> uk(heads * nope * r), uv(heads * v * r);
    // Read whole (small beside the experts) so that no head boundary need fall on a
    // quantization tile; this rank's heads start at head h0.
    TP_ASSIGN_OR_RETURN(StoredMatrix k_stored, StoredMatrix::OpenRole(s_, q_, c_, TensorRole::kKB,
                                                                      l, 0, &used_));
    const std::string module = k_stored.module();
    const int64_t h0 = p_.first_head();
    const auto whole = [](const StoredMatrix& m) {
      return TensorSlice{0, m.rows(), 0, m.cols()};
    };
    const bool split = s_.format() == CheckpointFormat::kGguf &&
                       s_.Find(ModuleName(c_, s_.format(), TensorRole::kKB, l) + ".weight").ok();
    if (split) {  // attn_k_b and attn_v_b: per head, W_UK transposed
      TP_ASSIGN_OR_RETURN(HostMatrix kb, k_stored.Read(whole(k_stored)));
      TP_ASSIGN_OR_RETURN(StoredMatrix v_stored,
                          StoredMatrix::OpenRole(s_, q_, c_, TensorRole::kVB, l, 0, &used_));
      TP_ASSIGN_OR_RETURN(HostMatrix vb, v_stored.Read(whole(v_stored)));
      std::vector<float> row(std::max(nope, r));
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t j = 0; j < r; ++j) {  // row j of W_UK^T is column j of W_UK
          DequantizeWeightRow(kb.matrix, (h0 + h) * r + j, row.data());
          for (int64_t i = 0; i < nope; ++i) uk[(h * nope + i) * r + j] = row[i];
        }
        for (int64_t i = 0; i < v; ++i) {
          DequantizeWeightRow(vb.matrix, (h0 + h) * v + i, uv.data() + (h * v + i) * r);
        }
      }
    } else {  // kv_b_proj: per head nope rows of W_UK, then v rows of W_UV
      TP_ASSIGN_OR_RETURN(HostMatrix kvb, k_stored.Read(whole(k_stored)));
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t i = 0; i < nope; ++i) {
          DequantizeWeightRow(kvb.matrix, (h0 + h) * (nope + v) + i,
                              uk.data() + (h * nope + i) * r);
        }
        for (int64_t i = 0; i < v; ++i) {
          DequantizeWeightRow(kvb.matrix, (h0 + h) * (nope + v) + nope + i,
                              uv.data() + (h * v + i) * r);
        }
      }
    }
    if (mla_expanded_form_) {  // the expanded form's one matmul (not held by default)
      std::vector<float> kv_b(heads * (nope + v) * r);
      for (int64_t h = 0; h < heads; ++h) {
        std::copy_n(uk.data() + h * nope * r, nope * r, kv_b.data() + h * (nope + v) * r);
        std::copy_n(uv.data() + h * v * r, v * r, kv_b.data() + (h * (nope + v) + nope) * r);
      }
      TP_ASSIGN_OR_RETURN(w.kv_b, Place(F32Matrix(kv_b, heads * (nope + v), r),
                                        TensorRole::kKvB, l, module));
    }
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<float> uk_t(r * nope);  // W_UK^T of head h
      for (int64_t i = 0; i < nope; ++i) {
        for (int64_t j = 0; j < r; ++j) uk_t[j * nope + i] = uk[(h * nope + i) * r + j];
      }
      TP_ASSIGN_OR_RETURN(LoadedMatrix kb, Place(F32Matrix(uk_t, r, nope), TensorRole::kKB, l,
                                                 StrCat(module, " (W_UK^T of head ", h, ")")));
      w.k_b.push_back(std::move(kb));
      std::vector<float> uv_h(uv.begin() + h * v * r, uv.begin() + (h + 1) * v * r);
      TP_ASSIGN_OR_RETURN(LoadedMatrix vb, Place(F32Matrix(uv_h, v, r), TensorRole::kVB, l,
                                                 StrCat(module, " (W_UV of head ", h, ")")));
      w.v_b.push_back(std::move(vb));
    }
    return absl::OkStatus();
  }

  // An f32 [rows, cols] matrix owning `values`.
  static HostMatrix F32Matrix(const std::vector<float>& values, int64_t rows, int64_t cols) {
    HostMatrix h;
    h.values.resize(values.size() * sizeof(float));
    std::memcpy(h.values.data(), values.data(), h.values.size());
    h.matrix.format = TensorFormat::Of(FormatKind::kF32);
    h.matrix.data = h.values.data();
    h.matrix.rows = rows;
    h.matrix.cols = cols;
    h.matrix.row_bytes = cols * static_cast<int64_t>(sizeof(float));
    return h;
  }

  // Expert `expert`'s matrix of an expert role; a failure also says which expert of how many,
  // and which experts this rank reads (with expert parallelism only an expert's owner reads
  // it, so a missing expert is reported by that rank alone).
  absl::StatusOr<LoadedMatrix> ExpertMatrix(TensorRole role, int64_t layer, int64_t expert) {
    absl::StatusOr<LoadedMatrix> m = Matrix(role, layer, expert);
    if (m.ok()) return m;
    const int64_t first = p_.first_local_expert(), local = p_.num_local_experts();
    const std::string held = local == c_.moe.routing.num_experts
                                 ? std::string("every expert")
                                 : StrCat("experts ", first, "-", first + local - 1);
    return absl::Status(m.status().code(),
                        StrCat(m.status().message(), " (expert ", expert, " of ",
                               c_.moe.routing.num_experts, " in layer ", layer,
                               "; this rank holds ", held, ")"));
  }

  // A vector tensor (norm weights, rope factors) in f32 on the host.
  absl::StatusOr<std::vector<float>> HostVector(const std::string& name, int64_t size) {
    TP_ASSIGN_OR_RETURN(TensorView t, s_.Find(name));
    if (t.shape != std::vector<int64_t>{size}) {
      return absl::InvalidArgumentError(StrCat("tensor ", name, " in ", s_.Describe(),
                                               ": expected a vector of ", size, " values"));
    }
    if (BlockElems(t.dtype) != 1 || IsIntegerDType(t.dtype)) {
      return absl::InvalidArgumentError(StrCat("tensor ", name, ": vector of type ",
                                               DTypeName(t.dtype), ", expected a float type"));
    }
    std::vector<float> out(size);
    DequantizeRow(t.dtype, t.data, out.data(), size);
    used_.Mark(name);
    return out;
  }

  // A vector role (a norm's weights, a bias) in f32: this rank's slice of it (a bias goes with
  // its output rows), a norm's weights as RMSNorm multiplies them (1 + w for a Hugging Face
  // Gemma file).
  absl::StatusOr<DeviceBuffer> Norm(TensorRole role, int64_t layer) {
    const std::string name = TensorName(c_, s_.format(), role, layer);
    TP_ASSIGN_OR_RETURN(std::vector<float> v, VectorValues(role, layer));
    const int64_t bytes = static_cast<int64_t>(v.size() * sizeof(float));
    out_->bytes_copied += bytes;
    out_->role_bytes[static_cast<int>(role)] += bytes;
    return Upload(b_, v.data(), bytes, name);
  }

  // Norm's values on the host.
  absl::StatusOr<std::vector<float>> VectorValues(TensorRole role, int64_t layer) {
    const std::string name = TensorName(c_, s_.format(), role, layer);
    const std::array<int64_t, 2> full = FullShape(c_, role);
    TP_ASSIGN_OR_RETURN(std::vector<float> v, HostVector(name, full[0] * full[1]));
    if (IsBiasRole(role)) {
      const TensorSlice slice = p_.Slice(role);
      v = std::vector<float>(v.begin() + slice.row_begin,
                             v.begin() + slice.row_begin + slice.num_rows);
    } else if (c_.hf_norm_weight_offset && s_.format() != CheckpointFormat::kGguf) {
      for (float& x : v) x += 1.0f;
    }
    return v;
  }

  // A checkpoint that ties the LM head to the embedding but still stores a head must store an
  // exact copy; anything else would be a head we silently do not apply.
  absl::Status CheckTiedCopy(const std::string& name) {
    TP_ASSIGN_OR_RETURN(TensorView head, s_.Find(name));
    const std::string embed = ModuleName(c_, s_.format(), TensorRole::kEmbedding, 0) + ".weight";
    TP_ASSIGN_OR_RETURN(TensorView table, s_.Find(embed));
    if (head.dtype != table.dtype || head.shape != table.shape || head.nbytes != table.nbytes ||
        std::memcmp(head.data, table.data, head.nbytes) != 0) {
      return absl::InvalidArgumentError(StrCat(
          "tensor ", name, " in ", s_.Describe(), ": the config ties the LM head to ", embed,
          " but this head differs from it; set tie_word_embeddings to false to serve it"));
    }
    used_.Mark(name);
    return absl::OkStatus();
  }

  const ModelSpec& c_;
  const WeightSource& s_;
  const QuantScheme& q_;
  const ShardingPlan& p_;
  const WeightFormats& f_;
  Backend& b_;
  LlamaWeights* out_;
  const bool mla_expanded_form_;  // hold kv_b too
  TensorUse used_;
  FusionFallbackLog fusion_log_;
};

}  // namespace

absl::StatusOr<LlamaWeights> LoadLlamaWeights(const ModelSpec& config,
                                              const WeightSource& source,
                                              const QuantScheme& scheme,
                                              const ShardingPlan& plan,
                                              const WeightFormats& formats, Backend& backend,
                                              bool mla_expanded_form) {
  LlamaWeights weights;
  Loader loader(config, source, scheme, plan, formats, backend, &weights, mla_expanded_form);
  TP_RETURN_IF_ERROR(loader.LoadAll());
  return weights;
}

}  // namespace tpserve
