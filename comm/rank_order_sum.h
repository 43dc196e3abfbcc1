// Element-wise sums of one buffer per rank, added in rank order: out[i] =
// ((x0[i] + x1[i]) + x2[i]) + ... . Every caller that passes the same inputs gets the same bits,
// whichever rank it is and however the loop is vectorised (lanes are elements, never ranks), so
// ranks that each reduce for themselves (ShmCommunicator) still agree bitwise.
//
//   const uint8_t* slots[3] = {a, b, c};   // rank 0's, 1's and 2's n floats
//   SumF32InRankOrder(slots, 3, n, out);
//
// REQUIRES: num_ranks >= 1; `out` does not overlap any input; inputs are aligned to their
// element size.
// Thread-safe: pure functions.
#ifndef TPSERVE_COMM_RANK_ORDER_SUM_H_
#define TPSERVE_COMM_RANK_ORDER_SUM_H_

#include <cstddef>
#include <cstdint>

#include "formats/dtype.h"

namespace tpserve {

// `inputs[r]` points at rank r's n floats.
void SumF32InRankOrder(const uint8_t* const* inputs, int num_ranks, size_t n, float* out);

// kF16 or kBF16 inputs, summed in f32 in rank order and rounded once (to nearest even).
// REQUIRES: dtype is kF16 or kBF16.
void SumHalfInRankOrder(DType dtype, const uint8_t* const* inputs, int num_ranks, size_t n,
                        uint16_t* out);

}  // namespace tpserve

#endif  // TPSERVE_COMM_RANK_ORDER_SUM_H_
