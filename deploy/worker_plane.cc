#include "deploy/worker_plane.h"

#include <stdlib.h>

#include <chrono>
#include <map>
#include <filesystem>
#include <system_error>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "cluster/secret.h"
#include "base/host_identity.h"

namespace tpserve {

WorkerPlane::~WorkerPlane() {
  if (server != nullptr) server->Shutdown(std::chrono::system_clock::now());
  if (!run_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(run_dir, ec);
  }
}

absl::StatusOr<std::unique_ptr<WorkerPlane>> StartWorkerPlane(const WorkerPlaneOptions& options) {
  std::string listen = options.worker_listen;
  if (listen.empty()) {
    if (!options.spawn_ranks) {
      return absl::InvalidArgumentError(
          "--spawn_ranks=false needs --worker_listen=HOST:PORT: the address the workers are "
          "told in their --coordinator");
    }
    listen = "127.0.0.1:0";
  }
  if (!options.spawn_ranks && options.cluster_secret_file.empty()) {
    return absl::InvalidArgumentError(
        "--spawn_ranks=false needs --cluster_secret_file=PATH: the secret the workers are "
        "given too (e.g. made by `head -c 32 /dev/urandom | xxd -p -c 64`)");
  }
  auto plane = std::make_unique<WorkerPlane>();
  std::string dir_template =
      (std::filesystem::temp_directory_path() / "tpserve-XXXXXX").string();
  if (mkdtemp(dir_template.data()) == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mkdtemp(", dir_template, ")"));
  }
  plane->run_dir = dir_template;
  if (!options.cluster_secret_file.empty()) {
    absl::StatusOr<std::string> secret = ReadClusterSecretFile(options.cluster_secret_file);
    if (!secret.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--cluster_secret_file: ",
                                                     secret.status().message()));
    }
    plane->secret = *std::move(secret);
    plane->secret_file = options.cluster_secret_file;
  } else {
    plane->secret = NewClusterSecret();
    plane->secret_file = plane->run_dir + "/cluster_secret";
    absl::Status written = WriteClusterSecretFile(plane->secret_file, plane->secret);
    if (!written.ok()) return written;
  }

  plane->control = std::make_unique<ClusterControlService>(options.ranks, plane->secret);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(plane->control.get());
  plane->server = builder.BuildAndStart();
  if (plane->server == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("--worker_listen = ", listen, ": cannot listen there"));
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  plane->listen_address = absl::StrCat(host, ":", port);
  const bool any = host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::";
  plane->local_address = absl::StrCat(any ? "127.0.0.1" : host, ":", port);
  return plane;
}

bool AllOnThisHost(const std::vector<JoinedRank>& ranks) {
  const std::string here = LocalHostIdentity();
  for (const JoinedRank& r : ranks) {
    if (absl::StrCat(r.hostname, "/", r.boot_id) != here) return false;
  }
  return true;
}

std::vector<int32_t> DeviceOrdinalsByHost(const std::vector<JoinedRank>& ranks) {
  std::map<std::string, int32_t> next;  // per host: the ordinal its next rank takes
  std::vector<int32_t> ordinals;
  for (const JoinedRank& r : ranks) ordinals.push_back(next[r.hostname + "/" + r.boot_id]++);
  return ordinals;
}

}  // namespace tpserve
