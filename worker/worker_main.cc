// A worker rank process: serves tpserve.worker.v1.Worker until the coordinator says Shutdown
// or it gets SIGTERM. Launched by //deploy:launch, one per rank.
//
//   worker --listen=127.0.0.1:0 --port_file=/tmp/run/rank0.port
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "worker/worker_service.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0", "address to serve the worker protocol on");
ABSL_FLAG(std::string, port_file, "", "write the bound port here once serving");

namespace {
tpserve::WorkerService* g_service = nullptr;
}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  tpserve::WorkerService service;
  g_service = &service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen), grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(256 << 20);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "worker: cannot listen on %s\n", absl::GetFlag(FLAGS_listen).c_str());
    return 1;
  }
  if (!absl::GetFlag(FLAGS_port_file).empty()) {
    const std::string tmp = absl::GetFlag(FLAGS_port_file) + ".tmp";
    std::ofstream(tmp) << port << "\n";
    std::rename(tmp.c_str(), absl::GetFlag(FLAGS_port_file).c_str());  // appears whole
  }
  // SIGTERM ends the process through the same path as a Shutdown call.
  std::signal(SIGTERM, [](int) { std::_Exit(0); });
  service.WaitForShutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}
