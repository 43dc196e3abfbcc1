#include "kernels/rope_table.h"

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
      TP_CHECK(s.high_freq_factor != s.low_freq_factor, "llama3 rope: high == low freq factor");
      const double wavelen = 2.0 * M_PI / freq;
      const double high_freq_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
      const double low_freq_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
      if (wavelen > low_freq_wavelen) {
        freq = freq / s.factor;
      } else if (wavelen >= high_freq_wavelen) {
        const double smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        freq = (1.0 - smooth) * freq / s.factor + smooth * freq;
      }
    }
    inv_freq[i] = static_cast<float>(freq);
  }
  return inv_freq;
}

}  // namespace tpserve
