// The case groups of the backend-parity suite, one function per file; RunBackendParity calls
// them in turn. Internal to kernels/testing.
#ifndef TPSERVE_KERNELS_TESTING_PARITY_CASES_H_
#define TPSERVE_KERNELS_TESTING_PARITY_CASES_H_

#include "kernels/testing/parity_util.h"

namespace tpserve::parity {

void RunMatMulCases(ParityContext& ctx);     // parity_matmul.cc: MatMul, MatMulChunked
void RunOpCases(ParityContext& ctx);         // parity_ops.cc: norms, RoPE, element-wise, rows
void RunAttentionCases(ParityContext& ctx);  // parity_attention.cc: WriteKv, PagedAttention
// parity_attention.cc: WriteKv and PagedAttention over the batches real steps make
// (RunStepBatchParity).
void RunStepBatchCases(ParityContext& ctx);

}  // namespace tpserve::parity

#endif  // TPSERVE_KERNELS_TESTING_PARITY_CASES_H_
