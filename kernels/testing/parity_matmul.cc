// Parity cases of MatMul and MatMulChunked: every weight format the backends know, aligned and
// unaligned sizes (n = 33, k = 72), batch sizes on both sides of the GEMV / GEMM switch,
// decode-sized batches whose x is not 16-byte aligned (which must keep exact activations), and
// matrices with a bias.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "base/status_macros.h"
#include "formats/dtype.h"
#include "base/str_cat.h"
#include "kernels/quantize_weights.h"
#include "kernels/testing/parity_bounds.h"
#include "kernels/testing/parity_cases.h"
#include "kernels/testing/parity_util.h"

namespace tpserve::parity {
namespace {

struct WeightCase {
  TensorFormat format;
  bool act_order = false;  // int4 with a column permutation
  std::string Name() const {
    return TensorFormatName(format) + (act_order ? "+perm" : "");
  }
};

std::vector<WeightCase> AllWeightCases() {
  std::vector<WeightCase> cases;
  for (FormatKind k : {FormatKind::kF32, FormatKind::kF16, FormatKind::kBF16, FormatKind::kF8E4M3,
                       FormatKind::kFp8PerChannel, FormatKind::kFp8Block128}) {
    cases.push_back({TensorFormat::Of(k)});
  }
  cases.push_back({TensorFormat::Int4(32)});
  cases.push_back({TensorFormat::Int4(128)});
  cases.push_back({TensorFormat::Int4(128), true});
  for (FormatKind k : {FormatKind::kQ8_0, FormatKind::kQ4_0, FormatKind::kQ4_1, FormatKind::kQ4_K,
                       FormatKind::kQ5_K, FormatKind::kQ6_K}) {
    cases.push_back({TensorFormat::Of(k)});
  }
  return cases;
}

bool IsGgml(const TensorFormat& f) {
  const std::optional<DType> t = ElementDType(f);
  return t.has_value() && BlockElems(*t) > 1;
}

bool FitsInputs(const TensorFormat& f, int64_t k) {
  return k % InputBlockValues(f) == 0 && PackedRowBytes(f, k) > 0;
}

// See parity_bounds.h.
double MatMulBound(const ParityContext& ctx, const TensorFormat& f, int64_t m) {
  if (!ctx.candidate_bf16()) return kF32OrderBound;
  if (IsGgml(f)) return kQ8ActivationBound;
  const bool fp8 = f.kind == FormatKind::kFp8PerChannel || f.kind == FormatKind::kF8E4M3 ||
                   f.kind == FormatKind::kFp8Block128;
  if (fp8 && m > kFp8QuantizedRowsAbove) return kFp8ActivationBound;
  return kBf16TwiceBound;
}

HostMatrix MakeWeight(const WeightCase& wc, int64_t n, int64_t k, uint32_t seed) {
  const std::vector<float> w = RandomF32(n * k, seed, 0.2f);
  HostMatrix host = QuantizeWeights(wc.format, w.data(), n, k);
  if (wc.act_order) {
    host.perm.resize(k);
    std::iota(host.perm.begin(), host.perm.end(), 0);
    std::shuffle(host.perm.begin(), host.perm.end(), std::mt19937(seed));
    host.matrix.input_perm = host.perm.data();
  }
  return host;
}

struct Output {
  std::vector<double> values;
  std::vector<uint8_t> bytes;
  bool guards_ok = false;
};

// x starts `x_offset` bytes into its (aligned) buffer: one activation element for the
// unaligned cases, so x is element-aligned but not 16-byte aligned.
absl::StatusOr<Output> RunMatMul(Backend& be, const WeightMatrix& w, const std::vector<float>& x,
                                 int64_t m, DType y_dtype, int64_t x_offset = 0) {
  std::vector<uint8_t> xb(x_offset, 0);
  const std::vector<uint8_t> values = EncodeActivations(be, x);
  xb.insert(xb.end(), values.begin(), values.end());
  TP_ASSIGN_OR_RETURN(GuardedBuffer xbuf,
                      GuardedBuffer::Filled(be, xb.data(), static_cast<int64_t>(xb.size())));
  TP_ASSIGN_OR_RETURN(GuardedBuffer ybuf,
                      GuardedBuffer::Poisoned(be, m * w.rows * BlockBytes(y_dtype)));
  be.MatMul(static_cast<const uint8_t*>(xbuf.data()) + x_offset, m, w, ybuf.data(), y_dtype);
  TP_RETURN_IF_ERROR(be.Synchronize());
  Output out;
  TP_RETURN_IF_ERROR(ybuf.Read(&out.bytes, &out.guards_ok));
  out.values = y_dtype == DType::kF32 ? DecodeF32(out.bytes) : DecodeActivations(be, out.bytes);
  return out;
}

void MatMulCases(ParityContext& ctx) {
  const std::pair<int64_t, int64_t> shapes[] = {{256, 96}, {512, 33}, {1024, 272}, {72, 40}};
  const int64_t batches[] = {1, 2, 7, 16, 17, 33, 64};
  uint32_t seed = 100;
  for (const WeightCase& wc : AllWeightCases()) {
    if (!ctx.candidate().SupportsWeight(wc.format)) {
      ctx.NotSupported({"MatMul", wc.Name(), "all shapes"}, "SupportsWeight is false");
      continue;
    }
    for (const auto& [k, n] : shapes) {
      if (!FitsInputs(wc.format, k)) continue;
      const HostMatrix host = MakeWeight(wc, n, k, ++seed);
      const CaseName upload{"MatMul", wc.Name(), StrCat("k=", k, " n=", n)};
      absl::StatusOr<UploadedWeight> cw = UploadWeight(ctx.candidate(), host);
      absl::StatusOr<UploadedWeight> rw = UploadWeight(ctx.reference(), host);
      if (!ctx.Check(upload, cw.status()) || !ctx.Check(upload, rw.status())) continue;
      for (int64_t m : batches) {
        const std::vector<float> x = RandomBf16(m * k, ++seed);
        const std::string shape = StrCat("m=", m, " k=", k, " n=", n);
        absl::StatusOr<Output> ref = RunMatMul(ctx.reference(), rw->matrix, x, m, DType::kF32);
        if (!ctx.Check({"MatMul", wc.Name(), shape}, ref.status())) continue;
        std::vector<DType> outputs = {ctx.candidate().activation_dtype()};
        if (outputs[0] != DType::kF32 && (m == 1 || m == 33)) outputs.push_back(DType::kF32);
        for (DType y : outputs) {
          const CaseName name{"MatMul", StrCat(wc.Name(), " -> ", DTypeName(y)), shape};
          absl::StatusOr<Output> got = RunMatMul(ctx.candidate(), cw->matrix, x, m, y);
          if (!ctx.Check(name, got.status())) continue;
          ctx.Compare(name, got->values, ref->values, MatMulBound(ctx, wc.format, m),
                      got->guards_ok, ref->guards_ok);
        }
      }
    }
  }
}

// A matrix with a bias (Qwen2's q/k/v): y = x * W^T + bias on every path a backend has for the
// format (GEMV and GEMM batch sizes, bf16 and f32 outputs), against the reference's product
// without the bias plus the bias added here, so a backend that dropped the bias, added it
// twice or to the wrong columns fails whatever the reference does with one.
void BiasCases(ParityContext& ctx) {
  const std::pair<int64_t, int64_t> shapes[] = {{256, 96}, {512, 33}};
  const int64_t batches[] = {1, 7, 16, 17, 64};
  uint32_t seed = 900;
  for (const WeightCase& wc : AllWeightCases()) {
    if (!ctx.candidate().SupportsWeight(wc.format)) {
      ctx.NotSupported({"MatMul+bias", wc.Name(), "all shapes"}, "SupportsWeight is false");
      continue;
    }
    for (const auto& [k, n] : shapes) {
      if (!FitsInputs(wc.format, k)) continue;
      const HostMatrix host = MakeWeight(wc, n, k, ++seed);
      const std::vector<float> bias = RandomF32(n, ++seed, 3.0f);
      const CaseName upload{"MatMul+bias", wc.Name(), StrCat("k=", k, " n=", n)};
      absl::StatusOr<UploadedWeight> cw = UploadWeight(ctx.candidate(), host);
      absl::StatusOr<UploadedWeight> rw = UploadWeight(ctx.reference(), host);
      absl::StatusOr<GuardedBuffer> cbias =
          GuardedBuffer::Filled(ctx.candidate(), bias.data(), n * 4);
      if (!ctx.Check(upload, cw.status()) || !ctx.Check(upload, rw.status()) ||
          !ctx.Check(upload, cbias.status())) {
        continue;
      }
      WeightMatrix biased = cw->matrix;
      biased.bias = static_cast<const float*>(cbias->data());
      for (int64_t m : batches) {
        const std::vector<float> x = RandomBf16(m * k, ++seed);
        const std::string shape = StrCat("m=", m, " k=", k, " n=", n);
        absl::StatusOr<Output> ref = RunMatMul(ctx.reference(), rw->matrix, x, m, DType::kF32);
        if (!ctx.Check({"MatMul+bias", wc.Name(), shape}, ref.status())) continue;
        for (size_t i = 0; i < ref->values.size(); ++i) ref->values[i] += bias[i % n];
        std::vector<DType> outputs = {ctx.candidate().activation_dtype()};
        if (outputs[0] != DType::kF32 && m == 17) outputs.push_back(DType::kF32);
        for (DType y : outputs) {
          const CaseName name{"MatMul+bias", StrCat(wc.Name(), " -> ", DTypeName(y)), shape};
          absl::StatusOr<Output> got = RunMatMul(ctx.candidate(), biased, x, m, y);
          if (!ctx.Check(name, got.status())) continue;
          ctx.Compare(name, got->values, ref->values, MatMulBound(ctx, wc.format, m),
                      got->guards_ok, ref->guards_ok);
        }
      }
    }
  }
}

// Decode-sized batches with x one element past 16-byte alignment: the bound of exact
// activations (a backend that quantized x because a pointer was unaligned would miss it by
// an order of magnitude).
void UnalignedActivationCases(ParityContext& ctx) {
  const int64_t k = 256, n = 96;
  const int64_t offset = ActivationBytes(ctx.candidate());
  uint32_t seed = 700;
  for (const WeightCase& wc :
       {WeightCase{TensorFormat::Of(FormatKind::kF8E4M3)},
        WeightCase{TensorFormat::Of(FormatKind::kFp8PerChannel)},
        WeightCase{TensorFormat::Of(FormatKind::kFp8Block128)},
        WeightCase{TensorFormat::Int4(128)}, WeightCase{TensorFormat::Of(FormatKind::kBF16)}}) {
    if (!ctx.candidate().SupportsWeight(wc.format)) {
      ctx.NotSupported({"MatMul x+1", wc.Name(), "all shapes"}, "SupportsWeight is false");
      continue;
    }
    const HostMatrix host = MakeWeight(wc, n, k, ++seed);
    const CaseName upload{"MatMul x+1", wc.Name(), StrCat("k=", k, " n=", n)};
    absl::StatusOr<UploadedWeight> cw = UploadWeight(ctx.candidate(), host);
    absl::StatusOr<UploadedWeight> rw = UploadWeight(ctx.reference(), host);
    if (!ctx.Check(upload, cw.status()) || !ctx.Check(upload, rw.status())) continue;
    for (int64_t m : {int64_t{1}, int64_t{7}, kFp8QuantizedRowsAbove}) {
      const std::vector<float> x = RandomBf16(m * k, ++seed);
      const DType y = ctx.candidate().activation_dtype();
      const CaseName name{"MatMul x+1", StrCat(wc.Name(), " -> ", DTypeName(y)),
                          StrCat("m=", m, " k=", k, " n=", n, " x at +", offset, " bytes")};
      absl::StatusOr<Output> ref = RunMatMul(ctx.reference(), rw->matrix, x, m, DType::kF32);
      absl::StatusOr<Output> got = RunMatMul(ctx.candidate(), cw->matrix, x, m, y, offset);
      if (!ctx.Check(name, ref.status()) || !ctx.Check(name, got.status())) continue;
      ctx.Compare(name, got->values, ref->values, MatMulBound(ctx, wc.format, m), got->guards_ok,
                  ref->guards_ok);
    }
  }
}

absl::StatusOr<Output> RunChunked(Backend& be, const WeightMatrix& w, const std::vector<float>& x,
                                  int64_t m, int64_t chunks) {
  const std::vector<uint8_t> xb = EncodeActivations(be, x);
  TP_ASSIGN_OR_RETURN(GuardedBuffer xbuf,
                      GuardedBuffer::Filled(be, xb.data(), static_cast<int64_t>(xb.size())));
  TP_ASSIGN_OR_RETURN(GuardedBuffer ybuf, GuardedBuffer::Poisoned(be, chunks * m * w.rows * 4));
  be.MatMulChunked(xbuf.data(), m, w, chunks, static_cast<float*>(ybuf.data()));
  TP_RETURN_IF_ERROR(be.Synchronize());
  Output out;
  TP_RETURN_IF_ERROR(ybuf.Read(&out.bytes, &out.guards_ok));
  out.values = DecodeF32(out.bytes);
  return out;
}

// Chunk c of the chunked product must be bit for bit what MatMul gives for that chunk alone:
// x's columns of the chunk (after any act-order permutation) as a dense input, and W's columns
// as a weight of their own, placed like any other (so a backend that holds its own form of a
// weight is checked against its own form of the chunk). Returns the number of floats that
// differ.
absl::StatusOr<int64_t> ChunkMismatches(Backend& be, const HostMatrix& host,
                                        const std::vector<float>& x, int64_t m, int64_t chunks,
                                        const std::vector<uint8_t>& chunked) {
  const int64_t k = host.matrix.cols, kc = k / chunks, n = host.matrix.rows;
  int64_t mismatches = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    std::vector<float> xc(m * kc);
    for (int64_t t = 0; t < m; ++t) {
      for (int64_t j = 0; j < kc; ++j) {
        const int64_t col = c * kc + j;
        xc[t * kc + j] = x[t * k + (host.perm.empty() ? col : host.perm[col])];
      }
    }
    TP_ASSIGN_OR_RETURN(UploadedWeight chunk,
                        UploadWeight(be, CopyColumnChunk(host.matrix, c, kc)));
    TP_ASSIGN_OR_RETURN(Output alone, RunMatMul(be, chunk.matrix, xc, m, DType::kF32));
    for (int64_t i = 0; i < m * n; ++i) {
      if (std::memcmp(alone.bytes.data() + 4 * i, chunked.data() + 4 * (c * m * n + i), 4) != 0) {
        ++mismatches;
      }
    }
  }
  return mismatches;
}

void MatMulChunkedCases(ParityContext& ctx) {
  const int64_t chunks = 3, kc = 256, k = chunks * kc, n = 48;
  uint32_t seed = 900;
  for (const WeightCase& wc :
       {WeightCase{TensorFormat::Of(FormatKind::kBF16)}, WeightCase{TensorFormat::Of(FormatKind::kF16)},
        WeightCase{TensorFormat::Of(FormatKind::kFp8PerChannel)},
        WeightCase{TensorFormat::Of(FormatKind::kFp8Block128)}, WeightCase{TensorFormat::Int4(128)},
        WeightCase{TensorFormat::Int4(128), true}, WeightCase{TensorFormat::Of(FormatKind::kQ4_0)},
        WeightCase{TensorFormat::Of(FormatKind::kQ4_K)}}) {
    if (!ctx.candidate().SupportsWeight(wc.format)) {
      ctx.NotSupported({"MatMulChunked", wc.Name(), "all shapes"}, "SupportsWeight is false");
      continue;
    }
    const HostMatrix host = MakeWeight(wc, n, k, ++seed);
    const CaseName upload{"MatMulChunked", wc.Name(), StrCat("k=", k, " n=", n)};
    absl::StatusOr<UploadedWeight> cw = UploadWeight(ctx.candidate(), host);
    absl::StatusOr<UploadedWeight> rw = UploadWeight(ctx.reference(), host);
    if (!ctx.Check(upload, cw.status()) || !ctx.Check(upload, rw.status())) continue;
    for (int64_t m : {1, 7, 33}) {
      const std::vector<float> x = RandomBf16(m * k, ++seed);
      const std::string shape = StrCat("m=", m, " k=", k, " n=", n, " chunks=", chunks);
      const CaseName name{"MatMulChunked", wc.Name() + " -> f32", shape};
      absl::StatusOr<Output> got = RunChunked(ctx.candidate(), cw->matrix, x, m, chunks);
      absl::StatusOr<Output> ref = RunChunked(ctx.reference(), rw->matrix, x, m, chunks);
      if (!ctx.Check(name, got.status()) || !ctx.Check(name, ref.status())) continue;
      ctx.Compare(name, got->values, ref->values, MatMulBound(ctx, wc.format, m), got->guards_ok,
                  ref->guards_ok);
      const CaseName same{"MatMulChunked==MatMul", wc.Name() + " -> f32", shape};
      absl::StatusOr<int64_t> diff =
          ChunkMismatches(ctx.candidate(), host, x, m, chunks, got->bytes);
      if (!ctx.Check(same, diff.status())) continue;
      ParityResult r{same.op, same.dtype, same.shape, static_cast<double>(*diff), 0.0,
                     *diff == 0 ? ParityOutcome::kOk : ParityOutcome::kFailed,
                     *diff == 0 ? "" : "floats differ from MatMul of the chunk alone"};
      ctx.Add(std::move(r));
    }
  }
}

}  // namespace

void RunMatMulCases(ParityContext& ctx) {
  if (ctx.Wants("MatMul")) MatMulCases(ctx);
  if (ctx.Wants("MatMul x+1")) UnalignedActivationCases(ctx);
  if (ctx.Wants("MatMul+bias")) BiasCases(ctx);
  if (ctx.Wants("MatMulChunked")) MatMulChunkedCases(ctx);
}

}  // namespace tpserve::parity
