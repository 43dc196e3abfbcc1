// The public gRPC service (tpserve.v1.TpServe) over an Engine: validates each request, builds
// the prompt (text, chat template, or ids), streams GenerationEvents back as GenerateResponses,
// and cancels the generation when the client goes away or its deadline passes.
//
//   TpServeService service(&engine, &tokenizer, &chat_template, info, limits);
//   builder.RegisterService(&service);
//
// Threading: gRPC calls the handlers from its thread pool; everything they touch (Engine,
// Tokenizer, ChatTemplate) is thread-safe.
#ifndef TPSERVE_COORDINATOR_SERVER_H_
#define TPSERVE_COORDINATOR_SERVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/engine.h"
#include "coordinator/tokenizer/chat_template.h"
#include "coordinator/tokenizer/tokenizer.h"
#include "coordinator/validation.h"
#include "proto/tpserve.grpc.pb.h"

namespace tpserve {

struct ServedModelInfo {
  std::string name;
  std::string architecture = "llama";
  std::string weight_format;
  std::string backend = "cpu";
  int32_t tensor_parallel_degree = 1;
  int64_t num_parameters = 0;
  int64_t kv_cache_tokens = 0;
};

class TpServeService final : public tpserve::v1::TpServe::Service {
 public:
  // All pointers must outlive the service. `chat_template` may be null (chat input is then
  // FAILED_PRECONDITION).
  TpServeService(Engine* engine, const Tokenizer* tokenizer, const ChatTemplate* chat_template,
                 ServedModelInfo info, ModelLimits limits);

  grpc::Status Generate(grpc::ServerContext* context, const tpserve::v1::GenerateRequest* request,
                        grpc::ServerWriter<tpserve::v1::GenerateResponse>* writer) override;
  grpc::Status Tokenize(grpc::ServerContext* context, const tpserve::v1::TokenizeRequest* request,
                        tpserve::v1::TokenizeResponse* response) override;
  grpc::Status CountTokens(grpc::ServerContext* context,
                           const tpserve::v1::TokenizeRequest* request,
                           tpserve::v1::CountTokensResponse* response) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context,
                            const tpserve::v1::GetModelInfoRequest* request,
                            tpserve::v1::ModelInfo* response) override;

  // The prompt's token ids for any input kind (also used by Tokenize and CountTokens).
  absl::StatusOr<std::vector<int32_t>> BuildPrompt(const ValidatedInput& input) const;

 private:
  absl::StatusOr<std::vector<int32_t>> EncodeTokenizeRequest(
      const tpserve::v1::TokenizeRequest& request) const;

  Engine* engine_;
  const Tokenizer* tokenizer_;
  const ChatTemplate* chat_template_;
  const ServedModelInfo info_;
  const ModelLimits limits_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_SERVER_H_
