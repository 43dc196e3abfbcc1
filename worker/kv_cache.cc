#include "worker/kv_cache.h"

#include "absl/strings/str_format.h"
#include "base/str_cat.h"
#include "kernels/check.h"
#include "model/step_buffers.h"

namespace tpserve {
namespace {

bool MulOverflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

int64_t PoolBytes(const KvCacheShape& s) {
  return s.num_blocks * s.block_size_tokens * s.num_kv_heads * s.head_dim * BlockBytes(s.dtype);
}

}  // namespace

std::optional<int64_t> KvCache::BytesFor(const KvCacheShape& s) {
  if (!IsKvDtype(s.dtype)) return std::nullopt;
  // Overflow guard on the factors first; the size itself comes from the plan's function.
  if (s.pools != 1 && s.pools != 2) return std::nullopt;
  const int64_t factors[] = {s.num_layers, s.pools, s.num_blocks, s.block_size_tokens,
                             s.num_kv_heads, s.head_dim, BlockBytes(s.dtype)};
  int64_t bytes = 1;
  for (int64_t f : factors) {
    if (f <= 0 || MulOverflows(bytes, f, &bytes)) return std::nullopt;
  }
  return s.num_blocks * s.block_size_tokens *
         KvBytesPerToken(s.num_layers, KvEntry{s.num_kv_heads, s.head_dim, s.pools}, s.dtype);
}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheShape& shape,
                                                         Backend& backend) {
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
  if (shape.pools != 1 && shape.pools != 2) {
    return absl::InvalidArgumentError(
        StrCat("KV cache: pools = ", shape.pools, " must be 1 (latent) or 2 (K and V)"));
  }
  if (!IsKvDtype(shape.dtype)) {
    return absl::InvalidArgumentError(StrCat("KV cache: dtype ", DTypeName(shape.dtype),
                                             " is not one of F32, F16, BF16, F8_E4M3"));
  }
  if (!backend.SupportsKvDtype(shape.dtype)) {
    return absl::UnimplementedError(StrCat("KV cache: the ", backend.name(),
                                           " backend cannot attend over a ",
                                           DTypeName(shape.dtype), " cache"));
  }
  if (!(shape.k_scale > 0.0f) || !(shape.v_scale > 0.0f)) {
    return absl::InvalidArgumentError(StrCat("KV cache: k_scale = ", shape.k_scale,
                                             " and v_scale = ", shape.v_scale,
                                             " must be positive"));
  }
  const std::optional<int64_t> bytes = BytesFor(shape);
  if (!bytes.has_value()) {
    return absl::InvalidArgumentError("KV cache: size overflows int64");
  }
  // Left uninitialized: a slot is always written (WriteKv) before attention reads it, and
  // untouched pages of a large host pool then cost no physical memory.
  absl::StatusOr<DeviceBuffer> buffer = backend.Allocate(*bytes, "KV cache");
  if (!buffer.ok()) return buffer.status();
  return std::unique_ptr<KvCache>(new KvCache(shape, *std::move(buffer)));
}

KvPoolView KvCache::layer(int64_t layer) {
  TP_CHECK(layer >= 0 && layer < shape_.num_layers, "KV cache layer out of range");
  const int64_t pool = PoolBytes(shape_);
  uint8_t* k = buffer_.as<uint8_t>() + layer * shape_.pools * pool;
  return KvPoolView{k,
                    shape_.pools == 1 ? k : k + pool,
                    shape_.dtype,
                    shape_.k_scale,
                    shape_.v_scale,
                    shape_.num_blocks,
                    shape_.block_size_tokens,
                    shape_.num_kv_heads,
                    shape_.head_dim};
}

}  // namespace tpserve
