#include "deploy/stream_client.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/file_text.h"
#include "base/status_macros.h"
#include "base/grpc_status.h"
#include "proto/tpserve.grpc.pb.h"

namespace tpserve {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& option, const std::string& path) {
  std::optional<std::string> text = ReadFileText(path);
  if (!text) return absl::NotFoundError(absl::StrCat(option, " = ", path, ": cannot read the file"));
  return *std::move(text);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(
    const StreamClientOptions& o) {
  if (o.tls_ca_file.empty() && o.tls_cert_file.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  if (!o.tls_ca_file.empty()) {
    TP_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile("tls_ca_file", o.tls_ca_file));
  }
  if (!o.tls_cert_file.empty()) {
    TP_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadFile("tls_cert_file", o.tls_cert_file));
    TP_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadFile("tls_key_file", o.tls_key_file));
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::Status StreamChat(const std::string& address, const std::string& message,
                        const StreamClientOptions& options, std::FILE* out) {
  namespace pb = ::tpserve::v1;
  TP_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials, Credentials(options));
  auto stub = pb::TpServe::NewStub(grpc::CreateChannel(address, credentials));
  pb::GenerateRequest req;
  if (!options.system.empty()) {
    pb::ChatMessage* m = req.mutable_chat()->add_messages();
    m->set_role("system");
    m->set_content(options.system);
  }
  pb::ChatMessage* m = req.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content(message);
  req.mutable_sampling()->set_temperature(options.temperature);
  req.set_max_new_tokens(options.max_new_tokens);

  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + options.deadline));
  if (!options.bearer_token.empty()) {
    ctx.AddMetadata("authorization", absl::StrCat("Bearer ", options.bearer_token));
  }
  auto reader = stub->Generate(&ctx, req);
  pb::GenerateResponse r;
  pb::Usage usage;
  while (reader->Read(&r)) {
    std::fputs(r.text().c_str(), out);
    std::fflush(out);
    if (r.has_usage()) usage = r.usage();
  }
  std::fputc('\n', out);
  std::fflush(out);
  grpc::Status status = reader->Finish();
  if (status.ok() && options.print_usage) {
    const double tps = usage.decode_time_s() > 0
                           ? (usage.completion_tokens() - 1) / usage.decode_time_s() : 0.0;
    std::fprintf(stderr, "[prompt %d tokens, output %d tokens, first token %.3f s, decode %.1f tokens/s]\n",
                 usage.prompt_tokens(), usage.completion_tokens(), usage.time_to_first_token_s(), tps);
  }
  return FromGrpcStatus(status);
}

}  // namespace tpserve
