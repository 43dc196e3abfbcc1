#include "bench/model_timings.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/quantize.h"

namespace tpserve {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t DecodeBlocksPerSequence(const TimingOptions& o) {
  return CeilDiv(o.context_tokens + o.decode_steps, o.block_size_tokens);
}

std::vector<int32_t> Blocks(int64_t first, int64_t count) {
  std::vector<int32_t> table(count);
  std::iota(table.begin(), table.end(), static_cast<int32_t>(first));
  return table;
}

// Token ids from a 64-bit LCG (any ids in the vocabulary do; the weights are random).
class TokenStream {
 public:
  TokenStream(uint64_t seed, int64_t vocab) : state_(seed * 2 + 1), vocab_(vocab) {}
  int32_t Next() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int32_t>((state_ >> 33) % static_cast<uint64_t>(vocab_));
  }

 private:
  uint64_t state_;
  int64_t vocab_;
};

// Runs `batch` and returns its wall time; logits must come back finite.
absl::StatusOr<double> TimedForward(LlamaModel& model, KvCache& cache, const StepBatch& batch,
                                    std::vector<float>& logits, bool* finite) {
  logits.resize(batch.num_logit_rows() * model.config().vocab_size);
  const auto start = std::chrono::steady_clock::now();
  TP_RETURN_IF_ERROR(model.Forward(batch, &cache, logits.data()));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (float x : logits) {
    if (!std::isfinite(x)) *finite = false;
  }
  return s;
}

// One decode run: `steps` steps of `num_seqs` sequences whose blocks start at `first_block`.
absl::Status DecodeRun(LlamaModel& model, KvCache& cache, const TimingOptions& o, int64_t num_seqs,
                       int64_t first_block, TokenStream& tokens, StepTimes* times, bool* finite) {
  const int64_t per_seq = DecodeBlocksPerSequence(o);
  std::vector<float> logits;
  for (int64_t step = 0; step < o.decode_steps; ++step) {
    StepBatch batch;
    for (int64_t s = 0; s < num_seqs; ++s) {
      batch.Add(/*seq_id=*/s, o.context_tokens + step, std::vector<int32_t>{tokens.Next()},
                Blocks(first_block + s * per_seq, per_seq));
    }
    TP_ASSIGN_OR_RETURN(double seconds, TimedForward(model, cache, batch, logits, finite));
    if (times != nullptr) times->seconds.push_back(seconds);
  }
  return absl::OkStatus();
}

absl::Status CheckOptions(const TimingOptions& o, const KvCache& cache) {
  const std::pair<const char*, int64_t> positive[] = {{"prefill_tokens", o.prefill_tokens},
                                                      {"batch", o.batch},
                                                      {"decode_steps", o.decode_steps},
                                                      {"runs", o.runs},
                                                      {"block_size_tokens", o.block_size_tokens}};
  for (const auto& [field, value] : positive) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("TimingOptions.", field, " is ", value, ", must be >= 1"));
    }
  }
  if (o.context_tokens < 0 || o.warmup < 0) {
    return absl::InvalidArgumentError("TimingOptions: context_tokens and warmup must be >= 0");
  }
  if (cache.shape().num_blocks < TimingKvBlocks(o) ||
      cache.shape().block_size_tokens != o.block_size_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV cache has ", cache.shape().num_blocks, " blocks of ", cache.shape().block_size_tokens,
        " tokens; the timings need ", TimingKvBlocks(o), " of ", o.block_size_tokens));
  }
  return absl::OkStatus();
}

}  // namespace

double StepTimes::Median() const {
  if (seconds.empty()) return 0;
  std::vector<double> v = seconds;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double StepTimes::Min() const {
  return seconds.empty() ? 0 : *std::min_element(seconds.begin(), seconds.end());
}

double StepTimes::Max() const {
  return seconds.empty() ? 0 : *std::max_element(seconds.begin(), seconds.end());
}

int64_t TimingKvBlocks(const TimingOptions& o) {
  return CeilDiv(o.prefill_tokens, o.block_size_tokens) +
         (1 + o.batch) * DecodeBlocksPerSequence(o);
}

int64_t TimingMaxStepTokens(const TimingOptions& o) { return std::max(o.prefill_tokens, o.batch); }

int64_t TimingMaxLogitRows(const TimingOptions& o) { return std::max<int64_t>(o.batch, 1); }

absl::Status FillKvCache(Backend& backend, KvCache& cache, uint64_t seed) {
  const KvCacheShape& shape = cache.shape();
  const std::optional<int64_t> total = KvCache::BytesFor(shape);
  if (!total.has_value()) return absl::InvalidArgumentError("KV cache shape has no size");
  const int64_t pool_bytes = *total / (2 * shape.num_layers);  // one layer's K (or V)
  const int64_t elem_bytes = BlockBytes(shape.dtype);          // KV dtypes are plain elements
  const int64_t pattern_elems = std::min<int64_t>(pool_bytes / elem_bytes, int64_t{1} << 22);
  std::vector<float> values(pattern_elems);
  TokenStream random(seed, 1 << 20);
  for (float& v : values) v = static_cast<float>(random.Next()) / (1 << 19) - 1.0f;
  std::vector<uint8_t> encoded(pattern_elems * elem_bytes);
  QuantizeRow(shape.dtype, values.data(), encoded.data(), pattern_elems);
  TP_ASSIGN_OR_RETURN(DeviceBuffer pattern,
                      Upload(backend, encoded.data(), encoded.size(), "KV fill pattern"));
  const int64_t chunk = static_cast<int64_t>(encoded.size());
  for (int64_t l = 0; l < shape.num_layers; ++l) {
    const KvPoolView pool = cache.layer(l);
    for (void* base : {pool.k, pool.v}) {
      for (int64_t off = 0; off < pool_bytes; off += chunk) {
        const int64_t n = std::min(chunk, pool_bytes - off);
        backend.Copy2D(static_cast<uint8_t*>(base) + off, n, pattern.data(), n, n, 1);
      }
    }
  }
  return backend.Synchronize();
}

absl::StatusOr<ModelTimings> TimeModel(LlamaModel& model, Backend& backend, KvCache& cache,
                                       const TimingOptions& o) {
  TP_RETURN_IF_ERROR(CheckOptions(o, cache));
  ModelTimings out;
  TokenStream tokens(o.seed, model.config().vocab_size);
  std::vector<float> logits;
  const int64_t prefill_blocks = CeilDiv(o.prefill_tokens, o.block_size_tokens);
  for (int run = 0; run < o.warmup + o.runs; ++run) {
    StepBatch prefill;
    std::vector<int32_t> ids(o.prefill_tokens);
    for (int32_t& id : ids) id = tokens.Next();
    prefill.Add(/*seq_id=*/0, 0, std::move(ids), Blocks(0, prefill_blocks));
    bool finite = true;
    TP_ASSIGN_OR_RETURN(double s, TimedForward(model, cache, prefill, logits, &finite));
    if (run >= o.warmup) {
      out.prefill.seconds.push_back(s);
      out.logits_finite = out.logits_finite && finite;
    }
  }
  const int64_t one_first = prefill_blocks;
  const int64_t batch_first = one_first + DecodeBlocksPerSequence(o);
  for (int64_t num_seqs : {int64_t{1}, o.batch}) {
    const int64_t first = num_seqs == 1 ? one_first : batch_first;
    StepTimes* times = num_seqs == 1 ? &out.decode_one : &out.decode_batch;
    for (int run = 0; run < o.warmup + o.runs; ++run) {
      bool finite = true;
      TP_RETURN_IF_ERROR(DecodeRun(model, cache, o, num_seqs, first, tokens,
                                   run >= o.warmup ? times : nullptr, &finite));
      if (run >= o.warmup) out.logits_finite = out.logits_finite && finite;
    }
  }
  TP_RETURN_IF_ERROR(backend.Synchronize());
  return out;
}

}  // namespace tpserve
