// Which decode steps are recorded and replayed (Backend::RunCaptured: CUDA graphs), and what
// the recordings cost in device memory: one set of rules that the model (the batch a step is
// padded to), the backends (the CUDA backend's context buckets, the CPU backend's emulation of
// them) and the memory plan all read, so the plan counts the recordings the engine makes.
//
//   CaptureBatchBucket(/*num_sequences=*/3, /*max_rows=*/256);  // 4: padded to 4 rows
//   CaptureContextBucket(/*max_decode_context=*/700);            // 1024
//   RecordedStepsBytes(32, 256, 8192);  // the plan's "CUDA graphs" line for 32 layers
//
// A recording is kept per (batch bucket, context bucket): batch buckets are the powers of two
// up to the most logit rows a step has (a decode step has one per sequence), so a step is
// padded to at most twice its rows; context buckets are the powers of two from
// kMinCaptureContext up, because the recorded attention grid is sized for the bucket's longest
// context (each row reads its own length on the device).
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_STEP_CAPTURE_H_
#define TPSERVE_KERNELS_STEP_CAPTURE_H_

#include <cstdint>
#include <vector>

namespace tpserve {

// The smallest context bucket (keys per sequence a recorded attention grid is sized for).
inline constexpr int64_t kMinCaptureContext = 256;

// The rows a decode step of `num_sequences` sequences (one token each) is padded to: the
// smallest power of two >= num_sequences; 0 (run it op by op) when that exceeds `max_rows`
// or num_sequences < 1.
int64_t CaptureBatchBucket(int64_t num_sequences, int64_t max_rows);

// Every bucket CaptureBatchBucket can return for `max_rows`: 1, 2, 4, ... <= max_rows.
std::vector<int64_t> CaptureBatchBuckets(int64_t max_rows);

// The context bucket of a step whose longest decode context is `max_decode_context` keys:
// the smallest power of two >= it, at least kMinCaptureContext.
int64_t CaptureContextBucket(int64_t max_decode_context);

// How many context buckets steps of up to `max_context_tokens` keys fall into.
int64_t NumCaptureContextBuckets(int64_t max_context_tokens);

// ---- Device memory of the recordings (an estimate; see docs/CAPACITY.md) ----
//
// Nothing exact exists: the driver does not say what an instantiated graph holds, and the
// recordings allocate nothing of their own (every buffer a step uses is a step buffer, counted
// as such). What a graph keeps on the device is, per node, its launch descriptor and
// arguments: estimated at kRecordedBytesPerLaunch (the classic 4 KiB kernel-argument limit)
// per launch, for kRecordedLaunchesPerLayer launches per decoder layer (the ~18 kernels of an
// eager decode layer, kernels/cuda/README.md, plus the two all-reduces at tp > 1 and room for
// a GEMM that quantizes its input first) and kRecordedLaunchesPerStep outside the layers
// (embedding and its all-reduce, final norm, LM head, the logits' padding, copy and gather).
// To be replaced by a measurement: cudaMemGetInfo around cudaGraphInstantiate/Upload on a GPU.
inline constexpr int64_t kRecordedBytesPerLaunch = 4096;
inline constexpr int64_t kRecordedLaunchesPerLayer = 24;
inline constexpr int64_t kRecordedLaunchesPerStep = 8;

// One recorded decode step of `num_layers` layers.
int64_t RecordedStepBytes(int64_t num_layers);

// Every recording a rank may keep: one per (batch bucket of `max_rows`, context bucket of
// `max_context_tokens`), each RecordedStepBytes. An upper bound: recordings are made lazily,
// for the buckets steps reach.
int64_t RecordedStepsBytes(int64_t num_layers, int64_t max_rows, int64_t max_context_tokens);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_STEP_CAPTURE_H_
