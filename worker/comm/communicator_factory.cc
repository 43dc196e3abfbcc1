#include "worker/comm/communicator_factory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "gloo/rendezvous/prefix_store.h"
#include "worker/comm/gloo_communicator.h"
#if TPSERVE_WITH_CUDA
#include "worker/comm/nccl_communicator.h"
#endif

namespace tpserve {
namespace {

absl::Status CheckRank(const CommunicatorOptions& options) {
  if (options.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CommunicatorOptions.world_size is ", options.world_size, ", must be >= 1"));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("CommunicatorOptions.rank is ", options.rank,
                                                   ", must be in [0, ", options.world_size, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Communicator>> MakeInProcess(const CommunicatorOptions& options) {
  if (options.in_process_group == nullptr) {
    return absl::InvalidArgumentError("CommunicatorOptions.in_process_group is null");
  }
  if (options.in_process_group->world_size() != options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("CommunicatorOptions.in_process_group has world size ",
                     options.in_process_group->world_size(), ", options say ", options.world_size));
  }
  return std::make_unique<InProcessCommunicator>(options.in_process_group, options.rank,
                                                 options.timeout);
}

absl::StatusOr<std::unique_ptr<Communicator>> MakeGloo(const CommunicatorOptions& options) {
  GlooOptions gloo_options;
  gloo_options.rank = options.rank;
  gloo_options.world_size = options.world_size;
  gloo_options.hostname = options.gloo_hostname;
  gloo_options.iface = options.gloo_iface;
  gloo_options.timeout = options.timeout;
  gloo_options.verify_collectives = options.verify_collectives;
  if (options.run_id.empty()) {
    return absl::InvalidArgumentError("CommunicatorOptions.run_id is empty (needed for gloo)");
  }
  if (options.gloo_store != nullptr) {
    gloo::rendezvous::PrefixStore store(options.run_id, *options.gloo_store);
    TP_ASSIGN_OR_RETURN(std::unique_ptr<GlooCommunicator> comm,
                        GlooCommunicator::Connect(gloo_options, store));
    return std::unique_ptr<Communicator>(std::move(comm));
  }
  if (options.store_dir.empty()) {
    return absl::InvalidArgumentError(
        "CommunicatorOptions: gloo needs gloo_store or store_dir, both are empty");
  }
  TP_ASSIGN_OR_RETURN(
      std::unique_ptr<GlooCommunicator> comm,
      GlooCommunicator::ConnectWithFileStore(gloo_options, options.store_dir, options.run_id));
  return std::unique_ptr<Communicator>(std::move(comm));
}

absl::StatusOr<std::unique_ptr<Communicator>> MakeNccl(const CommunicatorOptions& options) {
#if !TPSERVE_WITH_CUDA
  return absl::UnimplementedError(
      "this build has no NCCL: build with the CUDA toolkit present to run GPU ranks");
#else
  NcclOptions nccl_options;
  nccl_options.rank = options.rank;
  nccl_options.world_size = options.world_size;
  nccl_options.device_ordinal = options.device_ordinal;
  nccl_options.unique_id = options.nccl_unique_id;
  nccl_options.timeout = options.timeout;
  nccl_options.stream = static_cast<CUstream_st*>(options.cuda_stream);
  TP_ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> comm,
                      NcclCommunicator::Create(nccl_options));
  return std::unique_ptr<Communicator>(std::move(comm));
#endif
}

}  // namespace

absl::StatusOr<CommunicatorKind> ParseCommunicatorKind(absl::string_view name) {
  for (CommunicatorKind kind : {CommunicatorKind::kSingleRank, CommunicatorKind::kInProcess,
                                CommunicatorKind::kGloo, CommunicatorKind::kNccl}) {
    if (name == CommunicatorKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown communicator kind '", name,
                                                 "'; expected single, in_process, gloo or nccl"));
}

const char* CommunicatorKindName(CommunicatorKind kind) {
  switch (kind) {
    case CommunicatorKind::kSingleRank:
      return "single";
    case CommunicatorKind::kInProcess:
      return "in_process";
    case CommunicatorKind::kGloo:
      return "gloo";
    case CommunicatorKind::kNccl:
      return "nccl";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<Communicator>> MakeCommunicator(const CommunicatorOptions& options) {
  TP_RETURN_IF_ERROR(CheckRank(options));
  if (options.timeout < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat("CommunicatorOptions.timeout is ",
                                                   absl::FormatDuration(options.timeout),
                                                   ", must be >= 1ms"));
  }
  switch (options.kind) {
    case CommunicatorKind::kSingleRank:
      if (options.world_size != 1) {
        return absl::InvalidArgumentError(absl::StrCat("CommunicatorOptions.world_size is ",
                                                       options.world_size, " for kind single"));
      }
      return std::make_unique<SingleRankCommunicator>();
    case CommunicatorKind::kInProcess:
      return MakeInProcess(options);
    case CommunicatorKind::kGloo:
      return MakeGloo(options);
    case CommunicatorKind::kNccl:
      return MakeNccl(options);
  }
  return absl::InvalidArgumentError("CommunicatorOptions.kind is not a known kind");
}

}  // namespace tpserve
