// The coordinator process's serving half: the engine over a set of worker ranks, the request
// door (coordinator/frontend.h), the public gRPC service (TLS and a bearer token optional),
// grpc.health.v1 (SERVING only while every rank answers, no step has failed and no drain has
// begun) and server reflection (on loopback addresses, or when asked for).
//
//   TP_ASSIGN_OR_RETURN(auto gateway, Gateway::Start(bundle, std::move(executor), options));
//   std::printf("serving on %s\n", gateway->address().c_str());
//   ...  gateway->Drain(absl::Seconds(30));  gateway->Shutdown();
//
// Threading: Start/Shutdown from one thread; the gRPC service is multi-threaded.
#ifndef TPSERVE_COORDINATOR_GATEWAY_H_
#define TPSERVE_COORDINATOR_GATEWAY_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "coordinator/engine.h"
#include "coordinator/frontend.h"
#include "coordinator/http/http_server.h"
#include "coordinator/model_bundle.h"
#include "coordinator/server.h"
#include "coordinator/structured/compiler.h"

namespace tpserve {

// PEM files for the public ports. No cert: plaintext. A client CA: clients must present a
// certificate it signed (mutual TLS).
struct TlsFiles {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  bool enabled() const { return !cert_file.empty(); }
};

// True for 127.0.0.0/8, ::1 and "localhost" (a host without its port).
bool IsLoopbackHost(std::string_view host);

struct GatewayOptions {
  std::string listen = "127.0.0.1:0";
  EngineOptions engine;
  ServedModelInfo info;
  FrontendOptions frontend;
  TlsFiles tls;
  // Server reflection: by default only on a loopback address.
  std::optional<bool> reflection;
  // The OpenAI-compatible HTTP front on the same host (0: none), with the same TLS files.
  // Structured output (coordinator/structured/compiler.h); unset: constrained requests are
  // refused with FAILED_PRECONDITION.
  std::optional<ConstraintLimits> structured = ConstraintLimits{};
  int http_port = 0;
  int http_threads = 64;
  absl::Duration health_interval = absl::Milliseconds(500);
  // Extra liveness check run by the health monitor (e.g. RemoteExecutor::Ping); OK = alive.
  std::function<absl::Status()> ranks_alive;
};

class Gateway {
 public:
  // `proposer`: speculative decoding's drafts (Engine's constructor says when it may be null).
  static absl::StatusOr<std::unique_ptr<Gateway>> Start(const ModelBundle* bundle,
                                                        std::unique_ptr<ModelExecutor> executor,
                                                        GatewayOptions options,
                                                        std::unique_ptr<Proposer> proposer = nullptr);
  ~Gateway();

  const std::string& address() const { return address_; }
  // "http://host:port" (or https), empty without an HTTP front.
  std::string http_url() const { return http_ == nullptr ? "" : http_->base_url(); }
  Engine& engine() { return *engine_; }
  Frontend& frontend() { return *frontend_; }
  // Warnings about the configuration (e.g. plaintext on a non-loopback address), for the log.
  const std::vector<std::string>& warnings() const { return warnings_; }
  // The serving status most recently published to grpc.health.v1.
  bool serving() const { return serving_.load(); }
  // The reason health went NOT_SERVING (OK while serving).
  absl::Status last_health_error() const;
  // Graceful drain: health goes NOT_SERVING, new requests get UNAVAILABLE, requests in flight
  // may finish within `timeout`; whatever is left then is cancelled. Returns how many were.
  int64_t Drain(absl::Duration timeout);
  void Shutdown();

 private:
  Gateway() = default;
  void MonitorHealth();

  GatewayOptions options_;
  std::unique_ptr<ConstraintCompiler> constraints_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Frontend> frontend_;
  std::unique_ptr<TpServeService> service_;
  std::vector<std::string> warnings_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::string address_;
  std::atomic<bool> serving_{false};
  std::atomic<bool> draining_{false};
  mutable absl::Mutex mu_;
  absl::Status health_error_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread monitor_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_GATEWAY_H_
