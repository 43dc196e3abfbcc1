// StepSampling and its answer to and from the worker protocol (proto/worker.proto's
// SampleRequest and SampleResponse): the one place they change shape at the process boundary.
#ifndef TPSERVE_STEP_STEP_SAMPLING_PROTO_H_
#define TPSERVE_STEP_STEP_SAMPLING_PROTO_H_

#include <vector>

#include "absl/status/statusor.h"
#include "proto/worker.pb.h"
#include "step/step_sampling.h"

namespace tpserve {

tpserve::worker::v1::SampleRequest ToProto(const StepSampling& sampling);
// INVALID_ARGUMENT naming the sequence for logit bias ids and values of different counts.
// (The rest is SampleStep's to check, where the vocabulary is known.)
absl::StatusOr<StepSampling> FromProto(const tpserve::worker::v1::SampleRequest& request);

tpserve::worker::v1::SampleResponse ToProto(const std::vector<SequenceSamples>& samples);
// INVALID_ARGUMENT for a token whose alternatives' ids and logprobs differ in count.
absl::StatusOr<std::vector<SequenceSamples>> FromProto(
    const tpserve::worker::v1::SampleResponse& response);

}  // namespace tpserve

#endif  // TPSERVE_STEP_STEP_SAMPLING_PROTO_H_
