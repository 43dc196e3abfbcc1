#include "checkpoint/testing/in_memory_weight_source.h"

#include "absl/status/status.h"
#include "kernels/check.h"
#include "kernels/quantize.h"

namespace tpserve {

void InMemoryWeightSource::AddFloat(const std::string& name, std::vector<int64_t> shape,
                                    const std::vector<float>& values, DType dtype) {
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  const int64_t cols = shape.back();
  TP_CHECK(static_cast<int64_t>(values.size()) == rows * cols, "values do not match the shape");
  tensors_[name] =
      Stored{dtype, std::move(shape), QuantizeMatrix(dtype, values.data(), rows, cols)};
}

void InMemoryWeightSource::AddRaw(const std::string& name, std::vector<int64_t> shape,
                                  DType dtype, std::vector<uint8_t> bytes) {
  tensors_[name] = Stored{dtype, std::move(shape), std::move(bytes)};
}

absl::StatusOr<TensorView> InMemoryWeightSource::Find(std::string_view name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError("tensor " + std::string(name) + " not found in " + Describe());
  }
  TensorView view;
  view.name = it->first;
  view.dtype = it->second.dtype;
  view.shape = it->second.shape;
  view.data = it->second.bytes.data();
  view.nbytes = static_cast<int64_t>(it->second.bytes.size());
  return view;
}

std::vector<std::string> InMemoryWeightSource::TensorNames() const {
  std::vector<std::string> names;
  for (const auto& [name, stored] : tensors_) names.push_back(name);
  return names;
}

}  // namespace tpserve
