#include "kernels/backend.h"

#include "base/str_cat.h"
#include "base/status_macros.h"
#include "kernels/check.h"
#include "kernels/cuda/row_sampling.h"

namespace tpserve {

std::string_view BackendKindName(BackendKind kind) {
  return kind == BackendKind::kCuda ? "cuda" : "cpu";
}

absl::StatusOr<BackendKind> ParseBackendKind(std::string_view name) {
  if (name == "cpu") return BackendKind::kCpu;
  if (name == "cuda") return BackendKind::kCuda;
  return absl::InvalidArgumentError(
      StrCat("backend \"", name, "\" is not one of: cpu, cuda"));
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    owner_ = other.owner_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.owner_ = nullptr;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (owner_ != nullptr && data_ != nullptr) owner_->Free(data_, bytes_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

std::string Backend::AttentionExtrasString(const AttentionParams& params) {
  std::string s;
  if (params.attention_chunk > 0) {
    s = StrCat("chunked attention (chunks of ", params.attention_chunk, " tokens)");
  }
  if (params.temperature_floor > 0) {
    s += StrCat(s.empty() ? "" : ", ", "attention temperature tuning (floor ",
                params.temperature_floor, ", scale ", params.temperature_scale, ")");
  }
  return s;
}

int64_t ActivationBytes(const Backend& backend) {
  return BlockBytes(backend.activation_dtype());
}

absl::StatusOr<DeviceBuffer> Upload(Backend& backend, const void* src, int64_t bytes,
                                    std::string_view what) {
  TP_ASSIGN_OR_RETURN(DeviceBuffer buffer, backend.Allocate(bytes, what));
  backend.CopyToDevice(buffer.data(), src, bytes);
  return buffer;
}

absl::StatusOr<PlacedWeight> PlaceStoredWeight(Backend& backend, const HostMatrix& host,
                                               std::string_view what) {
  PlacedWeight out;
  out.matrix = host.matrix;
  WeightMatrix& m = out.matrix;
  const WeightMatrixParts parts = WeightMatrixPartBytes(m);
  auto place = [&](const void* src, bool owned, int64_t bytes,
                   const char* part) -> absl::StatusOr<const void*> {
    if (src == nullptr || bytes == 0) return src;
    if (backend.host_memory() && !owned) {
      out.bytes_viewed += bytes;
      return src;
    }
    TP_ASSIGN_OR_RETURN(DeviceBuffer buffer, Upload(backend, src, bytes, StrCat(what, " ", part)));
    const void* data = buffer.data();
    out.bytes_copied += bytes;
    out.buffers.push_back(std::move(buffer));
    return data;
  };
  TP_ASSIGN_OR_RETURN(m.data, place(m.data, !host.values.empty(), parts.values, "values"));
  TP_ASSIGN_OR_RETURN(m.scales, place(m.scales, !host.scales.empty(), parts.scales, "scales"));
  TP_ASSIGN_OR_RETURN(m.zeros, place(m.zeros, !host.zeros.empty(), parts.zeros, "zeros"));
  TP_ASSIGN_OR_RETURN(const void* perm,
                      place(m.input_perm, !host.perm.empty(), parts.perm, "permutation"));
  m.input_perm = static_cast<const int32_t*>(perm);
  return out;
}

absl::Status CheckSampleRows(int64_t vocab, int64_t per_rank, int64_t layout_rows,
                             const SamplingRows& rows, size_t out_rows) {
  const int64_t n = static_cast<int64_t>(rows.rows.size());
  if (out_rows != rows.rows.size()) {
    return absl::InvalidArgumentError(
        StrCat("SampleRows: ", out_rows, " results for ", n, " rows"));
  }
  if (vocab <= 0 || per_rank <= 0 || layout_rows < n) {
    return absl::InvalidArgumentError(StrCat("SampleRows: ", n, " rows of vocab ", vocab,
                                             " in a layout of ", layout_rows,
                                             " rows and slices of ", per_rank, " ids"));
  }
  if (rows.bias_ids.size() != rows.bias_values.size() ||
      rows.penalty_ids.size() != rows.penalty_counts.size()) {
    return absl::InvalidArgumentError(StrCat(
        "SampleRows: ", rows.bias_ids.size(), " bias ids with ", rows.bias_values.size(),
        " values, ", rows.penalty_ids.size(), " penalty ids with ", rows.penalty_counts.size(),
        " counts"));
  }
  const auto range = [](int64_t begin, int64_t end, size_t size) {
    return begin >= 0 && begin <= end && end <= static_cast<int64_t>(size);
  };
  for (int64_t r = 0; r < n; ++r) {
    const SamplingRow& row = rows.rows[r];
    const bool ok =
        range(row.bias_begin, row.bias_end, rows.bias_ids.size()) &&
        range(row.penalty_begin, row.penalty_end, rows.penalty_ids.size()) &&
        (row.mask_begin < 0 || range(row.mask_begin, int64_t{row.mask_begin} + row.mask_word_count,
                                     rows.mask_words.size())) &&
        row.top_n >= 0 && row.top_n <= kMaxRowTopLogprobs &&
        (row.kind != RowKind::kScore || (row.scored_id >= 0 && row.scored_id < vocab));
    if (!ok) {
      return absl::InvalidArgumentError(StrCat(
          "SampleRows: row ", r, " (bias [", row.bias_begin, ", ", row.bias_end, "), penalties [",
          row.penalty_begin, ", ", row.penalty_end, "), mask ", row.mask_begin, " + ",
          row.mask_word_count, ", top_n ", row.top_n, ", scored id ", row.scored_id,
          ") reaches outside its arrays (", rows.bias_ids.size(), " biases, ",
          rows.penalty_ids.size(), " penalties, ", rows.mask_words.size(),
          " mask words, vocab ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status Backend::SampleRows(float* logits, int64_t vocab, int64_t per_rank,
                                 int64_t layout_rows, const SamplingRows& rows,
                                 absl::Span<RowSample> out) {
  if (!host_memory()) {
    return absl::UnimplementedError(StrCat("SampleRows: backend ", name(), " does not sample"));
  }
  TP_RETURN_IF_ERROR(CheckSampleRows(vocab, per_rank, layout_rows, rows, out.size()));
  SampleRowsOnHost(logits, vocab, per_rank, layout_rows, rows, out.data());
  return absl::OkStatus();
}

absl::StatusOr<PlacedWeight> Backend::PlaceWeight(const HostMatrix& host, WeightUse use,
                                                  std::string_view what) {
  (void)use;  // the stored form serves every use
  return PlaceStoredWeight(*this, host, what);
}

void Backend::RopePart(void*, int64_t, int64_t, int64_t, int64_t, const float*, RopeLayout) {
  TP_CHECK(false, "RopePart: this backend has no multi-head latent attention");
}

void Backend::PrefillAttention(const void*, const void*, const void*, int64_t, int64_t, int64_t,
                               float, void*) {
  TP_CHECK(false, "PrefillAttention: this backend has no multi-head latent attention");
}

}  // namespace tpserve
