// The public gRPC service (tpserve.v1.TpServe) over the Frontend, on gRPC's callback API: an
// open stream costs no thread while it waits for tokens, so hundreds of streams share the
// library's small pool. Each call checks the bearer token, hands the request to the single door
// (coordinator/frontend.h), streams the events back as GenerateResponses, and cancels the
// generation when the client goes away or its deadline passes.
//
// Requests arrive as raw bytes and are parsed here, so that a text field holding invalid UTF-8
// (which the protobuf parser rejects without saying where) becomes INVALID_ARGUMENT naming that
// field by its proto path, e.g. "chat.messages[1].content".
//
//   TpServeService service(&frontend);
//   builder.RegisterService(&service);
//
// Threading: gRPC calls the handlers from its pool; everything they touch is thread-safe.
#ifndef TPSERVE_COORDINATOR_SERVER_H_
#define TPSERVE_COORDINATOR_SERVER_H_

#include <grpcpp/grpcpp.h>

#include "coordinator/frontend.h"
#include "proto/tpserve.grpc.pb.h"

namespace tpserve {

using TpServeCallbackBase = tpserve::v1::TpServe::WithRawCallbackMethod_Generate<
    tpserve::v1::TpServe::WithRawCallbackMethod_Tokenize<
        tpserve::v1::TpServe::WithRawCallbackMethod_CountTokens<
            tpserve::v1::TpServe::WithCallbackMethod_GetModelInfo<
                tpserve::v1::TpServe::Service>>>>;

class TpServeService final : public TpServeCallbackBase {
 public:
  // `frontend` must outlive the service.
  explicit TpServeService(Frontend* frontend) : frontend_(frontend) {}

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CountTokens(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const tpserve::v1::GetModelInfoRequest* request,
                                         tpserve::v1::ModelInfo* response) override;

 private:
  Frontend* const frontend_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_SERVER_H_
