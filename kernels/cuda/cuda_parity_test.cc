// The backend-parity suite (kernels/testing/backend_parity.h) with the CUDA backend (device 0,
// bf16 activations) as the candidate and the CPU's scalar kernels (f32) as the reference.
// Without a usable device it skips with one line naming why. With one, "no failure" is not
// enough: a floor of cases must have run (a backend that answered "not supported" to
// everything would otherwise pass), every op must have run at least once, and every skipped
// case is listed.
//
// The batches real steps make (RunStepBatchParity: decodes first then prompt chunks, which the
// backend splits between FlashInfer's FA2 and FA3 in one step; Llama 3.1 405B's grouping at
// TP 8; a window of 16 over sequences of 40 with and without a soft-cap of 50) run in their own
// test below, every case required to run; //kernels/testing:step_batch_parity_test runs the same
// batches on the CPU without a GPU.
//
// Multi-head latent attention (DeepSeek-V3; kernels/backend.h's MLA section, the CUDA side in
// kernels/cuda/README.md's "MLA") is not in RunBackendParity: the two MLA tests below run its
// ops, RopePart and PagedAttention over a latent pool, against the same CPU reference, with
// the suite's own pieces (kernels/testing/parity_util.h: guarded NaN-poisoned buffers, value
// encoding, the normalised error). They skip, with a line saying why, without a device and where the device does not
// run MLA (SupportsLatentAttention() false: not compute capability 9.0).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "base/str_cat.h"
#include "formats/dtype.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/quantize.h"
#include "kernels/rope_table.h"
#include "kernels/testing/backend_parity.h"
#include "kernels/testing/parity_util.h"

namespace tpserve {
namespace {

// The suite has 709 cases where the candidate supports everything (the CPU's AVX2 run,
// 2026-12); the CUDA backend lacks the GGML block formats by design (SupportsWeight false:
// 126 MatMul, 12 MatMulChunked and 9 EmbeddingRows cases become one "not supported" line per
// format), leaving 562, and bf16 activations add an f32-output case per MatMul shape at m = 1
// and 33 (64 more). The floor leaves room for a few odd shapes a kernel may decline, not for
// an op family that stopped running.
constexpr int64_t kMinCasesRun = 500;

// Why `results` do not count as a parity run of the GPU backend (empty: they do): fewer than
// `floor` cases ran, or every case of some op was skipped. Skipped cases are listed on `log`.
std::vector<std::string> CoverageProblems(const std::vector<ParityResult>& results, int64_t floor,
                                          std::FILE* log) {
  int64_t run = 0;
  std::map<std::string, int64_t> run_per_op;  // every op seen, with its cases that ran
  for (const ParityResult& r : results) {
    run_per_op[r.op];  // an op whose every case was skipped stays at 0
    if (r.outcome == ParityOutcome::kNotSupported) {
      std::fprintf(log, "skipped: %s %s %s: %s\n", r.op.c_str(), r.dtype.c_str(), r.shape.c_str(),
                   r.detail.c_str());
      continue;
    }
    ++run;
    ++run_per_op[r.op];
  }
  std::fprintf(log, "%lld of %zu cases ran (floor %lld)\n", static_cast<long long>(run),
               results.size(), static_cast<long long>(floor));
  std::vector<std::string> problems;
  if (run < floor) {
    problems.push_back("only " + std::to_string(run) + " cases ran, below the floor of " +
                       std::to_string(floor));
  }
  for (const auto& [op, count] : run_per_op) {
    if (count == 0) problems.push_back(op + ": every case was skipped");
  }
  return problems;
}

TEST(CudaParity, CudaMatchesCpuReferenceOnEveryOp) {
  const absl::StatusOr<int> devices = CudaDeviceCount();
  if (!devices.ok()) GTEST_SKIP() << "no CUDA device: " << devices.status().message();
  if (*devices == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount found 0 devices";
  absl::StatusOr<std::unique_ptr<Backend>> cuda = CreateCudaBackend(0);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CpuBackend reference(CpuBackendOptions{.num_threads = threads, .isa = CpuIsa::kScalar});
  const std::vector<ParityResult> results = RunBackendParity(**cuda, reference);
  PrintParityTable(results, stdout);
  EXPECT_EQ(CountParityFailures(results), 0);
  for (const std::string& problem : CoverageProblems(results, kMinCasesRun, stdout)) {
    ADD_FAILURE() << problem;
  }
}

// The floor itself, without a GPU: a run where everything was "not supported" cannot pass,
// nor one where a whole op was skipped; a full one passes.
TEST(CudaParity, CoverageFloorRefusesSkippedRuns) {
  auto results_of = [](int64_t n, const char* op, ParityOutcome outcome) {
    std::vector<ParityResult> r(n);
    for (ParityResult& one : r) {
      one.op = op;
      one.outcome = outcome;
    }
    return r;
  };
  std::FILE* null = std::fopen("/dev/null", "w");
  ASSERT_NE(null, nullptr);
  EXPECT_EQ(
      CoverageProblems(results_of(700, "MatMul", ParityOutcome::kNotSupported), 500, null).size(),
      2u);  // below the floor, and MatMul never ran
  std::vector<ParityResult> full = results_of(600, "MatMul", ParityOutcome::kOk);
  EXPECT_TRUE(CoverageProblems(full, 500, null).empty());
  const std::vector<ParityResult> attention =
      results_of(3, "PagedAttention", ParityOutcome::kNotSupported);
  full.insert(full.end(), attention.begin(), attention.end());
  const std::vector<std::string> problems = CoverageProblems(full, 500, null);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "PagedAttention: every case was skipped");
  std::fclose(null);
}

// ---- Multi-head latent attention: RopePart and PagedAttention over a latent pool ----

// The suite's bounds (kernels/testing/parity_bounds.h, whose reasoning holds here): a bf16
// candidate's RoPE and attention carry one bf16 rounding of their output (kBf16RoundBound),
// a KV write of values exact in the pool's type is exact (kExactBound, fp8 codes included).
constexpr double kMlaBf16RoundBound = 1e-5;
constexpr int64_t kLatentDim = 512;  // c: what the model reads of each head's output
constexpr int64_t kRopeDim = 64;     // k_rope / q_rope
constexpr int64_t kEntryDim = kLatentDim + kRopeDim;
constexpr int64_t kQueryHeadDim = 128 + kRopeDim;  // DeepSeek-V3: q_nope 128 + q_rope 64

// The CUDA backend on device 0 where it runs MLA; otherwise `skip` (or `error`) says why not.
struct MlaDevice {
  std::unique_ptr<Backend> cuda;
  std::string skip;
  absl::Status error;
};

MlaDevice OpenMlaDevice() {
  MlaDevice d;
  const absl::StatusOr<int> devices = CudaDeviceCount();
  if (!devices.ok()) {
    d.skip = StrCat("no CUDA device: ", devices.status().message());
  } else if (*devices == 0) {
    d.skip = "no CUDA device: cudaGetDeviceCount found 0 devices";
  } else if (absl::StatusOr<std::unique_ptr<Backend>> cuda = CreateCudaBackend(0); !cuda.ok()) {
    d.error = cuda.status();
  } else if (!(*cuda)->SupportsLatentAttention()) {
    const absl::StatusOr<std::string> what = CudaDeviceDescription(0);
    d.skip = StrCat("no multi-head latent attention on ",
                    what.ok() ? *what : std::string(what.status().message()),
                    ": SupportsLatentAttention() is false (FlashInfer's MLA kernel is built for "
                    "compute capability 9.0 only)");
  } else {
    d.cuda = *std::move(cuda);
  }
  return d;
}

CpuBackend MakeReference() {
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return CpuBackend(CpuBackendOptions{.num_threads = threads, .isa = CpuIsa::kScalar});
}

absl::StatusOr<DeviceBuffer> UploadActs(Backend& be, const std::vector<float>& v) {
  const std::vector<uint8_t> bytes = parity::EncodeActivations(be, v);
  return Upload(be, bytes.data(), std::max<int64_t>(1, bytes.size()), "MLA parity activations");
}

// The comparison of the suite (ParityContext::Compare): finite values, guards held,
// sum((a - b)^2) / sum(b^2) <= bound.
ParityResult CompareValues(std::string op, std::string dtype, std::string shape,
                           const std::vector<double>& got, const std::vector<double>& ref,
                           double bound, bool got_guards_ok, bool ref_guards_ok) {
  ParityResult r{std::move(op), std::move(dtype), std::move(shape), 0.0, bound,
                 ParityOutcome::kOk, ""};
  auto finite = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
  };
  if (got.size() != ref.size()) {
    r.detail = StrCat("sizes differ: ", got.size(), " vs ", ref.size());
  } else if (!got_guards_ok) {
    r.detail = "candidate wrote outside its output (guard bytes changed)";
  } else if (!ref_guards_ok) {
    r.detail = "reference wrote outside its output (guard bytes changed)";
  } else if (!finite(got)) {
    r.detail = "candidate output has NaN/Inf (unwritten elements keep the NaN poison)";
  } else if (!finite(ref)) {
    r.detail = "reference output has NaN/Inf";
  } else {
    r.error = parity::NormalisedError(got, ref);
    if (r.error <= bound) return r;
    r.detail = "error above bound";
  }
  r.outcome = ParityOutcome::kFailed;
  return r;
}

ParityResult FailedResult(std::string op, std::string dtype, std::string shape,
                          const absl::Status& status) {
  return ParityResult{std::move(op), std::move(dtype), std::move(shape), 0.0, 0.0,
                      ParityOutcome::kFailed, std::string(status.message())};
}

// The MLA tests' verdict: no failure, and every case ran (a device that runs MLA declines none).
void ExpectAllRanAndPassed(const std::vector<ParityResult>& results) {
  PrintParityTable(results, stdout);
  EXPECT_EQ(CountParityFailures(results), 0);
  for (const ParityResult& r : results) {
    if (r.outcome == ParityOutcome::kNotSupported) {
      ADD_FAILURE() << r.op << " " << r.dtype << " " << r.shape << " did not run: " << r.detail;
    }
  }
}

// DeepSeek-V3's RoPE: YaRN over the 64 rotated dims (theta 10000, factor 40 from 4096).
constexpr double kRopeTheta = 10000.0;
YarnRopeScaling DeepSeekYarn() {
  return YarnRopeScaling{.factor = 40.0, .original_max_position_embeddings = 4096,
                         .beta_fast = 32.0, .beta_slow = 1.0};
}

// x after RopePart on `be` (and its guards), from the same bf16 input.
struct RopePartRun {
  std::vector<double> x;
  bool guards_ok = false;
};

absl::StatusOr<RopePartRun> RunRopePart(Backend& be, const std::vector<float>& x,
                                        const std::vector<int32_t>& positions, int64_t heads,
                                        int64_t stride, int64_t offset,
                                        const std::vector<float>& inv_freq, RopeLayout layout) {
  const std::vector<uint8_t> bytes = parity::EncodeActivations(be, x);
  absl::StatusOr<parity::GuardedBuffer> buf =
      parity::GuardedBuffer::Filled(be, bytes.data(), static_cast<int64_t>(bytes.size()));
  if (!buf.ok()) return buf.status();
  absl::StatusOr<DeviceBuffer> freq =
      Upload(be, inv_freq.data(), inv_freq.size() * sizeof(float), "MLA parity inv_freq");
  if (!freq.ok()) return freq.status();
  be.BeginStep(StepInputs{{}, positions, {}, {}});
  be.RopePart(buf->data(), heads, stride, offset, kRopeDim, freq->as<float>(), layout);
  if (absl::Status s = be.Synchronize(); !s.ok()) return s;
  std::vector<uint8_t> out;
  RopePartRun r;
  if (absl::Status s = buf->Read(&out, &r.guards_ok); !s.ok()) return s;
  r.x = parity::DecodeActivations(be, out);
  return r;
}

// RopePart as MLA calls it: the q_rope part of each query head ([T, heads, 192] at 128) and
// the k_rope part of each row's latent entry ([T, 1, 576] at 512), both layouts, over the
// positions of a step of several sequences (a prompt, decodes, a chunk, a long context).
std::vector<ParityResult> RunRopePartCases(Backend& cuda, Backend& reference) {
  struct Case {
    const char* what;
    int64_t heads, stride, offset;
  };
  const Case cases[] = {{"q heads", 16, kQueryHeadDim, 128},
                        {"q heads", 128, kQueryHeadDim, 128},
                        {"latent entry", 1, kEntryDim, kLatentDim}};
  // Sequences 0+7 (a prompt), 4095+1, 1000+33 (a chunk), 150000+1 (near V3's 163840 limit,
  // where the angle needs more than f32), 0+1: 43 rows.
  std::vector<int32_t> positions;
  for (const auto& [start, count] : std::vector<std::pair<int32_t, int32_t>>{
           {0, 7}, {4095, 1}, {1000, 33}, {150000, 1}, {0, 1}}) {
    for (int32_t i = 0; i < count; ++i) positions.push_back(start + i);
  }
  const int64_t rows = static_cast<int64_t>(positions.size());
  const std::vector<float> inv_freq = YarnInverseFrequencies(kRopeDim, kRopeTheta, DeepSeekYarn());
  std::vector<ParityResult> results;
  uint32_t seed = 9100;
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kRotateHalf}) {
    for (const Case& c : cases) {
      const std::string dtype =
          layout == RopeLayout::kInterleaved ? "act interleaved" : "act rotate-half";
      const std::string shape = StrCat(c.what, " rows=", rows, " heads=", c.heads, " stride=",
                                       c.stride, " offset=", c.offset, " rope=", kRopeDim);
      const std::vector<float> x = parity::RandomBf16(rows * c.heads * c.stride, ++seed);
      absl::StatusOr<RopePartRun> got =
          RunRopePart(cuda, x, positions, c.heads, c.stride, c.offset, inv_freq, layout);
      absl::StatusOr<RopePartRun> ref =
          RunRopePart(reference, x, positions, c.heads, c.stride, c.offset, inv_freq, layout);
      if (!got.ok() || !ref.ok()) {
        results.push_back(FailedResult("RopePart", dtype, shape,
                                       got.ok() ? ref.status() : got.status()));
        continue;
      }
      // The rotated part against the reference; the rest of each head must be untouched
      // (exactly the input, on both backends).
      std::vector<double> got_rot, ref_rot, got_rest, ref_rest, input_rest;
      for (int64_t i = 0; i < rows * c.heads * c.stride; ++i) {
        const int64_t d = i % c.stride;
        if (d >= c.offset && d < c.offset + kRopeDim) {
          got_rot.push_back(got->x[i]);
          ref_rot.push_back(ref->x[i]);
        } else {
          got_rest.push_back(got->x[i]);
          ref_rest.push_back(ref->x[i]);
          input_rest.push_back(x[i]);
        }
      }
      results.push_back(CompareValues("RopePart", dtype, shape, got_rot, ref_rot,
                                      kMlaBf16RoundBound, got->guards_ok, ref->guards_ok));
      results.push_back(CompareValues("RopePart", dtype + " (dims left alone)", shape,
                                      got_rest, input_rest, 0.0, got->guards_ok, true));
      results.push_back(CompareValues("RopePart", "reference " + dtype + " (dims left alone)",
                                      shape, ref_rest, input_rest, 0.0, ref->guards_ok, true));
    }
  }
  return results;
}

// One step over a latent pool, the same for both backends: each sequence's latent entries
// [start + count, 576] (the history cached by earlier steps, then the step's own rows),
// non-contiguous block tables (shuffled physical blocks, three owned by nobody) and the
// absorbed queries [rows, heads, 576].
struct LatentSeq {
  int64_t start, count;  // tokens already cached, new query tokens
  bool padding = false;  // a padding row: one token, no KV, zeros out
};

struct LatentBatch {
  int64_t heads, block_size;
  std::vector<LatentSeq> seqs;
  std::vector<std::vector<float>> entries;
  std::vector<std::vector<int32_t>> tables;
  std::vector<float> q;
  int64_t rows = 0, num_blocks = 0;

  LatentBatch(int64_t h, int64_t bs, const std::vector<LatentSeq>& batch, uint32_t seed)
      : heads(h), block_size(bs), seqs(batch) {
    for (const LatentSeq& s : seqs) {
      entries.push_back(parity::RandomBf16((s.start + s.count) * kEntryDim, ++seed));
      if (!s.padding) num_blocks += (s.start + s.count + bs - 1) / bs;
      rows += s.count;
    }
    num_blocks += 3;  // blocks nobody owns: they must keep their poison
    std::vector<int32_t> physical(num_blocks);
    std::iota(physical.begin(), physical.end(), 0);
    std::shuffle(physical.begin(), physical.end(), std::mt19937(seed));
    int64_t next = 0;
    for (const LatentSeq& s : seqs) {
      const int64_t n = s.padding ? 0 : (s.start + s.count + bs - 1) / bs;
      tables.emplace_back(physical.begin() + next, physical.begin() + next + n);
      next += n;
    }
    // The absorbed query [W_UK^T q_nope, q_rope] is wider-spread than an entry; 0.5 keeps the
    // softmax over thousands of keys from collapsing onto one.
    q = parity::RandomBf16(rows * heads * kEntryDim, ++seed, 0.5f);
  }
  std::vector<bool> OwnedSlots() const {
    std::vector<bool> owned(num_blocks * block_size, false);
    for (size_t s = 0; s < seqs.size(); ++s) {
      if (seqs[s].padding) continue;
      for (int64_t p = 0; p < seqs[s].start + seqs[s].count; ++p) {
        owned[tables[s][p / block_size] * block_size + p % block_size] = true;
      }
    }
    return owned;
  }
};

struct LatentRun {
  std::vector<uint8_t> pool;  // bytes after the step
  std::vector<double> out;    // [rows, heads, 576]
  bool guards_ok = false;
};

// As the model runs a layer (worker/llama_model.cc's LatentAttention): each sequence's history
// written by earlier steps, then this step's WriteKv(entry, entry, pool) and PagedAttention over
// the pool, one buffer seen as keys and values (KvPoolView::v == k, as worker/kv_cache.cc
// makes a pools = 1 view).
absl::StatusOr<LatentRun> RunLatentStep(Backend& be, const LatentBatch& b, DType dtype,
                                        float kv_scale, const Backend::AttentionParams& params) {
  const int64_t pool_bytes = b.num_blocks * b.block_size * kEntryDim * BlockBytes(dtype);
  absl::StatusOr<parity::GuardedBuffer> pool = parity::GuardedBuffer::Poisoned(be, pool_bytes);
  if (!pool.ok()) return pool.status();
  const KvPoolView view{pool->data(), pool->data(), dtype,        kv_scale, kv_scale,
                        b.num_blocks, b.block_size, /*kv_heads=*/1, kEntryDim};
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    if (b.seqs[i].start == 0 || b.seqs[i].padding) continue;
    const std::vector<float> e(b.entries[i].begin(),
                               b.entries[i].begin() + b.seqs[i].start * kEntryDim);
    absl::StatusOr<DeviceBuffer> eb = UploadActs(be, e);
    if (!eb.ok()) return eb.status();
    const AttentionSequence prior{0, b.seqs[i].start, 0, b.tables[i]};
    be.BeginStep(StepInputs{{}, {}, {&prior, 1}, {}});
    be.WriteKv(eb->data(), eb->data(), view);
    if (absl::Status s = be.Synchronize(); !s.ok()) return s;
  }
  std::vector<AttentionSequence> step_seqs;
  std::vector<float> e_new;
  int64_t row = 0;
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    step_seqs.push_back({row, b.seqs[i].count, b.seqs[i].start, b.tables[i], b.seqs[i].padding});
    e_new.insert(e_new.end(), b.entries[i].begin() + b.seqs[i].start * kEntryDim,
                 b.entries[i].begin() + (b.seqs[i].start + b.seqs[i].count) * kEntryDim);
    row += b.seqs[i].count;
  }
  absl::StatusOr<DeviceBuffer> eb = UploadActs(be, e_new);
  if (!eb.ok()) return eb.status();
  absl::StatusOr<DeviceBuffer> qb = UploadActs(be, b.q);
  if (!qb.ok()) return qb.status();
  const int64_t act_bytes = BlockBytes(be.activation_dtype());
  absl::StatusOr<parity::GuardedBuffer> out =
      parity::GuardedBuffer::Poisoned(be, b.rows * b.heads * kEntryDim * act_bytes);
  if (!out.ok()) return out.status();
  be.BeginStep(StepInputs{{}, {}, step_seqs, {}});
  be.WriteKv(eb->data(), eb->data(), view);
  be.PagedAttention(qb->data(), b.heads, params, view, out->data());
  if (absl::Status s = be.Synchronize(); !s.ok()) return s;
  LatentRun r;
  bool pool_ok = false, out_ok = false;
  std::vector<uint8_t> out_bytes;
  if (absl::Status s = pool->Read(&r.pool, &pool_ok); !s.ok()) return s;
  if (absl::Status s = out->Read(&out_bytes, &out_ok); !s.ok()) return s;
  r.guards_ok = pool_ok && out_ok;
  r.out = parity::DecodeActivations(be, out_bytes);
  return r;
}

// The owned slots' values, and whether every byte of the unowned ones still holds the poison.
std::vector<double> OwnedEntries(const LatentBatch& b, DType dtype, float scale,
                                 const LatentRun& r, bool* unowned_intact) {
  const int64_t slot_bytes = kEntryDim * BlockBytes(dtype);
  const std::vector<bool> owned = b.OwnedSlots();
  std::vector<double> values;
  *unowned_intact = true;
  for (size_t slot = 0; slot < owned.size(); ++slot) {
    const uint8_t* begin = r.pool.data() + slot * slot_bytes;
    if (!owned[slot]) {
      if (std::any_of(begin, begin + slot_bytes,
                      [](uint8_t x) { return x != parity::kPoisonByte; })) {
        *unowned_intact = false;
      }
      continue;
    }
    const std::vector<double> v =
        parity::DecodeKv(dtype, scale, std::vector<uint8_t>(begin, begin + slot_bytes));
    values.insert(values.end(), v.begin(), v.end());
  }
  return values;
}

std::string LatentShapeName(const LatentBatch& b) {
  std::string out = StrCat("heads=", b.heads, "/1 entry=", kEntryDim, " bs=", b.block_size,
                           " seqs(start+n)=");
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    out += b.seqs[i].padding ? StrCat(i == 0 ? "" : ",", "pad")
                             : StrCat(i == 0 ? "" : ",", b.seqs[i].start, "+", b.seqs[i].count);
  }
  return out;
}

void LatentAttentionCase(Backend& cuda, Backend& reference, int64_t heads, int64_t block_size,
                         const std::vector<LatentSeq>& seqs, DType dtype, uint32_t seed,
                         const Backend::AttentionParams& params,
                         std::vector<ParityResult>* results) {
  const std::string kv = StrCat("latent kv ", DTypeName(dtype));
  const LatentBatch batch(heads, block_size, seqs, seed);
  const std::string shape = LatentShapeName(batch);
  if (!cuda.SupportsKvDtype(dtype)) {
    results->push_back(ParityResult{"PagedAttention", kv, shape, 0.0, 0.0,
                                    ParityOutcome::kNotSupported, "SupportsKvDtype is false"});
    return;
  }
  const float kv_scale = dtype == DType::kF8E4M3 ? 0.25f : 1.0f;
  absl::StatusOr<LatentRun> got = RunLatentStep(cuda, batch, dtype, kv_scale, params);
  absl::StatusOr<LatentRun> ref = RunLatentStep(reference, batch, dtype, kv_scale, params);
  if (!got.ok() || !ref.ok()) {
    results->push_back(FailedResult("PagedAttention", kv, shape,
                                    got.ok() ? ref.status() : got.status()));
    return;
  }
  // WriteKv(entry, entry, pool): the owned slots exactly the reference's, the others untouched.
  bool got_intact = false, ref_intact = false;
  const std::vector<double> got_kv = OwnedEntries(batch, dtype, kv_scale, *got, &got_intact);
  const std::vector<double> ref_kv = OwnedEntries(batch, dtype, kv_scale, *ref, &ref_intact);
  if (!got_intact || !ref_intact) {
    results->push_back(ParityResult{
        "WriteKv", kv, shape, 0.0, 0.0, ParityOutcome::kFailed,
        StrCat(got_intact ? "reference" : "candidate",
               " wrote into latent slots that no sequence owns")});
  } else {
    results->push_back(CompareValues("WriteKv", kv, shape, got_kv, ref_kv, 0.0, got->guards_ok,
                                     ref->guards_ok));
  }
  // The attention: the first 512 of each head (the weighted latent c, all the model reads).
  // The CPU computes the last 64 too (the weighted k_rope); the CUDA backend sets them to
  // zeros (kernels/cuda/README.md's MLA section), checked on their own.
  std::vector<double> got_c, ref_c, got_tail;
  for (size_t i = 0; i < got->out.size() && i < ref->out.size(); ++i) {
    if (static_cast<int64_t>(i) % kEntryDim < kLatentDim) {
      got_c.push_back(got->out[i]);
      ref_c.push_back(ref->out[i]);
    } else {
      got_tail.push_back(got->out[i]);
    }
  }
  results->push_back(CompareValues("PagedAttention", kv + " q/out act, out[:512]", shape, got_c,
                                   ref_c, kMlaBf16RoundBound, got->guards_ok, ref->guards_ok));
  results->push_back(CompareValues("PagedAttention", kv + " out[512:] zeros", shape, got_tail,
                                   std::vector<double>(got_tail.size(), 0.0), 0.0,
                                   got->guards_ok, true));
}

// PagedAttention over a latent pool as DeepSeek-V3 runs it (absorbed form): 16 and 128 query
// heads over one latent head of 576, a bf16 and an e4m3 (scale 0.25) latent cache, steps of
// decodes (long enough to split keys), prompts (one over a 64-row query tile), chunks after
// cached tokens, all of them mixed, and decodes padded with padding rows; the scale is
// DeepSeek's: 192^-0.5 times YaRN's mscale(40, mscale_all_dim 1)^2 (~1.87).
std::vector<ParityResult> RunLatentAttentionCases(Backend& cuda, Backend& reference) {
  Backend::AttentionParams params;
  const double mscale = YarnMscale(DeepSeekYarn().factor, 1.0);
  params.scale =
      static_cast<float>(mscale * mscale / std::sqrt(static_cast<double>(kQueryHeadDim)));
  const std::vector<std::vector<LatentSeq>> batches = {
      {{0, 1}, {40, 1}, {700, 1}, {3000, 1}},          // decode, long enough to split
      {{0, 80}, {50, 7}},                              // a prompt over two query tiles, a chunk
      {{0, 7}, {100, 1}, {20, 33}, {5, 2}, {1500, 1}},  // prefill, decode and chunks together
      {{40, 1}, {0, 1, true}, {700, 1}, {0, 1, true}},  // decode padded with padding rows
  };
  const std::pair<int64_t, int64_t> heads_blocks[] = {{16, 16}, {128, 64}};
  std::vector<ParityResult> results;
  uint32_t seed = 9500;
  for (const auto& [heads, block_size] : heads_blocks) {
    for (const std::vector<LatentSeq>& seqs : batches) {
      for (DType dtype : {DType::kBF16, DType::kF8E4M3}) {
        LatentAttentionCase(cuda, reference, heads, block_size, seqs, dtype, seed += 10, params,
                            &results);
      }
    }
  }
  return results;
}

TEST(CudaParity, StepBatchesMatchCpuReference) {
  const absl::StatusOr<int> devices = CudaDeviceCount();
  if (!devices.ok()) GTEST_SKIP() << "no CUDA device: " << devices.status().message();
  if (*devices == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount found 0 devices";
  absl::StatusOr<std::unique_ptr<Backend>> cuda = CreateCudaBackend(0);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  CpuBackend reference = MakeReference();
  const std::vector<ParityResult> results = RunStepBatchParity(**cuda, reference);
  ExpectAllRanAndPassed(results);
  EXPECT_EQ(results.size(), 168u);  // as //kernels/testing:step_batch_parity_test counts them
}

TEST(CudaParity, MlaRopePartMatchesCpuReference) {
  MlaDevice device = OpenMlaDevice();
  if (!device.skip.empty()) GTEST_SKIP() << device.skip;
  ASSERT_TRUE(device.error.ok()) << device.error;
  CpuBackend reference = MakeReference();
  ExpectAllRanAndPassed(RunRopePartCases(*device.cuda, reference));
}

TEST(CudaParity, MlaLatentAttentionMatchesCpuReference) {
  MlaDevice device = OpenMlaDevice();
  if (!device.skip.empty()) GTEST_SKIP() << device.skip;
  ASSERT_TRUE(device.error.ok()) << device.error;
  CpuBackend reference = MakeReference();
  ExpectAllRanAndPassed(RunLatentAttentionCases(*device.cuda, reference));
}

}  // namespace
}  // namespace tpserve
