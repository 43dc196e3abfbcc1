#include "kernels/cpu/onednn_bf16_matmul.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/str_cat.h"
#include "dnnl.hpp"
#include "formats/dtype.h"
#include "kernels/quantize.h"

namespace tpserve {
namespace {

using dnnl::memory;

// The activation rows the packed layout is chosen for, and then used with for every m: measured
// as fast as each m's own layout (docs/PERFORMANCE.md, "oneDNN and tinyBLAS, measured").
constexpr int64_t kLayoutRows = 8;

dnnl::engine& CpuEngine() {
  static dnnl::engine* const engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

// y[m, n] = x[m, k] * W where W is [k, n] in `weights`, x and y dense: oneDNN 2.6 runs a
// strided y (a slice's columns of the whole output) only on its reference implementation.
dnnl::matmul::primitive_desc Describe(int64_t m, int64_t k, int64_t n,
                                      const memory::desc& weights) {
  const memory::desc src({m, k}, memory::data_type::bf16, memory::format_tag::ab);
  const memory::desc dst({m, n}, memory::data_type::f32, memory::format_tag::ab);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), CpuEngine());
}

// Activations rounded on the calling thread up to this many values (m x k).
constexpr int64_t kInlineRoundingValues = 16 * 1024;

// A slice's products of one to three rows computed here, over oneDNN's packed layout and in
// oneDNN's own order, because oneDNN's one-row kernel streams the weights from DRAM slower
// than a loop that asks for them ahead, and its two-row one costs more than its four-row one
// (docs/PERFORMANCE.md, "bf16 through oneDNN in the engine"). The layout
// is oneDNN's 16a64b2a for [k, n]: per 64 outputs, the k pairs in order, each pair's 64 x 2
// values in 4 vectors of 16 outputs; measured order: k cut into chunks of `k_chunk`, each
// summed from zero pair by pair with `vdpbf16ps`, the chunk sums added in order. Pack checks
// the order on every slice (Calibrate) and leaves k_chunk 0 (oneDNN runs it) where it differs.
struct RowKernel {
  int64_t k_chunk = 0;        // values of k per partial sum; 0: use oneDNN
  int64_t n_block_elems = 0;  // elements from one 64-output block to the next
};

// The most rows Run multiplies in our loop rather than in oneDNN.
constexpr int64_t kOwnRowsMax = 3;

// Asked for this far ahead of the pair being multiplied: 8 pairs, 2 KiB.
constexpr int64_t kPrefetchElems = 8 * 128;

// y[t][0 .. n) = row t of x (k values, followed by a zero or, for t < rows - 1 and even k,
// the next row) times the slice, for t < rows. Each 64-output block's weights are read from
// memory once, for the first row; the later rows find them in L1/L2.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void PackedRows(
    const uint16_t* packed, const RowKernel& rk, const uint16_t* x, int64_t rows, int64_t k,
    int64_t n, float* y, int64_t y_stride) {
  const int64_t pairs = (k + 1) / 2;
  for (int64_t nb = 0; nb * 64 < n; ++nb) {
    const uint16_t* block = packed + nb * rk.n_block_elems;
    for (int64_t t = 0; t < rows; ++t) {
      const uint16_t* xt = x + t * k;
      __m512 total[4];
      for (int64_t k0 = 0; k0 < k; k0 += rk.k_chunk) {
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                         _mm512_setzero_ps()};
        const int64_t end = std::min(pairs, (k0 + rk.k_chunk) / 2);
        for (int64_t p = k0 / 2; p < end; ++p) {
          const uint16_t* w = block + p * 128;
          for (int line = 0; line < 4; ++line) {
            _mm_prefetch(reinterpret_cast<const char*>(w + kPrefetchElems + 32 * line),
                         _MM_HINT_T0);
          }
          uint32_t pair;
          std::memcpy(&pair, xt + 2 * p, 4);
          const __m512bh xb = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
          for (int q = 0; q < 4; ++q) {
            acc[q] = _mm512_dpbf16_ps(acc[q], (__m512bh)_mm512_loadu_si512(w + 32 * q), xb);
          }
        }
        for (int q = 0; q < 4; ++q) {
          total[q] = k0 == 0 ? acc[q] : _mm512_add_ps(total[q], acc[q]);
        }
      }
      for (int q = 0; q < 4; ++q) {
        const int64_t first = nb * 64 + 16 * q;
        if (first >= n) break;
        const int64_t count = std::min<int64_t>(16, n - first);
        _mm512_mask_storeu_ps(y + t * y_stride + first, static_cast<__mmask16>((1u << count) - 1),
                              total[q]);
      }
    }
  }
}

absl::Status Unavailable(const char* what, const dnnl::error& e) {
  return absl::UnavailableError(StrCat("oneDNN bf16 matmul: ", what, ": ", e.what()));
}

}  // namespace

// What one m needs, made on the first call with it: the primitive and its memory objects,
// whose data handles are set on each call (making them each time cost more than the product
// itself at m = 1).
struct PrimitiveFor {
  dnnl::matmul matmul;
  memory src, dst;
  std::unordered_map<int, memory> args;
};

struct OneDnnBf16MatMul::Slice {
  int64_t row0 = 0;
  int64_t rows = 0;
  memory::desc packed_md;
  memory packed;
  dnnl::stream stream;
  std::unordered_map<int64_t, PrimitiveFor> by_m;
  std::vector<float> y;  // [m, rows]: its outputs, dense, for m > 1
  RowKernel row;         // m = 1 here rather than in oneDNN, where Calibrate found its order
};

namespace {

// The k_chunk with which PackedRows gives oneDNN's own one-row outputs for `slice` bit for bit,
// on one random row; a RowKernel with k_chunk 0 when the layout is not 16a64b2a or no
// candidate matches (oneDNN then runs the one-row products too).
template <typename Slice>
RowKernel Calibrate(Slice& slice, int64_t k) {
  RowKernel rk;
  const dnnl_memory_desc_t& md = slice.packed_md.data;
  const auto& b = md.format_desc.blocking;
  const bool layout = md.format_kind == dnnl_blocked && b.inner_nblks == 3 &&
                      b.inner_blks[0] == 16 && b.inner_idxs[0] == 0 && b.inner_blks[1] == 64 &&
                      b.inner_idxs[1] == 1 && b.inner_blks[2] == 2 && b.inner_idxs[2] == 0 &&
                      b.strides[0] == 16 * 64 * 2;
  if (!layout) return rk;
  rk.n_block_elems = b.strides[1];
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> xf(k);
  for (float& v : xf) v = normal(rng);
  std::vector<uint16_t> x(k + 2, 0);                  // zero-padded to whole pairs
  QuantizeRow(DType::kBF16, xf.data(), x.data(), k);  // F32ToBF16: nearest even
  std::vector<float> want(slice.rows), got(slice.rows);
  const dnnl::matmul::primitive_desc pd = Describe(1, k, slice.rows, slice.packed_md);
  memory src(pd.src_desc(), CpuEngine(), x.data());
  memory dst(pd.dst_desc(), CpuEngine(), want.data());
  dnnl::matmul(pd).execute(
      slice.stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, slice.packed}, {DNNL_ARG_DST, dst}});
  slice.stream.wait();
  const auto* packed = static_cast<const uint16_t*>(slice.packed.get_data_handle());
  for (int64_t chunk : {k + 2, int64_t{1024}, int64_t{512}, int64_t{256}, int64_t{2048},
                        int64_t{128}, int64_t{64}}) {
    rk.k_chunk = chunk;
    PackedRows(packed, rk, x.data(), 1, k, slice.rows, got.data(), slice.rows);
    if (std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0) return rk;
  }
  rk.k_chunk = 0;
  return rk;
}

}  // namespace

bool OneDnnBf16MatMul::Supported() {
  const auto isa = static_cast<uint32_t>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<uint32_t>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

OneDnnBf16MatMul::OneDnnBf16MatMul(const void* source, int64_t rows, int64_t cols)
    : source_(source), rows_(rows), cols_(cols) {}

OneDnnBf16MatMul::~OneDnnBf16MatMul() = default;

absl::StatusOr<std::unique_ptr<OneDnnBf16MatMul>> OneDnnBf16MatMul::Pack(const WeightMatrix& w,
                                                                         int num_slices) {
  if (w.format.kind != FormatKind::kBF16) {
    return absl::InvalidArgumentError("oneDNN bf16 matmul: the weights are not bf16");
  }
  if (w.rows < 1 || w.cols < 1 || w.data == nullptr) {
    return absl::InvalidArgumentError(
        StrCat("oneDNN bf16 matmul: an empty matrix (", w.rows, " x ", w.cols, ")"));
  }
  if (w.row_bytes < w.cols * 2 || w.row_bytes % 2 != 0) {
    return absl::InvalidArgumentError(StrCat("oneDNN bf16 matmul: row_bytes ", w.row_bytes,
                                             " does not hold ", w.cols, " bf16 values"));
  }
  if (num_slices < 1) {
    return absl::InvalidArgumentError(
        StrCat("oneDNN bf16 matmul: num_slices ", num_slices, ", needs at least 1"));
  }
  if (w.input_perm != nullptr) {
    return absl::InvalidArgumentError("oneDNN bf16 matmul: an act-order permutation");
  }
  if (!Supported()) {
    return absl::UnavailableError("oneDNN bf16 matmul: this CPU has no AVX-512 BF16");
  }
  std::unique_ptr<OneDnnBf16MatMul> packed(new OneDnnBf16MatMul(w.data, w.rows, w.cols));
  const int64_t slices = std::min<int64_t>(num_slices, w.rows);
  const int64_t row_elems = w.row_bytes / 2;
  auto* base = static_cast<uint16_t*>(const_cast<void*>(w.data));  // read only (the reorder's src)
  try {
    for (int64_t s = 0; s < slices; ++s) {
      auto slice = std::make_unique<Slice>();
      slice->row0 = w.rows * s / slices;
      slice->rows = w.rows * (s + 1) / slices - slice->row0;
      const memory::desc any({w.cols, slice->rows}, memory::data_type::bf16,
                             memory::format_tag::any);
      const dnnl::matmul::primitive_desc layout = Describe(kLayoutRows, w.cols, slice->rows, any);
      // A reference implementation would be far slower than our own kernels: refuse.
      if (std::string(layout.impl_info_str()).rfind("ref", 0) == 0) {
        return absl::UnavailableError(StrCat("oneDNN bf16 matmul: no optimized implementation for ",
                                             slice->rows, " x ", w.cols, " (",
                                             layout.impl_info_str(), ")"));
      }
      packed->implementation_ = layout.impl_info_str();
      slice->packed_md = layout.weights_desc();
      slice->packed = memory(slice->packed_md, CpuEngine());
      slice->stream = dnnl::stream(CpuEngine());
      // W[n, k] row-major is the matmul's [k, n] weights with strides (1, row_elems).
      memory plain({{w.cols, slice->rows}, memory::data_type::bf16, memory::dims{1, row_elems}},
                   CpuEngine(), base + slice->row0 * row_elems);
      dnnl::reorder(plain, slice->packed).execute(slice->stream, plain, slice->packed);
      slice->stream.wait();
      slice->row = Calibrate(*slice, w.cols);
      packed->slices_.push_back(std::move(slice));
    }
  } catch (const dnnl::error& e) {
    return Unavailable("packing the weights", e);
  }
  return packed;
}

bool OneDnnBf16MatMul::own_row_kernel() const {
  for (const auto& slice : slices_) {
    if (slice->row.k_chunk == 0) return false;
  }
  return true;
}

int64_t OneDnnBf16MatMul::packed_bytes() const {
  int64_t bytes = 0;
  for (const auto& slice : slices_) bytes += static_cast<int64_t>(slice->packed_md.get_size());
  return bytes;
}

absl::Status OneDnnBf16MatMul::Run(const float* x, int64_t m, float* y, ThreadPool* pool) const {
  if (m <= 0) return absl::OkStatus();
  // Zero-padded by a value: PackedRows reads x in pairs.
  if (static_cast<int64_t>(x_bf16_.size()) < m * cols_ + 1) x_bf16_.resize(m * cols_ + 1);
  x_bf16_[m * cols_] = 0;
  // Decode-sized rows on the caller: a parallel loop costs more than rounding them.
  if (m * cols_ <= kInlineRoundingValues) {
    QuantizeRow(DType::kBF16, x, x_bf16_.data(), m * cols_);
  } else {
    pool->ParallelFor(m, [&](int64_t t, int) {
      QuantizeRow(DType::kBF16, x + t * cols_, x_bf16_.data() + t * cols_, cols_);
    });
  }
  // One to three rows (oneDNN's own kernel at m = 2 costs more than at m = 4 in the SmolLM2
  // step) through our loop, one task a slice: cutting a slice into 4 tasks measured slower
  // (10.4 against 11.3 ms median a step), each thread's weights then one contiguous stream.
  // Rows after the first must end on a whole pair (even k): the value padding each row is the
  // next row's first.
  if ((m == 1 || (m <= kOwnRowsMax && cols_ % 2 == 0)) && own_row_kernel()) {
    pool->ParallelFor(static_cast<int64_t>(slices_.size()), [&](int64_t s, int) {
      const Slice& slice = *slices_[s];
      PackedRows(static_cast<const uint16_t*>(slice.packed.get_data_handle()), slice.row,
                 x_bf16_.data(), m, cols_, slice.rows, y + slice.row0, rows_);
    });
    return absl::OkStatus();
  }
  std::vector<absl::Status> status(slices_.size());
  pool->ParallelFor(static_cast<int64_t>(slices_.size()), [&](int64_t s, int) {
    Slice& slice = *slices_[s];
    // oneDNN's OpenMP runtime runs a parallel region per call: a team of one on a pool thread.
    omp_set_num_threads(1);
    try {
      auto it = slice.by_m.find(m);
      if (it == slice.by_m.end()) {
        PrimitiveFor p;
        p.matmul = dnnl::matmul(Describe(m, cols_, slice.rows, slice.packed_md));
        p.src = memory({{m, cols_}, memory::data_type::bf16, memory::format_tag::ab}, CpuEngine(),
                       DNNL_MEMORY_NONE);
        p.dst = memory({{m, slice.rows}, memory::data_type::f32, memory::format_tag::ab},
                       CpuEngine(), DNNL_MEMORY_NONE);
        p.args = {{DNNL_ARG_SRC, p.src}, {DNNL_ARG_WEIGHTS, slice.packed}, {DNNL_ARG_DST, p.dst}};
        it = slice.by_m.emplace(m, std::move(p)).first;
      }
      PrimitiveFor& p = it->second;
      // One row of the slice's outputs is already dense where it goes in y.
      float* out = y + slice.row0;
      if (m > 1) {
        if (static_cast<int64_t>(slice.y.size()) < m * slice.rows) slice.y.resize(m * slice.rows);
        out = slice.y.data();
      }
      p.src.set_data_handle(x_bf16_.data());
      p.dst.set_data_handle(out);
      p.matmul.execute(slice.stream, p.args);
      slice.stream.wait();
      for (int64_t t = 0; m > 1 && t < m; ++t) {
        std::copy_n(&slice.y[t * slice.rows], slice.rows, y + t * rows_ + slice.row0);
      }
    } catch (const dnnl::error& e) {
      status[s] = Unavailable(StrCat("m = ", m).c_str(), e);
    }
  });
  for (absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tpserve
