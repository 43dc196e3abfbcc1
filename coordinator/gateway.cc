#include "coordinator/gateway.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"

namespace tpserve {

absl::StatusOr<std::unique_ptr<Gateway>> Gateway::Start(const ModelBundle* bundle,
                                                        std::unique_ptr<ModelExecutor> executor,
                                                        GatewayOptions options) {
  if (!bundle->tokenizer.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", bundle->files.path, " has no tokenizer"));
  }
  std::unique_ptr<Gateway> g(new Gateway());
  g->options_ = std::move(options);
  g->engine_ = std::make_unique<Engine>(g->options_.engine, std::move(executor),
                                        &*bundle->tokenizer);
  ModelLimits limits;
  limits.vocab_size = bundle->files.config.vocab_size;
  limits.context_length = g->options_.engine.context_length;
  g->service_ = std::make_unique<TpServeService>(
      g->engine_.get(), &*bundle->tokenizer,
      bundle->chat_template.has_value() ? &*bundle->chat_template : nullptr, g->options_.info,
      limits);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(g->options_.listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(g->service_.get());
  g->server_ = builder.BuildAndStart();
  if (g->server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", g->options_.listen));
  }
  const std::string host = g->options_.listen.substr(0, g->options_.listen.rfind(':'));
  g->address_ = absl::StrCat(host, ":", port);
  g->engine_->Start();
  g->server_->GetHealthCheckService()->SetServingStatus(true);
  g->serving_ = true;
  g->monitor_ = std::thread([gw = g.get()] { gw->MonitorHealth(); });
  return g;
}

void Gateway::MonitorHealth() {
  while (!stop_.WaitForNotificationWithTimeout(options_.health_interval)) {
    absl::Status s = engine_->health();
    if (s.ok() && options_.ranks_alive) s = options_.ranks_alive();
    const bool serving = s.ok();
    if (serving != serving_.load()) {
      server_->GetHealthCheckService()->SetServingStatus(serving);
      serving_ = serving;
    }
    absl::MutexLock lock(&mu_);
    health_error_ = s;
  }
}

absl::Status Gateway::last_health_error() const {
  absl::MutexLock lock(&mu_);
  return health_error_;
}

void Gateway::Shutdown() {
  if (stop_.HasBeenNotified()) return;
  stop_.Notify();
  if (monitor_.joinable()) monitor_.join();
  server_->GetHealthCheckService()->SetServingStatus(false);
  engine_->Stop();  // ends every open stream with UNAVAILABLE
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

Gateway::~Gateway() { Shutdown(); }

}  // namespace tpserve
