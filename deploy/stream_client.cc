#include "deploy/stream_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/time/clock.h"
#include "coordinator/grpc_status.h"
#include "proto/tpserve.grpc.pb.h"

namespace tpserve {

absl::Status StreamChat(const std::string& address, const std::string& message,
                        const StreamClientOptions& options, std::FILE* out) {
  namespace pb = ::tpserve::v1;
  auto stub = pb::TpServe::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
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
