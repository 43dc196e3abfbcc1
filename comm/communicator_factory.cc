#include "comm/communicator_factory.h"

#include <exception>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/gloo_communicator.h"
#include "comm/nccl_unique_id.h"
#include "comm/shm_communicator.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#if TPSERVE_WITH_CUDA
#include "comm/nccl_communicator.h"
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

GlooOptions ToGlooOptions(const CommunicatorOptions& options) {
  GlooOptions gloo_options;
  gloo_options.rank = options.rank;
  gloo_options.world_size = options.world_size;
  gloo_options.hostname = options.gloo_hostname;
  gloo_options.iface = options.gloo_iface;
  gloo_options.timeout = options.timeout;
  gloo_options.startup_timeout = options.startup_timeout;
  gloo_options.verify_collectives = options.verify_collectives;
  return gloo_options;
}

ShmOptions ToShmOptions(const CommunicatorOptions& options) {
  ShmOptions shm_options;
  shm_options.rank = options.rank;
  shm_options.world_size = options.world_size;
  shm_options.timeout = options.timeout;
  shm_options.startup_timeout = options.startup_timeout;
  shm_options.max_bytes = options.shm_max_bytes;
  shm_options.run_id = options.run_id;
  return shm_options;
}

template <typename T>
absl::StatusOr<std::unique_ptr<Communicator>> Upcast(absl::StatusOr<std::unique_ptr<T>> comm) {
  if (!comm.ok()) return comm.status();
  return std::unique_ptr<Communicator>(*std::move(comm));
}

using ConnectFn = absl::StatusOr<std::unique_ptr<Communicator>> (*)(const CommunicatorOptions&,
                                                                    gloo::rendezvous::Store&);

// Runs `connect` with the store the options name (gloo_store, or a FileStore in store_dir),
// prefixed by run_id so runs sharing a store stay apart.
absl::StatusOr<std::unique_ptr<Communicator>> WithRunStore(const CommunicatorOptions& options,
                                                           ConnectFn connect) {
  const char* kind = CommunicatorKindName(options.kind);
  if (options.run_id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CommunicatorOptions.run_id is empty (needed for ", kind, ")"));
  }
  if (options.gloo_store != nullptr) {
    gloo::rendezvous::PrefixStore store(options.run_id, *options.gloo_store);
    return connect(options, store);
  }
  if (options.store_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CommunicatorOptions: ", kind, " needs gloo_store or store_dir, both are empty"));
  }
  std::error_code error;
  std::filesystem::create_directories(options.store_dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create store directory '", options.store_dir, "': ", error.message()));
  }
  try {
    gloo::rendezvous::FileStore file_store(options.store_dir);
    gloo::rendezvous::PrefixStore store(options.run_id, file_store);
    return connect(options, store);
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(
        absl::StrCat("FileStore in '", options.store_dir, "': ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<Communicator>> ConnectGloo(const CommunicatorOptions& options,
                                                          gloo::rendezvous::Store& store) {
  return Upcast(GlooCommunicator::Connect(ToGlooOptions(options), store));
}

absl::StatusOr<std::unique_ptr<Communicator>> ConnectShm(const CommunicatorOptions& options,
                                                         gloo::rendezvous::Store& store) {
  return Upcast(ShmCommunicator::Connect(ToShmOptions(options), store));
}

// Every rank publishes its host identity and reads all of them: the same inputs on every
// rank, so the same choice.
absl::StatusOr<bool> AllOnOneHost(const CommunicatorOptions& options,
                                  gloo::rendezvous::Store& store) {
  const std::string mine =
      options.host_identity.empty() ? LocalHostIdentity() : options.host_identity;
  std::vector<std::string> keys;
  for (int r = 0; r < options.world_size; ++r) keys.push_back(absl::StrCat("auto_host_", r));
  std::vector<std::string> identities;
  try {
    store.set(keys[options.rank], std::vector<char>(mine.begin(), mine.end()));
    store.wait(keys, std::chrono::milliseconds(absl::ToInt64Milliseconds(
                         StartupTimeout(options.startup_timeout, options.timeout))));
    for (const std::string& key : keys) {
      const std::vector<char> value = store.get(key);
      identities.emplace_back(value.begin(), value.end());
    }
  } catch (const std::exception& e) {
    const std::string text =
        absl::StrCat("auto communicator choice on rank ", options.rank, " of ", options.world_size,
                     ": exchanging host identities: ", e.what());
    const std::string lower = absl::AsciiStrToLower(e.what());
    if (absl::StrContains(lower, "timeout") || absl::StrContains(lower, "timed out")) {
      return absl::DeadlineExceededError(text);
    }
    return absl::UnavailableError(text);
  }
  for (const std::string& identity : identities) {
    if (identity != identities[0]) return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Communicator>> ConnectAuto(const CommunicatorOptions& options,
                                                          gloo::rendezvous::Store& store) {
  TP_ASSIGN_OR_RETURN(const bool one_host, AllOnOneHost(options, store));
  return one_host ? ConnectShm(options, store) : ConnectGloo(options, store);
}

// Rank 0 makes the group's NCCL id and publishes it in the store the ranks meet through; the
// others read it there (nccl_unique_id.h), then all join the NCCL group.
#if TPSERVE_WITH_CUDA
absl::StatusOr<std::unique_ptr<Communicator>> ConnectNccl(const CommunicatorOptions& options,
                                                          gloo::rendezvous::Store& store) {
  ShareNcclUniqueIdOptions share;
  share.world_size = options.world_size;
  share.timeout = StartupTimeout(options.startup_timeout, options.timeout);
  share.key_prefix = options.run_id;
  TP_ASSIGN_OR_RETURN(std::string id, ShareNcclUniqueId(store, options.rank, share));
  NcclOptions nccl_options;
  nccl_options.rank = options.rank;
  nccl_options.world_size = options.world_size;
  nccl_options.device_ordinal = options.device_ordinal;
  nccl_options.unique_id = std::move(id);
  nccl_options.timeout = options.timeout;
  nccl_options.startup_timeout = options.startup_timeout;
  nccl_options.stream = static_cast<CUstream_st*>(options.cuda_stream);
  TP_ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> comm,
                      NcclCommunicator::Create(nccl_options));
  return std::unique_ptr<Communicator>(std::move(comm));
}
#endif

absl::StatusOr<std::unique_ptr<Communicator>> MakeNccl(const CommunicatorOptions& options) {
#if !TPSERVE_WITH_CUDA
  (void)options;
  return absl::UnimplementedError(
      "this build has no NCCL: build with the CUDA toolkit present to run GPU ranks");
#else
  return WithRunStore(options, &ConnectNccl);
#endif
}

}  // namespace

absl::StatusOr<CommunicatorKind> ParseCommunicatorKind(absl::string_view name) {
  for (CommunicatorKind kind :
       {CommunicatorKind::kSingleRank, CommunicatorKind::kInProcess, CommunicatorKind::kGloo,
        CommunicatorKind::kShm, CommunicatorKind::kAuto, CommunicatorKind::kNccl}) {
    if (name == CommunicatorKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown communicator kind '", name,
                   "'; expected single, in_process, gloo, shm, auto or nccl"));
}

const char* CommunicatorKindName(CommunicatorKind kind) {
  switch (kind) {
    case CommunicatorKind::kSingleRank:
      return "single";
    case CommunicatorKind::kInProcess:
      return "in_process";
    case CommunicatorKind::kGloo:
      return "gloo";
    case CommunicatorKind::kShm:
      return "shm";
    case CommunicatorKind::kAuto:
      return "auto";
    case CommunicatorKind::kNccl:
      return "nccl";
  }
  return "unknown";
}

bool CommunicatorUsesHostMemory(CommunicatorKind kind) { return kind != CommunicatorKind::kNccl; }

absl::StatusOr<std::unique_ptr<Communicator>> MakeCommunicator(const CommunicatorOptions& options) {
  TP_RETURN_IF_ERROR(CheckRank(options));
  if (options.timeout < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat("CommunicatorOptions.timeout is ",
                                                   absl::FormatDuration(options.timeout),
                                                   ", must be >= 1ms"));
  }
  if (options.startup_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("CommunicatorOptions.startup_timeout is ",
                                                   absl::FormatDuration(options.startup_timeout),
                                                   ", must be >= 0"));
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
      return WithRunStore(options, &ConnectGloo);
    case CommunicatorKind::kShm:
      return WithRunStore(options, &ConnectShm);
    case CommunicatorKind::kAuto:
      return WithRunStore(options, &ConnectAuto);
    case CommunicatorKind::kNccl:
      return MakeNccl(options);
  }
  return absl::InvalidArgumentError("CommunicatorOptions.kind is not a known kind");
}

}  // namespace tpserve
