#include "kernels/cuda/weight_placement.h"

#include <memory>
#include <vector>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "kernels/check.h"
#include "kernels/cuda/mixed_gemm/prepare.h"

namespace tpserve::cuda {
namespace {

// Bytes of the stored arrays the int4 prepared form replaces: codes, f16 scales and zeros (the
// act-order permutation stays), by the stored form's own count.
int64_t Int4StoredBytesReplaced(const TensorFormat& format, int64_t rows, int64_t cols) {
  WeightMatrix stored;
  stored.format = format;
  stored.rows = rows;
  stored.cols = cols;
  stored.row_bytes = PackedRowBytes(format, cols);
  stored.scale_stride = cols / format.group_size;
  const WeightMatrixParts parts = WeightMatrixPartBytes(stored);
  return parts.values + parts.scales + parts.zeros;
}

// Uploads `bytes` of `src` into a buffer `out` owns; returns the device address.
absl::StatusOr<const void*> UploadInto(Backend& backend, const void* src, int64_t bytes,
                                       std::string_view what, const char* part,
                                       PlacedWeight* out) {
  TP_ASSIGN_OR_RETURN(DeviceBuffer buffer, Upload(backend, src, bytes, StrCat(what, " ", part)));
  const void* data = buffer.data();
  out->bytes_copied += bytes;
  out->buffers.push_back(std::move(buffer));
  return data;
}

absl::StatusOr<PlacedWeight> PlaceInt4(Backend& backend, const HostMatrix& host,
                                       std::string_view what) {
  const WeightMatrix& w = host.matrix;
  const PreparedInt4 p = PrepareInt4(w);
  const MixedGemmPreparedBytes bytes = PreparedBytes(w.format, w.rows, w.cols);
  TP_CHECK(static_cast<int64_t>(p.codes.size()) == bytes.codes &&
               static_cast<int64_t>(p.scales.size() * 4) == bytes.scales &&
               static_cast<int64_t>(p.offsets.size() * 4) == bytes.offsets,
           "PrepareInt4 and PreparedBytes disagree");
  PlacedWeight out;
  out.matrix = w;
  // Nothing may read the stored form: it is not on the device.
  out.matrix.data = nullptr;
  out.matrix.scales = nullptr;
  out.matrix.zeros = nullptr;
  auto form = std::make_shared<MixedGemmWeight>(p.View());
  TP_ASSIGN_OR_RETURN(form->codes,
                      UploadInto(backend, p.codes.data(), bytes.codes, what, "int4 codes", &out));
  TP_ASSIGN_OR_RETURN(const void* scales, UploadInto(backend, p.scales.data(), bytes.scales, what,
                                                     "f32 group scales", &out));
  TP_ASSIGN_OR_RETURN(const void* offsets, UploadInto(backend, p.offsets.data(), bytes.offsets,
                                                      what, "f32 group offsets", &out));
  form->scales = static_cast<const float*>(scales);
  form->offsets = static_cast<const float*>(offsets);
  if (w.input_perm != nullptr) {  // act-order: x is gathered by it before the GEMM
    TP_ASSIGN_OR_RETURN(const void* perm,
                        UploadInto(backend, w.input_perm, WeightMatrixPartBytes(w).perm, what,
                                   "permutation", &out));
    out.matrix.input_perm = static_cast<const int32_t*>(perm);
  }
  out.matrix.prepared = form.get();
  out.prepared = std::move(form);
  return out;
}

absl::StatusOr<PlacedWeight> PlaceFp8(Backend& backend, const HostMatrix& host,
                                      std::string_view what) {
  TP_ASSIGN_OR_RETURN(PlacedWeight out, PlaceStoredWeight(backend, host, what));
  const std::vector<float> scales = PrepareFp8Scales(host.matrix);
  const WeightMatrix& w = host.matrix;
  const int64_t bytes = PreparedBytes(w.format, w.rows, w.cols).scales;
  TP_CHECK(static_cast<int64_t>(scales.size() * 4) == bytes,
           "PrepareFp8Scales and PreparedBytes disagree");
  TP_ASSIGN_OR_RETURN(const void* device_scales,
                      UploadInto(backend, scales.data(), bytes, what, "f32 scales per 128 columns",
                                 &out));
  // The codes the GEMM reads are the stored ones, where PlaceStoredWeight put them.
  auto form = std::make_shared<MixedGemmWeight>(
      Fp8MixedGemmWeight(out.matrix, static_cast<const float*>(device_scales)));
  out.matrix.prepared = form.get();
  out.prepared = std::move(form);
  return out;
}

}  // namespace

bool MixedGemmRunsOn(int compute_capability) { return compute_capability == 90; }

Backend::ProjectionFusion CudaProjectionFusion() {
  // MixedGemmTakesWeight's n % 16: parts of whole 16-row tiles make a stack it takes exactly
  // when it takes them.
  return {.fuses = true, .part_row_multiple = 16, .split_launches = 1};
}

CudaWeightForm CudaWeightFormFor(const TensorFormat& format, int64_t rows, int64_t cols,
                                 WeightUse use, int compute_capability) {
  if (use == WeightUse::kTable || !MixedGemmRunsOn(compute_capability) ||
      !MixedGemmTakesWeight(format, rows, cols)) {
    return CudaWeightForm::kStored;
  }
  return format.kind == FormatKind::kInt4Group ? CudaWeightForm::kInt4Mixed
                                               : CudaWeightForm::kFp8Mixed;
}

int64_t CudaWeightExtraBytes(const TensorFormat& format, int64_t rows, int64_t cols,
                             WeightUse use, int compute_capability) {
  switch (CudaWeightFormFor(format, rows, cols, use, compute_capability)) {
    case CudaWeightForm::kStored: return 0;
    case CudaWeightForm::kInt4Mixed:
      return PreparedBytes(format, rows, cols).total() -
             Int4StoredBytesReplaced(format, rows, cols);
    case CudaWeightForm::kFp8Mixed: return PreparedBytes(format, rows, cols).total();
  }
  return 0;
}

const MixedGemmWeight* MixedGemmForm(const WeightMatrix& w) {
  return static_cast<const MixedGemmWeight*>(w.prepared);
}

absl::StatusOr<PlacedWeight> PlaceCudaWeight(Backend& backend, const HostMatrix& host,
                                             WeightUse use, int compute_capability,
                                             std::string_view what) {
  const WeightMatrix& w = host.matrix;
  switch (CudaWeightFormFor(w.format, w.rows, w.cols, use, compute_capability)) {
    case CudaWeightForm::kStored: return PlaceStoredWeight(backend, host, what);
    case CudaWeightForm::kInt4Mixed: return PlaceInt4(backend, host, what);
    case CudaWeightForm::kFp8Mixed: return PlaceFp8(backend, host, what);
  }
  return absl::InternalError(StrCat(what, ": no CUDA weight form"));
}

}  // namespace tpserve::cuda
