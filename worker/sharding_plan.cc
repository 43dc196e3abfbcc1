#include "worker/sharding_plan.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_format.h"

namespace tpserve {
namespace {

absl::Status CheckDivisible(const char* field, int64_t value, int world_size) {
  if (value <= 0 || value % world_size != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor parallelism: %s = %d is not a positive multiple of world_size = %d", field,
        value, world_size));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ShardingPlan> ShardingPlan::Create(const LlamaConfig& config, ShardSpec shard) {
  if (shard.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("world_size = %d must be >= 1", shard.world_size));
  }
  if (shard.rank < 0 || shard.rank >= shard.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat("rank = %d is outside [0, %d)", shard.rank,
                                                      shard.world_size));
  }
  absl::Status s = CheckDivisible("num_heads", config.num_heads, shard.world_size);
  if (s.ok()) s = CheckDivisible("num_kv_heads", config.num_kv_heads, shard.world_size);
  if (s.ok()) s = CheckDivisible("intermediate_size", config.intermediate_size, shard.world_size);
  if (!s.ok()) return s;
  if (config.vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("vocab_size = %d must be positive", config.vocab_size));
  }
  ShardingPlan plan;
  plan.shard_ = shard;
  plan.num_local_heads_ = config.num_heads / shard.world_size;
  plan.num_local_kv_heads_ = config.num_kv_heads / shard.world_size;
  plan.local_intermediate_size_ = config.intermediate_size / shard.world_size;
  plan.vocab_rows_per_rank_ = (config.vocab_size + shard.world_size - 1) / shard.world_size;
  plan.first_vocab_row_ = std::min(config.vocab_size, shard.rank * plan.vocab_rows_per_rank_);
  plan.num_local_vocab_rows_ =
      std::min(config.vocab_size, plan.first_vocab_row_ + plan.vocab_rows_per_rank_) -
      plan.first_vocab_row_;
  return plan;
}

absl::StatusOr<WeightMatrix> SliceRows(const TensorView& t, int64_t row_begin, int64_t num_rows) {
  if (t.shape.size() != 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor %s: expected 2 dimensions for a matrix, got %d", t.name, t.shape.size()));
  }
  if (row_begin < 0 || num_rows < 0 || row_begin + num_rows > t.rows()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor %s: row slice [%d, %d) is outside its %d rows", t.name,
                        row_begin, row_begin + num_rows, t.rows()));
  }
  const int64_t row_bytes = RowBytes(t.dtype, t.cols()).value_or(0);
  return WeightMatrix{t.dtype, t.data + row_begin * row_bytes, num_rows, t.cols(), row_bytes};
}

absl::StatusOr<ShardedMatrix> CopyColumns(const TensorView& t, int64_t col_begin,
                                          int64_t num_cols) {
  if (t.shape.size() != 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor %s: expected 2 dimensions for a matrix, got %d", t.name, t.shape.size()));
  }
  if (col_begin < 0 || num_cols < 0 || col_begin + num_cols > t.cols()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor %s: column slice [%d, %d) is outside its %d columns", t.name,
                        col_begin, col_begin + num_cols, t.cols()));
  }
  const int64_t block = BlockElems(t.dtype);
  if (col_begin % block != 0 || num_cols % block != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor %s: column slice [%d, %d) is not aligned to %s blocks of %d elements", t.name,
        col_begin, col_begin + num_cols, std::string(DTypeName(t.dtype)), block));
  }
  const int64_t src_row_bytes = RowBytes(t.dtype, t.cols()).value_or(0);
  const int64_t dst_row_bytes = RowBytes(t.dtype, num_cols).value_or(0);
  const int64_t offset_bytes = col_begin / block * BlockBytes(t.dtype);
  ShardedMatrix out;
  out.owned_bytes = t.rows() * dst_row_bytes;
  out.owned = std::make_unique_for_overwrite<uint8_t[]>(out.owned_bytes);
  for (int64_t r = 0; r < t.rows(); ++r) {
    std::memcpy(out.owned.get() + r * dst_row_bytes, t.data + r * src_row_bytes + offset_bytes,
                dst_row_bytes);
  }
  out.matrix = WeightMatrix{t.dtype, out.owned.get(), t.rows(), num_cols, dst_row_bytes};
  return out;
}

}  // namespace tpserve
