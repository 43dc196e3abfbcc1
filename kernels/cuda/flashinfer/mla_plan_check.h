// FlashInfer's own MLA scheduler (MLAPlan, scheduler.cuh) run on the host over
// one batch, with host buffers of the given sizes: the work items it would
// upload, for mla_plan_flashinfer_test to check mla_plan.h's bounds against.
// MLAPlan reads the device's multiprocessor count (and nothing else of it)
// through cudaGetDevice / cudaDeviceGetAttribute: the FakeDevice given answers
// (fake_device.h). Test support only.
#ifndef TPSERVE_KERNELS_CUDA_FLASHINFER_MLA_PLAN_CHECK_H_
#define TPSERVE_KERNELS_CUDA_FLASHINFER_MLA_PLAN_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/flashinfer/fake_device.h"

namespace tpserve::cuda::fi {

struct MlaPlanWorks {
  int status = 0;  // a cudaError_t, or -1 with FlashInfer's message in `error`
  std::string error;
  int64_t num_blks_x = 0;  // cluster size
  int64_t num_blks_y = 0;  // clusters
  int64_t staged_int_bytes = 0;
  // One entry per work item, in FlashInfer's order (clusters one after
  // another).
  std::vector<int32_t> q_indptr, kv_indptr, q_len, kv_len, q_start, kv_start, kv_end;
};

MlaPlanWorks FlashInferMlaPlan(const std::vector<int32_t> &qo_indptr,
                               const std::vector<int32_t> &kv_indptr,
                               const std::vector<int32_t> &kv_len, int32_t num_heads,
                               int64_t float_bytes, int64_t int_bytes,
                               const FakeDevice &device = kFakeH100);

}  // namespace tpserve::cuda::fi

#endif  // TPSERVE_KERNELS_CUDA_FLASHINFER_MLA_PLAN_CHECK_H_
