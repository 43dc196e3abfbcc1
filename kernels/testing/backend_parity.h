// The backend-parity suite, in the style of ggml's test-backend-ops: every Backend op, for every
// dtype it applies to and in odd shapes (1, 7 and 33 tokens; 9 heads over 3 KV heads of 64,
// 5 heads of 80; vocab-parallel embedding shards; unaligned matrix sizes), runs on a
// *candidate* and a *reference* backend, and the two outputs are compared by normalised error
// sum((a - b)^2) / sum(b^2) against a per-op bound (see parity_bounds.h for why each bound is
// what it is). Every output sits between guard bytes that must survive the op, outputs start
// poisoned (0xFF: NaN in every float type) and must come back finite, and an op or dtype the
// candidate lacks is reported "not supported", not failed.
//
//   CpuBackend reference({.num_threads = 4, .isa = CpuIsa::kScalar});
//   std::vector<ParityResult> results = RunBackendParity(*cuda, reference);
//   PrintParityTable(results, stdout);
//   return CountParityFailures(results) == 0 ? 0 : 1;
//
// Inputs are drawn so that both backends see the same values: activations are rounded to bf16
// first (exact in bf16 and f32 alike), weights are encoded once and uploaded to each backend.
// Threading: uses both backends from the calling thread; not reentrant.
#ifndef TPSERVE_KERNELS_TESTING_BACKEND_PARITY_H_
#define TPSERVE_KERNELS_TESTING_BACKEND_PARITY_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace tpserve {

enum class ParityOutcome { kOk, kFailed, kNotSupported };

struct ParityResult {
  std::string op;     // "MatMul", "PagedAttention", ...
  std::string dtype;  // the weight / KV / output types, e.g. "fp8 -> bf16"
  std::string shape;  // e.g. "m=7 k=256 n=96"
  double error = 0.0;  // normalised error of candidate against reference
  double bound = 0.0;
  ParityOutcome outcome = ParityOutcome::kOk;
  std::string detail;  // why it failed (guard bytes, NaN, an error status, ...)
};

struct ParityOptions {
  // Runs only the ops whose name contains this (case-sensitive); empty: all.
  std::string filter;
};

// Runs every case. Errors of the backends (a failed Allocate, Synchronize or CopyToHost) become
// failed results naming the case; the suite itself never aborts on them.
std::vector<ParityResult> RunBackendParity(Backend& candidate, Backend& reference,
                                           const ParityOptions& options = {});

// WriteKv and PagedAttention over the batches real steps make, beyond RunBackendParity's
// (which keeps its case count): decodes first then prompt chunks in one step (on a GPU,
// FlashInfer's FA2 for the decodes and FA3 for the rest), Llama 3.1 405B's grouping at TP 8 (one
// KV head, 16 query heads of 128 per rank), and a sliding window of 16 over sequences of 40
// with and without a soft-cap of 50 (Gemma's local layers at small scale).
std::vector<ParityResult> RunStepBatchParity(Backend& candidate, Backend& reference);

// One line per result: op, dtype, shape, error, bound, ok / FAILED / not supported (and the
// detail of failures), then a summary line. failures_only: print only failed rows and the
// summary.
void PrintParityTable(const std::vector<ParityResult>& results, std::FILE* out,
                      bool failures_only = false);

int64_t CountParityFailures(const std::vector<ParityResult>& results);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_TESTING_BACKEND_PARITY_H_
