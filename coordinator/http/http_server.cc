#include "coordinator/http/http_server.h"

#include <sys/socket.h>

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "coordinator/http/elastic_task_queue.h"
#include "coordinator/tokenizer/utf8.h"

namespace tpserve {
namespace {

using Json = nlohmann::json;

constexpr char kJson[] = "application/json";
constexpr char kPrometheusText[] = "text/plain; version=0.0.4; charset=utf-8";
// How long a waiting stream sleeps before it looks at the server's state, and how long it may
// stay silent before it writes a keep-alive comment (which is how a gone client is noticed).
constexpr absl::Duration kPollInterval = absl::Milliseconds(200);
constexpr absl::Duration kKeepAliveInterval = absl::Seconds(1);
// On shutdown, how long to wait for the engine to confirm a cancellation.
constexpr absl::Duration kCancelGrace = absl::Seconds(2);

// Events of one request, from the engine's step thread (Push never blocks for long) to the
// HTTP thread that writes them.
class EventQueue {
 public:
  void Push(GenerationEvent event) {
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(event));
  }
  // Whatever has arrived, waiting up to `timeout` for the first event.
  std::vector<GenerationEvent> Take(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(this, &EventQueue::HasEvents), timeout);
    std::vector<GenerationEvent> out(std::make_move_iterator(events_.begin()),
                                     std::make_move_iterator(events_.end()));
    events_.clear();
    return out;
  }

 private:
  bool HasEvents() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !events_.empty(); }
  absl::Mutex mu_;
  std::deque<GenerationEvent> events_ ABSL_GUARDED_BY(mu_);
};

std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    absl::StrAppend(&out, out.empty() ? "" : "; ", buf);
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

// Server-side TLS from PEM files; on failure `error` names the option and the file.
bool ConfigureTls(SSL_CTX& ctx, const HttpServerOptions& o, std::string& error) {
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION);
  if (SSL_CTX_use_certificate_chain_file(&ctx, o.tls_cert_file.c_str()) != 1) {
    error = absl::StrCat("tls_cert_file ", o.tls_cert_file, ": ", OpenSslErrors());
    return false;
  }
  if (SSL_CTX_use_PrivateKey_file(&ctx, o.tls_key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    error = absl::StrCat("tls_key_file ", o.tls_key_file, ": ", OpenSslErrors());
    return false;
  }
  if (SSL_CTX_check_private_key(&ctx) != 1) {
    error = absl::StrCat("tls_key_file ", o.tls_key_file, " does not match tls_cert_file ",
                         o.tls_cert_file);
    return false;
  }
  if (!o.tls_client_ca_file.empty()) {
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.tls_client_ca_file.c_str());
    if (names == nullptr ||
        SSL_CTX_load_verify_locations(&ctx, o.tls_client_ca_file.c_str(), nullptr) != 1) {
      if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
      error = absl::StrCat("tls_client_ca_file ", o.tls_client_ca_file, ": ", OpenSslErrors());
      return false;
    }
    SSL_CTX_set_client_CA_list(&ctx, names);  // takes ownership
    SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return true;
}

absl::StatusOr<std::unique_ptr<httplib::Server>> MakeServer(const HttpServerOptions& o) {
  const bool tls = !o.tls_cert_file.empty() || !o.tls_key_file.empty();
  if (!tls) {
    if (!o.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "tls_client_ca_file is set but tls_cert_file and tls_key_file are not");
    }
    return std::make_unique<httplib::Server>();
  }
  if (o.tls_cert_file.empty() || o.tls_key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        o.tls_cert_file.empty() ? "tls_cert_file" : "tls_key_file",
        " is empty: HTTPS needs both tls_cert_file and tls_key_file"));
  }
  std::string error;
  auto server = std::make_unique<httplib::SSLServer>(
      [&](SSL_CTX& ctx) { return ConfigureTls(ctx, o, error); });
  if (!server->is_valid()) {
    return absl::InvalidArgumentError(error.empty() ? "cannot create a TLS context" : error);
  }
  return server;
}

}  // namespace

// One admitted generation, shared by the handler, the stream provider and its releaser.
struct HttpServer::Stream {
  Stream(const OpenAiRequest& request, const Admitted& a, const std::string& model,
         const Tokenizer* tokenizer)
      : admitted(a),
        builder(request, a.request_id, model, absl::ToUnixSeconds(absl::Now()), tokenizer) {
    builder.SetPromptIds(a.prompt_ids);
  }

  std::shared_ptr<EventQueue> queue = std::make_shared<EventQueue>();
  Admitted admitted;
  ResponseBuilder builder;
  bool finished = false;  // every choice's finishing event has been handled, or an error
  absl::Time last_write = absl::Now();
  absl::Time cancelled_at = absl::InfiniteFuture();  // when shutdown cancelled it
};

HttpServer::HttpServer(Frontend* frontend, HttpServerOptions options)
    : frontend_(frontend),
      options_(std::move(options)),
      started_unix_s_(absl::ToUnixSeconds(absl::Now())) {}

HttpServer::~HttpServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(Frontend* frontend,
                                                              HttpServerOptions options) {
  if (options.http_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("http_threads = ", options.http_threads, " is invalid: must be at least 1"));
  }
  std::unique_ptr<HttpServer> s(new HttpServer(frontend, std::move(options)));
  const HttpServerOptions& o = s->options_;
  absl::StatusOr<std::unique_ptr<httplib::Server>> server = MakeServer(o);
  if (!server.ok()) return server.status();
  s->server_ = *std::move(server);
  const size_t threads = static_cast<size_t>(o.http_threads);
  s->server_->new_task_queue = [threads] { return new ElasticTaskQueue(threads); };
  s->server_->set_payload_max_length(o.max_body_bytes);
  s->AddRoutes();
  // Debian's compiled cpp-httplib listens with a backlog of 5 (its CPPHTTPLIB_LISTEN_BACKLOG
  // default, fixed in the shared library): bursts of new connections were reset before any
  // request was read (the soak saw 5 in 1899). Remember the listening socket and listen again
  // on it with the system's maximum once it is bound (Linux then updates the backlog).
  int listen_fd = -1;
  s->server_->set_socket_options([&listen_fd](int sock) {
    httplib::default_socket_options(sock);
    listen_fd = sock;
  });

  errno = 0;
  if (o.port == 0) {
    s->port_ = s->server_->bind_to_any_port(o.host);
  } else {
    s->port_ = s->server_->bind_to_port(o.host, o.port) ? o.port : -1;
  }
  if (s->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("http: cannot listen on ", o.host, ":", o.port,
                                               ": ", errno != 0 ? std::strerror(errno) : "bind failed"));
  }
  if (listen_fd >= 0 && ::listen(listen_fd, SOMAXCONN) != 0) {
    return absl::UnavailableError(absl::StrCat("http: listen(", o.host, ":", s->port_,
                                               ", SOMAXCONN) failed: ", std::strerror(errno)));
  }
  httplib::Server* raw = s->server_.get();
  s->thread_ = std::thread([raw] { raw->listen_after_bind(); });
  return s;
}

std::string HttpServer::base_url() const {
  const bool tls = !options_.tls_cert_file.empty();
  return absl::StrCat(tls ? "https://" : "http://", options_.host, ":", port_);
}

void HttpServer::Shutdown() {
  if (stopping_.exchange(true) || server_ == nullptr) return;  // null: Start failed
  {
    // Open generations see stopping_, cancel themselves and send their last words.
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_generations_ == 0; };
    mu_.AwaitWithTimeout(absl::Condition(&idle), kCancelGrace + absl::Seconds(1));
  }
  server_->stop();
  if (thread_.joinable()) thread_.join();  // listen_after_bind joins the pool on its way out
}

void HttpServer::AddRoutes() {
  httplib::Server& s = *server_;
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(Endpoint::kChatCompletions, req, res);
  });
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(Endpoint::kCompletions, req, res);
  });
  s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    HandleTokenize(req, res);
  });
  s.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    HandleModels(req, res);
  });
  s.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    HandleModels(req, res);
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const bool ok = (!options_.serving || options_.serving()) && !frontend_->draining();
    res.status = ok ? 200 : 503;
    res.set_content(ok ? R"({"status":"ok"})" : R"({"status":"unavailable"})", kJson);
  });
  s.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorized(req, res)) return;
    res.set_content(frontend_->metrics().Render(), kPrometheusText);
  });
  // Unknown routes, 413 and the library's other refusals get an OpenAI error body too; a
  // response that already has one is left alone.
  s.set_error_handler(httplib::Server::HandlerWithResponse(
      [max_body = options_.max_body_bytes](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    std::string message;
    if (res.status == 404) {
      message = absl::StrCat("no route ", req.method, " ", req.path);
    } else if (res.status == 413) {
      message = absl::StrCat("the request body is over the limit of ", max_body, " bytes");
    } else {
      message = absl::StrCat("the request was refused with HTTP ", res.status);
    }
    Json error = {{"error",
                   {{"message", message}, {"type", "invalid_request_error"}, {"param", nullptr},
                    {"code", nullptr}}}};
    res.set_content(DumpJson(error), kJson);
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([this](const httplib::Request&, httplib::Response& res,
                                 std::exception_ptr) {
    SendError(absl::InternalError("unexpected exception in the HTTP handler"), res);
  });
}

void HttpServer::SendError(const absl::Status& status, httplib::Response& res) const {
  HttpError e = ToHttpError(status);
  res.status = e.http_status;
  if (status.code() == absl::StatusCode::kResourceExhausted ||
      status.code() == absl::StatusCode::kUnavailable) {
    res.set_header("Retry-After", std::to_string(frontend_->retry_after_s()));
  }
  res.set_content(e.body, kJson);
}

void HttpServer::Refuse(const absl::Status& status, httplib::Response& res) {
  frontend_->RecordRejected(status);
  SendError(status, res);
}

bool HttpServer::Authorized(const httplib::Request& req, httplib::Response& res) {
  absl::Status auth = frontend_->CheckAuth(req.get_header_value("Authorization"));
  if (auth.ok()) return true;
  Refuse(auth, res);
  res.set_header("WWW-Authenticate", "Bearer");
  return false;
}

void HttpServer::HandleModels(const httplib::Request& req, httplib::Response& res) {
  if (!Authorized(req, res)) return;
  const ServedModelInfo& info = frontend_->info();
  Json model = {{"id", info.name},
                {"object", "model"},
                {"created", started_unix_s_},
                {"owned_by", "tpserve"},
                {"context_length", frontend_->limits().context_length}};
  if (req.matches.size() > 1) {
    if (req.matches[1] != info.name) {
      return SendError(WithCode(absl::NotFoundError(absl::StrCat("the model `", req.matches[1].str(),
                                                                 "` does not exist")),
                                "model_not_found"),
                       res);
    }
    return res.set_content(DumpJson(model), kJson);
  }
  res.set_content(DumpJson({{"object", "list"}, {"data", Json::array({model})}}), kJson);
}

void HttpServer::HandleTokenize(const httplib::Request& req, httplib::Response& res) {
  if (!Authorized(req, res)) return;
  absl::StatusOr<OpenAiRequest> parsed =
      ParseOpenAiRequest(Endpoint::kTokenize, req.body, frontend_->info().name);
  if (!parsed.ok()) return Refuse(parsed.status(), res);
  absl::StatusOr<BuiltPrompt> prompt = [&]() -> absl::StatusOr<BuiltPrompt> {
    TP_ASSIGN_OR_RETURN(ValidatedInput in,
                        ValidateGenerateRequest(parsed->proto, frontend_->limits()));
    return frontend_->admitter().BuildPrompt(in);
  }();
  if (!prompt.ok()) return Refuse(ToClientFieldNames(prompt.status(), *parsed), res);
  Json out = {{"count", prompt->ids.size()},
              {"max_model_len", frontend_->limits().context_length},
              {"tokens", prompt->ids}};
  if (parsed->proto.has_chat()) out["prompt"] = prompt->text;
  if (parsed->return_token_strs) {
    Json strs = Json::array();
    for (int32_t id : prompt->ids) {
      absl::StatusOr<std::string> piece = frontend_->tokenizer().Decode({id});
      strs.push_back(piece.ok() ? SanitizeUtf8(*piece) : std::string());
    }
    out["token_strs"] = std::move(strs);
  }
  res.set_content(DumpJson(out), kJson);
}

void HttpServer::HandleGenerate(Endpoint endpoint, const httplib::Request& req,
                                httplib::Response& res) {
  const std::string client_request_id = req.get_header_value("X-Request-Id");
  if (!client_request_id.empty()) res.set_header("X-Request-Id", client_request_id);
  if (!Authorized(req, res)) return;
  absl::StatusOr<OpenAiRequest> parsed =
      ParseOpenAiRequest(endpoint, req.body, frontend_->info().name);
  if (!parsed.ok()) return Refuse(parsed.status(), res);
  parsed->proto.set_request_id(client_request_id);

  auto queue = std::make_shared<EventQueue>();
  const absl::Time deadline = options_.request_timeout == absl::InfiniteDuration()
                                  ? absl::InfiniteFuture()
                                  : absl::Now() + options_.request_timeout;
  // The door counts its own refusals.
  absl::StatusOr<Admitted> admitted = frontend_->Generate(
      parsed->proto, deadline, [queue](GenerationEvent e) { queue->Push(std::move(e)); });
  if (!admitted.ok()) return SendError(ToClientFieldNames(admitted.status(), *parsed), res);

  {
    absl::MutexLock lock(&mu_);
    ++open_generations_;
  }
  auto stream = std::make_shared<Stream>(*parsed, *admitted, frontend_->info().name,
                                         &frontend_->tokenizer());
  stream->queue = std::move(queue);
  res.set_header("X-Request-Id", admitted->request_id);
  if (parsed->stream) {
    RespondStreaming(stream, res);
  } else {
    Respond(stream, res);
  }
}

// Non-streaming: wait for the finishing event, then answer once.
void HttpServer::Respond(const std::shared_ptr<Stream>& s, httplib::Response& res) {
  absl::Status status;
  while (!s->finished) {
    if (stopping_ && s->cancelled_at == absl::InfiniteFuture()) {
      frontend_->Cancel(s->admitted.id);
      s->cancelled_at = absl::Now();
    }
    if (absl::Now() - s->cancelled_at > kCancelGrace) {
      status = absl::UnavailableError("the HTTP server is shutting down");
      break;
    }
    for (GenerationEvent& e : s->queue->Take(kPollInterval)) {
      if (s->finished) break;
      s->builder.Append(e);
      if (e.finish == FinishReason::kNone) continue;
      // The first choice that ends abnormally ends the response (the door cancels the rest).
      status = FinishStatus(e.finish, e.error);
      s->finished = !status.ok() || s->builder.done();
    }
  }
  if (stopping_ && status.code() == absl::StatusCode::kCancelled) {
    status = absl::UnavailableError("the HTTP server is shutting down");
  }
  if (status.ok()) {
    res.set_content(DumpJson(s->builder.Final()), kJson);
  } else {
    SendError(status, res);
  }
  EndGeneration();
}

void HttpServer::EndGeneration() {
  absl::MutexLock lock(&mu_);
  --open_generations_;
}

// Streaming: a chunked provider that cpp-httplib calls on this connection's pool thread until
// it calls done() or returns false (the client is gone, or the server stops).
void HttpServer::RespondStreaming(const std::shared_ptr<Stream>& s, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, s](size_t /*offset*/, httplib::DataSink& sink) -> bool {
        if (stopping_ && s->cancelled_at == absl::InfiniteFuture()) {
          frontend_->Cancel(s->admitted.id);
          s->cancelled_at = absl::Now();
        }
        std::string out;
        for (GenerationEvent& e : s->queue->Take(kPollInterval)) {
          if (s->finished) break;
          absl::Status status = FinishStatus(e.finish, e.error);
          if (!status.ok()) {
            if (stopping_ && status.code() == absl::StatusCode::kCancelled) {
              status = absl::UnavailableError("the HTTP server is shutting down");
            }
            out += SseData(ErrorObject(status));
            s->finished = true;
            break;
          }
          for (const Json& chunk : s->builder.StreamChunks(e)) out += SseData(chunk);
          if (s->builder.done()) {
            if (Json usage = s->builder.UsageChunk(); !usage.is_null()) out += SseData(usage);
            out += kSseDone;
            s->finished = true;
          }
        }
        if (out.empty() && !s->finished) {
          if (absl::Now() - s->cancelled_at > kCancelGrace) return false;
          if (absl::Now() - s->last_write < kKeepAliveInterval) return true;
          out = ": keep-alive\n\n";
        }
        if (!out.empty()) {
          if (!sink.write(out.data(), out.size())) return false;  // the client is gone
          s->last_write = absl::Now();
        }
        if (s->finished) sink.done();
        return true;
      },
      [this, s](bool /*success*/) {
        if (!s->finished) frontend_->Cancel(s->admitted.id);  // frees its KV blocks
        EndGeneration();
      });
}

}  // namespace tpserve
