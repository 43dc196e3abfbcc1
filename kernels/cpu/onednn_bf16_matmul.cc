#include "kernels/cpu/onednn_bf16_matmul.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/str_cat.h"
#include "dnnl.hpp"

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

// F32ToBF16 (kernels/quantize.h: round to nearest even, NaN stays a quiet NaN) over n values,
// in a loop the compiler vectorizes.
void RoundToBf16(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(x[i]);
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    out[i] = static_cast<uint16_t>(nan ? (bits >> 16) | 0x40u : rounded);
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
};

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
      packed->slices_.push_back(std::move(slice));
    }
  } catch (const dnnl::error& e) {
    return Unavailable("packing the weights", e);
  }
  return packed;
}

int64_t OneDnnBf16MatMul::packed_bytes() const {
  int64_t bytes = 0;
  for (const auto& slice : slices_) bytes += static_cast<int64_t>(slice->packed_md.get_size());
  return bytes;
}

absl::Status OneDnnBf16MatMul::Run(const float* x, int64_t m, float* y, ThreadPool* pool) const {
  if (m <= 0) return absl::OkStatus();
  if (static_cast<int64_t>(x_bf16_.size()) < m * cols_) x_bf16_.resize(m * cols_);
  // Decode-sized rows on the caller: a parallel loop costs more than rounding them.
  if (m * cols_ <= kInlineRoundingValues) {
    RoundToBf16(x, m * cols_, x_bf16_.data());
  } else {
    pool->ParallelFor(
        m, [&](int64_t t, int) { RoundToBf16(x + t * cols_, cols_, x_bf16_.data() + t * cols_); });
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
