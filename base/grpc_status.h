// The one place where an absl::Status becomes a grpc::Status. Codes map one to one (both follow
// google.rpc.Code); the message is kept verbatim so a client sees the field, value and bound.
//
//   return ToGrpcStatus(ValidateGenerateRequest(req, limits).status());
#ifndef TPSERVE_BASE_GRPC_STATUS_H_
#define TPSERVE_BASE_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tpserve {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace tpserve

#endif  // TPSERVE_BASE_GRPC_STATUS_H_
