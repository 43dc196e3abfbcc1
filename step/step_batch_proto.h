// StepBatch to and from the worker protocol's StepRequest: the one place a step changes shape,
// at the boundary between the coordinator process and a rank process.
#ifndef TPSERVE_STEP_STEP_BATCH_PROTO_H_
#define TPSERVE_STEP_STEP_BATCH_PROTO_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "proto/worker.pb.h"
#include "step/step_batch.h"

namespace tpserve {

tpserve::worker::v1::StepRequest ToProto(const StepBatch& batch, int64_t step_id);
// INVALID_ARGUMENT (StepBatch::CheckShape's) for a request no StepBatch could have made.
absl::StatusOr<StepBatch> FromProto(const tpserve::worker::v1::StepRequest& request);

}  // namespace tpserve

#endif  // TPSERVE_STEP_STEP_BATCH_PROTO_H_
