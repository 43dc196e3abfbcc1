// Parity cases of WriteKv and PagedAttention: every KV dtype (fp8 with a scale of 0.25), GQA
// groups of 3 and 4 and plain MHA, head dims 64, 80, 128 and 256, block sizes 7, 16 and 32,
// shuffled physical blocks, and batches of decode rows (contexts up to 3000, so decode splits
// its keys), one prompt, chunked prefill, mixes of all of them, and decode rows padded with
// padding rows (no KV writes, zero output); and the same batches with a sliding window shorter
// than the contexts and an attention logit soft-cap (Gemma 2 / 3). RunStepBatchCases: the
// batches real steps make (below).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "base/status_macros.h"
#include "formats/dtype.h"
#include "base/str_cat.h"
#include "kernels/testing/parity_bounds.h"
#include "kernels/testing/parity_cases.h"
#include "kernels/testing/parity_util.h"

namespace tpserve::parity {
namespace {

struct Shape {
  int64_t num_heads, num_kv_heads, head_dim, block_size;
};

struct Seq {
  int64_t start, count;  // tokens already cached, new query tokens
  bool padding = false;  // a padding row (AttentionSequence::padding): one token, no KV
};

// One batch and its data, the same for both backends.
struct Batch {
  Shape shape;
  Backend::AttentionParams params;
  std::vector<Seq> seqs;
  std::vector<std::vector<float>> k, v;  // per sequence: [start + count, kv_heads, head_dim]
  std::vector<std::vector<int32_t>> tables;
  std::vector<float> q;  // [rows, heads, head_dim]
  int64_t rows = 0, num_blocks = 0;

  Batch(const Shape& s, const std::vector<Seq>& batch, uint32_t seed,
        Backend::AttentionParams p = {})
      : shape(s), params(p), seqs(batch) {
    if (params.scale == 1.0f) params.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    const int64_t kv_row = s.num_kv_heads * s.head_dim;
    for (const Seq& q_seq : seqs) {
      const int64_t total = q_seq.start + q_seq.count;
      k.push_back(RandomBf16(total * kv_row, ++seed));
      v.push_back(RandomBf16(total * kv_row, ++seed));
      if (!q_seq.padding) num_blocks += (total + s.block_size - 1) / s.block_size;
      rows += q_seq.count;
    }
    num_blocks += 3;  // blocks nobody owns: they must keep their poison
    std::vector<int32_t> physical(num_blocks);
    std::iota(physical.begin(), physical.end(), 0);
    std::shuffle(physical.begin(), physical.end(), std::mt19937(seed));
    int64_t next = 0;
    for (const Seq& q_seq : seqs) {
      const int64_t n =
          q_seq.padding ? 0 : (q_seq.start + q_seq.count + s.block_size - 1) / s.block_size;
      tables.emplace_back(physical.begin() + next, physical.begin() + next + n);
      next += n;
    }
    q = RandomBf16(rows * s.num_heads * s.head_dim, ++seed);
  }
  int64_t PoolElems() const {
    return num_blocks * shape.block_size * shape.num_kv_heads * shape.head_dim;
  }
  // Whether slot (physical block * block_size + offset) belongs to a sequence.
  std::vector<bool> OwnedSlots() const {
    std::vector<bool> owned(num_blocks * shape.block_size, false);
    for (size_t s = 0; s < seqs.size(); ++s) {
      if (seqs[s].padding) continue;
      for (int64_t p = 0; p < seqs[s].start + seqs[s].count; ++p) {
        owned[tables[s][p / shape.block_size] * shape.block_size + p % shape.block_size] = true;
      }
    }
    return owned;
  }
};

struct Result {
  std::vector<uint8_t> k_pool, v_pool;  // bytes after the step
  std::vector<double> out;
  bool guards_ok = false;
};

absl::StatusOr<DeviceBuffer> UploadActs(Backend& be, const std::vector<float>& v) {
  const std::vector<uint8_t> bytes = EncodeActivations(be, v);
  return Upload(be, bytes.data(), std::max<int64_t>(1, bytes.size()), "parity activations");
}

// Writes each sequence's history as earlier steps would have, then runs the batch's step:
// WriteKv of the new rows and PagedAttention over them.
absl::StatusOr<Result> RunBatch(Backend& be, const Batch& b, DType dtype, float kv_scale) {
  const Shape& s = b.shape;
  const int64_t pool_bytes = b.PoolElems() * BlockBytes(dtype);
  TP_ASSIGN_OR_RETURN(GuardedBuffer k_pool, GuardedBuffer::Poisoned(be, pool_bytes));
  TP_ASSIGN_OR_RETURN(GuardedBuffer v_pool, GuardedBuffer::Poisoned(be, pool_bytes));
  const KvPoolView view{k_pool.data(), v_pool.data(), dtype,          kv_scale,
                        kv_scale,      b.num_blocks,  s.block_size, s.num_kv_heads,
                        s.head_dim};
  const int64_t kv_row = s.num_kv_heads * s.head_dim;
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    if (b.seqs[i].start == 0 || b.seqs[i].padding) continue;
    const std::vector<float> k(b.k[i].begin(), b.k[i].begin() + b.seqs[i].start * kv_row);
    const std::vector<float> v(b.v[i].begin(), b.v[i].begin() + b.seqs[i].start * kv_row);
    TP_ASSIGN_OR_RETURN(DeviceBuffer kb, UploadActs(be, k));
    TP_ASSIGN_OR_RETURN(DeviceBuffer vb, UploadActs(be, v));
    const AttentionSequence prior{0, b.seqs[i].start, 0, b.tables[i]};
    be.BeginStep(StepInputs{{}, {}, {&prior, 1}, {}});
    be.WriteKv(kb.data(), vb.data(), view);
    TP_RETURN_IF_ERROR(be.Synchronize());
  }
  std::vector<AttentionSequence> step_seqs;
  std::vector<float> k_new, v_new;
  int64_t row = 0;
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    step_seqs.push_back({row, b.seqs[i].count, b.seqs[i].start, b.tables[i], b.seqs[i].padding});
    const int64_t from = b.seqs[i].start * kv_row, to = from + b.seqs[i].count * kv_row;
    k_new.insert(k_new.end(), b.k[i].begin() + from, b.k[i].begin() + to);
    v_new.insert(v_new.end(), b.v[i].begin() + from, b.v[i].begin() + to);
    row += b.seqs[i].count;
  }
  TP_ASSIGN_OR_RETURN(DeviceBuffer kb, UploadActs(be, k_new));
  TP_ASSIGN_OR_RETURN(DeviceBuffer vb, UploadActs(be, v_new));
  TP_ASSIGN_OR_RETURN(DeviceBuffer qb, UploadActs(be, b.q));
  TP_ASSIGN_OR_RETURN(GuardedBuffer out,
                      GuardedBuffer::Poisoned(be, b.rows * s.num_heads * s.head_dim *
                                                      ActivationBytes(be)));
  be.BeginStep(StepInputs{{}, {}, step_seqs, {}});
  be.WriteKv(kb.data(), vb.data(), view);
  be.PagedAttention(qb.data(), s.num_heads, b.params, view, out.data());
  TP_RETURN_IF_ERROR(be.Synchronize());
  Result r;
  bool k_ok = false, v_ok = false, out_ok = false;
  std::vector<uint8_t> out_bytes;
  TP_RETURN_IF_ERROR(k_pool.Read(&r.k_pool, &k_ok));
  TP_RETURN_IF_ERROR(v_pool.Read(&r.v_pool, &v_ok));
  TP_RETURN_IF_ERROR(out.Read(&out_bytes, &out_ok));
  r.guards_ok = k_ok && v_ok && out_ok;
  r.out = DecodeActivations(be, out_bytes);
  return r;
}

// Values of the owned slots (both pools), and whether every byte of the unowned ones still holds
// the poison.
std::vector<double> OwnedValues(const Batch& b, DType dtype, float scale, const Result& r,
                                bool* unowned_intact) {
  const int64_t slot_elems = b.shape.num_kv_heads * b.shape.head_dim;
  const int64_t slot_bytes = slot_elems * BlockBytes(dtype);
  const std::vector<bool> owned = b.OwnedSlots();
  std::vector<double> values;
  *unowned_intact = true;
  for (const std::vector<uint8_t>* pool : {&r.k_pool, &r.v_pool}) {
    for (size_t slot = 0; slot < owned.size(); ++slot) {
      const auto begin = pool->begin() + slot * slot_bytes;
      if (!owned[slot]) {
        if (std::any_of(begin, begin + slot_bytes, [](uint8_t x) { return x != kPoisonByte; })) {
          *unowned_intact = false;
        }
        continue;
      }
      const std::vector<double> v = DecodeKv(dtype, scale, std::vector<uint8_t>(begin, begin + slot_bytes));
      values.insert(values.end(), v.begin(), v.end());
    }
  }
  return values;
}

std::string ShapeName(const Shape& s, const std::vector<Seq>& seqs,
                      const Backend::AttentionParams& params) {
  std::string out = StrCat("heads=", s.num_heads, "/", s.num_kv_heads, " hd=", s.head_dim,
                           " bs=", s.block_size);
  if (params.sliding_window > 0) out += StrCat(" window=", params.sliding_window);
  if (params.logit_softcap > 0) out += StrCat(" softcap=", params.logit_softcap);
  out += " seqs(start+n)=";
  for (size_t i = 0; i < seqs.size(); ++i) {
    out += seqs[i].padding ? StrCat(i == 0 ? "" : ",", "pad")
                           : StrCat(i == 0 ? "" : ",", seqs[i].start, "+", seqs[i].count);
  }
  return out;
}

void AttentionCase(ParityContext& ctx, const Shape& shape, const std::vector<Seq>& seqs,
                   DType dtype, uint32_t seed, const Backend::AttentionParams& params = {}) {
  const std::string kv = StrCat("kv ", DTypeName(dtype));
  const std::string name = ShapeName(shape, seqs, params);
  if (!ctx.candidate().SupportsKvDtype(dtype)) {
    ctx.NotSupported({"PagedAttention", kv, name}, "SupportsKvDtype is false");
    return;
  }
  const float scale = dtype == DType::kF8E4M3 ? 0.25f : 1.0f;
  const Batch batch(shape, seqs, seed, params);
  absl::StatusOr<Result> got = RunBatch(ctx.candidate(), batch, dtype, scale);
  absl::StatusOr<Result> ref = RunBatch(ctx.reference(), batch, dtype, scale);
  const CaseName write{"WriteKv", kv, name}, attend{"PagedAttention", kv + " q/out act", name};
  if (!ctx.Check(write, got.status()) || !ctx.Check(write, ref.status())) return;
  bool got_intact = false, ref_intact = false;
  const std::vector<double> got_kv = OwnedValues(batch, dtype, scale, *got, &got_intact);
  const std::vector<double> ref_kv = OwnedValues(batch, dtype, scale, *ref, &ref_intact);
  if (!got_intact) {
    ctx.Failed(write, "candidate wrote into KV slots that no sequence owns");
  } else if (!ref_intact) {
    ctx.Failed(write, "reference wrote into KV slots that no sequence owns");
  } else {
    ctx.Compare(write, got_kv, ref_kv, ctx.Bound(kExactBound), got->guards_ok, ref->guards_ok);
  }
  ctx.Compare(attend, got->out, ref->out, ctx.Bound(kBf16RoundBound), got->guards_ok,
              ref->guards_ok);
}

}  // namespace

void RunAttentionCases(ParityContext& ctx) {
  if (!ctx.Wants("PagedAttention") && !ctx.Wants("WriteKv")) return;
  const Shape shapes[] = {{9, 3, 64, 16}, {5, 5, 80, 7}, {32, 8, 128, 16}, {8, 2, 256, 32}};
  const std::vector<std::vector<Seq>> batches = {
      {{0, 1}},                                     // the very first token
      {{0, 1}, {40, 1}, {700, 1}, {3000, 1}},       // decode, long enough to split
      {{0, 33}},                                    // one prompt, two query tiles
      {{50, 7}},                                    // a prompt chunk after cached tokens
      {{0, 7}, {100, 1}, {20, 33}, {5, 2}},         // prefill, decode and chunks together
      {{40, 1}, {0, 1, true}, {700, 1}, {0, 1, true}},  // decode padded with padding rows
  };
  uint32_t seed = 5000;
  for (const Shape& shape : shapes) {
    for (const std::vector<Seq>& seqs : batches) {
      for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3}) {
        AttentionCase(ctx, shape, seqs, dtype, seed += 10);
      }
    }
  }
  // Gemma's local layers: a window shorter than most contexts (starting mid-block), with and
  // without Gemma 2's soft-cap of the scaled scores, and a query scale of its own.
  const Backend::AttentionParams gemma[] = {{0.0625f, 37, 0.0f}, {0.0625f, 37, 50.0f},
                                            {0.0625f, 0, 20.0f}};
  for (const Shape& shape : {shapes[0], shapes[3]}) {
    for (const std::vector<Seq>& seqs : batches) {
      for (const Backend::AttentionParams& params : gemma) {
        for (DType dtype : {DType::kF16, DType::kBF16}) {
          AttentionCase(ctx, shape, seqs, dtype, seed += 10, params);
        }
      }
    }
  }
}

void RunStepBatchCases(ParityContext& ctx) {
  if (!ctx.Wants("PagedAttention") && !ctx.Wants("WriteKv")) return;
  // (1) The scheduler puts decodes first, then prompt chunks: on a GPU the leading one-row
  // requests go to FlashInfer's FA2 (split keys) and the rest to FA3 in the same step (bf16 KV,
  // head_dim 64/128; flashinfer_attention.h), the SIMT kernels' decode and prefill work lists
  // otherwise. Padding rows (a recorded batch's spare slots) sit among the decodes.
  const std::vector<std::vector<Seq>> decodes_then_chunks = {
      {{700, 1}, {40, 1}, {3000, 1}, {100, 57}},             // a chunk after cached tokens
      {{5, 1}, {0, 80}},                                     // then a prompt of several tiles
      {{40, 1}, {0, 1, true}, {1500, 1}, {200, 33}, {0, 7}},  // padding among the decodes
  };
  // (2) Llama 3.1 405B at TP 8: 128 query heads over 8 KV heads, so each rank holds one KV
  // head and its group of 16 query heads, head_dim 128.
  const Shape llama405b_tp8{16, 1, 128, 16};
  std::vector<std::vector<Seq>> tp8_batches = {
      {{0, 1}, {40, 1}, {700, 1}, {3000, 1}},  // decodes, long enough to split keys
      {{0, 33}},                               // one prompt
      {{50, 7}},                               // a chunk after cached tokens
  };
  tp8_batches.insert(tp8_batches.end(), decodes_then_chunks.begin(), decodes_then_chunks.end());
  uint32_t seed = 8000;
  for (const std::vector<Seq>& seqs : tp8_batches) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3}) {
      AttentionCase(ctx, llama405b_tp8, seqs, dtype, seed += 10);
    }
  }
  // Llama 3 8B (32 over 8, one rank) and a head_dim of 64 take the same split.
  for (const Shape& shape : {Shape{32, 8, 128, 16}, Shape{16, 4, 64, 16}}) {
    for (const std::vector<Seq>& seqs : decodes_then_chunks) {
      for (DType dtype : {DType::kBF16, DType::kF8E4M3}) {
        AttentionCase(ctx, shape, seqs, dtype, seed += 10);
      }
    }
  }
  // (3) Gemma's local layers at small scale: a window of 16 over sequences of 40 (Gemma 2's is
  // 4096, Gemma 3's 1024), with and without Gemma 2's soft-cap of 50, and the cap alone; the
  // decodes and a chunk crossing the window's edge in one step. head_dim 128 runs on
  // FlashInfer's windowed variants, 256 on the SIMT kernels. With the cap the query scale is 8x
  // 1/sqrt(head_dim): random data at 1/sqrt(head_dim) scores about 1, where tanh(s / 50) * 50
  // is s to 1e-4 and a kernel ignoring the cap would pass; at 8x the scores reach about 20,
  // where the cap moves them by several units, as a trained model's do.
  const std::vector<std::vector<Seq>> windowed = {
      {{0, 40}},                             // a prompt: rows from 16 on see only the window
      {{39, 1}, {0, 40}},                    // a decode at 39 (keys 24..39), then the prompt
      {{39, 1}, {10, 1}, {24, 16}},          // decodes, then a chunk across the window's edge
      {{39, 1}, {0, 1, true}, {20, 20}},     // a padding row among them
  };
  for (const Shape& shape : {Shape{16, 8, 128, 16}, Shape{8, 4, 256, 16}}) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
    const Backend::AttentionParams gemma[] = {{scale, 16, 0.0f}, {8 * scale, 16, 50.0f},
                                              {8 * scale, 0, 50.0f}};
    for (const std::vector<Seq>& seqs : windowed) {
      for (const Backend::AttentionParams& params : gemma) {
        for (DType dtype : {DType::kBF16, DType::kF8E4M3}) {
          AttentionCase(ctx, shape, seqs, dtype, seed += 10, params);
        }
      }
    }
  }
}

}  // namespace tpserve::parity
