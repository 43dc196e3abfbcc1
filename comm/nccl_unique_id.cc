#include "comm/nccl_unique_id.h"

#include <chrono>
#include <exception>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#if TPSERVE_WITH_CUDA
#include <nccl.h>

#include "base/status_macros.h"
#include "comm/cuda_status.h"
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

absl::StatusOr<std::string> ShareNcclUniqueId(gloo::rendezvous::Store& store, int rank,
                                              const ShareNcclUniqueIdOptions& options) {
  const std::string key = options.key_prefix.empty()
                              ? std::string(kNcclUniqueIdKey)
                              : absl::StrCat(options.key_prefix, "/", kNcclUniqueIdKey);
  const std::string who = absl::StrCat("rank ", rank, " of ", options.world_size);
  // The store reports failures by throwing, as Gloo's stores do (rendezvous_store.h).
  try {
    if (rank == 0) {
      absl::StatusOr<std::string> id = options.make_id ? options.make_id() : NewNcclUniqueId();
      if (!id.ok()) return id.status();
      store.set(kNcclUniqueIdKey, std::vector<char>(id->begin(), id->end()));
      return id;
    }
    store.wait({kNcclUniqueIdKey},
               std::chrono::milliseconds(absl::ToInt64Milliseconds(options.timeout)));
    const std::vector<char> value = store.get(kNcclUniqueIdKey);
    if (value.size() != kNcclUniqueIdBytes) {
      return absl::InternalError(absl::StrCat(who, ": the NCCL unique id under key '", key,
                                              "' has ", value.size(), " bytes, expected ",
                                              kNcclUniqueIdBytes));
    }
    return std::string(value.begin(), value.end());
  } catch (const std::exception& e) {
    const std::string lower = absl::AsciiStrToLower(e.what());
    if (rank != 0 &&
        (absl::StrContains(lower, "timeout") || absl::StrContains(lower, "timed out"))) {
      return absl::DeadlineExceededError(absl::StrCat(
          who, ": rank 0 did not publish the NCCL unique id under key '", key,
          "' in the rendezvous store within ", absl::FormatDuration(options.timeout),
          " (did rank 0 fail to load?): ", e.what()));
    }
    return absl::UnavailableError(absl::StrCat(who, ": the NCCL unique id under key '", key,
                                               "' in the rendezvous store: ", e.what()));
  }
}

}  // namespace tpserve
