// Parity cases of the row-wise and element-wise ops: SumChunks, RmsNorm (in and out of place),
// Rope (both layouts, head dims 64 / 80 / 128 / 256, Llama 3.1 frequencies), GatedActivation
// (SwiGLU and GeGLU), Add, Scale and SoftCapF32
// (aliased outputs), EmbeddingRows (every table format, a vocab-parallel shard with ids on both
// sides of it) and GatherLogitRows.
#include <functional>

#include "base/status_macros.h"
#include "formats/dtype.h"
#include "base/str_cat.h"
#include "kernels/quantize_weights.h"
#include "kernels/rope_table.h"
#include "kernels/testing/parity_bounds.h"
#include "kernels/testing/parity_cases.h"
#include "kernels/testing/parity_util.h"

namespace tpserve::parity {
namespace {

struct Output {
  std::vector<double> values;
  bool guards_ok = false;
};

// One op's inputs: activations (encoded per backend), f32 arrays (raw), and its output.
struct OpIo {
  std::vector<std::vector<float>> acts;
  std::vector<std::vector<float>> f32s;
  int64_t out_elems = 0;
  bool out_f32 = false;
  bool in_place = false;  // the op writes into acts[0], which is the output
  const StepInputs* step = nullptr;
};
using OpFn = std::function<void(Backend&, const std::vector<void*>& acts,
                                const std::vector<void*>& f32s, void* out)>;

absl::StatusOr<Output> RunOp(Backend& be, const OpIo& io, const OpFn& fn) {
  std::vector<GuardedBuffer> bufs;
  std::vector<void*> acts, f32s;
  for (const std::vector<float>& a : io.acts) {
    const std::vector<uint8_t> bytes = EncodeActivations(be, a);
    TP_ASSIGN_OR_RETURN(GuardedBuffer b, GuardedBuffer::Filled(be, bytes.data(),
                                                               static_cast<int64_t>(bytes.size())));
    acts.push_back(b.data());
    bufs.push_back(std::move(b));
  }
  for (const std::vector<float>& f : io.f32s) {
    TP_ASSIGN_OR_RETURN(GuardedBuffer b, GuardedBuffer::Filled(be, f.data(),
                                                               static_cast<int64_t>(f.size() * 4)));
    f32s.push_back(b.data());
    bufs.push_back(std::move(b));
  }
  const int64_t out_bytes = io.out_elems * (io.out_f32 ? 4 : ActivationBytes(be));
  const GuardedBuffer* out = nullptr;
  std::optional<GuardedBuffer> own;
  if (io.in_place) {
    out = &bufs[0];
  } else {
    TP_ASSIGN_OR_RETURN(GuardedBuffer b, GuardedBuffer::Poisoned(be, out_bytes));
    own.emplace(std::move(b));
    out = &*own;
  }
  if (io.step != nullptr) be.BeginStep(*io.step);
  fn(be, acts, f32s, out->data());
  TP_RETURN_IF_ERROR(be.Synchronize());
  std::vector<uint8_t> bytes;
  Output result;
  TP_RETURN_IF_ERROR(out->Read(&bytes, &result.guards_ok));
  result.values = io.out_f32 ? DecodeF32(bytes) : DecodeActivations(be, bytes);
  return result;
}

void Run(ParityContext& ctx, const CaseName& name, const OpIo& io, const OpFn& fn, double bound) {
  absl::StatusOr<Output> got = RunOp(ctx.candidate(), io, fn);
  absl::StatusOr<Output> ref = RunOp(ctx.reference(), io, fn);
  if (!ctx.Check(name, got.status()) || !ctx.Check(name, ref.status())) return;
  ctx.Compare(name, got->values, ref->values, bound, got->guards_ok, ref->guards_ok);
}

void SumChunksCases(ParityContext& ctx) {
  for (int64_t count : {1, 7, 4099}) {
    OpIo io;
    io.f32s = {RandomF32(3 * count, 10 + count)};
    io.out_elems = count;
    Run(ctx, {"SumChunks", "f32 -> act", StrCat("chunks=3 count=", count)}, io,
        [&](Backend& be, const auto&, const auto& f, void* out) {
          be.SumChunks(static_cast<const float*>(f[0]), 3, count, out);
        },
        ctx.Bound(kBf16RoundBound));
  }
}

void RmsNormCases(ParityContext& ctx) {
  for (int64_t rows : {1, 7, 33}) {
    for (int64_t dim : {96, 1539, 4096}) {
      for (bool in_place : {false, true}) {
        OpIo io;
        io.acts = {RandomBf16(rows * dim, rows + dim, 3.0f)};
        io.f32s = {RandomF32(dim, 9)};
        io.out_elems = rows * dim;
        io.in_place = in_place;
        Run(ctx, {"RmsNorm", in_place ? "act (in place)" : "act",
                  StrCat("rows=", rows, " dim=", dim)},
            io,
            [&](Backend& be, const auto& a, const auto& f, void* out) {
              be.RmsNorm(a[0], static_cast<const float*>(f[0]), rows, dim, 1e-5f, out);
            },
            ctx.Bound(kBf16RoundBound));
      }
    }
  }
}

void RopeCases(ParityContext& ctx) {
  const std::pair<int64_t, int64_t> heads_dims[] = {{9, 64}, {3, 64}, {5, 80}, {32, 128}, {2, 256}};
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kRotateHalf}) {
    for (const auto& [heads, hd] : heads_dims) {
      for (int64_t rows : {1, 7, 33}) {
        std::vector<int32_t> positions(rows);
        for (int64_t r = 0; r < rows; ++r) positions[r] = static_cast<int32_t>((r * 977 + 13) % 8192);
        positions[rows - 1] = 100000;  // long context: the angle needs more than f32
        const StepInputs step{{}, positions, {}, {}};
        OpIo io;
        io.acts = {RandomBf16(rows * heads * hd, heads * 100 + hd + rows)};
        io.f32s = {RopeInverseFrequencies(hd, 500000.0, Llama3RopeScaling{})};
        io.out_elems = rows * heads * hd;
        io.in_place = true;
        io.step = &step;
        Run(ctx, {"Rope", layout == RopeLayout::kInterleaved ? "act interleaved" : "act rotate-half",
                  StrCat("rows=", rows, " heads=", heads, " hd=", hd)},
            io,
            [&](Backend& be, const auto& a, const auto& f, void*) {
              be.Rope(a[0], heads, hd, static_cast<const float*>(f[0]), layout);
            },
            ctx.Bound(kBf16RoundBound));
      }
    }
  }
}

void ElementwiseCases(ParityContext& ctx) {
  for (int64_t count : {1, 7, 3168, 100003}) {
    for (bool in_place : {false, true}) {
      OpIo io;
      io.acts = {RandomBf16(count, count + 1, 4.0f), RandomBf16(count, count + 2)};
      io.out_elems = count;
      io.in_place = in_place;
      const std::string dtype = in_place ? "act (out = first input)" : "act";
      for (Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
        Run(ctx, {"GatedActivation", dtype, StrCat(ActivationName(act), " count=", count)}, io,
            [&](Backend& be, const auto& a, const auto&, void* out) {
              be.GatedActivation(act, a[0], a[1], count, in_place ? a[0] : out);
            },
            ctx.Bound(kBf16RoundBound));
      }
      Run(ctx, {"Add", dtype, StrCat("count=", count)}, io,
          [&](Backend& be, const auto& a, const auto&, void* out) {
            be.Add(a[0], a[1], count, in_place ? a[0] : out);
          },
          ctx.Bound(kBf16RoundBound));
    }
  }
}

// The element-wise ops of the families beyond Llama: Gemma's embedding multiplier and Gemma 2's
// final logit soft-cap (f32 logits from -200 to 200, far into tanh's flat ends). (Qwen2's
// biases ride on their matrices: parity_matmul.cc.)
void FamilyElementwiseCases(ParityContext& ctx) {
  for (int64_t count : {1, 7, 100003}) {
    OpIo io;
    io.acts = {RandomBf16(count, count + 80, 2.0f)};
    io.out_elems = count;
    io.in_place = true;
    Run(ctx, {"Scale", "act (in place)", StrCat("count=", count)}, io,
        [&](Backend& be, const auto& a, const auto&, void*) { be.Scale(a[0], count, 25.3f); },
        ctx.Bound(kBf16RoundBound));
  }
  for (int64_t count : {1, 7, 262144}) {
    OpIo io;
    io.f32s = {RandomF32(count, count + 90, 200.0f)};
    io.out_elems = count;
    io.out_f32 = true;
    Run(ctx, {"SoftCapF32", "f32 (in place)", StrCat("count=", count, " cap=30")}, io,
        [&](Backend& be, const auto&, const auto& f, void* out) {
          be.Copy2D(out, count * 4, f[0], count * 4, count * 4, 1);
          be.SoftCapF32(static_cast<float*>(out), count, 30.0f);
        },
        ctx.Bound(kF32OrderBound));
  }
}

void EmbeddingCases(ParityContext& ctx) {
  const int64_t rows = 20, first_row = 10, cols = 256;  // this shard holds ids 10..29
  for (const TensorFormat& f :
       {TensorFormat::Of(FormatKind::kF32), TensorFormat::Of(FormatKind::kF16),
        TensorFormat::Of(FormatKind::kBF16), TensorFormat::Of(FormatKind::kF8E4M3),
        TensorFormat::Of(FormatKind::kFp8PerChannel), TensorFormat::Of(FormatKind::kFp8Block128),
        TensorFormat::Int4(32), TensorFormat::Int4(128), TensorFormat::Of(FormatKind::kQ8_0),
        TensorFormat::Of(FormatKind::kQ4_1), TensorFormat::Of(FormatKind::kQ6_K)}) {
    const std::string dtype = TensorFormatName(f) + " -> act";
    if (!ctx.candidate().SupportsWeight(f)) {
      ctx.NotSupported({"EmbeddingRows", dtype, "all shapes"}, "SupportsWeight is false");
      continue;
    }
    const std::vector<float> table = RandomF32(rows * cols, 77);
    const HostMatrix host = QuantizeWeights(f, table.data(), rows, cols);
    absl::StatusOr<UploadedWeight> cw = UploadWeight(ctx.candidate(), host, WeightUse::kTable);
    absl::StatusOr<UploadedWeight> rw = UploadWeight(ctx.reference(), host, WeightUse::kTable);
    const CaseName upload{"EmbeddingRows", dtype, "upload"};
    if (!ctx.Check(upload, cw.status()) || !ctx.Check(upload, rw.status())) continue;
    for (int64_t t : {1, 7, 33}) {
      std::vector<int32_t> ids(t);
      for (int64_t i = 0; i < t; ++i) ids[i] = static_cast<int32_t>((i * 7 + 12) % 40);  // 0..39
      const StepInputs step{ids, {}, {}, {}};
      OpIo io;
      io.out_elems = t * cols;
      io.step = &step;
      Run(ctx, {"EmbeddingRows", dtype, StrCat("tokens=", t, " rows 10..29 of 40 cols=", cols)},
          io,
          [&](Backend& be, const auto&, const auto&, void* out) {
            be.EmbeddingRows(&be == &ctx.candidate() ? cw->matrix : rw->matrix, first_row, out);
          },
          ctx.Bound(kBf16RoundBound));
    }
  }
}

void GatherLogitRowsCases(ParityContext& ctx) {
  const int64_t hidden = 96;
  const std::pair<int64_t, std::vector<int32_t>> cases[] = {
      {1, {0}}, {7, {6}}, {33, {0, 5, 32}}, {33, {32, 1, 1}}};
  for (const auto& [t, logit_rows] : cases) {
    const StepInputs step{{}, {}, {}, logit_rows};
    OpIo io;
    io.acts = {RandomBf16(t * hidden, 5 + t)};
    io.out_elems = static_cast<int64_t>(logit_rows.size()) * hidden;
    io.step = &step;
    Run(ctx, {"GatherLogitRows", "act",
              StrCat("tokens=", t, " rows=", logit_rows.size(), " hidden=", hidden)},
        io,
        [&](Backend& be, const auto& a, const auto&, void* out) {
          be.GatherLogitRows(a[0], hidden, out);
        },
        kExactBound);
  }
}

}  // namespace

void RunOpCases(ParityContext& ctx) {
  if (ctx.Wants("SumChunks")) SumChunksCases(ctx);
  if (ctx.Wants("RmsNorm")) RmsNormCases(ctx);
  if (ctx.Wants("Rope")) RopeCases(ctx);
  if (ctx.Wants("GatedActivation") || ctx.Wants("Add")) ElementwiseCases(ctx);
  if (ctx.Wants("Scale") || ctx.Wants("SoftCapF32")) {
    FamilyElementwiseCases(ctx);
  }
  if (ctx.Wants("EmbeddingRows")) EmbeddingCases(ctx);
  if (ctx.Wants("GatherLogitRows")) GatherLogitRowsCases(ctx);
}

}  // namespace tpserve::parity
