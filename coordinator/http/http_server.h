// The OpenAI-compatible HTTP front of the coordinator, on cpp-httplib (Debian's
// libcpp-httplib 0.11). Every generation goes through the same door as gRPC
// (coordinator/frontend.h): same validation, limits, admission control, metrics and logs.
//
//   HttpServerOptions o;  o.port = 0;  o.serving = [&] { return engine.health().ok(); };
//   TP_ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> http, HttpServer::Start(&frontend, o));
//   ... http->base_url() ...  http->Shutdown();
//
// Routes:
//   POST /v1/chat/completions, POST /v1/completions   (openai_api.h: what is accepted)
//        stream=false: one JSON object. stream=true: server-sent events, `data: {chunk}` per
//        event and `data: [DONE]` at the end (after a usage-only chunk with
//        stream_options.include_usage). An error before the 200 is an HTTP error with OpenAI's
//        error object; an error after it (the engine failed, the deadline passed) is one
//        `data: {"error": {...}}` event and the end of the stream, with no [DONE].
//        While a stream waits for tokens, an SSE comment (": keep-alive") goes out every
//        second, so a client that went away is noticed (and its request cancelled, KV freed)
//        within about two seconds even before the next token.
//   GET  /v1/models, /v1/models/{id}   the served model (context_length as an extra field)
//   GET  /metrics   Prometheus text format 0.0.4 (the frontend's registry)
//   GET  /health    200 {"status":"ok"} while `serving()` is true and the door is not
//                   draining, else 503. No authentication: load balancers probe it.
// Every other route needs `Authorization: Bearer <token>` when the frontend has a token
// (401, code "invalid_api_key", otherwise); /metrics too, since Prometheus can send one.
// Request ids: the client's `X-Request-Id` header becomes the request id (else the door makes
// one); it comes back as the `X-Request-Id` header and in the object id ("chatcmpl-<id>").
// TLS: tls_cert_file + tls_key_file (PEM) turn on HTTPS (TLS 1.2+); tls_client_ca_file also
// requires every client to present a certificate signed by that CA.
//
// Threading and its limit: cpp-httplib serves each connection on a thread of a fixed pool
// (`http_threads`), and an open stream holds its thread until the stream ends. At most
// `http_threads` requests are served at once; further connections wait in the pool's queue
// (not refused). The gRPC port, on gRPC's callback API, has no such limit; size http_threads
// to the streams you expect (the engine's own queue bound still applies to both).
// A non-streaming request whose client disconnects is not noticed: it runs to its end.
// Start, port, base_url and Shutdown are thread-safe.
#ifndef TPSERVE_COORDINATOR_HTTP_HTTP_SERVER_H_
#define TPSERVE_COORDINATOR_HTTP_HTTP_SERVER_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/frontend.h"
#include "coordinator/http/openai_api.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace tpserve {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0 = any free port (see HttpServer::port())
  // PEM files. cert + key: HTTPS. client CA as well: clients must present a certificate it signed.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  int http_threads = 64;  // connections served at once; each open stream holds one
  // /health is 200 while this returns true (unset: always) and the frontend is not draining.
  std::function<bool()> serving;
  // Deadline of each generation, from its arrival (infinite: none).
  absl::Duration request_timeout = absl::InfiniteDuration();
  size_t max_body_bytes = 16 << 20;  // larger bodies get 413
};

class HttpServer {
 public:
  // Listens and serves on a thread of its own. INVALID_ARGUMENT for inconsistent TLS options or
  // unreadable/invalid PEM files (naming the option and the file), UNAVAILABLE when the port
  // cannot be bound. `frontend` must outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(Frontend* frontend,
                                                           HttpServerOptions options);
  ~HttpServer();  // Shutdown()

  int port() const { return port_; }
  std::string base_url() const;  // "http://127.0.0.1:8080" or "https://..."

  // Stops accepting, ends open streams (their requests are cancelled) and joins every thread.
  // Idempotent. Call before the frontend's engine stops.
  void Shutdown();

 private:
  struct Stream;
  HttpServer(Frontend* frontend, HttpServerOptions options);
  void AddRoutes();

  void HandleGenerate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  void Respond(const std::shared_ptr<Stream>& stream, httplib::Response& res);
  void RespondStreaming(const std::shared_ptr<Stream>& stream, httplib::Response& res);
  // POST /tokenize (vLLM's): the prompt a chat or a prompt becomes, its ids and, for a chat,
  // the rendered text ("prompt").
  void HandleTokenize(const httplib::Request& req, httplib::Response& res);
  void HandleModels(const httplib::Request& req, httplib::Response& res);
  void SendError(const absl::Status& status, httplib::Response& res) const;
  // Counts a refusal before the door, then SendError.
  void Refuse(const absl::Status& status, httplib::Response& res);
  void EndGeneration();
  bool Authorized(const httplib::Request& req, httplib::Response& res);

  Frontend* const frontend_;
  const HttpServerOptions options_;
  const int64_t started_unix_s_;
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  // Admitted generations whose response has not finished; Shutdown lets them end first, since
  // once the library stops it writes nothing more (not even the stream's closing error event).
  absl::Mutex mu_;
  int open_generations_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_HTTP_HTTP_SERVER_H_
