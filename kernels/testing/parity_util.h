// Internals of the backend-parity suite: guarded backend buffers, activation encoding, weight
// upload, the comparison that turns two outputs into a ParityResult, and the context every
// case file shares. Not a public interface (backend_parity.h is).
//
//   ParityContext& ctx = ...;
//   GuardedBuffer y = GuardedBuffer::Poisoned(ctx.candidate(), bytes).value();
//   ...op...
//   ctx.Compare({"RmsNorm", "bf16", "rows=7 dim=96"}, cand_values, ref_values, bound);
//
// Threading: single-threaded, like the suite.
#ifndef TPSERVE_KERNELS_TESTING_PARITY_UTIL_H_
#define TPSERVE_KERNELS_TESTING_PARITY_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/testing/backend_parity.h"
#include "kernels/weight_matrix.h"

namespace tpserve::parity {

// Guard bytes before and after every output: a multiple of 256 so a guarded output keeps the
// alignment of the allocation (cudaMalloc gives 256), which GEMM libraries take into account.
inline constexpr int64_t kGuardBytes = 256;
inline constexpr uint8_t kPoisonByte = 0xFF;  // NaN in f32, f16, bf16 and e4m3

// A backend buffer of `bytes` between two guard regions of a fixed byte pattern.
class GuardedBuffer {
 public:
  // Payload filled with kPoisonByte.
  static absl::StatusOr<GuardedBuffer> Poisoned(Backend& backend, int64_t bytes);
  // Payload copied from host `init` (bytes long).
  static absl::StatusOr<GuardedBuffer> Filled(Backend& backend, const void* init, int64_t bytes);

  void* data() const { return static_cast<uint8_t*>(buffer_.data()) + kGuardBytes; }
  int64_t bytes() const { return bytes_; }
  // Copies the payload back (waiting for the backend's queued work) and checks both guards.
  // `guards_ok` is false when any guard byte changed.
  absl::Status Read(std::vector<uint8_t>* payload, bool* guards_ok) const;

 private:
  static absl::StatusOr<GuardedBuffer> Make(Backend& backend, const void* init, int64_t bytes);
  GuardedBuffer(Backend* backend, DeviceBuffer buffer, int64_t bytes)
      : backend_(backend), buffer_(std::move(buffer)), bytes_(bytes) {}
  Backend* backend_;
  DeviceBuffer buffer_;
  int64_t bytes_;
};

// n values ~ N(0, scale^2), rounded to bf16 (exactly representable in bf16 and f32).
std::vector<float> RandomBf16(int64_t n, uint32_t seed, float scale = 1.0f);
// n values ~ N(0, scale^2) in full f32 (weights, f32 inputs).
std::vector<float> RandomF32(int64_t n, uint32_t seed, float scale = 1.0f);

// Activations of `backend` (f32 or bf16) from / to f32 values.
std::vector<uint8_t> EncodeActivations(const Backend& backend, const std::vector<float>& values);
std::vector<double> DecodeActivations(const Backend& backend, const std::vector<uint8_t>& bytes);
std::vector<double> DecodeF32(const std::vector<uint8_t>& bytes);
// Values of a KV pool (dtype, fp8 read back as code * scale).
std::vector<double> DecodeKv(DType dtype, float scale, const std::vector<uint8_t>& bytes);

// A weight matrix placed in a backend's memory through Backend::PlaceWeight, as the model's
// loader places it: the backend's own form included (the CUDA backend's mixed-input GEMM
// layout), so the suite multiplies what the model multiplies.
using UploadedWeight = PlacedWeight;
absl::StatusOr<UploadedWeight> UploadWeight(Backend& backend, const HostMatrix& host,
                                            WeightUse use = WeightUse::kMatMul);


// What identifies one result.
struct CaseName {
  std::string op, dtype, shape;
};

class ParityContext {
 public:
  ParityContext(Backend& candidate, Backend& reference, const ParityOptions& options)
      : candidate_(candidate), reference_(reference), options_(options) {}

  Backend& candidate() { return candidate_; }
  Backend& reference() { return reference_; }
  bool Wants(const std::string& op) const;
  // Whether the candidate computes with bf16 activations (picks the bf16 bounds).
  bool candidate_bf16() const { return candidate_.activation_dtype() == DType::kBF16; }
  // kF32OrderBound for an f32 candidate, else `bf16_bound`.
  double Bound(double bf16_bound) const { return candidate_bf16() ? bf16_bound : kF32Order(); }

  void NotSupported(const CaseName& name, const std::string& why);
  void Failed(const CaseName& name, const std::string& why);
  // Records ok when both are finite, the guards held and nmse(candidate, reference) <= bound.
  void Compare(const CaseName& name, const std::vector<double>& candidate,
               const std::vector<double>& reference, double bound, bool candidate_guards_ok,
               bool reference_guards_ok);
  // Records a failure and returns false when `status` is not OK.
  bool Check(const CaseName& name, const absl::Status& status);

  void Add(ParityResult result) { results_.push_back(std::move(result)); }
  std::vector<ParityResult> TakeResults() { return std::move(results_); }

 private:
  static double kF32Order();
  Backend& candidate_;
  Backend& reference_;
  const ParityOptions& options_;
  std::vector<ParityResult> results_;
};

// sum((a - b)^2) / sum(b^2) (the plain sum of squares when b is all zeros).
double NormalisedError(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace tpserve::parity

#endif  // TPSERVE_KERNELS_TESTING_PARITY_UTIL_H_
