#include "bench/synthetic_weights.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "checkpoint/stored_matrix.h"
#include "base/splitmix.h"
#include "model/weight_formats.h"

namespace tpserve {
namespace {


uint64_t NameHash(std::string_view name) {  // FNV-1a
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001B3ull;
  return h;
}

}  // namespace

void FillRandomBf16(uint64_t seed, uint64_t first, uint16_t* out, int64_t n) {
  const uint64_t key = SplitMix64(seed);
  for (int64_t k = 0; k < n; ++k) {
    const uint64_t i = first + static_cast<uint64_t>(k);
    // One 64-bit hash feeds four values: sign, one of 4 exponents, 7 mantissa bits each.
    const uint16_t bits = static_cast<uint16_t>(SplitMix64(key ^ (i >> 2)) >> (16 * (i & 3)));
    const uint16_t sign = bits & 0x8000;
    const uint16_t exponent = static_cast<uint16_t>(127 - 8 + ((bits >> 13) & 3));
    out[k] = static_cast<uint16_t>(sign | (exponent << 7) | (bits & 0x7F));
  }
}

std::unique_ptr<SyntheticLlamaSource> SyntheticLlamaSource::Create(
    const ModelSpec& config, const SyntheticWeightsOptions& options) {
  std::unique_ptr<SyntheticLlamaSource> src(new SyntheticLlamaSource());
  const int64_t h = config.hidden_size, hd = config.head_dim, f = config.intermediate_size;
  const CheckpointFormat hf = CheckpointFormat::kSafetensors;
  auto name = [&](TensorRole role, int64_t layer) {
    return ModuleName(config, hf, role, layer) + ".weight";
  };
  src->Add(name(TensorRole::kEmbedding, 0), {config.vocab_size, h});
  if (!config.tie_word_embeddings) src->Add(name(TensorRole::kLmHead, 0), {config.vocab_size, h});
  src->Add(name(TensorRole::kFinalNorm, 0), {h});
  for (int64_t l = 0; l < config.num_layers; ++l) {
    src->Add(name(TensorRole::kAttnNorm, l), {h});
    src->Add(name(TensorRole::kFfnNorm, l), {h});
    src->Add(name(TensorRole::kQ, l), {config.num_heads * hd, h});
    src->Add(name(TensorRole::kK, l), {config.num_kv_heads * hd, h});
    src->Add(name(TensorRole::kV, l), {config.num_kv_heads * hd, h});
    src->Add(name(TensorRole::kO, l), {h, config.num_heads * hd});
    src->Add(name(TensorRole::kGate, l), {f, h});
    src->Add(name(TensorRole::kUp, l), {f, h});
    src->Add(name(TensorRole::kDown, l), {h, f});
  }

  int64_t largest = 0;
  for (const auto& [n, t] : src->tensors_) {
    if (t.shape.size() == 2) largest = std::max(largest, t.num_elements());
  }
  // Room for every window to start at a different place: 1/32 of the largest, at least 4 Mi.
  src->slack_elems_ = std::max<int64_t>(largest / 32, int64_t{1} << 22);
  src->pool_.resize(largest + src->slack_elems_);
  src->ones_.assign(h, 0x3F80);  // bf16 1.0

  const auto start = std::chrono::steady_clock::now();
  const int threads = options.num_threads > 0
                          ? options.num_threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int64_t total = static_cast<int64_t>(src->pool_.size());
  const int64_t per = (total + threads - 1) / threads;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    const int64_t begin = std::min(total, t * per), end = std::min(total, begin + per);
    workers.emplace_back([&src, &options, begin, end] {
      FillRandomBf16(options.seed, begin, src->pool_.data() + begin, end - begin);
    });
  }
  for (std::thread& w : workers) w.join();
  src->fill_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  for (auto& [n, t] : src->tensors_) {
    if (t.shape.size() == 1) {
      t.data = reinterpret_cast<const uint8_t*>(src->ones_.data());
    } else {
      const int64_t offset = static_cast<int64_t>(NameHash(n) % (src->slack_elems_ / 64)) * 64;
      t.data = reinterpret_cast<const uint8_t*>(src->pool_.data() + offset);
    }
  }
  return src;
}

void SyntheticLlamaSource::Add(const std::string& name, std::vector<int64_t> shape) {
  TensorView t;
  t.name = name;
  t.dtype = DType::kBF16;
  t.shape = std::move(shape);
  t.nbytes = t.num_elements() * 2;
  tensors_[name] = std::move(t);  // data is set once the pool exists
}

absl::StatusOr<TensorView> SyntheticLlamaSource::Find(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat("tensor ", std::string(name), " not in ", Describe()));
  }
  return it->second;
}

std::vector<std::string> SyntheticLlamaSource::TensorNames() const {
  std::vector<std::string> names;
  for (const auto& [n, t] : tensors_) names.push_back(n);
  return names;
}

}  // namespace tpserve
