// One weight matrix as a checkpoint stores it (a plain tensor, or the several tensors of a
// quantized linear: values, scales, zero points, group index), and reading one rank's slice of
// it into the engine's layouts (kernels/weight_matrix.h), touching only that slice's bytes.
//
//   TensorUse used;
//   TP_ASSIGN_OR_RETURN(StoredMatrix q, StoredMatrix::Open(source, scheme,
//       CheckpointNames::ForRole(source.format(), TensorRole::kQ, 0), 576, 576, &used));
//   TP_ASSIGN_OR_RETURN(HostMatrix mine, q.Read(plan.Slice(TensorRole::kQ)));
//
// Thread-compatible; Read is const and may run concurrently once opened.
#ifndef TPSERVE_CHECKPOINT_STORED_MATRIX_H_
#define TPSERVE_CHECKPOINT_STORED_MATRIX_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/quant_scheme.h"
#include "formats/tensor_format.h"
#include "formats/weight_source.h"
#include "kernels/weight_matrix.h"
#include "model/sharding.h"
#include "model/weight_formats.h"

namespace tpserve {

// The checkpoint tensors a loader has consumed; whatever is left over is an error (a scale or
// zero point nobody applied would serve wrong answers as right ones).
class TensorUse {
 public:
  void Mark(const std::string& name) { used_.insert(name); }
  bool Contains(const std::string& name) const { return used_.count(name) > 0; }
  // Every tensor of `module` ("model.layers.3.mlp.experts.17": module + ".weight", its
  // scales, ...) is another rank's to load and check (an expert placed on another rank).
  void ExcuseModule(const std::string& module) { excused_modules_.insert(module); }
  // Every tensor whose name starts with `prefix` belongs to a part of the checkpoint that is
  // not served (a multimodal checkpoint's vision tower: ModelSpec::hf_unserved_weight_prefixes).
  void ExcusePrefix(const std::string& prefix) { excused_prefixes_.push_back(prefix); }
  // INVALID_ARGUMENT naming the first tensor of `source` that was not consumed (nor excused).
  absl::Status CheckAllUsed(const WeightSource& source) const;

 private:
  std::set<std::string> used_;
  std::set<std::string> excused_modules_;
  std::vector<std::string> excused_prefixes_;
};

// The name of the module that holds `role` (layer `layer`) in a checkpoint of `format`:
// "blk.3.attn_q" (GGUF) or "model.layers.3.self_attn.q_proj" (Hugging Face); its tensors are
// this plus ".weight", ".weight_scale", ".qweight", ... (".bias" for the bias roles). The
// description matters where families name one role differently: Hugging Face Gemma calls its
// pre-MLP norm "pre_feedforward_layernorm" and its post-attention norm
// "post_attention_layernorm", Llama's name for the pre-MLP one. An expert role names expert
// `expert`'s module in a Hugging Face checkpoint ("model.layers.3.mlp.experts.5.up_proj") and
// the stacked tensor of every expert in a GGUF file ("blk.3.ffn_up_exps"), or, for Llama 4's
// checkpoints (MoeSpec::HfNames::kFusedFeedForward), the whole name of the tensor holding every
// expert ("model.layers.3.feed_forward.experts.gate_up_proj", gate's and up's; no suffix).
std::string ModuleName(const ModelSpec& spec, CheckpointFormat format, TensorRole role,
                       int64_t layer, int64_t expert = 0);
// What every tensor of layer `layer` starts with in a checkpoint of `format`: "blk.3." (GGUF) or
// "model.layers.3." under the checkpoint's prefix (Hugging Face).
std::string LayerPrefix(const ModelSpec& spec, CheckpointFormat format, int64_t layer);
// The whole name of a vector role's tensor (norms, biases): ModuleName plus ".weight" or
// ".bias".
std::string TensorName(const ModelSpec& spec, CheckpointFormat format, TensorRole role,
                       int64_t layer);

// Layouts read (per linear `P`, W = [rows = out, cols = in]; shapes outermost first):
//   plain        P.weight [out, in], any float or GGML type                -> that format
//   fp8          P.weight F8_E4M3 [out, in], P.weight_scale F32/BF16/F16 [out, 1]
//                (+ fbgemm's optional P.input_scale_ub F32 [1])             -> fp8
//   fp8-block    P.weight F8_E4M3, P.weight_scale [ceil(out/128), ceil(in/128)]
//                                                                           -> fp8-block
//   awq          P.qweight I32 [in, out/8] (nibble i of word [k][c] is row 8c + (0 2 4 6 1 3
//                5 7)[i]), P.qzeros I32 [in/G, out/8] (same order), P.scales F16 [in/G, out]
//                                                                           -> int4-g<G>
//   gptq (v1)    P.qweight I32 [in/8, out] (nibble i of word [r][o] is column 8r + i),
//                P.qzeros I32 [in/G, out/8] holding zero - 1 (nibble i: row 8c + i),
//                P.scales F16 [in/G, out], P.g_idx I32 [in]                 -> int4-g<G>
// Nibble i is bits 4i..4i+3 of the little-endian word. int4 values are (q - zero) * scale
// exactly as the checkpoint means them; a GPTQ g_idx that is not sequential (act-order) is
// read as input_perm (checkpoint/act_order.h).
class StoredMatrix {
 public:
  // Finds the tensors of `module` under `scheme` (plain when the scheme leaves the module
  // unquantized), checks that together they describe a [rows, cols] matrix (dtypes, exact
  // shapes, scale and zero counts, packed sizes that divide, g_idx values and group sizes),
  // and marks them in `used`. NOT_FOUND naming the tensor when one is missing;
  // INVALID_ARGUMENT naming tensor, value and bound when one is malformed; UNIMPLEMENTED for
  // a dtype no format here covers.
  static absl::StatusOr<StoredMatrix> Open(const WeightSource& source, const QuantScheme& scheme,
                                           const std::string& module, int64_t rows, int64_t cols,
                                           TensorUse* used);

  // The matrix of `role` in layer `layer` of the model `spec` describes (expert `expert` of an
  // expert role), wherever the checkpoint keeps it: its own tensors (Open), its rows of a
  // GGUF stacked expert tensor ("blk.N.ffn_up_exps.weight" [experts, rows, cols], a plain
  // float or GGML type), or its columns of a Llama 4 fused expert tensor, stored transposed
  // (gate_up_proj [experts, cols, 2 * rows]: gate's columns then up's; down_proj [experts,
  // cols, rows]; F32, F16 or BF16, read by copying the slice), whose shape and size are
  // checked before any offset is taken. MLA's up-projections (IsMlaUpRole): k_b and v_b as a
  // GGUF file stores them per head (attn_k_b [heads, kv_lora, nope] read as [heads * kv_lora,
  // nope]; attn_v_b likewise), and otherwise, for all three roles, the tensor holding both
  // (kv_b_proj, attn_kv_b: [heads * (nope + v), kv_lora]), from which the loader cuts them.
  static absl::StatusOr<StoredMatrix> OpenRole(const WeightSource& source,
                                               const QuantScheme& scheme, const ModelSpec& spec,
                                               TensorRole role, int64_t layer, int64_t expert,
                                               TensorUse* used);

  // The format of the stored values, in the engine's terms.
  const TensorFormat& format() const { return format_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  const std::string& module() const { return module_; }

  // The slice in format(), converting only the slice's bytes: a view into the checkpoint
  // where its bytes already are the layout (whole rows of a plain or fp8 tensor, F32 scales),
  // otherwise a copy. INVALID_ARGUMENT naming the tensor when the slice cuts a block, group or
  // tile (act-order: when a group is not whole in the slice's columns).
  absl::StatusOr<HostMatrix> Read(const TensorSlice& slice) const;

 private:
  enum class Layout : uint8_t { kPlain, kFp8Channel, kFp8Block, kAwq, kGptq, kTransposed };

  StoredMatrix() = default;
  absl::Status OpenPlain(const WeightSource& source, TensorUse* used);
  // values_ = a plain tensor's view, checked to be [rows_, cols_] of a float or GGML type.
  absl::Status UsePlain(TensorView values, const WeightSource& source);
  absl::Status OpenFp8(const WeightSource& source, TensorUse* used);   // stored_matrix_fp8.cc
  absl::Status OpenInt4(const WeightSource& source, TensorUse* used);  // stored_matrix_int4.cc
  absl::StatusOr<HostMatrix> ReadPlain(const TensorSlice& slice) const;
  absl::StatusOr<HostMatrix> ReadFp8(const TensorSlice& slice) const;
  absl::StatusOr<HostMatrix> ReadInt4(const TensorSlice& slice) const;
  // Layout::kTransposed: values_ is one expert's [cols, stored_rows] slab; the matrix's row r is
  // its column first_stored_row_ + r.
  static absl::StatusOr<StoredMatrix> OpenFusedExpert(const WeightSource& source,
                                                      const QuantScheme& scheme,
                                                      const ModelSpec& spec, TensorRole role,
                                                      int64_t layer, int64_t expert,
                                                      TensorUse* used);
  absl::StatusOr<HostMatrix> ReadTransposed(const TensorSlice& slice) const;
  // Tensor `name`, checked to be `want` ([count, rows, cols]; `leading` names the count).
  static absl::StatusOr<TensorView> FindStacked(const WeightSource& source,
                                                const std::string& name,
                                                const std::vector<int64_t>& want,
                                                std::string_view leading);
  // A plain matrix over `view` (shape [rows, cols]) called `module`, tensor `name` marked used.
  static absl::StatusOr<StoredMatrix> PlainOver(TensorView view, const std::string& module,
                                                const QuantScheme& scheme, const std::string& name,
                                                const WeightSource& source, TensorUse* used);

  std::string module_;
  QuantScheme scheme_;
  Layout layout_ = Layout::kPlain;
  TensorFormat format_;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  // The tensors that make up the matrix (unused ones stay empty).
  TensorView values_;       // weight, or qweight
  TensorView scales_;       // weight_scale, or scales
  TensorView zeros_;        // qzeros
  // GPTQ g_idx when it is not sequential (act-order); empty otherwise.
  std::vector<int32_t> group_index_;
  float activation_scale_ub_ = 0.0f;
  int64_t first_stored_row_ = 0;  // Layout::kTransposed
};

// `src` re-encoded in `target` (quantize on load), 128 rows at a time so that no f32 copy of a
// large slice is ever held. Returns src itself when the formats are equal.
// INVALID_ARGUMENT when src's columns do not fit `target` (e.g. not a whole number of groups).
absl::StatusOr<HostMatrix> ConvertMatrix(HostMatrix src, const TensorFormat& target,
                                         std::string_view what);

}  // namespace tpserve

#endif  // TPSERVE_CHECKPOINT_STORED_MATRIX_H_
