#include "coordinator/gateway.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "base/file_text.h"
#include "base/status_macros.h"

namespace tpserve {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& what, const std::string& path) {
  std::optional<std::string> text = ReadFileText(path);
  if (!text) return absl::NotFoundError(absl::StrCat(what, " = ", path, ": cannot read the file"));
  if (text->find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, " = ", path, ": not a PEM file"));
  }
  return *std::move(text);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const TlsFiles& tls) {
  if (!tls.enabled()) {
    if (!tls.key_file.empty() || !tls.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "tls_cert_file is empty: a key or client CA file needs a certificate too");
    }
    return grpc::InsecureServerCredentials();
  }
  if (tls.key_file.empty()) {
    return absl::InvalidArgumentError("tls_key_file is empty: a certificate needs its key");
  }
  grpc::SslServerCredentialsOptions options(
      tls.client_ca_file.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                 : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  TP_ASSIGN_OR_RETURN(std::string cert, ReadPem("tls_cert_file", tls.cert_file));
  TP_ASSIGN_OR_RETURN(std::string key, ReadPem("tls_key_file", tls.key_file));
  if (!tls.client_ca_file.empty()) {
    TP_ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem("tls_client_ca_file", tls.client_ca_file));
  }
  options.pem_key_cert_pairs.push_back({key, cert});
  return grpc::SslServerCredentials(options);
}

}  // namespace

bool IsLoopbackHost(std::string_view host_view) {
  absl::string_view host(host_view.data(), host_view.size());
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost" || host == "::1") return true;
  const std::vector<absl::string_view> parts = absl::StrSplit(host, '.');
  int first = 0;
  return parts.size() == 4 && absl::SimpleAtoi(parts[0], &first) && first == 127;
}

absl::StatusOr<std::unique_ptr<Gateway>> Gateway::Start(const ModelBundle* bundle,
                                                        std::unique_ptr<ModelExecutor> executor,
                                                        GatewayOptions options,
                                                        std::unique_ptr<Proposer> proposer) {
  if (!bundle->tokenizer.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", bundle->files.path, " has no tokenizer"));
  }
  std::unique_ptr<Gateway> g(new Gateway());
  g->options_ = std::move(options);
  TP_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                      Credentials(g->options_.tls));
  const std::string host = g->options_.listen.substr(0, g->options_.listen.rfind(':'));
  if (!IsLoopbackHost(host) && !g->options_.tls.enabled()) {
    g->warnings_.push_back(absl::StrCat(
        "listening on ", host, " (not loopback) without TLS: requests, tokens and any bearer "
        "token travel in plaintext; give --tls_cert_file and --tls_key_file"));
  }
  g->engine_ = std::make_unique<Engine>(g->options_.engine, std::move(executor),
                                        &*bundle->tokenizer, std::move(proposer));
  ModelLimits limits;
  limits.vocab_size = bundle->files.config.vocab_size;
  limits.context_length = g->options_.engine.context_length;
  g->options_.frontend.max_running = g->options_.engine.scheduler.max_num_seqs;
  if (g->options_.structured.has_value()) {
    TP_ASSIGN_OR_RETURN(g->constraints_,
                        ConstraintCompiler::Create(*bundle->tokenizer,
                                                   static_cast<int32_t>(limits.vocab_size),
                                                   g->options_.engine.eos_token_ids,
                                                   *g->options_.structured));
    g->options_.frontend.constraints = g->constraints_.get();
  }
  g->frontend_ = std::make_unique<Frontend>(
      g->engine_.get(), &*bundle->tokenizer,
      bundle->chat_template.has_value() ? &*bundle->chat_template : nullptr, g->options_.info,
      limits, g->options_.frontend);
  g->service_ = std::make_unique<TpServeService>(g->frontend_.get());

  grpc::EnableDefaultHealthCheckService(true);
  if (g->options_.reflection.value_or(IsLoopbackHost(host))) {
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(g->options_.listen, credentials, &port);
  builder.RegisterService(g->service_.get());
  g->server_ = builder.BuildAndStart();
  if (g->server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", g->options_.listen));
  }
  g->address_ = absl::StrCat(host, ":", port);
  if (g->options_.http_port != 0) {
    HttpServerOptions http;
    http.host = host;
    http.port = g->options_.http_port;
    http.tls_cert_file = g->options_.tls.cert_file;
    http.tls_key_file = g->options_.tls.key_file;
    http.tls_client_ca_file = g->options_.tls.client_ca_file;
    http.http_threads = g->options_.http_threads;
    http.serving = [gw = g.get()] { return gw->serving_.load(); };
    absl::StatusOr<std::unique_ptr<HttpServer>> started =
        HttpServer::Start(g->frontend_.get(), http);
    if (!started.ok()) return started.status();
    g->http_ = *std::move(started);
  }
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
    absl::MutexLock lock(&mu_);  // against Drain: once draining, never SERVING again
    const bool serving = s.ok() && !draining_.load();
    if (serving != serving_.load()) {
      server_->GetHealthCheckService()->SetServingStatus(serving);
      serving_ = serving;
    }
    health_error_ = s;
  }
}

absl::Status Gateway::last_health_error() const {
  absl::MutexLock lock(&mu_);
  return health_error_;
}

int64_t Gateway::Drain(absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    server_->GetHealthCheckService()->SetServingStatus(false);
    serving_ = false;
  }
  frontend_->BeginDrain();
  if (frontend_->WaitIdle(timeout)) return 0;
  const int64_t left = frontend_->in_flight();
  frontend_->CancelAll();
  frontend_->WaitIdle(absl::Seconds(5));  // cancelled requests end at the next step
  return left;
}

void Gateway::Shutdown() {
  if (stop_.HasBeenNotified()) return;
  stop_.Notify();
  if (monitor_.joinable()) monitor_.join();
  server_->GetHealthCheckService()->SetServingStatus(false);
  if (http_ != nullptr) http_->Shutdown();  // its open streams end with an error event
  engine_->Stop();  // ends every open gRPC stream with UNAVAILABLE
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

Gateway::~Gateway() { Shutdown(); }

}  // namespace tpserve
