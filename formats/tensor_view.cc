#include "formats/weight_source.h"

namespace tpserve {

int64_t TensorView::rows() const {
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  return rows;
}

int64_t TensorView::cols() const { return shape.empty() ? 1 : shape.back(); }

int64_t TensorView::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace tpserve
