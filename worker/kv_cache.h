// The paged KV storage of one tensor-parallel rank: per layer, a K pool and a V pool of
// [num_blocks][block_size_tokens][num_kv_heads][head_dim] f32 (num_kv_heads = this rank's).
// It only stores; which sequence owns which block is the block manager's business, passed in
// per step as block tables.
//
//   TP_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache, KvCache::Create(shape));
//   backend->PagedAttention(q, heads, scale, seqs, cache->layer(l), out);
//
// Threading: the pools are plain memory; the model writes them during Forward, one step at a
// time.
#ifndef TPSERVE_WORKER_KV_CACHE_H_
#define TPSERVE_WORKER_KV_CACHE_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace tpserve {

struct KvCacheShape {
  int64_t num_layers = 0;
  int64_t num_blocks = 0;
  int64_t block_size_tokens = 0;
  int64_t num_kv_heads = 0;  // local to the rank
  int64_t head_dim = 0;
};

class KvCache {
 public:
  // Bytes the pools of `shape` occupy (K and V, all layers); nullopt when a field is not
  // positive or the product overflows int64. The one place this size is computed.
  static std::optional<int64_t> BytesFor(const KvCacheShape& shape);

  // INVALID_ARGUMENT naming the field when a dimension is not positive or the size overflows;
  // RESOURCE_EXHAUSTED when the allocation fails.
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  int64_t bytes() const { return bytes_; }
  // Capacity in tokens across all blocks.
  int64_t capacity_tokens() const { return shape_.num_blocks * shape_.block_size_tokens; }

  // The K and V pools of layer `layer`. REQUIRES: 0 <= layer < num_layers.
  KvPoolView layer(int64_t layer);

 private:
  KvCache(const KvCacheShape& shape, int64_t bytes, std::unique_ptr<float[]> data)
      : shape_(shape), bytes_(bytes), data_(std::move(data)) {}

  KvCacheShape shape_;
  int64_t bytes_;
  std::unique_ptr<float[]> data_;  // [num_layers][2 (K, V)][pool floats]
};

}  // namespace tpserve

#endif  // TPSERVE_WORKER_KV_CACHE_H_
