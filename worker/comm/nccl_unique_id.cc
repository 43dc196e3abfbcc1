#include "worker/comm/nccl_unique_id.h"

#if TPSERVE_WITH_CUDA
#include <nccl.h>

#include "base/status_macros.h"
#include "worker/comm/cuda_status.h"
#endif

namespace tpserve {

absl::StatusOr<std::string> NewNcclUniqueId() {
#if TPSERVE_WITH_CUDA
  static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes);
  ncclUniqueId id;
  TP_RETURN_IF_ERROR(TP_NCCL_CALL(ncclGetUniqueId(&id)));
  return std::string(id.internal, sizeof(id.internal));
#else
  return absl::UnimplementedError(
      "this build has no NCCL (built without the CUDA toolkit): cannot make an NCCL unique id "
      "for GPU ranks");
#endif
}

}  // namespace tpserve
