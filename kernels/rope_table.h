// RoPE inverse frequencies: the table Backend::Rope multiplies positions by, including the
// Llama 3.1 ("llama3") long-context rescaling of low frequencies.
//
//   std::vector<float> inv_freq = RopeInverseFrequencies(64, 1e5, std::nullopt);
//   backend->Rope(q, rows, heads, 64, positions, inv_freq.data(), RopeLayout::kInterleaved);
//
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_ROPE_TABLE_H_
#define TPSERVE_KERNELS_ROPE_TABLE_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace tpserve {

// Parameters of Llama 3.1's "llama3" rope_scaling (mirrors the Hugging Face config keys).
struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192;
};

// head_dim / 2 entries: inv_freq[i] = theta^(-2i / head_dim), then, when `scaling` is set, with
// wavelen = 2*pi / freq:
//   wavelen < orig / high_freq_factor: unchanged (high frequencies)
//   wavelen > orig / low_freq_factor:  freq / factor
//   otherwise: smooth = (orig / wavelen - low) / (high - low),
//              freq = (1 - smooth) * freq / factor + smooth * freq.
// REQUIRES: head_dim even and > 0, theta > 0, high_freq_factor != low_freq_factor.
std::vector<float> RopeInverseFrequencies(int64_t head_dim, double theta,
                                          const std::optional<Llama3RopeScaling>& scaling);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_ROPE_TABLE_H_
