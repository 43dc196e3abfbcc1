#include "worker/comm/rank_order_sum.h"

#include <cstring>

#include "kernels/quantize.h"

namespace tpserve {
namespace {

// One pass over memory for the common world sizes; the rank loop is unrolled, the element loop
// is what the compiler vectorises.
template <int kRanks>
void SumFixed(const float* const* in, size_t n, float* __restrict out) {
  for (size_t i = 0; i < n; ++i) {
    float acc = in[0][i];
    for (int r = 1; r < kRanks; ++r) acc += in[r][i];
    out[i] = acc;
  }
}

float HalfToF32(DType dtype, uint16_t h) {
  return dtype == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
}

}  // namespace

void SumF32InRankOrder(const uint8_t* const* inputs, int num_ranks, size_t n, float* out) {
  const float* in[4];
  if (num_ranks >= 2 && num_ranks <= 4) {
    for (int r = 0; r < num_ranks; ++r) in[r] = reinterpret_cast<const float*>(inputs[r]);
  }
  switch (num_ranks) {
    case 2:
      return SumFixed<2>(in, n, out);
    case 3:
      return SumFixed<3>(in, n, out);
    case 4:
      return SumFixed<4>(in, n, out);
    default:
      break;
  }
  // Pass by pass: the same association ((x0 + x1) + x2) + ... as the fused loops above.
  std::memcpy(out, inputs[0], n * sizeof(float));
  for (int r = 1; r < num_ranks; ++r) {
    const float* x = reinterpret_cast<const float*>(inputs[r]);
    for (size_t i = 0; i < n; ++i) out[i] += x[i];
  }
}

void SumHalfInRankOrder(DType dtype, const uint8_t* const* inputs, int num_ranks, size_t n,
                        uint16_t* out) {
  for (size_t i = 0; i < n; ++i) {
    float acc = 0.0f;
    for (int r = 0; r < num_ranks; ++r) {
      uint16_t h;
      std::memcpy(&h, inputs[r] + i * sizeof(uint16_t), sizeof(h));
      acc = r == 0 ? HalfToF32(dtype, h) : acc + HalfToF32(dtype, h);
    }
    out[i] = dtype == DType::kBF16 ? F32ToBF16(acc) : F32ToF16(acc);
  }
}

}  // namespace tpserve
