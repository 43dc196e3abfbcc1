// A WeightSource over tensors held in memory, for tests: build a synthetic checkpoint in any
// format and type without touching the file system.
//
//   InMemoryWeightSource src(CheckpointFormat::kGguf);
//   src.AddFloat("blk.0.attn_q.weight", {64, 64}, values, DType::kQ4_1);
//
// Threading: add everything first; afterwards the const WeightSource methods are thread-safe.
#ifndef TPSERVE_CHECKPOINT_TESTING_IN_MEMORY_WEIGHT_SOURCE_H_
#define TPSERVE_CHECKPOINT_TESTING_IN_MEMORY_WEIGHT_SOURCE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "formats/weight_source.h"

namespace tpserve {

class InMemoryWeightSource final : public WeightSource {
 public:
  explicit InMemoryWeightSource(CheckpointFormat format) : format_(format) {}

  // Stores `values` (row-major, outermost-first `shape`) encoded as `dtype`.
  // REQUIRES: the last dim is a multiple of BlockElems(dtype); values has prod(shape) entries.
  void AddFloat(const std::string& name, std::vector<int64_t> shape,
                const std::vector<float>& values, DType dtype);
  // Stores `bytes` as they are (packed words, or deliberately malformed tensors), with no
  // check that they fit `shape` and `dtype`.
  void AddRaw(const std::string& name, std::vector<int64_t> shape, DType dtype,
              std::vector<uint8_t> bytes);
  void Remove(const std::string& name) { tensors_.erase(name); }

  CheckpointFormat format() const override { return format_; }
  absl::StatusOr<TensorView> Find(std::string_view name) const override;
  std::vector<std::string> TensorNames() const override;
  std::string Describe() const override { return "in-memory checkpoint"; }

 private:
  struct Stored {
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  CheckpointFormat format_;
  std::map<std::string, Stored, std::less<>> tensors_;
};

}  // namespace tpserve

#endif  // TPSERVE_CHECKPOINT_TESTING_IN_MEMORY_WEIGHT_SOURCE_H_
