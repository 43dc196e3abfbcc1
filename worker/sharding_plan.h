// Which slice of every Llama weight one tensor-parallel rank owns (Megatron-style), and the
// two ways of cutting a checkpoint tensor to it. The single owner of sharding decisions.
//
//   TP_ASSIGN_OR_RETURN(ShardingPlan plan, ShardingPlan::Create(config, ShardSpec{1, 3}));
//   // plan.first_head() == 3, plan.num_local_heads() == 3, plan.first_kv_head() == 1
//
//   layer piece         split                          after it
//   Q, K, V             column-parallel, whole heads   -
//   gate, up            column-parallel, output rows   -
//   O, down             row-parallel, input columns    one AllReduceSum each
//   embedding           vocab-parallel rows            AllReduceSum (foreign rows are zero)
//   LM head             vocab-parallel rows            AllGather of the local logits
// Rank r holds query heads [r*H/W, (r+1)*H/W) and KV heads [r*KV/W, (r+1)*KV/W): with
// H % W == 0 and KV % W == 0 each KV group stays on the rank of its query heads.
// Thread-compatible value type; the slicing functions are thread-safe.
#ifndef TPSERVE_WORKER_SHARDING_PLAN_H_
#define TPSERVE_WORKER_SHARDING_PLAN_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "formats/weight_source.h"
#include "kernels/backend.h"
#include "model/config.h"

namespace tpserve {

struct ShardSpec {
  int rank = 0;
  int world_size = 1;
};

class ShardingPlan {
 public:
  // INVALID_ARGUMENT naming the bound when world_size < 1, rank outside [0, world_size), or
  // num_heads, num_kv_heads or intermediate_size is not divisible by world_size.
  static absl::StatusOr<ShardingPlan> Create(const LlamaConfig& config, ShardSpec shard);

  ShardSpec shard() const { return shard_; }
  int64_t first_head() const { return shard_.rank * num_local_heads_; }
  int64_t num_local_heads() const { return num_local_heads_; }
  int64_t first_kv_head() const { return shard_.rank * num_local_kv_heads_; }
  int64_t num_local_kv_heads() const { return num_local_kv_heads_; }
  int64_t first_ffn_row() const { return shard_.rank * local_intermediate_size_; }
  int64_t local_intermediate_size() const { return local_intermediate_size_; }
  // Vocab rows are ceil(V / W) per rank; the last ranks may hold fewer (or none): padding.
  int64_t vocab_rows_per_rank() const { return vocab_rows_per_rank_; }
  int64_t first_vocab_row() const { return first_vocab_row_; }
  int64_t num_local_vocab_rows() const { return num_local_vocab_rows_; }

 private:
  ShardSpec shard_;
  int64_t num_local_heads_ = 0;
  int64_t num_local_kv_heads_ = 0;
  int64_t local_intermediate_size_ = 0;
  int64_t vocab_rows_per_rank_ = 0;
  int64_t first_vocab_row_ = 0;
  int64_t num_local_vocab_rows_ = 0;
};

// A weight matrix either viewing the checkpoint's bytes or owning a copy of a slice of them.
// Move-only, so `matrix.data` can never outlive or alias a stale copy of `owned`.
struct ShardedMatrix {
  WeightMatrix matrix;
  std::unique_ptr<uint8_t[]> owned;  // set when `matrix.data` points here
  int64_t owned_bytes = 0;
};

// Rows [row_begin, row_begin + num_rows) of a 2-D tensor, as a view (zero copy): the rows are
// contiguous in the checkpoint. INVALID_ARGUMENT naming the tensor when it is not 2-D or the
// range is outside its rows.
absl::StatusOr<WeightMatrix> SliceRows(const TensorView& t, int64_t row_begin, int64_t num_rows);

// Columns [col_begin, col_begin + num_cols) of every row of a 2-D tensor, copied (only those
// bytes of the checkpoint are read). INVALID_ARGUMENT naming the tensor when the range is
// outside its columns or, for block-quantized types, not aligned to whole blocks.
absl::StatusOr<ShardedMatrix> CopyColumns(const TensorView& t, int64_t col_begin,
                                          int64_t num_cols);

}  // namespace tpserve

#endif  // TPSERVE_WORKER_SHARDING_PLAN_H_
