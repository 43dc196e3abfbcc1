// The seam between checkpoint files and the model: a read-only set of named tensors that lives
// as long as the source (the bytes are usually an mmapped file).
//
//   TP_ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> src, OpenWeightSource(path));
//   TP_ASSIGN_OR_RETURN(TensorView wq, src->Find("blk.0.attn_q.weight"));
//
// Thread-safety: all methods are const and safe to call concurrently once opened.
#ifndef TPSERVE_FORMATS_WEIGHT_SOURCE_H_
#define TPSERVE_FORMATS_WEIGHT_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/dtype.h"

namespace tpserve {

// A tensor inside a checkpoint. `shape` is outermost-first (PyTorch order): a linear weight is
// {out_features, in_features} and rows of `in_features` elements are contiguous. (GGUF lists
// dims innermost-first; readers reverse them.) `data` points at `nbytes` bytes that stay valid
// while the owning WeightSource lives. Readers have already validated that
// nbytes == prod(shape[:-1]) * RowBytes(dtype, shape.back()) and that the bytes lie inside the file.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  int64_t nbytes = 0;

  int64_t rows() const;  // product of all dims but the last (1 for a vector)
  int64_t cols() const;  // the last dim
  int64_t num_elements() const;
};

// How tensors are named and laid out; the model maps its canonical names through this.
enum class CheckpointFormat {
  kGguf,         // llama.cpp names ("blk.0.attn_q.weight"); Q/K rows permuted for interleaved RoPE.
  kSafetensors,  // Hugging Face names ("model.layers.0.self_attn.q_proj.weight"); rotate-half RoPE.
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;

  virtual CheckpointFormat format() const = 0;
  // NOT_FOUND naming the tensor and the file when absent.
  virtual absl::StatusOr<TensorView> Find(std::string_view name) const = 0;
  virtual std::vector<std::string> TensorNames() const = 0;
  // Human-readable origin for error messages (a path, or several for sharded checkpoints).
  virtual std::string Describe() const = 0;
};

// Opens a `.gguf` file, a `.safetensors` file, a `model.safetensors.index.json`, or a directory
// holding one of those, choosing the reader by content. Every count, size and offset is checked.
absl::StatusOr<std::unique_ptr<WeightSource>> OpenWeightSource(const std::string& path);

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_WEIGHT_SOURCE_H_
