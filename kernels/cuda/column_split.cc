#include "kernels/cuda/column_split.h"

#include <cstring>

#include "kernels/check.h"

namespace tpserve::cuda {
namespace {

bool Divides(int64_t unit, int64_t v) { return v % unit == 0; }

}  // namespace

ColumnSplit PlanColumnSplit(const void* src, absl::Span<void* const> dst,
                            absl::Span<const int64_t> cols, int64_t elem_bytes) {
  TP_CHECK(!dst.empty() && dst.size() <= kMaxSplitOutputs && dst.size() == cols.size(),
           "PlanColumnSplit: 1 to 4 outputs, one width each");
  TP_CHECK(elem_bytes > 0, "PlanColumnSplit: element bytes");
  ColumnSplit s;
  s.num_outputs = static_cast<int>(dst.size());
  int64_t row_bytes = 0;
  for (int64_t c : cols) {
    TP_CHECK(c > 0, "PlanColumnSplit: an empty output");
    row_bytes += c * elem_bytes;
  }
  s.unit_bytes = 16;
  while (s.unit_bytes > 1) {
    bool fits = Divides(s.unit_bytes, reinterpret_cast<uintptr_t>(src));
    for (size_t i = 0; i < dst.size(); ++i) {
      fits &= Divides(s.unit_bytes, reinterpret_cast<uintptr_t>(dst[i])) &&
              Divides(s.unit_bytes, cols[i] * elem_bytes);
    }
    if (fits) break;
    s.unit_bytes /= 2;
  }
  s.row_units = row_bytes / s.unit_bytes;
  int64_t first = 0;
  for (size_t i = 0; i < dst.size(); ++i) {
    s.dst[i] = dst[i];
    s.first_unit[i] = first;
    s.units[i] = cols[i] * elem_bytes / s.unit_bytes;
    first += s.units[i];
  }
  return s;
}

void SplitColumnsOnHost(const ColumnSplit& s, const void* src, int64_t rows) {
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t u = 0; u < s.row_units; ++u) {
      const int i = SplitOutputOf(s, u);
      auto* out =
          static_cast<uint8_t*>(s.dst[i]) + (r * s.units[i] + (u - s.first_unit[i])) * s.unit_bytes;
      std::memcpy(out, in + (r * s.row_units + u) * s.unit_bytes, s.unit_bytes);
    }
  }
}

}  // namespace tpserve::cuda
