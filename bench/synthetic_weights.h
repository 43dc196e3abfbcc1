// A Llama checkpoint that exists only in memory, with random bf16 weights, for benchmarks at
// real shapes (Llama 3.1 8B: 16 GB of bf16) without a file: the real loader reads it through the
// WeightSource seam like any checkpoint (Hugging Face names, rotate-half RoPE), and quantizes
// it on load when asked for another format (fp8 per-channel).
//
//   std::unique_ptr<SyntheticLlamaSource> src = SyntheticLlamaSource::Create(config, {});
//   auto model = LlamaModel::Load(config, *src, {0, 1}, backend, &comm, load_options);
//
// How it stays cheap: one pool of random bf16 values, a little longer than the largest tensor,
// is filled once by a counter-based hash on every core (several GB/s), and each tensor is a
// window of it starting at an offset drawn from the tensor's name. So the source holds about
// one LM head's worth of memory whatever the depth; every tensor still gets its own bytes on
// the device (the loader copies each one), and layers differ by their windows. Values are
// +-[2^-8, 2^-4), about the scale of trained Llama weights, finite in every format; norm
// weights are all 1.
// Thread-safety: immutable after Create; the const methods are safe to call concurrently.
#ifndef TPSERVE_BENCH_SYNTHETIC_WEIGHTS_H_
#define TPSERVE_BENCH_SYNTHETIC_WEIGHTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/weight_source.h"
#include "model/config.h"

namespace tpserve {

struct SyntheticWeightsOptions {
  uint64_t seed = 1;
  int num_threads = 0;  // 0: every core
};

class SyntheticLlamaSource final : public WeightSource {
 public:
  // REQUIRES: config.Validate() is OK. Stores lm_head.weight unless the config ties it.
  static std::unique_ptr<SyntheticLlamaSource> Create(const ModelSpec& config,
                                                      const SyntheticWeightsOptions& options);

  CheckpointFormat format() const override { return CheckpointFormat::kSafetensors; }
  absl::StatusOr<TensorView> Find(std::string_view name) const override;
  std::vector<std::string> TensorNames() const override;
  std::string Describe() const override { return "synthetic bf16 Llama checkpoint"; }

  // Host bytes the random pool takes, and the seconds it took to fill.
  int64_t pool_bytes() const { return static_cast<int64_t>(pool_.size()) * 2; }
  double fill_seconds() const { return fill_seconds_; }

 private:
  SyntheticLlamaSource() = default;
  void Add(const std::string& name, std::vector<int64_t> shape);

  std::vector<uint16_t> pool_;  // bf16 values
  std::vector<uint16_t> ones_;  // bf16 1.0, [hidden]: every norm weight
  int64_t slack_elems_ = 0;     // pool_.size() - the largest tensor's elements
  double fill_seconds_ = 0;
  std::map<std::string, TensorView, std::less<>> tensors_;
};

// Fills `out` with n finite bf16 values of magnitude in [2^-8, 2^-4), from counter `first`
// of the stream `seed` (so disjoint ranges can be filled in parallel). Exposed for tests.
void FillRandomBf16(uint64_t seed, uint64_t first, uint16_t* out, int64_t n);

}  // namespace tpserve

#endif  // TPSERVE_BENCH_SYNTHETIC_WEIGHTS_H_
