#include "kernels/testing/parity_util.h"

#include <cmath>
#include <cstring>
#include <random>

#include "base/status_macros.h"
#include "formats/dtype.h"
#include "base/str_cat.h"
#include "kernels/quantize.h"
#include "kernels/testing/parity_bounds.h"

namespace tpserve::parity {
namespace {

uint8_t GuardByte(int64_t i) { return static_cast<uint8_t>(0x5A ^ (i * 37 + 11)); }

bool AllFinite(const std::vector<double>& v) {
  for (double x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<GuardedBuffer> GuardedBuffer::Make(Backend& backend, const void* init,
                                                  int64_t bytes) {
  std::vector<uint8_t> host(bytes + 2 * kGuardBytes);
  for (int64_t i = 0; i < kGuardBytes; ++i) {
    host[i] = GuardByte(i);
    host[kGuardBytes + bytes + i] = GuardByte(i + kGuardBytes);
  }
  if (init != nullptr) {
    if (bytes > 0) std::memcpy(host.data() + kGuardBytes, init, bytes);
  } else {
    std::memset(host.data() + kGuardBytes, kPoisonByte, bytes);
  }
  TP_ASSIGN_OR_RETURN(DeviceBuffer buffer, Upload(backend, host.data(),
                                                  static_cast<int64_t>(host.size()), "parity"));
  return GuardedBuffer(&backend, std::move(buffer), bytes);
}

absl::StatusOr<GuardedBuffer> GuardedBuffer::Poisoned(Backend& backend, int64_t bytes) {
  return Make(backend, nullptr, bytes);
}

absl::StatusOr<GuardedBuffer> GuardedBuffer::Filled(Backend& backend, const void* init,
                                                    int64_t bytes) {
  return Make(backend, init, bytes);
}

absl::Status GuardedBuffer::Read(std::vector<uint8_t>* payload, bool* guards_ok) const {
  std::vector<uint8_t> host(bytes_ + 2 * kGuardBytes);
  TP_RETURN_IF_ERROR(backend_->CopyToHost(host.data(), buffer_.data(),
                                          static_cast<int64_t>(host.size())));
  *guards_ok = true;
  for (int64_t i = 0; i < kGuardBytes; ++i) {
    if (host[i] != GuardByte(i) || host[kGuardBytes + bytes_ + i] != GuardByte(i + kGuardBytes)) {
      *guards_ok = false;
    }
  }
  payload->assign(host.begin() + kGuardBytes, host.begin() + kGuardBytes + bytes_);
  return absl::OkStatus();
}

std::vector<float> RandomF32(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> RandomBf16(int64_t n, uint32_t seed, float scale) {
  std::vector<float> v = RandomF32(n, seed, scale);
  for (float& x : v) x = BF16ToF32(F32ToBF16(x));
  return v;
}

std::vector<uint8_t> EncodeActivations(const Backend& backend, const std::vector<float>& values) {
  const DType t = backend.activation_dtype();
  std::vector<uint8_t> out(values.size() * BlockBytes(t));
  QuantizeRow(t, values.data(), out.data(), static_cast<int64_t>(values.size()));
  return out;
}

std::vector<double> DecodeActivations(const Backend& backend, const std::vector<uint8_t>& bytes) {
  const DType t = backend.activation_dtype();
  std::vector<float> f(bytes.size() / BlockBytes(t));
  DequantizeRow(t, bytes.data(), f.data(), static_cast<int64_t>(f.size()));
  return std::vector<double>(f.begin(), f.end());
}

std::vector<double> DecodeF32(const std::vector<uint8_t>& bytes) {
  std::vector<double> out(bytes.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    float f;
    std::memcpy(&f, bytes.data() + 4 * i, 4);
    out[i] = f;
  }
  return out;
}

std::vector<double> DecodeKv(DType dtype, float scale, const std::vector<uint8_t>& bytes) {
  std::vector<float> f(bytes.size() / BlockBytes(dtype));
  DequantizeRow(dtype, bytes.data(), f.data(), static_cast<int64_t>(f.size()));
  std::vector<double> out(f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    out[i] = dtype == DType::kF8E4M3 ? double{f[i] * scale} : double{f[i]};
  }
  return out;
}

absl::StatusOr<UploadedWeight> UploadWeight(Backend& backend, const HostMatrix& host,
                                            WeightUse use) {
  return backend.PlaceWeight(host, use, "parity weight");
}

double NormalisedError(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den == 0.0 ? num : num / den;
}

double ParityContext::kF32Order() { return kF32OrderBound; }

bool ParityContext::Wants(const std::string& op) const {
  return options_.filter.empty() || op.find(options_.filter) != std::string::npos;
}

void ParityContext::NotSupported(const CaseName& name, const std::string& why) {
  results_.push_back(
      ParityResult{name.op, name.dtype, name.shape, 0.0, 0.0, ParityOutcome::kNotSupported, why});
}

void ParityContext::Failed(const CaseName& name, const std::string& why) {
  results_.push_back(
      ParityResult{name.op, name.dtype, name.shape, 0.0, 0.0, ParityOutcome::kFailed, why});
}

bool ParityContext::Check(const CaseName& name, const absl::Status& status) {
  if (status.ok()) return true;
  Failed(name, std::string(status.message()));
  return false;
}

void ParityContext::Compare(const CaseName& name, const std::vector<double>& candidate,
                            const std::vector<double>& reference, double bound,
                            bool candidate_guards_ok, bool reference_guards_ok) {
  ParityResult r{name.op, name.dtype, name.shape, 0.0, bound, ParityOutcome::kOk, ""};
  if (candidate.size() != reference.size()) {
    r.outcome = ParityOutcome::kFailed;
    r.detail = StrCat("sizes differ: ", candidate.size(), " vs ", reference.size());
  } else if (!candidate_guards_ok) {
    r.outcome = ParityOutcome::kFailed;
    r.detail = "candidate wrote outside its output (guard bytes changed)";
  } else if (!reference_guards_ok) {
    r.outcome = ParityOutcome::kFailed;
    r.detail = "reference wrote outside its output (guard bytes changed)";
  } else if (!AllFinite(candidate)) {
    r.outcome = ParityOutcome::kFailed;
    r.detail = "candidate output has NaN/Inf (unwritten elements keep the NaN poison)";
  } else if (!AllFinite(reference)) {
    r.outcome = ParityOutcome::kFailed;
    r.detail = "reference output has NaN/Inf";
  } else {
    r.error = NormalisedError(candidate, reference);
    if (!(r.error <= bound)) {
      r.outcome = ParityOutcome::kFailed;
      r.detail = "error above bound";
    }
  }
  results_.push_back(std::move(r));
}

}  // namespace tpserve::parity
