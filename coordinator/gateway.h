// The coordinator process's serving half: the engine over a set of worker ranks, the public
// gRPC service, grpc.health.v1 (SERVING only while every rank answers and no step has failed)
// and server reflection.
//
//   TP_ASSIGN_OR_RETURN(auto gateway, Gateway::Start(bundle, std::move(executor), options));
//   std::printf("serving on %s\n", gateway->address().c_str());  ...  gateway->Shutdown();
//
// Threading: Start/Shutdown from one thread; the gRPC service is multi-threaded.
#ifndef TPSERVE_COORDINATOR_GATEWAY_H_
#define TPSERVE_COORDINATOR_GATEWAY_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "coordinator/engine.h"
#include "coordinator/model_bundle.h"
#include "coordinator/server.h"

namespace tpserve {

struct GatewayOptions {
  std::string listen = "127.0.0.1:0";
  EngineOptions engine;
  ServedModelInfo info;
  absl::Duration health_interval = absl::Milliseconds(500);
  // Extra liveness check run by the health monitor (e.g. RemoteExecutor::Ping); OK = alive.
  std::function<absl::Status()> ranks_alive;
};

class Gateway {
 public:
  static absl::StatusOr<std::unique_ptr<Gateway>> Start(const ModelBundle* bundle,
                                                        std::unique_ptr<ModelExecutor> executor,
                                                        GatewayOptions options);
  ~Gateway();

  const std::string& address() const { return address_; }
  Engine& engine() { return *engine_; }
  // The serving status most recently published to grpc.health.v1.
  bool serving() const { return serving_.load(); }
  // The reason health went NOT_SERVING (OK while serving).
  absl::Status last_health_error() const;
  void Shutdown();

 private:
  Gateway() = default;
  void MonitorHealth();

  GatewayOptions options_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<TpServeService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::atomic<bool> serving_{false};
  mutable absl::Mutex mu_;
  absl::Status health_error_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread monitor_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_GATEWAY_H_
