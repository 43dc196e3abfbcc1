// RoPE inverse frequencies: the table Backend::Rope multiplies positions by, including the
// long-context rescalings: Llama 3.1's "llama3", "linear" (position interpolation) and "yarn".
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
// Equal factors (Llama 4 Scout's high = low = 1) leave no band between the two: every
// frequency is kept or divided, as Meta's llama4 apply_scaling does.
// REQUIRES: head_dim even and > 0, theta > 0, high_freq_factor >= low_freq_factor.
std::vector<float> RopeInverseFrequencies(int64_t head_dim, double theta,
                                          const std::optional<Llama3RopeScaling>& scaling);

// YaRN (Peng et al. 2023) as transformers' _compute_yarn_parameters and llama.cpp's rope_yarn
// compute it: with the correction range of pair indices
//   low  = floor(head_dim * ln(orig / (beta_fast * 2 pi)) / (2 ln theta)),
//   high = ceil(head_dim * ln(orig / (beta_slow * 2 pi)) / (2 ln theta)), both clamped to
//   [0, head_dim - 1], ramp(i) = clamp((i - low) / max(high - low, 0.001), 0, 1),
// inv_freq[i] = f_i / factor * ramp(i) + f_i * (1 - ramp(i)) with f_i = theta^(-2i / head_dim):
// high-frequency pairs keep their frequency, low ones are interpolated. The rotated q and k are
// also multiplied by YarnAttentionFactor, which the model folds into its attention scale
// (squared, since both q and k carry it).
struct YarnRopeScaling {
  double factor = 1.0;
  double original_max_position_embeddings = 4096;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};
std::vector<float> YarnInverseFrequencies(int64_t head_dim, double theta,
                                          const YarnRopeScaling& scaling);
// 0.1 ln(factor) + 1 for factor > 1, else 1 (transformers' get_mscale, llama.cpp's mscale).
double YarnAttentionFactor(double factor);
// DeepSeek's yarn_get_mscale: 0.1 mscale ln(factor) + 1 for factor > 1, else 1
// (YarnAttentionFactor is mscale 1).
double YarnMscale(double factor, double mscale);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_ROPE_TABLE_H_
