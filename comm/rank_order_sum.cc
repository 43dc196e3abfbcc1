#include "comm/rank_order_sum.h"

#include <cstring>
#include <vector>

#include "kernels/quantize.h"

namespace tpserve {
namespace {

// Eight floats per operation (two SSE registers, or one AVX one where the build allows). GCC at
// -O2 does not vectorise the plain loop (its cheap cost model refuses the epilogue), and the
// vector extension keeps IEEE single-precision adds per lane, so the bits stay those of the
// scalar loop.
using F32x8 = float __attribute__((vector_size(32)));

// One pass over memory: for each block of 8 elements, add the ranks' blocks in rank order.
// kRanks > 0 fixes the rank count at compile time (the rank loop unrolls); 0 reads num_ranks.
template <int kRanks>
void SumBlocks(const float* const* in, int num_ranks, size_t n, float* out) {
  const int ranks = kRanks > 0 ? kRanks : num_ranks;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    F32x8 acc, x;
    std::memcpy(&acc, in[0] + i, sizeof(acc));
    for (int r = 1; r < ranks; ++r) {
      std::memcpy(&x, in[r] + i, sizeof(x));
      acc += x;
    }
    std::memcpy(out + i, &acc, sizeof(acc));
  }
  for (; i < n; ++i) {
    float acc = in[0][i];
    for (int r = 1; r < ranks; ++r) acc += in[r][i];
    out[i] = acc;
  }
}

float HalfToF32(DType dtype, uint16_t h) {
  return dtype == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
}

}  // namespace

void SumF32InRankOrder(const uint8_t* const* inputs, int num_ranks, size_t n, float* out) {
  const float* stack[16];
  std::vector<const float*> heap;
  const float** in = stack;
  if (num_ranks > 16) {
    heap.resize(num_ranks);
    in = heap.data();
  }
  for (int r = 0; r < num_ranks; ++r) in[r] = reinterpret_cast<const float*>(inputs[r]);
  switch (num_ranks) {
    case 2:
      return SumBlocks<2>(in, num_ranks, n, out);
    case 3:
      return SumBlocks<3>(in, num_ranks, n, out);
    case 4:
      return SumBlocks<4>(in, num_ranks, n, out);
    default:
      return SumBlocks<0>(in, num_ranks, n, out);
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
