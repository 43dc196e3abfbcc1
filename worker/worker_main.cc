// A worker rank process: serves tpserve.worker.v1.Worker, joins the coordinator's control
// plane as rank R, and then does what the coordinator says (Load, Step) until it says Shutdown
// or the process gets SIGTERM. //deploy:launch starts one per rank on its own host; on other
// hosts start them yourself (docs/ARCHITECTURE.md, "Processes"):
//
//   worker --coordinator=10.0.0.1:7000 --rank=1 --cluster_secret_file=/etc/tpserve/secret
//   worker --coordinator=127.0.0.1:7000 --rank=0 --listen=127.0.0.1:0 --cluster_secret_file=...
#include <unistd.h>

#include <climits>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cluster/control_client.h"
#include "cluster/secret.h"
#include "worker/worker_service.h"

ABSL_FLAG(std::string, coordinator, "",
          "HOST:PORT of the coordinator's worker control plane (launch --worker_listen)");
ABSL_FLAG(int, rank, -1, "this process's tensor-parallel rank, in [0, launch --ranks)");
ABSL_FLAG(std::string, listen, "0.0.0.0:0",
          "HOST:PORT to serve the worker protocol on (port 0: any free port)");
ABSL_FLAG(std::string, advertise, "",
          "the host the coordinator and the other ranks reach this rank at (its worker service "
          "and Gloo); default: the --listen host, or this machine's hostname when that is "
          "0.0.0.0 or ::");
ABSL_FLAG(std::string, cluster_secret_file, "",
          "file holding the cluster secret (launch made it, or its --cluster_secret_file)");
ABSL_FLAG(int, join_timeout_s, 600,
          "how long to keep trying to reach the coordinator before giving up");
ABSL_FLAG(int, coordinator_lost_s, 30,
          "exit 1 when the coordinator has not answered for this long, or at once when another "
          "launch answers in its place, so that a supervisor restarts this rank into the new "
          "cluster (0 = never)");

namespace tpserve {
namespace {

int Fail(const std::string& message, int code = 1) {
  std::fprintf(stderr, "worker: %s\n", message.c_str());
  return code;
}

// "HOST:PORT" -> HOST without brackets ("[::1]:0" -> "::1").
std::string HostOf(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  std::string host = colon == std::string::npos ? host_port : host_port.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

std::string AdvertisedHost(const std::string& listen) {
  if (!absl::GetFlag(FLAGS_advertise).empty()) return absl::GetFlag(FLAGS_advertise);
  const std::string host = HostOf(listen);
  if (!host.empty() && host != "0.0.0.0" && host != "::") return host;
  char hostname[HOST_NAME_MAX + 1] = {};
  if (gethostname(hostname, sizeof(hostname) - 1) != 0) return "127.0.0.1";
  return hostname;
}

// Runs for the life of the process: exits it when the coordinator this rank joined is gone.
void WatchCoordinator(ClusterControlClient* client, absl::Duration lost_after) {
  absl::Time last_seen = absl::Now();
  while (true) {
    absl::SleepFor(absl::Seconds(1));
    absl::StatusOr<std::string> id = client->Alive(absl::Seconds(2));
    if (id.ok() && *id != client->launch_id()) {
      std::fprintf(stderr, "worker: the coordinator at %s is another launch now; exiting 1\n",
                   client->coordinator_address().c_str());
      std::_Exit(1);
    }
    if (id.ok()) {
      last_seen = absl::Now();
    } else if (absl::Now() - last_seen > lost_after) {
      std::fprintf(stderr, "worker: the coordinator at %s has not answered for %s (%s); "
                   "exiting 1\n", client->coordinator_address().c_str(),
                   absl::FormatDuration(absl::Now() - last_seen).c_str(),
                   std::string(id.status().message()).c_str());
      std::_Exit(1);
    }
  }
}

int Main() {
  const std::string coordinator = absl::GetFlag(FLAGS_coordinator);
  const int rank = absl::GetFlag(FLAGS_rank);
  if (coordinator.empty()) return Fail("--coordinator=HOST:PORT is required", 2);
  if (rank < 0) return Fail(absl::StrCat("--rank = ", rank, " must be at least 0"), 2);
  if (absl::GetFlag(FLAGS_cluster_secret_file).empty()) {
    return Fail("--cluster_secret_file is required (the coordinator's cluster secret)", 2);
  }
  absl::StatusOr<std::string> secret =
      ReadClusterSecretFile(absl::GetFlag(FLAGS_cluster_secret_file));
  if (!secret.ok()) return Fail(std::string(secret.status().message()), 2);

  const std::string listen = absl::GetFlag(FLAGS_listen);
  const std::string host = AdvertisedHost(listen);
  ClusterControlClient client(coordinator, *secret);
  WorkerServiceOptions options;
  options.cluster_secret = *secret;
  options.rendezvous_store = &client.store();
  options.gloo_hostname = host;
  WorkerService service(options);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(256 << 20);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) return Fail(absl::StrCat("cannot listen on ", listen));
  const std::string address =
      absl::StrCat(host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host,
                   ":", port);
  absl::StatusOr<int> world =
      client.Join(rank, address, absl::Seconds(absl::GetFlag(FLAGS_join_timeout_s)));
  if (!world.ok()) return Fail(std::string(world.status().message()));
  std::fprintf(stderr, "worker: rank %d of %d serving on %s, joined %s\n", rank, *world,
               address.c_str(), coordinator.c_str());
  // SIGTERM ends the process at once, as a Shutdown call would.
  std::signal(SIGTERM, [](int) { std::_Exit(0); });
  if (absl::GetFlag(FLAGS_coordinator_lost_s) > 0) {
    std::thread([&client] {
      WatchCoordinator(&client, absl::Seconds(absl::GetFlag(FLAGS_coordinator_lost_s)));
    }).detach();
  }
  service.WaitForShutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  // Not `return`: the watchdog thread still uses `client`, which a return would destroy.
  std::fflush(stderr);
  std::_Exit(0);
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "A tpserve worker rank: worker --coordinator=HOST:PORT --rank=R --cluster_secret_file=F");
  absl::ParseCommandLine(argc, argv);
  return tpserve::Main();
}
