#include "kernels/cpu/cpu_matmul.h"

#include <algorithm>
#include <cstring>

#include "kernels/check.h"

namespace tpserve {
namespace {

using QuantDotFn = void (*)(const uint8_t*, const Q8Block* const*, int, int64_t, float*);
using RowGroupDotFn = void (*)(const uint8_t*, int64_t, int64_t, int, const Q8Block* const*, int,
                               int64_t, float*);

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Values per Q8Block: activations are quantized in blocks of 32 whatever the weight block is.
constexpr int64_t kActivationBlock = 32;

constexpr int64_t kFp8Tile = 128;  // fp8-block: columns (and rows) per scale

// Activation rows per task for prefill-sized m: 64 rows of quantized activations (a few tens
// of KiB for k up to a few thousand) stay in L2 while a tile's weight rows stream past.
constexpr int64_t kTokensPerTile = 64;

// Within a task, activation rows are taken in groups whose bytes stay in L1 while every
// weight row of a sub-tile passes them, and the weight rows in sub-tiles that stay in L2 while
// the groups take turns: a dot call reads its activations (up to kMaxDotRows rows, several
// passes for many rows) from L1 and its weight row from memory or L2 once per group. Measured
// on 576 x 1536 and 1536 x 576 bf16 (docs/PERFORMANCE.md, issue 39): 8 rows of 1536 floats
// (48 KiB) from L2 ran at a third of the speed of 3 rows from L1.
constexpr int64_t kGroupActivationBytes = 24 << 10;
constexpr int64_t kSubTileWeightBytes = 256 << 10;

// How far ahead RunFloatTile asks for a weight row's lines (0, 4 and 8 measured: 8 gave the
// quickest SmolLM2 bf16 steps, docs/PERFORMANCE.md).
constexpr int64_t kPrefetchRows = 8;

// Q4_0/1 and Q5_0/1 rows in their stored form (rows one after another) whose span in a call (a
// column chunk's, for chunked products) is at most this many bytes take the row-group kernels,
// longer ones the per-row kernels. Measured with //kernels/cpu:matmul_bench, 2 threads,
// DRAM-streamed matrices (docs/PERFORMANCE.md): at m = 1 the groups win on 360-byte rows (131072
// x 576 Q4_1: 1.2 against 1.9 ms) and lose on 960-byte and longer ones (65536 x 1536: 3.0 against
// 2.3 ms; 32768 x 4096: 3.5-4.0 against 2.5-2.9 ms), where they still win from m = 2 on.
// Interleaved, a group is one stream and every row length takes the groups. The choice is the
// matrix's (its form, shape and format), never the step's, so a row's floats do not depend on
// the batch; a TP rank's slice and the same columns run as a chunk on one rank
// (--deterministic_tp) are both placed by CpuBackend::PlaceWeight, so they choose alike.
constexpr int64_t kRowGroupMaxRowBytes = 512;

// An interleaved matrix (InterleaveRowGroups): the CPU backend's own form of a Q8_0, Q4_0/1 or
// Q5_0/1 matrix.
bool IsInterleaved(const WeightMatrix& w) {
  return w.prepared != nullptr && InterleavesRowGroups(w.format);
}

bool UsesRowGroups(const WeightMatrix& w) {
  if (!InterleavesRowGroups(w.format)) return false;
  if (IsInterleaved(w)) return true;
  // Stored Q8_0 rows stay one at a time: in groups they lost at m = 1 on DRAM-streamed
  // matrices of any row length (262144 x 640: 7.2-8.4 against 5.0-5.5 ms).
  return w.format.kind != FormatKind::kQ8_0 &&
         w.cols / InputBlockValues(w.format) * BlockBytes(*ElementDType(w.format)) <=
             kRowGroupMaxRowBytes;
}

}  // namespace

bool InterleavesRowGroups(const TensorFormat& format) {
  switch (format.kind) {
    case FormatKind::kQ8_0:
    case FormatKind::kQ4_0:
    case FormatKind::kQ4_1:
    case FormatKind::kQ5_0:
    case FormatKind::kQ5_1:
      return true;
    default:
      return false;
  }
}

std::vector<uint8_t> InterleaveRowGroups(const WeightMatrix& w) {
  TP_CHECK(InterleavesRowGroups(w.format) && w.data != nullptr && w.input_perm == nullptr,
           "InterleaveRowGroups: not a Q8_0, Q4_0/1 or Q5_0/1 matrix in host memory");
  const int64_t block = BlockBytes(*ElementDType(w.format));
  const int64_t num_blocks = w.cols / InputBlockValues(w.format);
  const int64_t row_bytes = num_blocks * block;
  const auto* src = static_cast<const uint8_t*>(w.data);
  std::vector<uint8_t> out(w.rows * row_bytes);
  const int64_t whole = w.rows / kWeightRowGroup * kWeightRowGroup;
  for (int64_t r = 0; r < w.rows; ++r) {
    uint8_t* group = out.data() + r / kWeightRowGroup * kWeightRowGroup * row_bytes;
    const uint8_t* row = src + r * w.row_bytes;
    if (r >= whole) {  // the last, partial group: rows one after another
      std::memcpy(out.data() + r * row_bytes, row, row_bytes);
      continue;
    }
    for (int64_t b = 0; b < num_blocks; ++b) {
      std::memcpy(group + (b * kWeightRowGroup + r % kWeightRowGroup) * block, row + b * block,
                  block);
    }
  }
  return out;
}

CpuMatMul::CpuMatMul(const CpuKernels& kernels, ThreadPool* pool)
    : kernels_(kernels), pool_(pool), row_scratch_(pool->num_threads()) {}

bool CpuMatMul::Supports(const TensorFormat& format) {
  switch (format.kind) {
    case FormatKind::kF32:
    case FormatKind::kF16:
    case FormatKind::kBF16:
    case FormatKind::kF8E4M3:
    case FormatKind::kFp8PerChannel:
    case FormatKind::kFp8Block128:
    case FormatKind::kQ8_0:
    case FormatKind::kQ4_0:
    case FormatKind::kQ4_1:
    case FormatKind::kQ4_K:
    case FormatKind::kQ5_K:
    case FormatKind::kQ6_K:
    case FormatKind::kQ5_0:
    case FormatKind::kQ5_1:
      return true;
    case FormatKind::kInt4Group:
      return format.group_size > 0 && format.group_size % 32 == 0;
  }
  return false;
}

CpuMatMul::Tiling CpuMatMul::ChooseTiling(int64_t m, int64_t n) const {
  const int64_t tokens = std::min<int64_t>(std::max<int64_t>(m, 1), kTokensPerTile);
  const int64_t token_tiles = CeilDiv(m, tokens);
  // Enough tasks for dynamic balancing, but at least 8 rows per task so the per-task overhead
  // stays small next to the work. Decode-sized m streams weights from memory: fewer, longer
  // contiguous runs per task keep the hardware prefetchers ahead.
  const int64_t target_tasks = (m <= kMaxDotRows ? 4 : 8) * pool_->num_threads();
  const int64_t row_tiles = std::max<int64_t>(1, target_tasks / token_tiles);
  // Whole groups of kWeightRowGroup rows, so the row-group kernels fill their lanes.
  const int64_t rows = CeilDiv(std::max<int64_t>(8, CeilDiv(n, row_tiles)), kWeightRowGroup) *
                       kWeightRowGroup;
  return Tiling{std::min(rows, std::max<int64_t>(n, 1)), tokens};
}

void CpuMatMul::QuantizeActivations(const float* x, int64_t m, int64_t k) {
  const int64_t blocks_per_row = k / kActivationBlock;
  if (static_cast<int64_t>(x_q8_.size()) < m * blocks_per_row) x_q8_.resize(m * blocks_per_row);
  Q8Block* out = x_q8_.data();
  const int64_t rows_per_task = std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1));
  pool_->ParallelFor(CeilDiv(m, rows_per_task), [&](int64_t task, int) {
    const int64_t r1 = std::min(m, (task + 1) * rows_per_task);
    for (int64_t r = task * rows_per_task; r < r1; ++r) {
      kernels_.quantize_q8(x + r * k, k, out + r * blocks_per_row);
    }
  });
}

void CpuMatMul::RunInt4Tile(const WeightMatrix& w, int64_t n0, int64_t n1, int64_t m0,
                            int64_t m1, float* y, int64_t x_block0, int64_t x_row_blocks) const {
  const int64_t num_chunks = w.cols / kActivationBlock;
  const auto* base = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const uint16_t*>(w.scales);
  const auto* zeros = static_cast<const uint16_t*>(w.zeros);
  const Q8Block* rows[kMaxDotRows];
  float out[kMaxDotRows];
  for (int64_t i = n0; i < n1; ++i) {
    for (int64_t j = m0; j < m1; j += kMaxDotRows) {
      const int num_x = static_cast<int>(std::min<int64_t>(kMaxDotRows, m1 - j));
      for (int t = 0; t < num_x; ++t) rows[t] = x_q8_.data() + (j + t) * x_row_blocks + x_block0;
      kernels_.dot_int4(base + i * w.row_bytes, scales + i * w.scale_stride,
                        zeros + i * w.scale_stride, w.format.group_size, rows, num_x, num_chunks,
                        out);
      for (int t = 0; t < num_x; ++t) y[(j + t) * w.rows + i] = out[t];
    }
  }
}

void CpuMatMul::RunRowGroupTile(const WeightMatrix& w, int64_t n0, int64_t n1, int64_t m0,
                                int64_t m1, float* y, int64_t x_block0,
                                int64_t x_row_blocks) const {
  RowGroupDotFn dot = nullptr;
  switch (w.format.kind) {
    case FormatKind::kQ4_0: dot = kernels_.dot_q4_0_rows; break;
    case FormatKind::kQ4_1: dot = kernels_.dot_q4_1_rows; break;
    case FormatKind::kQ5_0: dot = kernels_.dot_q5_0_rows; break;
    case FormatKind::kQ5_1: dot = kernels_.dot_q5_1_rows; break;
    case FormatKind::kQ8_0: dot = kernels_.dot_q8_0_rows; break;
    default: TP_CHECK(false, "not a row-group weight type");
  }
  const int64_t num_blocks = w.cols / InputBlockValues(w.format);
  const int64_t block = BlockBytes(*ElementDType(w.format));
  const bool interleaved = IsInterleaved(w);
  const auto* base = static_cast<const uint8_t*>(interleaved ? w.prepared : w.data);
  const int64_t first_block = interleaved ? x_block0 : 0;  // a chunk's (the others are views)
  TP_CHECK(n0 % kWeightRowGroup == 0, "a row-group tile starts inside a group");
  const Q8Block* rows[kMaxDotRows];
  float out[kMaxDotRows * kWeightRowGroup];
  for (int64_t i = n0; i < n1; i += kWeightRowGroup) {
    const int num_w = static_cast<int>(std::min<int64_t>(kWeightRowGroup, n1 - i));
    const uint8_t* group = base + i * w.row_bytes;
    int64_t row_stride = w.row_bytes, block_stride = block;
    if (interleaved && i + kWeightRowGroup <= w.rows) {
      // One sequential stream, which the hardware prefetcher follows (software prefetches
      // measured no quicker).
      TP_CHECK(num_w == kWeightRowGroup, "a row-group tile ends inside a group");
      group += first_block * kWeightRowGroup * block;
      row_stride = block;
      block_stride = kWeightRowGroup * block;
    } else {
      // Rows one after another: the kernel reads them a block of each at a time, a few lines
      // ahead at most, in an order the hardware prefetcher does not follow; every line of the
      // group asked for up front arrives in parallel (DRAM-streamed 131072 x 576 at m = 1: 2.7
      // ms without this, 1.1 ms with it; asking for the next group instead: 1.5-1.8 ms,
      // docs/PERFORMANCE.md).
      group += first_block * block;
      for (int64_t b = 0; b < num_w * w.row_bytes; b += 64) __builtin_prefetch(group + b);
    }
    for (int64_t j = m0; j < m1; j += kMaxDotRows) {
      const int num_x = static_cast<int>(std::min<int64_t>(kMaxDotRows, m1 - j));
      for (int t = 0; t < num_x; ++t) rows[t] = x_q8_.data() + (j + t) * x_row_blocks + x_block0;
      dot(group, row_stride, block_stride, num_w, rows, num_x, num_blocks, out);
      for (int t = 0; t < num_x; ++t) {
        for (int r = 0; r < num_w; ++r) y[(j + t) * w.rows + i + r] = out[t * kWeightRowGroup + r];
      }
    }
  }
}

void CpuMatMul::RunQuantizedTile(const WeightMatrix& w, int64_t n0, int64_t n1, int64_t m0,
                                 int64_t m1, float* y, int64_t x_block0,
                                 int64_t x_row_blocks) const {
  if (w.format.kind == FormatKind::kInt4Group) {
    return RunInt4Tile(w, n0, n1, m0, m1, y, x_block0, x_row_blocks);
  }
  if (UsesRowGroups(w)) return RunRowGroupTile(w, n0, n1, m0, m1, y, x_block0, x_row_blocks);
  QuantDotFn dot = nullptr;
  switch (w.format.kind) {
    case FormatKind::kQ8_0: dot = kernels_.dot_q8_0; break;
    case FormatKind::kQ4_0: dot = kernels_.dot_q4_0; break;
    case FormatKind::kQ4_1: dot = kernels_.dot_q4_1; break;
    case FormatKind::kQ5_0: dot = kernels_.dot_q5_0; break;
    case FormatKind::kQ5_1: dot = kernels_.dot_q5_1; break;
    case FormatKind::kQ4_K: dot = kernels_.dot_q4_K; break;
    case FormatKind::kQ5_K: dot = kernels_.dot_q5_K; break;
    case FormatKind::kQ6_K: dot = kernels_.dot_q6_K; break;
    default: TP_CHECK(false, "not a quantized weight type");
  }
  // Weight blocks (32 values, or 256 for the K-quants); x_block0 and x_row_blocks count
  // activation blocks, always 32 values.
  const int64_t num_blocks = w.cols / InputBlockValues(w.format);
  const auto* base = static_cast<const uint8_t*>(w.data);
  const Q8Block* rows[kMaxDotRows];
  float out[kMaxDotRows];
  for (int64_t i = n0; i < n1; ++i) {
    const uint8_t* w_row = base + i * w.row_bytes;
    for (int64_t j = m0; j < m1; j += kMaxDotRows) {
      const int num_x = static_cast<int>(std::min<int64_t>(kMaxDotRows, m1 - j));
      for (int t = 0; t < num_x; ++t) rows[t] = x_q8_.data() + (j + t) * x_row_blocks + x_block0;
      dot(w_row, rows, num_x, num_blocks, out);
      for (int t = 0; t < num_x; ++t) y[(j + t) * w.rows + i] = out[t];
    }
  }
}

void CpuMatMul::RunFp8Tile(const float* x, int64_t x_stride, const WeightMatrix& w, int64_t n0,
                           int64_t n1, int64_t m0, int64_t m1, float* y) const {
  const auto* base = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const float*>(w.scales);
  static constexpr float kUnitScale = 1.0f;  // plain e4m3: no scale
  const float* rows[kMaxDotRows];
  float out[kMaxDotRows];
  for (int64_t i = n0; i < n1; ++i) {
    // Per-channel: one tile spanning the row; 128x128 blocks: the row's line of tile scales.
    const float* row_scales = &kUnitScale;
    int64_t tile_cols = w.cols;
    if (w.format.kind == FormatKind::kFp8PerChannel) {
      row_scales = scales + i;
    } else if (w.format.kind == FormatKind::kFp8Block128) {
      row_scales = scales + (i / kFp8Tile) * w.scale_stride;
      tile_cols = kFp8Tile;
    }
    for (int64_t j = m0; j < m1; j += kMaxDotRows) {
      const int num_x = static_cast<int>(std::min<int64_t>(kMaxDotRows, m1 - j));
      for (int t = 0; t < num_x; ++t) rows[t] = x + (j + t) * x_stride;
      kernels_.dot_fp8(base + i * w.row_bytes, row_scales, tile_cols, rows, num_x, w.cols, out);
      for (int t = 0; t < num_x; ++t) y[(j + t) * w.rows + i] = out[t];
    }
  }
}

void CpuMatMul::RunFloatTile(const float* x, int64_t x_stride, const WeightMatrix& w, int64_t n0,
                             int64_t n1, int64_t m0, int64_t m1, float* y,
                             float* row_scratch) const {
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t k = w.cols;
  // 16-bit rows: up to kMaxDotRows activation rows (decode, verification) take one dot call per
  // weight row, widening in registers; more rows widen the weight row once and re-use it. The
  // two give the same floats (dot_f16 / dot_bf16 mirror dot_f32).
  const bool widen_once = m1 - m0 > kMaxDotRows;
  const float* rows[kMaxDotRows];
  float out[kMaxDotRows];
  // Each weight row's lines are asked for kPrefetchRows rows ahead: a task streams its rows
  // from DRAM, and the hardware prefetcher, restarted by every task and matrix, comes up to
  // speed late on matrices of a few hundred KiB a task.
  const auto prefetch_row = [&](int64_t i) {
    if (i >= n1) return;
    const uint8_t* ahead = base + i * w.row_bytes;
    for (int64_t b = 0; b < w.row_bytes; b += 64) __builtin_prefetch(ahead + b);
  };
  for (int64_t i = n0; i < n1; ++i) {
    prefetch_row(i + kPrefetchRows);
    const uint8_t* src = base + i * w.row_bytes;
    const auto* half = reinterpret_cast<const uint16_t*>(src);
    const float* w_row = row_scratch;
    switch (w.format.kind) {
      case FormatKind::kF32: w_row = reinterpret_cast<const float*>(src); break;
      case FormatKind::kF16:
        if (widen_once) kernels_.f16_to_f32(half, row_scratch, k);
        break;
      case FormatKind::kBF16:
        if (widen_once) kernels_.bf16_to_f32(half, row_scratch, k);
        break;
      default: TP_CHECK(false, "not a float weight type");
    }
    for (int64_t j = m0; j < m1; j += kMaxDotRows) {
      const int num_x = static_cast<int>(std::min<int64_t>(kMaxDotRows, m1 - j));
      for (int t = 0; t < num_x; ++t) rows[t] = x + (j + t) * x_stride;
      if (w.format.kind == FormatKind::kF16 && !widen_once) {
        kernels_.dot_f16(half, rows, num_x, k, out);
      } else if (w.format.kind == FormatKind::kBF16 && !widen_once) {
        kernels_.dot_bf16(half, rows, num_x, k, out);
      } else {
        kernels_.dot_f32(w_row, rows, num_x, k, out);
      }
      for (int t = 0; t < num_x; ++t) y[(j + t) * w.rows + i] = out[t];
    }
  }
}

namespace {

enum class Path { kQuantized, kFp8, kFloat };

Path PathOf(const TensorFormat& format) {
  const std::optional<DType> element = ElementDType(format);
  if (format.kind == FormatKind::kInt4Group || (element.has_value() && BlockElems(*element) > 1)) {
    return Path::kQuantized;
  }
  if (format.kind == FormatKind::kF8E4M3 || format.kind == FormatKind::kFp8PerChannel ||
      format.kind == FormatKind::kFp8Block128) {
    return Path::kFp8;
  }
  return Path::kFloat;
}

}  // namespace

void CpuMatMul::Prepare(const WeightMatrix& w, int64_t m, int64_t kc, const float** x) {
  if (w.input_perm != nullptr) {  // act-order: gather x into the stored column order once
    if (static_cast<int64_t>(x_perm_.size()) < m * w.cols) x_perm_.resize(m * w.cols);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < w.cols; ++j) {
        x_perm_[r * w.cols + j] = (*x)[r * w.cols + w.input_perm[j]];
      }
    }
    *x = x_perm_.data();
  }
  const Path path = PathOf(w.format);
  if (path == Path::kQuantized) {
    QuantizeActivations(*x, m, w.cols);  // once for the full rows: chunks share the blocks
  } else if (path == Path::kFloat && w.format.kind != FormatKind::kF32) {
    for (auto& s : row_scratch_) {
      if (static_cast<int64_t>(s.size()) < kc) s.resize(kc);
    }
  }
}

void CpuMatMul::RunTile(const float* x, const WeightMatrix& w, int64_t chunk, int64_t kc,
                        int64_t n0, int64_t n1, int64_t m0, int64_t m1, float* y,
                        int thread) const {
  WeightMatrix whole = w;
  whole.bias = nullptr;  // added below, to the tile's finished sums
  WeightMatrix wc;
  if (IsInterleaved(w)) {  // the chunk's columns, addressed from the whole (RunRowGroupTile)
    wc = whole;
    wc.cols = kc;
  } else {
    whole.prepared = nullptr;  // the stored form (CpuBackend may pack a bf16 one beside it)
    wc = ColumnChunk(whole, chunk, kc);
  }
  const Path path = PathOf(w.format);
  // Up to 2 * kMaxDotRows rows, a group per L1; prefill-sized tiles keep their own order
  // (16-bit rows widened once per tile row, see RunFloatTile).
  const int64_t activation_row_bytes =
      path == Path::kQuantized ? kc / kActivationBlock * int64_t{sizeof(Q8Block)}
                               : kc * int64_t{sizeof(float)};
  int64_t group = m1 - m0;
  int64_t sub_rows = n1 - n0;
  const int64_t fits_l1 =
      std::clamp<int64_t>(kGroupActivationBytes / activation_row_bytes, 1, kMaxDotRows);
  if (group <= 2 * kMaxDotRows && fits_l1 < group) {
    group = fits_l1;
    const int64_t chunk_row_bytes = std::max<int64_t>(1, w.row_bytes * kc / w.cols);
    sub_rows = std::max<int64_t>(
        kWeightRowGroup,
        kSubTileWeightBytes / chunk_row_bytes / kWeightRowGroup * kWeightRowGroup);
  }
  for (int64_t s0 = n0; s0 < n1; s0 += sub_rows) {
    const int64_t s1 = std::min(n1, s0 + sub_rows);
    for (int64_t g0 = m0; g0 < m1; g0 += group) {
      const int64_t g1 = std::min(m1, g0 + group);
      switch (path) {
        case Path::kQuantized:
          RunQuantizedTile(wc, s0, s1, g0, g1, y, chunk * (kc / kActivationBlock),
                           w.cols / kActivationBlock);
          break;
        case Path::kFp8:
          RunFp8Tile(x + chunk * kc, w.cols, wc, s0, s1, g0, g1, y);
          break;
        case Path::kFloat:
          RunFloatTile(x + chunk * kc, w.cols, wc, s0, s1, g0, g1, y,
                       row_scratch_[thread].data());
          break;
      }
    }
  }
  if (w.bias == nullptr) return;
  // While the tile is still in cache; f32 activations, so the same floats as a pass after.
  for (int64_t t = m0; t < m1; ++t) {
    float* row = y + t * w.rows + n0;
    kernels_.add(row, w.bias + n0, n1 - n0, row);
  }
}

void CpuMatMul::Run(const float* x, int64_t m, const WeightMatrix& w, int64_t num_chunks,
                    float* y) {
  TP_CHECK(Supports(w.format), "unsupported weight format for CPU matmul");
  TP_CHECK(num_chunks >= 1 && w.cols % num_chunks == 0, "k is not a whole number of chunks");
  const int64_t kc = w.cols / num_chunks;
  // Chunk boundaries must fall on weight-block boundaries. A single chunk may end in a partial
  // 128-column fp8 tile: its scales cover ceil(cols / 128) tiles.
  const int64_t block =
      num_chunks == 1 && w.format.kind == FormatKind::kFp8Block128 ? 1 : InputBlockValues(w.format);
  TP_CHECK(kc % block == 0, "a chunk is not a whole number of weight blocks");
  TP_CHECK(num_chunks == 1 || w.bias == nullptr, "a chunked product has no bias");
  if (m <= 0 || w.rows <= 0) return;
  Prepare(w, m, kc, &x);
  const Tiling tiling = ChooseTiling(m, w.rows);
  const int64_t row_tiles = CeilDiv(w.rows, tiling.rows_per_tile);
  const int64_t token_tiles = CeilDiv(m, tiling.tokens_per_tile);
  const int64_t tasks_per_chunk = row_tiles * token_tiles;
  pool_->ParallelFor(tasks_per_chunk * num_chunks, [&](int64_t task, int thread) {
    const int64_t c = task / tasks_per_chunk;
    const int64_t in_chunk = task % tasks_per_chunk;
    // Token-tile-major order: consecutive tasks share the same activation rows.
    const int64_t tt = in_chunk / row_tiles;
    const int64_t rt = in_chunk % row_tiles;
    const int64_t n0 = rt * tiling.rows_per_tile;
    const int64_t m0 = tt * tiling.tokens_per_tile;
    RunTile(x, w, c, kc, n0, std::min(w.rows, n0 + tiling.rows_per_tile), m0,
            std::min(m, m0 + tiling.tokens_per_tile), y + c * m * w.rows, thread);
  });
}

void CpuMatMul::RunMany(const float* x, int64_t m, absl::Span<const Output> outs) {
  if (outs.empty() || m <= 0) return;
  const int64_t k = outs[0].w->cols;
  bool shared = true;  // act-order matrices gather x in their own order: those run alone
  for (const Output& o : outs) {
    TP_CHECK(Supports(o.w->format), "unsupported weight format for CPU matmul");
    TP_CHECK(k % InputBlockValues(o.w->format) == 0 ||
                 o.w->format.kind == FormatKind::kFp8Block128,
             "k is not a whole number of weight blocks");
    TP_CHECK(o.w->cols == k, "MatMulMany needs matrices with the same cols");
    shared &= o.w->input_perm == nullptr;
  }
  if (!shared || outs.size() == 1) {
    for (const Output& o : outs) Run(x, m, *o.w, 1, o.y);
    return;
  }
  // x is prepared once per path the matrices need (quantized once, scratch sized once).
  bool quantized = false, wide = false;
  int64_t total_rows = 0;
  for (const Output& o : outs) {
    const Path path = PathOf(o.w->format);
    if (path == Path::kQuantized && !quantized) {
      Prepare(*o.w, m, k, &x);
      quantized = true;
    } else if (path == Path::kFloat && o.w->format.kind != FormatKind::kF32 && !wide) {
      Prepare(*o.w, m, k, &x);
      wide = true;
    }
    total_rows += o.w->rows;
  }
  // One tiling for all rows together, so the tasks (and thread hand-offs) are those of one
  // matrix of total_rows.
  const Tiling tiling = ChooseTiling(m, total_rows);
  const int64_t token_tiles = CeilDiv(m, tiling.tokens_per_tile);
  std::vector<int64_t> first_task(outs.size() + 1, 0);
  for (size_t i = 0; i < outs.size(); ++i) {
    first_task[i + 1] =
        first_task[i] + CeilDiv(outs[i].w->rows, tiling.rows_per_tile) * token_tiles;
  }
  pool_->ParallelFor(first_task.back(), [&](int64_t task, int thread) {
    size_t i = 0;
    while (task >= first_task[i + 1]) ++i;
    const WeightMatrix& w = *outs[i].w;
    const int64_t row_tiles = CeilDiv(w.rows, tiling.rows_per_tile);
    const int64_t in_matrix = task - first_task[i];
    const int64_t n0 = (in_matrix % row_tiles) * tiling.rows_per_tile;
    const int64_t m0 = (in_matrix / row_tiles) * tiling.tokens_per_tile;
    RunTile(x, w, 0, k, n0, std::min(w.rows, n0 + tiling.rows_per_tile), m0,
            std::min(m, m0 + tiling.tokens_per_tile), outs[i].y, thread);
  });
}

}  // namespace tpserve
