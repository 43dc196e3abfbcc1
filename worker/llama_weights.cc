#include "worker/llama_weights.h"

#include <cstring>

#include "base/status_macros.h"
#include "checkpoint/stored_matrix.h"
#include "formats/str_cat.h"

namespace tpserve {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Bytes of each side array a matrix of this shape and format carries.
struct SideBytes {
  int64_t scales = 0;
  int64_t zeros = 0;
  int64_t perm = 0;
};

SideBytes SideBytesOf(const WeightMatrix& m) {
  SideBytes b;
  switch (m.format.kind) {
    case FormatKind::kFp8PerChannel:
      b.scales = m.rows * 4;
      break;
    case FormatKind::kFp8Block128:
      b.scales = CeilDiv(m.rows, 128) * m.scale_stride * 4;
      break;
    case FormatKind::kInt4Group:
      b.scales = b.zeros = m.rows * m.scale_stride * 2;
      if (m.input_perm != nullptr) b.perm = m.cols * 4;
      break;
    default:
      break;
  }
  return b;
}

class Loader {
 public:
  Loader(const LlamaConfig& c, const WeightSource& s, const QuantScheme& q,
         const ShardingPlan& p, const WeightFormats& f, Backend& b, LlamaWeights* out)
      : c_(c), s_(s), q_(q), p_(p), f_(f), b_(b), out_(out) {}

  absl::Status LoadAll() {
    TP_ASSIGN_OR_RETURN(out_->embedding, Matrix(TensorRole::kEmbedding, 0));
    const std::string head = ModuleName(s_.format(), TensorRole::kLmHead, 0);
    const bool has_head = s_.Find(head + ".weight").ok() || s_.Find(head + ".qweight").ok();
    out_->lm_head_tied = c_.tie_word_embeddings || !has_head;
    if (!out_->lm_head_tied) {
      TP_ASSIGN_OR_RETURN(out_->lm_head, Matrix(TensorRole::kLmHead, 0));
    } else if (has_head) {
      TP_RETURN_IF_ERROR(CheckTiedCopy(head + ".weight"));
    }
    TP_ASSIGN_OR_RETURN(out_->output_norm, Norm(TensorRole::kFinalNorm, 0));
    const std::string rope = "rope_freqs.weight";
    if (s_.format() == CheckpointFormat::kGguf && s_.Find(rope).ok()) {
      TP_ASSIGN_OR_RETURN(out_->rope_freq_factors, HostVector(rope, c_.head_dim / 2));
    }
    for (int64_t l = 0; l < c_.num_layers; ++l) {
      LlamaLayerWeights w;
      TP_ASSIGN_OR_RETURN(w.attn_norm, Norm(TensorRole::kAttnNorm, l));
      TP_ASSIGN_OR_RETURN(w.ffn_norm, Norm(TensorRole::kFfnNorm, l));
      TP_ASSIGN_OR_RETURN(w.q, Matrix(TensorRole::kQ, l));
      TP_ASSIGN_OR_RETURN(w.k, Matrix(TensorRole::kK, l));
      TP_ASSIGN_OR_RETURN(w.v, Matrix(TensorRole::kV, l));
      TP_ASSIGN_OR_RETURN(w.o, Matrix(TensorRole::kO, l));
      TP_ASSIGN_OR_RETURN(w.gate, Matrix(TensorRole::kGate, l));
      TP_ASSIGN_OR_RETURN(w.up, Matrix(TensorRole::kUp, l));
      TP_ASSIGN_OR_RETURN(w.down, Matrix(TensorRole::kDown, l));
      out_->layers.push_back(std::move(w));
    }
    return used_.CheckAllUsed(s_);
  }

 private:
  // One role's slice: read in the checkpoint's layout, converted to the target format, placed.
  absl::StatusOr<LoadedMatrix> Matrix(TensorRole role, int64_t layer) {
    const std::string module = ModuleName(s_.format(), role, layer);
    const std::array<int64_t, 2> full = FullShape(c_, role);
    TP_ASSIGN_OR_RETURN(StoredMatrix stored,
                        StoredMatrix::Open(s_, q_, module, full[0], full[1], &used_));
    TP_ASSIGN_OR_RETURN(HostMatrix host, stored.Read(p_.Slice(role)));
    TP_ASSIGN_OR_RETURN(host, ConvertMatrix(std::move(host), f_.At(role, layer), module));
    if (!b_.SupportsWeight(host.matrix.format)) {
      return absl::UnimplementedError(StrCat(module, ": format ",
                                             TensorFormatName(host.matrix.format),
                                             " is not supported by the ", b_.name(), " backend"));
    }
    TP_ASSIGN_OR_RETURN(LoadedMatrix loaded, Place(std::move(host), module));
    out_->role_bytes[static_cast<int>(role)] += WeightMatrixBytes(loaded.matrix);
    return loaded;
  }

  // Copies what the backend cannot read in place into backend memory and points the matrix at
  // it; on a host backend, views of the checkpoint stay views.
  absl::StatusOr<LoadedMatrix> Place(HostMatrix host, const std::string& module) {
    LoadedMatrix out;
    out.matrix = host.matrix;
    WeightMatrix& m = out.matrix;
    const SideBytes side = SideBytesOf(m);
    const bool in_place = b_.host_memory();
    auto place = [&](const void* src, bool owned, int64_t bytes,
                     const char* what) -> absl::StatusOr<const void*> {
      if (src == nullptr || bytes == 0) return src;
      if (in_place && !owned) {
        out_->bytes_viewed += bytes;
        return src;
      }
      TP_ASSIGN_OR_RETURN(DeviceBuffer buffer, Upload(b_, src, bytes, StrCat(module, " ", what)));
      const void* data = buffer.data();
      out_->bytes_copied += bytes;
      out.buffers.push_back(std::move(buffer));
      return data;
    };
    TP_ASSIGN_OR_RETURN(m.data, place(m.data, !host.values.empty(), m.rows * m.row_bytes,
                                      "values"));
    TP_ASSIGN_OR_RETURN(m.scales, place(m.scales, !host.scales.empty(), side.scales, "scales"));
    TP_ASSIGN_OR_RETURN(m.zeros, place(m.zeros, !host.zeros.empty(), side.zeros, "zeros"));
    TP_ASSIGN_OR_RETURN(const void* perm,
                        place(m.input_perm, !host.perm.empty(), side.perm, "permutation"));
    m.input_perm = static_cast<const int32_t*>(perm);
    return out;
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

  absl::StatusOr<DeviceBuffer> Norm(TensorRole role, int64_t layer) {
    const std::string name = ModuleName(s_.format(), role, layer) + ".weight";
    TP_ASSIGN_OR_RETURN(std::vector<float> v, HostVector(name, c_.hidden_size));
    const int64_t bytes = c_.hidden_size * static_cast<int64_t>(sizeof(float));
    out_->bytes_copied += bytes;
    out_->role_bytes[static_cast<int>(role)] += bytes;
    return Upload(b_, v.data(), bytes, name);
  }

  // A checkpoint that ties the LM head to the embedding but still stores a head must store an
  // exact copy; anything else would be a head we silently do not apply.
  absl::Status CheckTiedCopy(const std::string& name) {
    TP_ASSIGN_OR_RETURN(TensorView head, s_.Find(name));
    const std::string embed = ModuleName(s_.format(), TensorRole::kEmbedding, 0) + ".weight";
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

  const LlamaConfig& c_;
  const WeightSource& s_;
  const QuantScheme& q_;
  const ShardingPlan& p_;
  const WeightFormats& f_;
  Backend& b_;
  LlamaWeights* out_;
  TensorUse used_;
};

}  // namespace

absl::StatusOr<LlamaWeights> LoadLlamaWeights(const LlamaConfig& config,
                                              const WeightSource& source,
                                              const QuantScheme& scheme,
                                              const ShardingPlan& plan,
                                              const WeightFormats& formats, Backend& backend) {
  LlamaWeights weights;
  Loader loader(config, source, scheme, plan, formats, backend, &weights);
  TP_RETURN_IF_ERROR(loader.LoadAll());
  return weights;
}

}  // namespace tpserve
