#include "kernels/rope_table.h"

#include <algorithm>
#include <cmath>

#include "kernels/check.h"

namespace tpserve {

std::vector<float> RopeInverseFrequencies(int64_t head_dim, double theta,
                                          const std::optional<Llama3RopeScaling>& scaling) {
  TP_CHECK(head_dim > 0 && head_dim % 2 == 0, "head_dim must be even and positive");
  TP_CHECK(theta > 0, "rope theta must be positive");
  std::vector<float> inv_freq(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    double freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    if (scaling.has_value()) {
      const Llama3RopeScaling& s = *scaling;
      TP_CHECK(s.high_freq_factor >= s.low_freq_factor, "llama3 rope: high < low freq factor");
      const double wavelen = 2.0 * M_PI / freq;
      const double high_freq_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
      const double low_freq_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
      if (wavelen > low_freq_wavelen) {
        freq = freq / s.factor;
      } else if (wavelen >= high_freq_wavelen && high_freq_wavelen < low_freq_wavelen) {
        const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        freq = (1.0 - smooth) * freq / s.factor + smooth * freq;
      }
    }
    inv_freq[i] = static_cast<float>(freq);
  }
  return inv_freq;
}

std::vector<float> YarnInverseFrequencies(int64_t head_dim, double theta,
                                          const YarnRopeScaling& s) {
  TP_CHECK(head_dim > 0 && head_dim % 2 == 0, "head_dim must be even and positive");
  TP_CHECK(theta > 1 && s.factor > 0, "yarn rope: theta must exceed 1, factor be positive");
  const double dims = static_cast<double>(head_dim);
  // The pair index whose wavelength makes `rotations` turns over the original context.
  auto correction_dim = [&](double rotations) {
    return dims * std::log(s.original_max_position_embeddings / (rotations * 2.0 * M_PI)) /
           (2.0 * std::log(theta));
  };
  const double low = std::max(0.0, std::floor(correction_dim(s.beta_fast)));
  const double high = std::min(dims - 1.0, std::ceil(correction_dim(s.beta_slow)));
  std::vector<float> inv_freq(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double freq = std::pow(theta, -2.0 * static_cast<double>(i) / dims);
    const double ramp =
        std::clamp((static_cast<double>(i) - low) / std::max(high - low, 0.001), 0.0, 1.0);
    inv_freq[i] = static_cast<float>(freq / s.factor * ramp + freq * (1.0 - ramp));
  }
  return inv_freq;
}

double YarnAttentionFactor(double factor) { return YarnMscale(factor, 1.0); }

double YarnMscale(double factor, double mscale) {
  return factor > 1.0 ? 0.1 * mscale * std::log(factor) + 1.0 : 1.0;
}

}  // namespace tpserve
