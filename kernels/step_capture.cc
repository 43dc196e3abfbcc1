#include "kernels/step_capture.h"

namespace tpserve {

int64_t CaptureBatchBucket(int64_t num_sequences, int64_t max_rows) {
  if (num_sequences < 1) return 0;
  int64_t bucket = 1;
  while (bucket < num_sequences) bucket *= 2;
  return bucket <= max_rows ? bucket : 0;
}

std::vector<int64_t> CaptureBatchBuckets(int64_t max_rows) {
  std::vector<int64_t> buckets;
  for (int64_t b = 1; b <= max_rows; b *= 2) buckets.push_back(b);
  return buckets;
}

int64_t CaptureContextBucket(int64_t max_decode_context) {
  int64_t bucket = kMinCaptureContext;
  while (bucket < max_decode_context) bucket *= 2;
  return bucket;
}

int64_t NumCaptureContextBuckets(int64_t max_context_tokens) {
  int64_t count = 1;
  for (int64_t b = kMinCaptureContext; b < max_context_tokens; b *= 2) ++count;
  return count;
}

int64_t RecordedStepBytes(int64_t num_layers) {
  return (num_layers * kRecordedLaunchesPerLayer + kRecordedLaunchesPerStep) *
         kRecordedBytesPerLaunch;
}

int64_t RecordedStepsBytes(int64_t num_layers, int64_t max_rows, int64_t max_context_tokens) {
  const int64_t recordings = static_cast<int64_t>(CaptureBatchBuckets(max_rows).size()) *
                             NumCaptureContextBuckets(max_context_tokens);
  return recordings * RecordedStepBytes(num_layers);
}

}  // namespace tpserve
