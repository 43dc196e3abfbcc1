// The paged KV storage of one tensor-parallel rank, in backend memory: per layer, a K pool and
// a V pool of [num_blocks][block_size_tokens][num_kv_heads][head_dim] elements of the cache's
// dtype (f32, f16, bf16, or fp8 e4m3 stored as value / scale), num_kv_heads being the rank's;
// or, for multi-head latent attention (pools 1), one pool of latent entries that serves as
// both (KvPoolView::v == k).
// It only stores; which sequence owns which block is the block manager's business, passed in
// per step as block tables.
//
//   TP_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache, KvCache::Create(shape, backend));
//   backend->PagedAttention(q, heads, scale, cache->layer(l), out);
//
// Threading: the pools are plain backend memory; the model writes them during Forward, one
// step at a time.
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
  DType dtype = DType::kF16;
  // fp8 only: stored code = value / scale. 1 keeps E4M3's range (+-448) for K and V, which
  // Llama-family activations stay well inside.
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  // 2: a K and a V pool per layer; 1: one pool read as both (MLA's latent, KvEntryOf).
  int64_t pools = 2;
};

class KvCache {
 public:
  // Bytes the pools of `shape` occupy (K and V, all layers); nullopt when a field is not
  // positive or the product overflows int64. Bytes per block come from KvBytesPerToken
  // (model/step_buffers.h), the function the memory plan counts with.
  static std::optional<int64_t> BytesFor(const KvCacheShape& shape);

  // INVALID_ARGUMENT naming the field when a dimension is not positive, the dtype is not a KV
  // dtype or the size overflows; UNIMPLEMENTED when `backend` cannot attend over the dtype;
  // RESOURCE_EXHAUSTED when the allocation fails.
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(const KvCacheShape& shape,
                                                         Backend& backend);

  const KvCacheShape& shape() const { return shape_; }
  int64_t bytes() const { return buffer_.bytes(); }
  // Capacity in tokens across all blocks.
  int64_t capacity_tokens() const { return shape_.num_blocks * shape_.block_size_tokens; }

  // The K and V pools of layer `layer`. REQUIRES: 0 <= layer < num_layers.
  KvPoolView layer(int64_t layer);

 private:
  KvCache(const KvCacheShape& shape, DeviceBuffer buffer)
      : shape_(shape), buffer_(std::move(buffer)) {}

  KvCacheShape shape_;
  DeviceBuffer buffer_;  // [num_layers][2 (K, V)][pool elements]
};

}  // namespace tpserve

#endif  // TPSERVE_WORKER_KV_CACHE_H_
