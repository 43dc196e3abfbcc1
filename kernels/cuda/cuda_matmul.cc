#include "kernels/cuda/cuda_matmul.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/gemv_kernels.h"
#include "kernels/cuda/quant_kernels.h"
#include "kernels/cuda/weight_placement.h"

namespace tpserve::cuda {
namespace {

constexpr int64_t kBf16Bytes = 2;

static_assert(kExactActivationRowsMax == kGemvMaxRows,
              "decode-sized batches are exactly the ones the GEMVs take");

bool Aligned16(const void* p) { return PointerAlignment(p) == 16; }

// The paths that read W's stored form (data, scales, zeros), which a prepared int4 weight no
// longer has on the device.
bool ReadsStoredForm(MatMulPath path) {
  return path != MatMulPath::kMixedGemm && path != MatMulPath::kChunkByChunk &&
         path != MatMulPath::kNoKernel;
}

int64_t TypeBytes(GemmType t) {
  switch (t) {
    case GemmType::kF32: return 4;
    case GemmType::kF16: return 2;
    case GemmType::kBF16: return 2;
    case GemmType::kE4M3: return 1;
  }
  return 4;
}

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

CudaMatMul::CudaMatMul(std::unique_ptr<CublasLtGemm> gemm, int64_t* scratch_generation,
                       CudaMatMulOptions options)
    : gemm_(std::move(gemm)),
      options_(options),
      x_perm_("act-order activations", scratch_generation, options.abort),
      x_staged_("aligned activations", scratch_generation, options.abort),
      x_chunk_("chunk activations", scratch_generation, options.abort),
      y_chunk_("chunk output", scratch_generation, options.abort),
      y_staged_("aligned output", scratch_generation, options.abort),
      x_wide_("f16/f32 activations", scratch_generation, options.abort),
      x_fp8_("fp8 activations", scratch_generation, options.abort),
      x_scales_("fp8 activation scales", scratch_generation, options.abort),
      w_scales_("fp8 weight scales", scratch_generation, options.abort),
      out_f32_("f32 GEMM output", scratch_generation, options.abort),
      bias_sums_("f32 sums awaiting a bias", scratch_generation, options.abort),
      w_bf16_("decoded weights", scratch_generation, options.abort),
      mixed_workspace_("mixed GEMM split-K workspace", scratch_generation, options.abort) {
  TP_CHECK(gemm_->deterministic() == options_.deterministic,
           "CudaMatMul and its CublasLtGemm must agree on deterministic mode");
  TP_CHECK(options_.sm_count >= 1, "CudaMatMul needs the device's SM count");
}

OperandFacts CudaMatMul::FactsFor(const void* x, const WeightMatrix& w) const {
  OperandFacts facts;
  facts.x_aligned = Aligned16(x);
  facts.w_prepared = MixedGemmForm(w) != nullptr;
  // The packed width too: a chunk of this matrix then starts aligned wherever it sits, so the
  // path of a chunk does not depend on its position (tensor-parallel degree).
  const int64_t packed = PackedRowBytes(w.format, w.cols);
  facts.w_aligned = Aligned16(w.data) && w.row_bytes % 16 == 0 && packed > 0 && packed % 16 == 0;
  return facts;
}

absl::StatusOr<const void*> CudaMatMul::StageX(const void* x, int64_t bytes, void* stream) {
  TP_RETURN_IF_ERROR(x_staged_.Reserve(bytes, stream));
  TP_RETURN_IF_ERROR(TPK_CUDA(
      cudaMemcpyAsync(x_staged_.data(), x, bytes, cudaMemcpyDeviceToDevice, AsStream(stream))));
  return static_cast<const void*>(x_staged_.data());
}

absl::Status CudaMatMul::Gemm(GemmType type, const void* w, int64_t ldw, const void* x, int64_t m,
                              int64_t n, int64_t k, const float* bias, void* y, bool y_f32,
                              void* stream) {
  const auto bias_key = std::make_pair(static_cast<int>(type), static_cast<int>(y_f32));
  if (bias != nullptr && bias_refused_.count(bias_key) > 0) {
    TP_RETURN_IF_ERROR(bias_sums_.Reserve(m * n * 4, stream));
    TP_RETURN_IF_ERROR(Gemm(type, w, ldw, x, m, n, k, nullptr, bias_sums_.data(), true, stream));
    return TPK_LAUNCH(LaunchBiasRound(bias_sums_.as<float>(), bias, m, n, y, y_f32, stream));
  }
  // bf16 inputs write bf16 or f32 directly; f32 and f16 inputs write f32, narrowed after.
  GemmArgs g = MatMulGemmArgs(type, m, n, k, ldw, y_f32);
  g.w = w;
  g.x = x;
  g.bias = bias;
  const bool narrow = g.out == GemmType::kF32 && !y_f32;
  // Deterministic mode: the pinned algorithms take 16-byte aligned operands only.
  if (options_.deterministic && !Aligned16(x)) {
    TP_ASSIGN_OR_RETURN(g.x, StageX(x, m * k * TypeBytes(type), stream));
  }
  const int64_t out_bytes = m * n * TypeBytes(g.out);
  const bool stage_y = narrow || (options_.deterministic && !Aligned16(y));
  DeviceScratch& out = narrow ? out_f32_ : y_staged_;
  if (stage_y) {
    TP_RETURN_IF_ERROR(out.Reserve(out_bytes, stream));
  }
  g.y = stage_y ? out.data() : y;
  const absl::Status run = gemm_->Run(g, stream);
  if (bias != nullptr && run.code() == absl::StatusCode::kUnimplemented) {
    // No algorithm with the bias epilogue for this GEMM: say so once, then add it after.
    if (bias_refused_.empty()) {
      std::fprintf(stderr, "CudaMatMul: %s; biases of such GEMMs are added in a pass of their "
                   "own\n", std::string(run.message()).c_str());
    }
    bias_refused_.insert(bias_key);
    return Gemm(type, w, ldw, x, m, n, k, bias, y, y_f32, stream);
  }
  TP_RETURN_IF_ERROR(run);
  if (!stage_y) return absl::OkStatus();
  if (narrow) return TPK_LAUNCH(LaunchF32ToBf16(out_f32_.as<float>(), m * n, y, stream));
  return TPK_CUDA(cudaMemcpyAsync(y, g.y, out_bytes, cudaMemcpyDeviceToDevice, AsStream(stream)));
}

absl::Status CudaMatMul::DecodedGemm(const void* x, int64_t m, const WeightMatrix& w, void* y,
                                     bool y_f32, void* stream) {
  decoded_weight_bytes_ += MatMulDecodedBytes(MatMulPath::kDecodedGemm, w.rows, w.cols);
  TP_RETURN_IF_ERROR(w_bf16_.Reserve(w.rows * w.cols * kBf16Bytes, stream));
  TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchDequantizeToBf16(ToDeviceWeight(w), w_bf16_.data(), stream)));
  return Gemm(GemmType::kBF16, w_bf16_.data(), w.cols, x, m, w.rows, w.cols, w.bias, y, y_f32,
              stream);
}

absl::Status CudaMatMul::Gemv(const MatMulPlan& plan, const void* x, int64_t m,
                              const DeviceWeight& w, int64_t num_chunks, void* y, bool y_f32,
                              void* stream) {
  const bool int4 = w.kind == WeightKind::kInt4Group;
  // Slices of 16 rows (deterministic mode) give each row the floats of a batch of one: the
  // GEMV's order of summation depends on k only.
  const int64_t step = plan.path == MatMulPath::kGemvRowSlices ? kGemvMaxRows : m;
  const int64_t n = w.rows, y_elem = y_f32 ? 4 : kBf16Bytes;
  for (int64_t t0 = 0; t0 < m; t0 += step) {
    const int64_t rows = std::min(step, m - t0);
    const void* xs = static_cast<const uint8_t*>(x) + t0 * w.cols * kBf16Bytes;
    const bool fits =
        int4 ? Int4GemvFits(w, rows, xs, num_chunks) : Fp8GemvFits(w, rows, xs, num_chunks);
    if (!fits) {
      return absl::InternalError(StrCat(
          "MatMul path ", MatMulPathName(plan.path), " but the GEMV does not take m=", rows,
          " k=", w.cols, " chunks=", num_chunks, " (matmul_plan.cc and gemv_kernels.cu disagree)"));
    }
    // [num_chunks, m, n] outputs: a slice's chunks are not contiguous in y, so they go through
    // scratch when there is more than one slice.
    const bool direct = num_chunks == 1 || rows == m;
    void* ys = static_cast<uint8_t*>(y) + t0 * n * y_elem;
    if (!direct) {
      TP_RETURN_IF_ERROR(y_staged_.Reserve(num_chunks * rows * n * y_elem, stream));
      ys = y_staged_.data();
    }
    const LaunchResult launched = int4 ? LaunchInt4Gemv(xs, rows, w, num_chunks, ys, y_f32, stream)
                                       : LaunchFp8Gemv(xs, rows, w, num_chunks, ys, y_f32, stream);
    TP_RETURN_IF_ERROR(TPK_LAUNCH(launched));
    if (!direct) {
      TP_RETURN_IF_ERROR(TPK_CUDA(cudaMemcpy2DAsync(
          static_cast<uint8_t*>(y) + t0 * n * y_elem, m * n * y_elem, ys, rows * n * y_elem,
          rows * n * y_elem, num_chunks, cudaMemcpyDeviceToDevice, AsStream(stream))));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaMatMul::RunPlanThenBias(const MatMulPlan& plan, const void* x, int64_t m,
                                         const WeightMatrix& w, void* y, bool y_f32,
                                         void* stream) {
  WeightMatrix plain = w;
  plain.bias = nullptr;
  TP_RETURN_IF_ERROR(bias_sums_.Reserve(m * w.rows * 4, stream));
  TP_RETURN_IF_ERROR(RunPlan(plan, x, m, plain, bias_sums_.data(), /*y_f32=*/true, stream));
  return TPK_LAUNCH(LaunchBiasRound(bias_sums_.as<float>(), w.bias, m, w.rows, y, y_f32, stream));
}

absl::Status CudaMatMul::RunPlan(const MatMulPlan& plan, const void* x, int64_t m,
                                 const WeightMatrix& w, void* y, bool y_f32, void* stream) {
  const int64_t n = w.rows, k = w.cols;
  if (w.bias != nullptr && !AddsBiasInKernel(plan.path) && plan.path != MatMulPath::kNoKernel) {
    return RunPlanThenBias(plan, x, m, w, y, y_f32, stream);
  }
  if (plan.path == MatMulPath::kNoKernel) {
    return absl::FailedPreconditionError(StrCat(
        "no CUDA kernel multiplies this ", TensorFormatName(w.format), " weight [", n, ", ", k,
        "] (rows not 16-byte aligned, or its stored form replaced by the mixed GEMM's and the "
        "batch of ", m, " not one that GEMM takes)"));
  }
  if (w.data == nullptr && ReadsStoredForm(plan.path)) {
    return absl::InternalError(StrCat("MatMul path ", MatMulPathName(plan.path), " reads the ",
                                      TensorFormatName(w.format), " weight's stored form, which "
                                      "its placement replaced (weight_placement.h)"));
  }
  if (plan.stage_x) {
    TP_ASSIGN_OR_RETURN(x, StageX(x, m * k * kBf16Bytes, stream));
  }
  switch (plan.path) {
    case MatMulPath::kBf16Gemm:
      return Gemm(GemmType::kBF16, w.data, w.row_bytes / 2, x, m, n, k, w.bias, y, y_f32, stream);
    case MatMulPath::kWideGemm: {
      const bool f16 = w.format.kind == FormatKind::kF16;
      TP_RETURN_IF_ERROR(x_wide_.Reserve(m * k * (f16 ? 2 : 4), stream));
      TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchConvertBf16(x, m * k, f16, x_wide_.data(), stream)));
      return Gemm(f16 ? GemmType::kF16 : GemmType::kF32, w.data, w.row_bytes / (f16 ? 2 : 4),
                  x_wide_.data(), m, n, k, w.bias, y, y_f32, stream);
    }
    case MatMulPath::kMixedGemm:
      return MixedGemm(w.format, x, k, m, *MixedGemmForm(w), 1, y, y_f32, stream);
    case MatMulPath::kGemv:
    case MatMulPath::kGemvRowSlices:
      return Gemv(plan, x, m, ToDeviceWeight(w), 1, y, y_f32, stream);
    case MatMulPath::kFp8RowScaledGemm: return Fp8RowScaledGemm(x, m, w, y, y_f32, stream);
    case MatMulPath::kFp8BlockScaledGemm: return Fp8BlockScaledGemm(x, m, w, y, y_f32, stream);
    case MatMulPath::kDecodedGemm: return DecodedGemm(x, m, w, y, y_f32, stream);
    case MatMulPath::kChunkByChunk:
    case MatMulPath::kNoKernel: break;
  }
  return absl::InternalError(
      StrCat("MatMul path ", MatMulPathName(plan.path), " is not a path of one matrix"));
}

absl::Status CudaMatMul::Run(const void* x, int64_t m, const WeightMatrix& w, void* y,
                             DType y_dtype, void* stream) {
  TP_CHECK(CudaMatMulSupports(w.format), "weight format not supported by the CUDA backend");
  TP_CHECK(y_dtype == DType::kBF16 || y_dtype == DType::kF32, "MatMul writes bf16 or f32");
  const int64_t n = w.rows, k = w.cols;
  if (m <= 0 || n <= 0) return absl::OkStatus();
  const bool y_f32 = y_dtype == DType::kF32;
  if (k == 0) {  // an empty sum
    return TPK_CUDA(cudaMemsetAsync(y, 0, m * n * (y_f32 ? 4 : kBf16Bytes), AsStream(stream)));
  }
  if (w.input_perm != nullptr) {  // act-order: x's columns in stored order first
    TP_RETURN_IF_ERROR(x_perm_.Reserve(m * k * kBf16Bytes, stream));
    TP_RETURN_IF_ERROR(
        TPK_LAUNCH(LaunchGatherColumns(x, m, k, w.input_perm, x_perm_.data(), stream)));
    x = x_perm_.data();
  }
  OperandFacts facts = FactsFor(x, w);
  const auto refusal = std::make_tuple(static_cast<int>(w.format.kind), n, k, y_f32);
  facts.fp8_gemm_refused = fp8_refused_.count(refusal) > 0;
  const MatMulPlan plan = ChooseMatMulPath(w.format, m, n, k, facts, options_.deterministic);
  if (options_.strict_kernels && plan.path == MatMulPath::kDecodedGemm) {
    // CheckWeight refused such weights at load; this one (a chunk of one, say) was not seen.
    return absl::FailedPreconditionError(StrCat(
        "--strict_kernels: a ", TensorFormatName(w.format), " weight [", n, ", ", k,
        "] would take the ", MatMulPathName(plan.path), " fallback at m = ", m, ": ",
        DecodedGemmReason(w.format, m, n, k, facts, options_.deterministic)));
  }
  const absl::Status st = RunPlan(plan, x, m, w, y, y_f32, stream);
  if (st.code() != absl::StatusCode::kUnimplemented || !QuantizesActivations(plan.path)) {
    return st;
  }
  if (options_.strict_kernels) {
    return absl::FailedPreconditionError(
        StrCat("--strict_kernels: ", st.message(), "; no fallback to a decoded bf16 GEMM"));
  }
  // cuBLASLt has no algorithm for this fp8 GEMM (no scale modes on this GPU or library, or
  // this shape), and CheckWeight did not find it at load: say so once, then take the path the
  // plan gives without it, which keeps activations exact.
  if (fp8_refused_.empty()) {
    std::fprintf(stderr, "CudaMatMul: %s; fp8 GEMMs cuBLASLt refuses decode W to bf16 instead\n",
                 std::string(st.message()).c_str());
  }
  fp8_refused_.insert(refusal);
  facts.fp8_gemm_refused = true;
  return RunPlan(ChooseMatMulPath(w.format, m, n, k, facts, options_.deterministic), x, m, w, y,
                 y_f32, stream);
}

absl::Status CudaMatMul::CheckWeight(const WeightMatrix& w, std::string_view what) {
  if (!CudaMatMulSupports(w.format) || w.rows <= 0 || w.cols <= 0) return absl::OkStatus();
  LoadedWeight loaded;
  loaded.role = WeightRoleName(what);
  loaded.format = w.format;
  loaded.n = w.rows;
  loaded.k = w.cols;
  loaded.row_bytes = w.row_bytes;
  loaded.data = w.data;
  loaded.facts = FactsFor(/*x=*/nullptr, w);  // x: the step's, staged where a kernel needs it
  const auto key = std::make_tuple(static_cast<int>(w.format.kind), w.format.group_size, w.rows,
                                   w.cols, w.row_bytes, loaded.facts.w_aligned,
                                   loaded.facts.w_prepared);
  auto it = load_checks_.find(key);
  if (it == load_checks_.end()) {
    if (load_rows_.empty()) {
      load_rows_ = MatMulLoadRows(options_.max_tokens_per_step, options_.deterministic);
    }
    const MatMulLoadOptions options{.deterministic = options_.deterministic,
                                    .strict_kernels = options_.strict_kernels,
                                    .rows = load_rows_};
    absl::StatusOr<MatMulLoadReport> report = CheckMatMulAtLoad(
        loaded, options, [this](const GemmArgs& g) { return gemm_->Check(g); });
    if (!report.ok()) return report.status();  // names this weight's role: not kept
    it = load_checks_.emplace(key, *std::move(report)).first;
  }
  const MatMulLoadReport& report = it->second;
  for (bool y_f32 : {false, true}) {
    if (report.fp8_refused[y_f32]) {
      fp8_refused_.insert(std::make_tuple(static_cast<int>(w.format.kind), w.rows, w.cols, y_f32));
    }
  }
  for (const std::string& line : fallback_log_.Add(loaded, report)) {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  return absl::OkStatus();
}

absl::Status CudaMatMul::RunChunked(const void* x, int64_t m, const WeightMatrix& w,
                                    int64_t num_chunks, float* y, void* stream) {
  TP_CHECK(num_chunks >= 1 && w.cols % num_chunks == 0, "k is not a whole number of chunks");
  TP_CHECK(w.bias == nullptr, "a chunked product has no bias (backend.h)");
  const int64_t k = w.cols, kc = k / num_chunks, n = w.rows;
  TP_CHECK(kc % InputBlockValues(w.format) == 0, "a chunk is not a whole number of blocks");
  if (m <= 0 || n <= 0) return absl::OkStatus();
  WeightMatrix whole = w;
  if (w.input_perm != nullptr) {  // permute the full rows once, then chunk (as the CPU does)
    TP_RETURN_IF_ERROR(x_perm_.Reserve(m * k * kBf16Bytes, stream));
    TP_RETURN_IF_ERROR(
        TPK_LAUNCH(LaunchGatherColumns(x, m, k, w.input_perm, x_perm_.data(), stream)));
    x = x_perm_.data();
    whole.input_perm = nullptr;
  }
  // One launch over every chunk where a kernel takes them, each chunk summed exactly as a call
  // on that chunk alone: the mixed GEMM (CUTLASS batch mode, the chunk's plan) for a prepared
  // weight, or the GEMV (per 16-row slice) streaming the stored form (gemv_kernels.h).
  const MatMulPlan plan = ChooseChunkedPath(whole.format, m, n, k, num_chunks, FactsFor(x, whole),
                                            options_.deterministic);
  if (plan.stage_x) {
    TP_ASSIGN_OR_RETURN(x, StageX(x, m * k * kBf16Bytes, stream));
  }
  switch (plan.path) {
    case MatMulPath::kMixedGemm:
      return MixedGemm(whole.format, x, k, m, MixedGemmColumnChunk(*MixedGemmForm(whole), 0, kc),
                       num_chunks, y, /*y_f32=*/true, stream);
    case MatMulPath::kGemv:
    case MatMulPath::kGemvRowSlices:
      return Gemv(plan, x, m, ToDeviceWeight(whole), num_chunks, y, /*y_f32=*/true, stream);
    case MatMulPath::kChunkByChunk:
      if (whole.data != nullptr) break;
      [[fallthrough]];  // a prepared int4 weight has no stored form to chunk
    default:
      return absl::FailedPreconditionError(StrCat(
          "MatMulChunked: no CUDA kernel takes ", num_chunks, " chunks of ", kc, " columns of "
          "this ", TensorFormatName(whole.format), " weight [", n, ", ", k, "] (a prepared int4 "
          "weight's chunks must be whole groups of whole 64-column K tiles)"));
  }
  // An fp8 weight's own form keeps its stored one beside it (the chunks below run on that,
  // each as a weight of its own would: a chunk that is not whole 128-column groups is not
  // prepared, and larger batches quantize x either way).
  whole.prepared = nullptr;
  // Each chunk runs from and into buffers of its own (aligned, dense), so its floats do not
  // depend on where its input columns and output rows sit: the same chunk gives the same bits
  // at every tensor-parallel degree.
  TP_RETURN_IF_ERROR(x_chunk_.Reserve(m * kc * kBf16Bytes, stream));
  TP_RETURN_IF_ERROR(y_chunk_.Reserve(m * n * 4, stream));
  for (int64_t c = 0; c < num_chunks; ++c) {
    TP_RETURN_IF_ERROR(TPK_CUDA(cudaMemcpy2DAsync(
        x_chunk_.data(), kc * kBf16Bytes, static_cast<const uint8_t*>(x) + c * kc * kBf16Bytes,
        k * kBf16Bytes, kc * kBf16Bytes, m, cudaMemcpyDeviceToDevice, AsStream(stream))));
    TP_RETURN_IF_ERROR(
        Run(x_chunk_.data(), m, ColumnChunk(whole, c, kc), y_chunk_.data(), DType::kF32, stream));
    TP_RETURN_IF_ERROR(TPK_CUDA(cudaMemcpyAsync(y + c * m * n, y_chunk_.data(), m * n * 4,
                                                cudaMemcpyDeviceToDevice, AsStream(stream))));
  }
  return absl::OkStatus();
}

}  // namespace tpserve::cuda
