#include "worker/kv_cache.h"

#include <limits>
#include <new>

#include "absl/strings/str_format.h"
#include "kernels/check.h"

namespace tpserve {
namespace {

bool MulOverflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

int64_t PoolFloats(const KvCacheShape& s) {
  return s.num_blocks * s.block_size_tokens * s.num_kv_heads * s.head_dim;
}

}  // namespace

std::optional<int64_t> KvCache::BytesFor(const KvCacheShape& s) {
  const int64_t factors[] = {s.num_layers, 2, s.num_blocks, s.block_size_tokens, s.num_kv_heads,
                             s.head_dim, static_cast<int64_t>(sizeof(float))};
  int64_t bytes = 1;
  for (int64_t f : factors) {
    if (f <= 0 || MulOverflows(bytes, f, &bytes)) return std::nullopt;
  }
  return bytes;
}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheShape& shape) {
  const std::pair<const char*, int64_t> fields[] = {
      {"num_layers", shape.num_layers},       {"num_blocks", shape.num_blocks},
      {"block_size_tokens", shape.block_size_tokens}, {"num_kv_heads", shape.num_kv_heads},
      {"head_dim", shape.head_dim}};
  for (const auto& [name, value] : fields) {
    if (value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("KV cache: %s = %d must be positive", name, value));
    }
  }
  const std::optional<int64_t> bytes = BytesFor(shape);
  if (!bytes.has_value()) {
    return absl::InvalidArgumentError("KV cache: size overflows int64");
  }
  // Left uninitialized: a slot is always written (WriteKv) before attention reads it, and
  // untouched pages of a large pool then cost no physical memory.
  std::unique_ptr<float[]> data(new (std::nothrow) float[*bytes / sizeof(float)]);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("KV cache: cannot allocate %d bytes", *bytes));
  }
  return std::unique_ptr<KvCache>(new KvCache(shape, *bytes, std::move(data)));
}

KvPoolView KvCache::layer(int64_t layer) {
  TP_CHECK(layer >= 0 && layer < shape_.num_layers, "KV cache layer out of range");
  const int64_t pool = PoolFloats(shape_);
  float* k = data_.get() + layer * 2 * pool;
  return KvPoolView{k,
                    k + pool,
                    shape_.num_blocks,
                    shape_.block_size_tokens,
                    shape_.num_kv_heads,
                    shape_.head_dim};
}

}  // namespace tpserve
