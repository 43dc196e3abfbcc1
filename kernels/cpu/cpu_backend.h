// The CPU implementation of Backend: SIMD kernels picked at run time (AVX2 or the portable
// scalar reference), a persistent thread pool, and host memory for everything.
//
//   auto backend = std::make_unique<CpuBackend>(CpuBackendOptions{.num_threads = 2});
//   backend->MatMul(x, m, w, y);  // see kernels/backend.h
//
// Set TPSERVE_CPU_ISA=scalar in the environment (or options.isa) to force the reference path.
// Threading: like every Backend, one caller thread at a time; ops use the pool internally.
#ifndef TPSERVE_KERNELS_CPU_CPU_BACKEND_H_
#define TPSERVE_KERNELS_CPU_CPU_BACKEND_H_

#include <optional>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_attention.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_matmul.h"
#include "kernels/cpu/thread_pool.h"

namespace tpserve {

struct CpuBackendOptions {
  int num_threads = 1;         // >= 1; 1 runs every op on the calling thread
  std::optional<CpuIsa> isa;   // default: DetectCpuIsa()
};

class CpuBackend final : public Backend {
 public:
  // REQUIRES: options.num_threads >= 1; an explicit isa must be supported by this CPU.
  explicit CpuBackend(const CpuBackendOptions& options);

  CpuIsa isa() const { return isa_; }
  int num_threads() const { return pool_.num_threads(); }

  std::string_view name() const override { return name_; }
  bool SupportsWeightType(DType dtype) const override;
  void MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y) override;
  void MatMulChunked(const float* x, int64_t m, const WeightMatrix& w, int64_t num_chunks,
                     float* y) override;
  void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
               float* y) override;
  void Rope(float* x, int64_t rows, int64_t num_heads, int64_t head_dim,
            const int32_t* positions, const float* inv_freq, RopeLayout layout) override;
  void SiluMul(const float* gate, const float* up, int64_t count, float* out) override;
  void Add(const float* a, const float* b, int64_t count, float* out) override;
  void EmbeddingRows(const WeightMatrix& table, int64_t first_row, const int32_t* ids,
                     int64_t num_ids, float* out) override;
  void WriteKv(const float* k_new, const float* v_new, absl::Span<const AttentionSequence> seqs,
               const KvPoolView& pool) override;
  void PagedAttention(const float* q, int64_t num_heads, float scale,
                      absl::Span<const AttentionSequence> seqs, const KvPoolView& pool,
                      float* out) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

 private:
  // Runs fn(begin, end) over [0, count) in chunks worth a thread wake-up.
  void ParallelChunks(int64_t count, int64_t min_chunk,
                      absl::FunctionRef<void(int64_t, int64_t)> fn);

  const CpuIsa isa_;
  const std::string name_;
  const CpuKernels& kernels_;
  ThreadPool pool_;
  CpuMatMul matmul_;
  CpuAttention attention_;
};

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CPU_CPU_BACKEND_H_
