#include "kernels/cuda/flashinfer/mla_plan_check.h"

#include <exception>

#include <flashinfer/attention/scheduler.cuh>

namespace tpserve::cuda::fi {
namespace {

std::vector<int32_t> Read(const std::vector<char> &ints, int64_t offset, int64_t n) {
  const auto *p = reinterpret_cast<const int32_t *>(ints.data() + offset);
  return std::vector<int32_t>(p, p + n);
}

}  // namespace

MlaPlanWorks FlashInferMlaPlan(const std::vector<int32_t> &qo_indptr,
                               const std::vector<int32_t> &kv_indptr,
                               const std::vector<int32_t> &kv_len, int32_t num_heads,
                               int64_t float_bytes, int64_t int_bytes,
                               const FakeDevice &device) {
  SetFakeDevice(device);
  MlaPlanWorks out;
  std::vector<char> floats(float_bytes), ints(int_bytes), pinned(int_bytes);
  flashinfer::MLAPlanInfo info;
  size_t staged = 0;
  try {
    out.status = static_cast<int>(flashinfer::MLAPlan<int32_t>(
        floats.data(), floats.size(), ints.data(), pinned.data(), ints.size(), info, staged,
        const_cast<int32_t *>(qo_indptr.data()), const_cast<int32_t *>(kv_indptr.data()),
        const_cast<int32_t *>(kv_len.data()), static_cast<uint32_t>(kv_len.size()),
        static_cast<uint32_t>(num_heads),
        /*head_dim_o=*/512, /*causal=*/true,
        /*stream=*/nullptr));
  } catch (const std::exception &e) {
    out.status = -1;
    out.error = e.what();
    return out;
  }
  if (out.status != 0) return out;
  out.num_blks_x = info.num_blks_x;
  out.num_blks_y = info.num_blks_y;
  out.staged_int_bytes = static_cast<int64_t>(staged);
  const std::vector<int32_t> work_indptr =
      Read(pinned, info.work_indptr_offset, info.num_blks_y + 1);
  const int64_t n = work_indptr.back();
  out.q_indptr = Read(pinned, info.q_indptr_offset, n);
  out.kv_indptr = Read(pinned, info.kv_indptr_offset, n);
  out.q_len = Read(pinned, info.q_len_offset, n);
  out.kv_len = Read(pinned, info.kv_len_offset, n);
  out.q_start = Read(pinned, info.q_start_offset, n);
  out.kv_start = Read(pinned, info.kv_start_offset, n);
  out.kv_end = Read(pinned, info.kv_end_offset, n);
  return out;
}

}  // namespace tpserve::cuda::fi
